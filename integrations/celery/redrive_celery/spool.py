"""A durable spool of letters on their way to Redrive.

A task that fails for good is written here first, in the worker, in one
SQLite transaction, and sent from here by a background thread: if Redrive
or its database is down, the letter waits on disk and is tried again with
backoff, and the worker never waits for Redrive. The task id is the
letter's identity, so a letter spooled twice (a task that failed twice, a
worker restarted mid-send) is one row here and one letter in Redrive.

Several worker processes share the spool: a sender takes letters under a
lease, so two processes do not send the same letter at once; one that dies
mid-send leaves its letters to the others once the lease ends.
"""

import json
import os
import random
import sqlite3
import time

SCHEMA = """
CREATE TABLE IF NOT EXISTS letters (
    task_id      TEXT PRIMARY KEY,
    body         TEXT NOT NULL,
    tries        INTEGER NOT NULL DEFAULT 0,
    next_at      REAL NOT NULL,
    leased_until REAL NOT NULL DEFAULT 0,
    last_error   TEXT
);
CREATE TABLE IF NOT EXISTS outcomes (
    letter_id    INTEGER PRIMARY KEY,
    state        TEXT NOT NULL,
    message      TEXT NOT NULL DEFAULT '',
    job_ref      TEXT NOT NULL DEFAULT '',
    tries        INTEGER NOT NULL DEFAULT 0,
    next_at      REAL NOT NULL,
    leased_until REAL NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS published (
    replay_id INTEGER PRIMARY KEY,
    task_id   TEXT NOT NULL,
    at        REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS attempts (
    task_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    body    TEXT NOT NULL,
    at      REAL NOT NULL,
    PRIMARY KEY (task_id, attempt)
);
"""

# A retried attempt's error is kept this long for the letter it may become:
# a task retried for longer than that loses its oldest attempts' errors,
# never its letter.
ATTEMPTS_KEPT_FOR = 7 * 24 * 3600


class Spool:
    """The spool in the SQLite file at path (its folder is made)."""

    def __init__(self, path):
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        self.path = path
        with self._connect() as db:
            db.executescript(SCHEMA)

    def _connect(self):
        # One connection a call: cheap for SQLite, and safe across threads
        # and the fork of Celery's prefork pool.
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        return db

    def put(self, task_id, letter):
        """Spool a letter; one already spooled for task_id is kept."""
        db = self._connect()
        try:
            db.execute("INSERT OR IGNORE INTO letters (task_id, body, next_at) VALUES (?, ?, ?)",
                       (task_id, json.dumps(letter), time.time()))
        finally:
            db.close()

    def note_attempt(self, task_id, attempt, body):
        """Keep one retried attempt's error for the letter the task may become."""
        db = self._connect()
        try:
            db.execute("INSERT OR REPLACE INTO attempts (task_id, attempt, body, at) VALUES (?, ?, ?, ?)",
                       (task_id, attempt, json.dumps(body), time.time()))
            db.execute("DELETE FROM attempts WHERE at < ?", (time.time() - ATTEMPTS_KEPT_FOR,))
        finally:
            db.close()

    def attempts(self, task_id):
        """The retried attempts kept for task_id, first first."""
        db = self._connect()
        try:
            rows = db.execute("SELECT body FROM attempts WHERE task_id = ? ORDER BY attempt", (task_id,)).fetchall()
        finally:
            db.close()
        return [json.loads(r[0]) for r in rows]

    def take(self, limit, lease):
        """Lease up to limit letters due now for lease seconds: [(task_id, letter)]."""
        now = time.time()
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            rows = db.execute(
                "SELECT task_id, body FROM letters WHERE next_at <= ? AND leased_until <= ? ORDER BY next_at LIMIT ?",
                (now, now, limit)).fetchall()
            db.executemany("UPDATE letters SET leased_until = ? WHERE task_id = ?", [(now + lease, r[0]) for r in rows])
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        finally:
            db.close()
        return [(r[0], json.loads(r[1])) for r in rows]

    def sent(self, task_ids):
        """Forget letters Redrive has, and their attempts."""
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            db.executemany("DELETE FROM letters WHERE task_id = ?", [(t,) for t in task_ids])
            db.executemany("DELETE FROM attempts WHERE task_id = ?", [(t,) for t in task_ids])
            db.execute("COMMIT")
        finally:
            db.close()

    def failed(self, task_ids, error, base=1.0, cap=60.0):
        """Try these letters again later: backoff doubling from base to cap, with jitter."""
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            for task_id in task_ids:
                row = db.execute("SELECT tries FROM letters WHERE task_id = ?", (task_id,)).fetchone()
                if row is None:
                    continue
                wait = backoff(row[0], base, cap)
                db.execute("UPDATE letters SET tries = tries + 1, next_at = ?, leased_until = 0, last_error = ? WHERE task_id = ?",
                           (time.time() + wait, error[:2000], task_id))
            db.execute("COMMIT")
        finally:
            db.close()

    def waiting(self):
        """How many letters wait to be sent, and the last error of the oldest."""
        db = self._connect()
        try:
            n = db.execute("SELECT count(*) FROM letters").fetchone()[0]
            row = db.execute("SELECT last_error FROM letters ORDER BY next_at LIMIT 1").fetchone()
        finally:
            db.close()
        return n, (row[0] if row else None)


# How far along a replay is: a report never moves one back.
STEPS = {"sent": 0, "running": 1, "succeeded": 2, "died_again": 2}


class Outcomes:
    """The outcomes of replays this app ran, on their way to Redrive, in
    the spool's file: one row a replayed letter, its furthest state."""

    def __init__(self, spool):
        self.spool = spool

    def put(self, letter_id, state, message="", job_ref=""):
        db = self.spool._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT state FROM outcomes WHERE letter_id = ?", (letter_id,)).fetchone()
            if row is None:
                db.execute("INSERT INTO outcomes (letter_id, state, message, job_ref, next_at) VALUES (?, ?, ?, ?, ?)",
                           (letter_id, state, message, job_ref, time.time()))
            elif STEPS[state] >= STEPS.get(row[0], 0):
                db.execute("UPDATE outcomes SET state = ?, message = ?, job_ref = CASE WHEN job_ref = '' THEN ? ELSE job_ref END, "
                           "next_at = ?, leased_until = 0 WHERE letter_id = ?", (state, message, job_ref, time.time(), letter_id))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        finally:
            db.close()

    def take(self, limit, lease):
        now = time.time()
        db = self.spool._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            rows = db.execute("SELECT letter_id, state, message, job_ref FROM outcomes WHERE next_at <= ? AND leased_until <= ? "
                              "ORDER BY next_at LIMIT ?", (now, now, limit)).fetchall()
            db.executemany("UPDATE outcomes SET leased_until = ? WHERE letter_id = ?", [(now + lease, r[0]) for r in rows])
            db.execute("COMMIT")
        finally:
            db.close()
        return rows

    def sent(self, letter_id, state):
        """Forget an outcome Redrive has, unless a later one came meanwhile."""
        db = self.spool._connect()
        try:
            db.execute("DELETE FROM outcomes WHERE letter_id = ? AND state = ?", (letter_id, state))
        finally:
            db.close()

    def failed(self, letter_id, cap):
        db = self.spool._connect()
        try:
            row = db.execute("SELECT tries FROM outcomes WHERE letter_id = ?", (letter_id,)).fetchone()
            if row is not None:
                db.execute("UPDATE outcomes SET tries = tries + 1, next_at = ?, leased_until = 0 WHERE letter_id = ?",
                           (time.time() + backoff(row[0], 1.0, cap), letter_id))
        finally:
            db.close()

    def published(self, replay_id):
        """The task id replay_id was published as by this app, or None."""
        db = self.spool._connect()
        try:
            row = db.execute("SELECT task_id FROM published WHERE replay_id = ?", (replay_id,)).fetchone()
        finally:
            db.close()
        return row[0] if row else None

    def mark_published(self, replay_id, task_id):
        db = self.spool._connect()
        try:
            db.execute("INSERT OR IGNORE INTO published (replay_id, task_id, at) VALUES (?, ?, ?)", (replay_id, task_id, time.time()))
            db.execute("DELETE FROM published WHERE at < ?", (time.time() - ATTEMPTS_KEPT_FOR,))
        finally:
            db.close()


def backoff(tries, base, cap):
    """The wait before try tries+1: doubling from base, capped, half of it jittered."""
    wait = min(cap, base * (2 ** min(tries, 30)))
    return wait / 2 + random.uniform(0, wait / 2)
