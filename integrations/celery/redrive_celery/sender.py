"""The thread of a worker process that talks to Redrive: it sends the
spooled letters and the outcomes of replays, and takes the replays due to
run and publishes them through the app's own broker."""

import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request

from .spool import Outcomes

# A replay's task carries these headers: the letter it replays, and the
# replay (the same for every publication of one replay).
REPLAY_OF = "redrive_replay_of"
REPLAY_ID = "redrive_replay_id"

log = logging.getLogger("redrive_celery")


class Sender:
    """Sends the spool's letters to Redrive's POST /api/v1/letters, a batch
    at a time, in a daemon thread of the process it runs in.

    A batch Redrive took is forgotten; one it did not (unreachable, 5xx, a
    token it refuses) is tried again with backoff, up to backoff_cap
    seconds apart. A letter is never dropped: one Redrive refuses as
    malformed (a 400, which a letter this package builds should never get)
    stays in the spool, tried again at the cap, and logged.
    """

    def __init__(self, spool, url, token, source, app=None, batch=100, lease=30.0, poll=1.0, backoff_cap=60.0, timeout=10.0):
        self.spool = spool
        self.outcomes = Outcomes(spool)
        self.app = app  # None: replays are not taken by this process
        self.url = url.rstrip("/")
        self.endpoint = self.url + "/api/v1/letters"
        self.token = token
        self.source = source
        self.batch = batch
        self.lease = lease
        self.poll = poll
        self.backoff_cap = backoff_cap
        self.timeout = timeout
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread = None
        self._pid = None

    def start(self):
        """Start the sending thread in this process, once (again after a fork)."""
        with self._lock:
            if self._thread is not None and self._pid == os.getpid() and self._thread.is_alive():
                return
            self._pid = os.getpid()
            self._wake = threading.Event()
            self._thread = threading.Thread(target=self._run, name="redrive-sender", daemon=True)
            self._thread.start()

    def wake(self):
        """A letter was spooled: send it now rather than at the next poll."""
        self.start()
        self._wake.set()

    def flush(self, timeout):
        """Send what is due for up to timeout seconds (at worker shutdown)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.send_once() == 0:
                return

    def _run(self):
        while True:
            busy = 0
            for step in (self.send_once, self.report_once, self.replay_once):
                try:
                    busy += step()
                except Exception:  # noqa: BLE001 - the thread must live on
                    log.exception("redrive: %s failed", step.__name__)
            if busy == 0:
                self._wake.wait(self.poll)
                self._wake.clear()

    def _post(self, path, body):
        """POST body (JSON) to Redrive; the decoded answer, or an HTTPError/URLError."""
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode("utf-8"), method="POST", headers={
            "Authorization": "Bearer " + self.token, "Content-Type": "application/json", "User-Agent": "redrive-celery"})
        with urllib.request.urlopen(req, timeout=self.timeout) as res:
            return json.loads(res.read() or b"{}")

    def report_once(self):
        """Send the outcomes of replays this app ran; return how many went."""
        done = 0
        for letter_id, state, message, job_ref in self.outcomes.take(self.batch, self.lease):
            body = {"state": state}
            if message:
                body["message"] = message
            if job_ref:
                body["job_ref"] = job_ref
            try:
                self._post("/api/v1/letters/%d/outcome" % letter_id, body)
            except urllib.error.HTTPError as e:
                if e.code in (404, 409):
                    # Redrive has nothing to follow there (a replay stopped
                    # being followed, or already settled): nothing to retry.
                    log.warning("redrive: outcome %s of letter %d not taken: %s", state, letter_id, e.read(300))
                    self.outcomes.sent(letter_id, state)
                    continue
                self.outcomes.failed(letter_id, self.backoff_cap)
                continue
            except (urllib.error.URLError, OSError):
                self.outcomes.failed(letter_id, self.backoff_cap)
                continue
            self.outcomes.sent(letter_id, state)
            done += 1
        return done

    def replay_once(self):
        """Take the replays due now and publish each through the app's
        broker; return how many were published."""
        if self.app is None:
            return 0
        try:
            taken = self._post("/api/v1/sources/%s/replays/take" % urllib.request.quote(self.source, safe=""),
                               {"limit": 20, "lease_seconds": 60})
        except (urllib.error.URLError, OSError) as e:
            log.debug("redrive: cannot take replays: %s", e)
            return 0
        published = 0
        for r in taken.get("replays") or []:
            replay_id, letter_id = r["replay_id"], r["dead_letter_id"]
            # Published already (the report of it was lost): only report.
            task_id = self.outcomes.published(replay_id)
            if task_id is None:
                # The same id for every publication of one replay.
                task_id = "redrive-replay-%d" % replay_id
                self.app.send_task(r["task"], args=list(r.get("args") or []), kwargs=dict(r.get("kwargs") or {}),
                                   task_id=task_id, queue=r.get("queue") or None, routing_key=r.get("queue") or None,
                                   serializer="json", headers={REPLAY_OF: letter_id, REPLAY_ID: replay_id})
                self.outcomes.mark_published(replay_id, task_id)
                published += 1
            self.outcomes.put(letter_id, "sent", job_ref=task_id)
        if published:
            self.report_once()
        return published

    def send_once(self):
        """Send one batch of due letters; return how many Redrive took."""
        due = self.spool.take(self.batch, self.lease)
        if not due:
            return 0
        ids = [task_id for task_id, _ in due]
        body = json.dumps({"source": self.source, "letters": [letter for _, letter in due]}).encode("utf-8")
        req = urllib.request.Request(self.endpoint, data=body, method="POST", headers={
            "Authorization": "Bearer " + self.token, "Content-Type": "application/json",
            "User-Agent": "redrive-celery"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as res:
                res.read()
        except urllib.error.HTTPError as e:
            answer = e.read(500).decode("utf-8", "replace")
            problem = "Redrive answered %d: %s" % (e.code, answer)
            if e.code == 400:
                log.error("redrive: letters refused as malformed, kept and tried again hourly: %s", answer)
                self.spool.failed(ids, problem, base=self.backoff_cap, cap=max(self.backoff_cap, 3600))
            else:
                log.warning("redrive: %s; %d letters wait in the spool", problem, len(ids))
                self.spool.failed(ids, problem, cap=self.backoff_cap)
            return 0
        except (urllib.error.URLError, OSError) as e:
            log.warning("redrive: cannot reach %s (%s); %d letters wait in the spool", self.endpoint, e, len(ids))
            self.spool.failed(ids, str(e), cap=self.backoff_cap)
            return 0
        self.spool.sent(ids)
        return len(ids)
