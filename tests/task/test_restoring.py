"""When a TF1 worker's program may start (marathon_tf.task.restoring): the deciding task says in the job's plan that
its program restores the job's checkpoint, every other tf1 worker waits for it to be back, bounded; a save round's
hold that came while no program ran holds the next start. The end-to-end case is
tests/system/lifecycle/test_coordinator_kill_e2e.py (a relaunched coordinator's slow restore and a newcomer)."""

from __future__ import annotations

import threading

import pytest

from marathon_tf.contract.plan import JobPlan
from marathon_tf.task.rendezvous import Coordinator, View
from marathon_tf.task.restoring import RestoreGate, StartHold, hold_limit


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Plan:
    """A rendezvous whose plan a test sets; each look at it moves the test's clock by ``step`` s."""

    def __init__(self, clock: Clock, restoring: bool = True, clear_after: float | None = None, step: float = 0.05):
        self.clock, self.now, self.clear_after, self.step = clock, restoring, clear_after, step

    def restoring(self) -> bool:
        self.clock.now += self.step
        if self.clear_after is not None and self.clock.now >= self.clear_after:
            self.now = False
        return self.now


class Stop(threading.Event):
    def wait(self, timeout=None) -> bool:  # (the clock moves in Plan.restoring)
        return self.is_set()


def gate(rendezvous=None, *, coordinator=None, waits=True, limit=30.0, clock=None, stop=None):
    said: list[str] = []
    g = RestoreGate(coordinator=coordinator, rendezvous=lambda: rendezvous, waits=waits, leader="worker-0",
                    limit=limit, stop=stop or Stop(), log=said.append, clock=clock or Clock())
    return g, said


def test_the_deciding_task_says_in_its_plan_that_its_program_restores_until_it_steps():
    view = View()
    g, _ = gate(coordinator=Coordinator(view))
    g.program_starts(True)  # (before its rendezvous publishes anything: the logdir has a checkpoint)
    assert view.plan.restoring is True and JobPlan.from_wire(view.plan.to_wire()).restoring is True
    generation = view.plan.generation
    g.program_starts(True)  # said once
    assert view.plan.generation == generation
    g.program_back()
    assert view.plan.restoring is False and view.plan.generation == generation + 1
    g.program_back()  # (every step: nothing more is written)
    assert view.plan.generation == generation + 1
    g.program_starts(False)  # a start with no checkpoint restores nothing
    assert view.plan.restoring is False
    g.handing_over()  # its own stop: its successor restores
    assert view.plan.restoring is True


def test_a_deciding_program_that_prints_no_steps_never_says_it_restores():
    """(it could not say when it is back: every worker's start would wait the whole limit)"""
    view = View()
    g = RestoreGate(coordinator=Coordinator(view), rendezvous=lambda: None, waits=False, leader="worker-0", limit=30,
                    stop=Stop(), log=print, prints_steps=lambda: False)
    g.program_starts(True)
    g.handing_over()
    assert view.plan.restoring is False and view.plan.generation == 0


def test_a_worker_waits_for_the_deciding_program_to_be_back_and_says_how_long():
    clock = Clock()
    g, said = gate(Plan(clock, clear_after=3.0), clock=clock)
    waited = g.wait()
    assert waited == pytest.approx(3.0, abs=0.11)
    assert said[0] == ("worker-0's program is restoring the job's checkpoint: this program starts once it is back "
                       "(at most 30 s)")
    assert said[1].startswith("worker-0's program is back at the job's checkpoint after 3.0 s: starting"), said


def test_the_wait_is_bounded_and_says_so():
    clock = Clock()
    g, said = gate(Plan(clock), clock=clock, limit=5.0)
    assert g.wait() == pytest.approx(5.0, abs=0.11)
    assert said[-1] == ("worker-0's program did not step within 5 s of starting from the job's checkpoint: starting "
                        "this program all the same")


@pytest.mark.parametrize("case", ["not restoring", "does not wait", "deciding task", "no rendezvous", "stopped"])
def test_nothing_is_waited_for_otherwise(case):
    clock = Clock()
    plan = Plan(clock, restoring=case != "not restoring")
    stop = Stop()
    if case == "stopped":
        stop.set()
    g, said = gate(None if case == "no rendezvous" else plan, waits=case != "does not wait", clock=clock, stop=stop,
                   coordinator=Coordinator(View()) if case == "deciding task" else None)
    waited = g.wait()
    if case == "stopped":  # (it looked, and stopped at once)
        assert waited is not None and waited < 0.2 and len(said) == 1, (waited, said)
    else:
        assert waited is None and said == []


def test_a_hold_that_came_before_the_program_holds_its_start_until_let_go():
    said: list[str] = []
    hold = StartHold(log=said.append)
    assert hold.hold("worker-0 is stopped", 30.0) == {"held": True, "step": None}
    assert said == ["held for the job's save round (worker-0 is stopped) before the training program started: it "
                    "starts once the round is over (at most 30 s)"]
    stop = threading.Event()
    started = threading.Event()
    waiter = threading.Thread(target=lambda: (hold.wait(stop), started.set()))
    waiter.start()
    assert not started.wait(0.3)  # held
    hold.release("the deciding task's program is back at the job's checkpoint")
    assert started.wait(5)
    waiter.join()
    assert said[-1] == ("the save round is over (the deciding task's program is back at the job's checkpoint): the "
                        "training program may start")
    hold.release("again")  # nothing held: nothing said
    assert len(said) == 2


def test_a_start_hold_runs_out_is_extended_only_when_held_and_ends_with_the_task():
    clock = Clock()
    said: list[str] = []
    hold = StartHold(log=said.append, clock=clock)
    assert hold.hold("r", 2.0, extend=True) == {"held": False}  # a confirmed round holds nothing anew
    hold.hold("r", 2.0)
    clock.now = 1.5
    assert hold.hold("r", 2.0, extend=True) == {"held": True}  # until 3.5 now
    stop = threading.Event()
    clock.now = 3.0
    stop.set()
    hold.wait(stop)  # the task stops: no wait
    stop.clear()
    clock.now = 3.6
    hold.wait(stop)
    assert said[-1] == "the save round's hold (r) ran out before it was let go: the training program starts"
    hold.wait(stop)  # nothing left
    assert len(said) == 2


def test_the_hold_limit_is_the_save_rounds():
    from marathon_tf.task import saving

    assert saving.hold_limit is hold_limit and hold_limit(5.0) == 30.0 and hold_limit(25.0) == 50.0
