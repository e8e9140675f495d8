"""The progress watchdog's rules (marathon_tf.task.watchdog), with a fake clock."""

from __future__ import annotations

from marathon_tf.task.watchdog import ProgressWatchdog


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_progress_and_first_step_limits():
    clock = Clock()
    w = ProgressWatchdog(30, 120, clock=clock)
    w.started()
    clock.t += 119
    assert w.overdue() is None
    clock.t += 1
    assert w.overdue() == "no progress for 120 s since the program started (no first step yet)"
    w.step(10)
    clock.t += 29
    assert w.overdue() is None
    w.step(10)  # the same step again is not progress
    clock.t += 1
    assert w.overdue() == "no progress for 30 s since step 10"
    w.step(11)
    assert w.overdue() is None
    w.started()  # a restart waits for the first step again
    clock.t += 60
    assert w.overdue() is None


def test_progress_alone_also_bounds_the_first_step_and_off_is_off():
    clock = Clock()
    w = ProgressWatchdog(30, None, clock=clock)
    clock.t += 30
    assert w.overdue().startswith("no progress for 30 s")
    off = ProgressWatchdog(None, None, clock=clock)
    clock.t += 10_000
    assert not off.enabled and off.overdue() is None
    assert not ProgressWatchdog.for_role("ps", (30, 60)).enabled
    assert ProgressWatchdog.for_role("worker", (30, 60)).enabled
