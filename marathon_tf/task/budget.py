"""The restart budget a task counts alone, and the backoff of restarts that keep failing.

* :class:`RestartBudget`: a task's own count, for when the job's keeper (:mod:`marathon_tf.task.keeper`)
  cannot be reached: at most ``max_failures`` failures within a sliding window, in memory and, when
  the job's logdir is writable, in ``<logdir>/.marathon-tf/failures.jsonl`` (the ledger's entries,
  :mod:`marathon_tf.task.ledger`), which every relaunch of every task reads: with shared storage the
  count is the job's even without the keeper. :meth:`RestartBudget.take` answers like the keeper
  (:class:`~marathon_tf.task.ledger.Answer`, ``alone``).
* :func:`backoff`: the one backoff of repeated restarts: the first restart after a failure is
  immediate, the next ones wait 1, 2, 4 ... s, at most 30 s. Used for a program restarted in place
  (:mod:`marathon_tf.task.restarts`) and for the keeper's group restart rounds.

No I/O but the budget's file.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from marathon_tf.task.ledger import FAILURE, INFRASTRUCTURE, PREEMPTION, Answer, Entry, append_file, bucket, read_file

__all__ = ["RestartBudget", "backoff", "BACKOFF", "STREAK_RESET"]

#: (first, cap) seconds of :func:`backoff`.
BACKOFF = (1.0, 30.0)
#: Failures further apart than this (seconds; or a run that lasted this long or made a step) start
#: the backoff again.
STREAK_RESET = 60.0


def backoff(streak: int, first: float = BACKOFF[0], cap: float = BACKOFF[1]) -> float:
    """Seconds before restarting after the ``streak``-th failure in a row: 0 for the first (a restart
    is immediate), then ``first``, 2 × ``first``, 4 × ``first`` ... at most ``cap``."""
    return 0.0 if streak <= 1 else min(cap, first * 2.0 ** (streak - 2))


class RestartBudget:
    """A task's own count, for when the keeper cannot be reached: at most ``max_failures`` failures
    within ``window`` seconds (a sliding window).

    Failures are kept in memory for this task and, when ``path`` is given (the logdir's
    ``failures.jsonl``), appended to that file as ledger entries, which every relaunch of every task
    reads. ``clock`` is wall time (the file is shared between processes and hosts).
    """

    def __init__(self, max_failures: int, window: float, *, task: str, path: str | None = None,
                 clock: Callable[[], float] = time.time):
        self.max_failures, self.window, self.task, self.path, self.clock = max_failures, window, task, path, clock
        self._mine: list[float] = []
        self._preemptions: list[float] = []

    def record(self, code: int, stderr_tail: str = "", *, entry: Entry | None = None) -> int:
        """Count one failure; returns the failures within the window (job-wide when shared)."""
        now = self.clock()
        self._mine.append(now)
        append_file(self.path, entry or Entry(id=f"{self.task}@{now:.6f}", task=self.task, kind=FAILURE, time=now,
                                              code=code, reason=stderr_tail[-2000:]))
        return self.count()

    def count(self) -> int:
        """Failures within the window: the larger of this task's and the file's (of its bucket) count."""
        since = self.clock() - self.window
        self._mine = [t for t in self._mine if t >= since]
        mine = bucket(self.task)
        return max(len(self._mine), sum(1 for e in read_file(self.path) if e.kind == FAILURE and e.counted
                                        and e.time >= since and bucket(e.task) == mine))

    def take(self, entry: Entry, preemption_budget: tuple[int, float]) -> Answer:
        """Count ``entry`` alone (a failure is recorded, a preemption remembered here); the job's counts
        as this task knows them."""
        failures = self.record(entry.code or 0, entry.reason, entry=entry) if entry.kind == FAILURE else self.count()
        if entry.kind == PREEMPTION:
            self._preemptions.append(entry.time)
        most, window = preemption_budget
        preemptions = sum(1 for t in self._preemptions if t >= entry.time - window)
        return Answer(counted=entry.kind != INFRASTRUCTURE, failures=failures, max_failures=self.max_failures,
                      window_seconds=self.window, preemptions=preemptions, max_preemptions=most, alone=True)

    def shared(self) -> list[dict[str, Any]]:
        """Every entry of the file (malformed lines are skipped), as dicts."""
        return [e.to_dict() for e in read_file(self.path)]
