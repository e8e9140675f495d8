"""Training progress: a task's step rate, and ``step S/T, R steps/s, ETA …`` for people.

The step itself comes from the training program's output (``step=N`` lines, see
:data:`marathon_tf.task.supervisor.STEP_RE`) or from the logdir (:mod:`marathon_tf.task.checkpoints`);
the target from the job file's ``progress.target_step``. Pure: no I/O.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["StepRate", "eta_seconds", "describe", "duration", "parse_duration", "median", "window_text",
           "job_step", "STEP_ROLES"]

#: The roles whose step is the job's: they train (a ps's, an evaluator's step is read from the logdir).
STEP_ROLES = ("chief", "worker")


def job_step(steps: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> int | None:
    """The job's step: the largest step any chief or worker reported (``{task: step}``, or
    ``(task, step)`` pairs; a task's step is its program's last ``step=N``, else its logdir's);
    None when none did. The one definition of the job's step while it runs and of its *final step*
    once it ended: the record's ``marathon-tf/final-step`` (the deciding task's own step and the
    other chiefs' and workers' last ones, :meth:`marathon_tf.task.jobcontrol.JobControl.finish`),
    ``status``'s ``step`` / ``finalStep``, the progress line, ``deploy``'s last line and the API's
    ``JobStatus.final_step``. (A ParameterServerStrategy chief reports the global step; in
    between-graph training each worker prints the shared global step as it saw it, so the last
    ones race past the target: ``step 301`` for a target of 300.)"""
    pairs = steps.items() if isinstance(steps, Mapping) else steps
    known = [s for task, s in pairs if isinstance(s, int) and not isinstance(s, bool)
             and str(task).rsplit("-", 1)[0] in STEP_ROLES]
    return max(known) if known else None


class StepRate:
    """Steps per second over the last ``window`` seconds of ``(time, step)`` observations."""

    def __init__(self, window: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self.window, self.clock = window, clock
        self._seen: collections.deque[tuple[float, int]] = collections.deque()

    def add(self, step: int) -> float | None:
        now = self.clock()
        if self._seen and step < self._seen[-1][1]:
            self._seen.clear()  # the program restarted from an older checkpoint
        self._seen.append((now, step))
        while len(self._seen) > 2 and now - self._seen[1][0] >= self.window:
            self._seen.popleft()
        return self.rate()

    def rate(self) -> float | None:
        if len(self._seen) < 2:
            return None
        (t0, s0), (t1, s1) = self._seen[0], self._seen[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 else None


def median(values) -> float:
    """The median of a non-empty sequence of numbers (``statistics`` costs the bootstrap an import of
    ``fractions`` and ``decimal``)."""
    xs = sorted(values)
    mid = len(xs) // 2
    return float(xs[mid]) if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def eta_seconds(step: int | None, target: int | None, rate: float | None) -> float | None:
    if step is None or not target or not rate or rate <= 0:
        return None
    return max(0.0, (target - step) / rate)


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h10m``, ``3d4h``."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600}h"


def describe(step: int | None, target: int | None = None, rate: float | None = None) -> str:
    """``step 120/300, 14.2 steps/s, ETA 13s`` (the parts that are known); a step past the target is
    ``step 301, target 300 reached`` (never ``301/300``)."""
    if step is None:
        return ""
    if target and step > target:
        return f"step {step}, target {target} reached"
    parts = [f"step {step}/{target}" if target else f"step {step}"]
    if rate is not None:
        parts.append(f"{rate:.3g} steps/s")
    eta = eta_seconds(step, target, rate)
    if eta is not None and step < (target or 0):
        parts.append(f"ETA {duration(eta)}")
    return ", ".join(parts)


_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``5m``, ``1h30m``, ``1.5h`` → seconds; ValueError naming the problem."""
    import re

    raw = text.strip().lower()
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([smhd]?)", raw)
    if not raw or re.sub(r"(\d+(?:\.\d+)?)\s*([smhd]?)", "", raw).strip():
        raise ValueError(f"{text!r} is not a duration (e.g. 90, 90s, 5m, 1h30m)")
    if len(parts) > 1 and any(unit == "" for _, unit in parts):
        raise ValueError(f"{text!r}: give every number of a duration its unit (e.g. 1h30m)")
    return sum(float(n) * _UNITS[unit] for n, unit in parts)


def window_text(seconds: float) -> str:
    """A budget's window in short: ``600`` -> ``10m``, ``86400`` -> ``24h``, ``90`` -> ``90s``."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"
