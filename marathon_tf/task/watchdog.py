"""The progress watchdog: a training program whose step stopped advancing is a failed program.

The step is what the bootstrap reads from the program's output: the last ``step=<int>`` (also
``step: <int>`` / ``step <int>``, :data:`marathon_tf.task.supervisor.STEP_RE`) on stdout or stderr,
or from the logdir. A step counts as progress when it differs from the previous one (a restored
job may start below the last step it printed). Two limits (``restart.progress_timeout_seconds``
and ``restart.first_step_timeout_seconds`` in job.json), each of them

* ``None`` (not set): on, adaptive (the default: a hang is a fault without configuration);
* ``0``: off;
* a number of seconds: that fixed limit.

``progress``: no new step since the last one for that long. Adaptive: ``max(10 × the median
interval between the program's steps, 2 × the longest interval seen in this run, 120 s)`` — it
learns the job's own pace (a job that prints a step every 5 minutes gets 50 minutes), the
longest pause it has already come through (an evaluation every epoch), and never goes below two
minutes.

``first_step``: no step at all that long after the program (re)started (TensorFlow's start-up,
rendezvous and checkpoint restore included). Adaptive: 600 s, but only for a program known to
print steps (``prints_steps``: an earlier run of this task printed one, or the job declares
``progress.target_step`` for this role); a program that never prints a step is never failed for
it. A fixed ``progress`` limit with ``first_step`` not set also bounds the wait for the first step.

Only chief and worker tasks are watched: a ps never prints steps, and neither do most evaluators
and tensorboard; nor is a ``parameter_server`` job's worker (it only serves: its coordinator's steps
show its progress, and the logdir's step, which a worker that prints none would be watched by, moves
only with the job's checkpoints). Pure (the clock is injected); the bootstrap calls :meth:`started`, :meth:`step`
and :meth:`overdue`.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from marathon_tf.contract.progress import median

__all__ = ["ProgressWatchdog", "WATCHED_ROLES", "ADAPTIVE_FACTOR", "PROGRESS_FLOOR", "FIRST_STEP_FLOOR"]

WATCHED_ROLES = ("chief", "worker")
#: Adaptive progress limit: this many median step intervals ...
ADAPTIVE_FACTOR = 10.0
#: ... and never less than this (seconds).
PROGRESS_FLOOR = 120.0
#: Adaptive first-step limit (seconds), for programs known to print steps.
FIRST_STEP_FLOOR = 600.0
#: Step intervals kept for the median.
_INTERVALS = 64


class ProgressWatchdog:
    def __init__(self, progress: float | None, first_step: float | None = None, *,
                 prints_steps: bool = False, clock: Callable[[], float] = time.monotonic) -> None:
        self.progress, self.first_step, self.clock = progress, first_step, clock
        self.prints_steps = prints_steps
        self._lock = threading.Lock()
        self._since = clock()
        self._step: int | None = None
        self._intervals: deque[float] = deque(maxlen=_INTERVALS)
        self._longest = 0.0

    @classmethod
    def for_role(cls, role: str, timeouts: tuple[float | None, float | None], style: str = "",
                 **kw) -> ProgressWatchdog:
        """The watchdog of a task: off (both 0) for roles that print no steps (``style``: the job's)."""
        watched = role in WATCHED_ROLES and not (style == "parameter_server" and role == "worker")
        return cls(*timeouts, **kw) if watched else cls(0, 0, **kw)

    @property
    def enabled(self) -> bool:
        return self.progress != 0 or self.first_step != 0

    def started(self) -> None:
        """The program (re)started: wait for its first step again (the pace learnt so far is kept)."""
        with self._lock:
            if self._step is not None:
                self.prints_steps = True
            self._since, self._step = self.clock(), None

    def step(self, step: int) -> bool:
        """The program printed ``step``; a different value than the last is progress (True)."""
        with self._lock:
            if step == self._step:
                return False
            now = self.clock()
            if self._step is not None:
                interval = now - self._since
                self._intervals.append(interval)
                self._longest = max(self._longest, interval)
            self._step, self._since = step, now
            return True

    def progress_limit(self) -> float | None:
        """Seconds without a new step that fail the program now (None: not watched)."""
        with self._lock:
            return self._progress_limit()

    def _progress_limit(self) -> float | None:
        if self.progress == 0:
            return None
        if self.progress is not None:
            return float(self.progress)
        usual = median(self._intervals) if self._intervals else 0.0
        return max(ADAPTIVE_FACTOR * usual, 2 * self._longest, PROGRESS_FLOOR)

    def _first_step_limit(self) -> float | None:
        if self.first_step == 0:
            return None
        if self.first_step is not None:
            return float(self.first_step)
        if self.progress not in (None, 0):
            return float(self.progress)  # a fixed progress limit alone bounds the first step too
        return FIRST_STEP_FLOOR if self.prints_steps else None

    def usual_interval(self) -> float | None:
        """The median interval between the program's steps (None before two steps)."""
        with self._lock:
            return median(self._intervals) if self._intervals else None

    def stalled_for(self) -> tuple[float, int | None]:
        """(seconds since the last step, or since the start without one; the last step)."""
        with self._lock:
            return self.clock() - self._since, self._step

    def overdue(self) -> str | None:
        """None while the program makes progress; else the one-line reason it is failed."""
        with self._lock:
            waited = self.clock() - self._since
            if self._step is None:
                limit = self._first_step_limit()
                if limit is not None and waited >= limit:
                    return f"no progress for {waited:.0f} s since the program started (no first step yet)"
                return None
            limit = self._progress_limit()
            if limit is not None and waited >= limit:
                return f"no progress for {waited:.0f} s since step {self._step}"
            return None
