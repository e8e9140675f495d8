"""The progress watchdog: a training program whose step stopped advancing is a failed program.

The step is what the bootstrap reads from the program's output: the last ``step=<int>`` (also
``step: <int>`` / ``step <int>``, :data:`marathon_tf.task.supervisor.STEP_RE`) on stdout or stderr.
A step counts as progress when it differs from the previous one (a restored job may start below
the last step it printed). Two limits, each off when None (``restart.progress_timeout_seconds``
and ``restart.first_step_timeout_seconds`` in job.json):

* ``progress``: no new step for this many seconds since the last one;
* ``first_step``: no step at all this many seconds after the program (re)started (TensorFlow's
  start-up, rendezvous and checkpoint restore included). When only ``progress`` is set, it also
  bounds the wait for the first step.

Only chief and worker tasks are watched: a ps never prints steps, and neither do most evaluators
and tensorboard. Pure (the clock is injected); the bootstrap calls :meth:`started`, :meth:`step`
and :meth:`overdue`.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Optional

__all__ = ["ProgressWatchdog", "WATCHED_ROLES"]

WATCHED_ROLES = ("chief", "worker")


class ProgressWatchdog:
    def __init__(self, progress: Optional[float], first_step: Optional[float] = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.progress, self.first_step, self.clock = progress, first_step, clock
        self._lock = threading.Lock()
        self._since = clock()
        self._step: Optional[int] = None

    @classmethod
    def for_role(cls, role: str, timeouts: tuple[Optional[float], Optional[float]], **kw) -> "ProgressWatchdog":
        """The watchdog of a task: off (both None) for roles that print no steps."""
        return cls(*timeouts, **kw) if role in WATCHED_ROLES else cls(None, None, **kw)

    @property
    def enabled(self) -> bool:
        return self.progress is not None or self.first_step is not None

    def started(self) -> None:
        """The program (re)started: wait for its first step again."""
        with self._lock:
            self._since, self._step = self.clock(), None

    def step(self, step: int) -> None:
        """The program printed ``step``; a different value than the last is progress."""
        with self._lock:
            if step != self._step:
                self._step, self._since = step, self.clock()

    def overdue(self) -> Optional[str]:
        """None while the program makes progress; else the one-line reason it is failed."""
        with self._lock:
            waited = self.clock() - self._since
            if self._step is None:
                limit = self.first_step if self.first_step is not None else self.progress
                if limit is not None and waited >= limit:
                    return f"no progress for {waited:.0f} s since the program started (no first step yet)"
                return None
            if self.progress is not None and waited >= self.progress:
                return f"no progress for {waited:.0f} s since step {self._step}"
            return None
