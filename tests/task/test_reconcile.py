"""The task's reconcile step (marathon_tf.task.reconcile): one look, one step, in the documented order; and the
look is level-triggered — a round missed between two looks is followed once, at the plan's newest generation."""

from __future__ import annotations

import itertools
import signal
import threading
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest

from marathon_tf.contract.plan import Round, RoundCause, RoundKind
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.task.machine import TaskMachine
from marathon_tf.task.observer import TaskObserver
from marathon_tf.task.policy import ExitPolicy
from marathon_tf.task.reconcile import ORDER, Seen, Step, next_step
from marathon_tf.task.restarts import Restarter
from marathon_tf.task.status_server import TaskStatus
from marathon_tf.task.watchdog import ProgressWatchdog

ROUND = Round(generation=3, kind=RoundKind.RESTART, reason=RoundCause.FAILURE, cause="worker-1 failed")

#: a look that calls for each step, and for that step only
CALLS_FOR = {
    Step.STOP: Seen(stopping=True),
    Step.FOLLOW: Seen(round=ROUND),
    Step.HUNG: Seen(hung="no progress for 121 s since step 40"),
    Step.PEER: Seen(peer_restarted="ps-0"),
    Step.ENDED: Seen(exit_code=1),
    Step.WATCH: Seen(watch_due=True),
}


def merged(*looks: Seen) -> Seen:
    """One look with every field that any of ``looks`` sets."""
    fields: dict = {}
    for look in looks:
        fields.update({k: v for k, v in vars(look).items() if v not in (None, False)})
    return replace(Seen(), **fields)


def test_a_quiet_look_is_run_and_each_call_is_its_step():
    assert next_step(Seen()) is Step.RUN
    for step, look in CALLS_FOR.items():
        assert next_step(look) is step, step
    assert [step for step, _ in ORDER] == list(CALLS_FOR)  # the table names every step but RUN, once


@pytest.mark.parametrize("first, second", list(itertools.combinations(list(CALLS_FOR), 2)),
                         ids=lambda s: str(s))
def test_the_earlier_step_wins_over_every_later_one(first, second):
    """A stop beats the plan's round (its stop asks for one save round, whatever the plan), the round beats the
    program's end (it ended because of the round: not its failure), a hang beats a peer's restart (the program is
    failed and decided, never restarted uncounted), ..., and a due watch waits behind everything."""
    look = merged(CALLS_FOR[first], CALLS_FOR[second])
    if first in (Step.HUNG, Step.PEER) and second is Step.ENDED:
        assert next_step(look) is Step.ENDED  # a hang and a peer's restart are a running program's: it ended
        return
    assert next_step(look) is first, look


def test_an_ended_program_is_never_hung_nor_restarted_for_a_peer():
    assert next_step(Seen(exit_code=0, hung="no progress", peer_restarted="ps-0", watch_due=True)) is Step.ENDED
    assert next_step(Seen(exit_code=143, stopping=True)) is Step.STOP


class Plan:
    """A rendezvous whose plan the test publishes: (leader, the newest round)."""

    def __init__(self) -> None:
        self.leader: str | None = "chief-0@10.0.0.1:31000"
        self.round: Round | None = None

    def restart_round(self):
        return self.leader, self.round


def restarter(task: str = "worker-1") -> tuple[Restarter, Plan]:
    ctx = TaskContext(job="ml/mnist", role="worker", index=int(task.split("-")[1]), cluster={"ps": 1, "worker": 3})
    status = TaskStatus(job=ctx.job, task=ctx.task, role=ctx.role, index=ctx.index)
    machine = TaskMachine(status)
    observer = TaskObserver(ctx, status, ProgressWatchdog.for_role("worker", (0, 0)), probe=lambda a: "silent",
                            machine=machine)
    restarts = Restarter(ctx, ExitPolicy(), None, status, observer, threading.Event(), lambda: signal.SIGTERM,
                         grace=1.0, clock=time.monotonic, log=lambda m: None, machine=machine)
    plan = Plan()
    restarts.rendezvous = plan  # type: ignore[assignment]  (what attach() sets, without its keeper checks)
    restarts.begin()
    return restarts, plan


def looked(restarts: Restarter) -> Step:
    return next_step(Seen(round=restarts.new_round()))


def test_a_round_missed_between_two_looks_is_followed_once_at_the_newest_generation():
    restarts, plan = restarter()
    plan.round = replace(ROUND, generation=1)
    plan.round = replace(ROUND, generation=2, cause="ps-0 failed")  # the look before this one missed generation 1
    assert looked(restarts) is Step.FOLLOW
    assert restarts.new_round() == plan.round  # still the plan's newest until followed
    ended = SimpleNamespace(wait=lambda timeout=None: 1)  # its program ended meanwhile (because of the round)
    assert restarts.stop_for_round(ended, plan.round)  # type: ignore[arg-type]
    assert looked(restarts) is Step.RUN  # followed: the same plan asks nothing more
    plan.round = replace(ROUND, generation=3)
    assert looked(restarts) is Step.FOLLOW


def test_rounds_before_the_program_started_and_rounds_for_others_ask_nothing():
    restarts, plan = restarter("worker-2")
    plan.round = replace(ROUND, generation=4)
    restarts.begin()  # the program starts after generation 4: not its round to follow
    assert looked(restarts) is Step.RUN
    plan.round = Round(generation=5, kind=RoundKind.RESIZE, reason=RoundCause.GROW, restart=("worker-0", "worker-1"))
    assert looked(restarts) is Step.RUN  # an elastic size change that leaves worker-2 training
    assert looked(restarts) is Step.RUN
    plan.round = replace(ROUND, generation=6)
    assert looked(restarts) is Step.FOLLOW


def test_a_relaunched_coordinators_plan_is_taken_as_it_is_then_followed_from_there():
    """A new leader (the deciding task relaunched: its rounds count from its own generations) is read as the
    current plan, not as news: the spec is rewritten for its move anyway; its next round is followed."""
    restarts, plan = restarter()
    plan.round = replace(ROUND, generation=7)
    restarts.begin()
    plan.leader, plan.round = "chief-0@10.0.0.9:31000", replace(ROUND, generation=1)
    assert looked(restarts) is Step.RUN
    plan.round = replace(ROUND, generation=2)
    assert looked(restarts) is Step.FOLLOW
