"""What a Celery task that failed says, as Redrive's letters and attempts.

Only what Redrive's ingest takes is sent (POST /api/v1/letters): the task's
name and id, its queue, args and kwargs, the exception's class and message,
the traceback, the attempts counted right and each retried attempt's
error where Celery gave it. Masking happens in Redrive, as for every letter.
"""

import json
import socket
from datetime import datetime, timezone

# Redrive's limits (dlq.MaxIngestMessage, dlq.MaxIngestTraceback): a longer
# text is cut here, marked, rather than refused there.
MAX_MESSAGE = 64 << 10
MAX_TRACEBACK = 1 << 20
CUT = "\n… (cut by redrive-celery)"


def now_iso():
    return datetime.now(timezone.utc).isoformat()


def cut(text, limit):
    text = text or ""
    if len(text.encode("utf-8")) <= limit:
        return text
    return text.encode("utf-8")[: limit - len(CUT.encode("utf-8"))].decode("utf-8", "ignore") + CUT


def error_class(exc):
    """The exception's class as a Python programmer names it: builtins bare,
    the rest with their module (requests.exceptions.ConnectionError)."""
    cls = type(exc)
    module = getattr(cls, "__module__", "") or ""
    if module in ("builtins", "__main__", ""):
        return cls.__qualname__
    return module + "." + cls.__qualname__


def json_safe(value):
    """value as JSON takes it: what json cannot say is its repr, so a
    letter is never lost to an argument JSON cannot hold."""
    return json.loads(json.dumps(value, default=repr))


def queue_of(task, request):
    info = getattr(request, "delivery_info", None) or {}
    return (info.get("routing_key") or getattr(task, "queue", None)
            or task.app.conf.task_default_queue or "celery")


def hostname(request):
    return getattr(request, "hostname", None) or socket.gethostname()


def attempt(request, exc, traceback, outcome, retry_in=None):
    """One attempt of the task, as Redrive's history keeps it."""
    a = {
        "attempt": (getattr(request, "retries", 0) or 0) + 1,
        "at": now_iso(),
        "host": hostname(request),
        "class": error_class(exc),
        "message": cut(str(exc), MAX_MESSAGE),
        "traceback": cut(traceback, MAX_TRACEBACK),
        "outcome": outcome,
    }
    if retry_in is not None:
        a["retry_in_ms"] = int(retry_in * 1000)
    return a


def letter(task, task_id, exc, args, kwargs, traceback, history):
    """The letter of a task that failed for good, its earlier attempts in history."""
    request = task.request
    retries = getattr(request, "retries", 0) or 0
    attempts = retries + 1
    max_retries = getattr(task, "max_retries", None)
    # max_retries None retries for ever: such a task only ever gets here
    # by an exception it does not retry, so its attempts are all it had.
    max_attempts = attempts if max_retries is None else max(max_retries + 1, attempts)
    final = attempt(request, exc, traceback, "dead")
    return {
        "external_id": task_id,
        "task": task.name,
        "queue": queue_of(task, request),
        "args": json_safe(list(args or [])),
        "kwargs": json_safe(dict(kwargs or {})),
        "error_class": final["class"],
        "error": final["message"],
        "traceback": final["traceback"],
        "attempts": attempts,
        "max_attempts": max_attempts,
        "history": [h for h in history if h.get("attempt", 0) < attempts] + [final],
        # A task that gave up with retries left raised what it does not
        # retry: the same payload would fail the same way.
        "reason": "exhausted" if retries > 0 and attempts >= max_attempts else "permanent",
        "failed_at": final["at"],
    }
