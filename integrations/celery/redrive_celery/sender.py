"""The thread of a worker process that sends spooled letters to Redrive."""

import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request

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

    def __init__(self, spool, url, token, source, batch=100, lease=30.0, poll=1.0, backoff_cap=60.0, timeout=10.0):
        self.spool = spool
        self.endpoint = url.rstrip("/") + "/api/v1/letters"
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
            try:
                sent = self.send_once()
            except Exception:  # noqa: BLE001 - the thread must live on
                log.exception("redrive: sending letters failed")
                sent = 0
            if sent == 0:
                self._wake.wait(self.poll)
                self._wake.clear()

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
