"""The spool keeps letters on disk until Redrive has them: once per task
id, leased to one sender at a time, tried again with backoff."""

import os
import tempfile
import time
import unittest

from redrive_celery.spool import Spool, backoff


class SpoolTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "spool", "letters.sqlite")

    def tearDown(self):
        self.dir.cleanup()

    def test_a_letter_is_kept_once_and_survives_a_restart(self):
        s = Spool(self.path)
        s.put("t-1", {"external_id": "t-1", "task": "shop.ship"})
        s.put("t-1", {"external_id": "t-1", "task": "changed"})
        again = Spool(self.path)  # a worker restarted
        taken = again.take(10, lease=30)
        self.assertEqual(taken, [("t-1", {"external_id": "t-1", "task": "shop.ship"})])

    def test_a_leased_letter_is_not_taken_twice_until_its_lease_ends(self):
        s = Spool(self.path)
        s.put("t-1", {"n": 1})
        self.assertEqual(len(s.take(10, lease=0.2)), 1)
        self.assertEqual(s.take(10, lease=0.2), [])
        time.sleep(0.25)
        self.assertEqual(len(s.take(10, lease=0.2)), 1, "a sender that died mid-send leaves it to another")

    def test_a_failed_send_waits_and_is_tried_again(self):
        s = Spool(self.path)
        s.put("t-1", {"n": 1})
        s.take(10, lease=30)
        s.failed(["t-1"], "connection refused", base=0.2, cap=0.2)
        self.assertEqual(s.take(10, lease=30), [])
        self.assertEqual(s.waiting(), (1, "connection refused"))
        time.sleep(0.25)
        self.assertEqual(len(s.take(10, lease=30)), 1)
        s.sent(["t-1"])
        self.assertEqual(s.waiting(), (0, None))

    def test_retried_attempts_are_kept_for_the_letter(self):
        s = Spool(self.path)
        s.note_attempt("t-1", 2, {"attempt": 2, "class": "B"})
        s.note_attempt("t-1", 1, {"attempt": 1, "class": "A"})
        s.note_attempt("t-1", 1, {"attempt": 1, "class": "A again"})
        self.assertEqual([a["class"] for a in s.attempts("t-1")], ["A again", "B"])
        s.put("t-1", {})
        s.sent(["t-1"])
        self.assertEqual(s.attempts("t-1"), [])

    def test_backoff_doubles_up_to_its_cap_with_jitter(self):
        for tries, low, high in [(0, 0.5, 1), (3, 4, 8), (20, 30, 60)]:
            for _ in range(20):
                w = backoff(tries, 1, 60)
                self.assertTrue(low <= w <= high, (tries, w))


if __name__ == "__main__":
    unittest.main()
