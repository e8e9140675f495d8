"""The progress watchdog's rules (marathon_tf.task.watchdog), with a fake clock."""

from __future__ import annotations

from marathon_tf.task.watchdog import ADAPTIVE_FACTOR, FIRST_STEP_FLOOR, PROGRESS_FLOOR, ProgressWatchdog


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
    off = ProgressWatchdog(0, 0, clock=clock)
    off.step(1)
    clock.t += 10_000
    assert not off.enabled and off.overdue() is None
    assert not ProgressWatchdog.for_role("ps", (30, 60)).enabled
    assert ProgressWatchdog.for_role("worker", (30, 60)).enabled


def test_by_default_the_limit_follows_the_programs_own_pace_with_a_floor():
    clock = Clock()
    w = ProgressWatchdog(None, None, clock=clock)
    assert w.enabled
    w.started()
    clock.t += 10_000  # a program never known to print steps is never failed before its first step
    assert w.overdue() is None
    w.step(0)
    assert w.progress_limit() == PROGRESS_FLOOR  # no interval seen yet: the floor
    for step in range(1, 40):  # a step every 0.5 s: 10 x 0.5 s is under the floor
        clock.t += 0.5
        w.step(step)
    assert w.usual_interval() == 0.5 and w.progress_limit() == PROGRESS_FLOOR
    clock.t += PROGRESS_FLOOR - 1
    assert w.overdue() is None
    clock.t += 1
    assert w.overdue() == f"no progress for {PROGRESS_FLOOR:.0f} s since step 39"


def test_by_default_a_slow_job_gets_ten_of_its_intervals_and_a_pause_it_came_through_twice_over():
    clock = Clock()
    w = ProgressWatchdog(None, None, clock=clock)
    for step in range(10):  # a step every 60 s
        w.step(step)
        clock.t += 60
    assert w.progress_limit() == ADAPTIVE_FACTOR * 60
    clock.t += 400  # one long pause (an evaluation), then the same pace again
    w.step(10)
    assert w.progress_limit() == 2 * 460
    fast = ProgressWatchdog(None, None, clock=clock)
    for step in range(100):
        fast.step(step)
        clock.t += 0.1
    clock.t += 300  # came through a 5-minute pause once ...
    fast.step(100)
    assert fast.progress_limit() >= 600  # ... so the next one of that length is no hang


def test_by_default_the_first_step_is_bounded_once_the_program_is_known_to_print_steps():
    clock = Clock()
    w = ProgressWatchdog(None, None, clock=clock)
    w.started()
    w.step(5)
    w.started()  # restarted after it printed steps: now it is known to print them
    clock.t += FIRST_STEP_FLOOR - 1
    assert w.overdue() is None
    clock.t += 1
    assert w.overdue() == f"no progress for {FIRST_STEP_FLOOR:.0f} s since the program started (no first step yet)"
    declared = ProgressWatchdog(None, None, prints_steps=True, clock=clock)  # the job declares a target step
    declared.started()
    clock.t += FIRST_STEP_FLOOR
    assert declared.overdue() is not None


def test_zero_turns_either_limit_off_and_a_number_fixes_it():
    clock = Clock()
    w = ProgressWatchdog(0, None, prints_steps=True, clock=clock)
    w.step(1)
    clock.t += 100_000
    assert w.overdue() is None and w.progress_limit() is None
    w.started()
    clock.t += FIRST_STEP_FLOOR
    assert w.overdue() is not None  # the first-step limit is still the adaptive one
    fixed = ProgressWatchdog(45, 0, clock=clock)
    fixed.started()
    clock.t += 10_000
    assert fixed.overdue() is None  # no first-step limit
    fixed.step(1)
    clock.t += 45
    assert fixed.overdue() == "no progress for 45 s since step 1"
