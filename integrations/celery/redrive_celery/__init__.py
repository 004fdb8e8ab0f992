"""Redrive for Celery: the tasks that fail for good become letters in Redrive.

One line in the app turns it on::

    import redrive_celery
    redrive_celery.setup(app)   # REDRIVE_URL, REDRIVE_TOKEN, REDRIVE_SOURCE from the environment

It hooks Celery's signals for every task: a retried attempt's error is
kept (task_retry), and a task that failed for good (task_failure: its
retries exhausted, or an exception it does not retry) is spooled on disk
and sent to Redrive's POST /api/v1/letters by a thread of the worker. A
task that will still be retried is never a letter. If Redrive is
unreachable the letter waits in the spool and is tried again with backoff;
the worker never waits for Redrive, and never fails because of it.
"""

import logging
import os
import tempfile

from celery import signals

from . import letters
from .sender import REPLAY_OF, Sender
from .spool import Spool

__all__ = ["setup", "Spool", "Sender"]

log = logging.getLogger("redrive_celery")


def replay_of(request):
    """The letter a running task replays (its redrive_replay_of header), or None."""
    value = getattr(request, REPLAY_OF, None)
    if value is None:
        value = (getattr(request, "headers", None) or {}).get(REPLAY_OF)
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def setup(app, url=None, token=None, source=None, spool_path=None, backoff_cap=60.0, replays=True):
    """Send app's tasks that fail for good to Redrive.

    url is the console (REDRIVE_URL), token an API token that may send the
    letters of source (REDRIVE_TOKEN; `redrive token create
    --send-letters-of SOURCE`), source the name the operator gave this app
    in REDRIVE_SOURCES (REDRIVE_SOURCE, default the app's main name), and
    spool_path the SQLite file letters wait in (REDRIVE_SPOOL, default in
    the temporary folder). With replays, the workers also take the replays
    Redrive has due for source, publish each through the app's broker (its
    queue, the JSON serializer, a task id of its own and a header naming
    the letter it replays), and report how each went. Returns the Sender.
    """
    url = url or os.environ.get("REDRIVE_URL", "")
    token = token or os.environ.get("REDRIVE_TOKEN", "")
    source = source or os.environ.get("REDRIVE_SOURCE") or app.main
    spool_path = spool_path or os.environ.get("REDRIVE_SPOOL") or os.path.join(
        tempfile.gettempdir(), "redrive-celery-%s.sqlite" % source)
    if not url or not token:
        raise ValueError("redrive_celery.setup: set REDRIVE_URL and REDRIVE_TOKEN (or pass url= and token=)")
    courier = Sender(Spool(spool_path), url=url, token=token, source=source, backoff_cap=backoff_cap,
                     app=app if replays else None)

    def on_retry(sender=None, request=None, reason=None, einfo=None, **_):
        # sender is the task; request the attempt that is retried.
        try:
            if request is None or getattr(request, "id", None) is None:
                return
            exc = getattr(reason, "exc", None) or reason
            when = getattr(reason, "when", None)
            retry_in = when if isinstance(when, (int, float)) else None
            courier.spool.note_attempt(request.id, (request.retries or 0) + 1,
                                       letters.attempt(request, exc, getattr(einfo, "traceback", ""), "retry", retry_in))
        except Exception:  # noqa: BLE001 - never fail the worker for Redrive
            log.exception("redrive: could not keep a retried attempt")

    def on_failure(sender=None, task_id=None, exception=None, args=None, kwargs=None, einfo=None, **_):
        # sender is the task that failed for good.
        try:
            history = courier.spool.attempts(task_id)
            letter = letters.letter(sender, task_id, exception, args, kwargs, getattr(einfo, "traceback", ""), history)
            of = replay_of(sender.request)
            if of is not None:
                # A replay that died again: its letter names the one it
                # replays, and the replay is reported died again.
                letter["replay_of"] = of
                courier.outcomes.put(of, "died_again", message=letter["error"][:2000])
            courier.spool.put(task_id, letter)
            courier.wake()
        except Exception:  # noqa: BLE001
            log.exception("redrive: could not spool the letter of task %s", task_id)

    def on_success(sender=None, **_):
        try:
            of = replay_of(sender.request)
            if of is not None:
                courier.outcomes.put(of, "succeeded")
                courier.wake()
        except Exception:  # noqa: BLE001
            log.exception("redrive: could not keep a replay's success")

    # weak=False: the handlers are closures, which would otherwise be collected.
    signals.task_retry.connect(on_retry, weak=False)
    signals.task_failure.connect(on_failure, weak=False)
    signals.task_success.connect(on_success, weak=False)
    signals.worker_process_init.connect(lambda **_: courier.start(), weak=False)
    signals.worker_ready.connect(lambda **_: courier.start(), weak=False)
    signals.worker_shutdown.connect(lambda **_: courier.flush(timeout=2.0), weak=False)
    return courier
