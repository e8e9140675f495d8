"""An elastic job's size (marathon_tf.task.sizing.plan_resize), the table itself: when a job forms, who restarts
for a grow or a shrink in each style (docs/elastic.md's table), which indexes are kept or compacted, when a save
round comes first, and the job below its minimum."""

from __future__ import annotations

from marathon_tf.contract.cluster_spec import Membership
from marathon_tf.task.sizing import BELOW_MIN, FORM, GROW, SHRINK, plan_resize

AT = {f"worker-{i}": f"10.0.0.{i}:2222" for i in range(6)}


def present(*indexes: int) -> dict[str, str]:
    return {f"worker-{i}": AT[f"worker-{i}"] for i in indexes}


def members(**indexes: int) -> dict[str, tuple[int, str]]:
    """worker_0=0 -> {"worker-0": (0, its address)}."""
    return {t.replace("_", "-"): (i, AT[t.replace("_", "-")]) for t, i in indexes.items()}


def plan(style: str, current: Membership | None, here: dict[str, str], *, bounds=(2, 4), take=True):
    decider = "chief-0" if style == "parameter_server" else "worker-0"
    return plan_resize(style=style, role="worker", bounds=bounds, current=current, present=here, take=take,
                       decider=decider)


def test_a_job_forms_with_its_deciding_worker_and_at_least_min_placed_at_once_when_max_are_there():
    assert plan("tf1", None, present(1, 2)) is None  # worker-0 (it runs the rendezvous) is not there
    assert plan("tf1", None, present(0)) is None  # below the minimum of 2
    assert plan("tf1", None, present(0, 2), take=False) is None  # arrivals are still being batched
    formed = plan("tf1", None, present(0, 2))
    assert formed is not None and formed.change is FORM
    assert formed.membership == Membership("worker", 1, members(worker_0=0, worker_2=1), cause="2 of 2..4 placed")
    assert (formed.added, formed.restart, formed.save) == (("worker-0", "worker-2"), (), False)
    full = plan("tf1", None, present(5, 3, 0, 1, 2), take=False)  # max placed: no need to wait for a batch
    assert full is not None and sorted(full.membership.members) == ["worker-0", "worker-1", "worker-2", "worker-3"]


def test_tf1_nobody_restarts_a_lost_index_stays_vacant_and_the_next_newcomer_takes_it():
    current = Membership("worker", 1, members(worker_0=0, worker_1=1, worker_2=2))
    shrunk = plan("tf1", current, present(0, 2))
    assert shrunk is not None and shrunk.change is SHRINK
    assert (shrunk.restart, shrunk.save, shrunk.removed) == ((), False, ("worker-1",))
    assert shrunk.membership.members == members(worker_0=0, worker_2=2)
    assert shrunk.membership.vacant == {1: AT["worker-1"]} and shrunk.membership.generation == 2
    grown = plan("tf1", shrunk.membership, present(0, 2, 4))
    assert grown is not None and grown.change is GROW and (grown.restart, grown.save) == ((), False)
    assert grown.membership.members == members(worker_0=0, worker_2=2, worker_4=1)  # the vacant index 1
    assert grown.membership.vacant == {} and grown.cause == "worker-4 placed: 2 -> 3 of 2..4"


def test_parameter_server_grows_with_the_coordinator_and_renumbered_workers_restarting_from_a_save():
    current = Membership("worker", 3, members(worker_0=0, worker_2=2), {1: AT["worker-1"]})
    grown = plan("parameter_server", current, present(0, 2, 3))
    assert grown is not None and grown.change is GROW
    assert grown.membership.members == members(worker_0=0, worker_2=1, worker_3=2)  # compacted
    assert (grown.restart, grown.save) == (("chief-0", "worker-2"), True)  # worker-0 keeps its index: trains on
    shrunk = plan("parameter_server", grown.membership, present(0, 3))
    assert shrunk is not None and shrunk.change is SHRINK and (shrunk.restart, shrunk.save) == ((), False)
    assert shrunk.membership.vacant == {1: AT["worker-2"]}  # the coordinator trains on without index 1


def test_multi_worker_mirrored_restarts_every_worker_from_a_save_to_grow_from_the_last_checkpoint_to_shrink():
    current = Membership("worker", 1, members(worker_0=0, worker_1=1, worker_2=2))
    shrunk = plan("multi_worker_mirrored", current, present(0, 2))
    assert shrunk is not None and shrunk.change is SHRINK
    assert shrunk.membership.members == members(worker_0=0, worker_2=1) and shrunk.membership.vacant == {}
    assert (shrunk.restart, shrunk.save) == (("worker-0", "worker-2"), False)  # a member is gone: nothing to save
    grown = plan("multi_worker_mirrored", shrunk.membership, present(0, 2, 5))
    assert grown is not None and grown.change is GROW
    assert (grown.restart, grown.save) == (("worker-0", "worker-2"), True)
    assert grown.membership.members == members(worker_0=0, worker_2=1, worker_5=2)


def test_below_its_minimum_every_program_stops_after_a_save_and_waits_for_enough_placed():
    current = Membership("worker", 4, members(worker_0=0, worker_1=1))
    below = plan("tf1", current, present(0))
    assert below is not None and below.change is BELOW_MIN and below.membership.paused
    assert (below.restart, below.save) == (("worker-0",), True)
    assert below.cause == "worker-1 gone: below the minimum of 2; waiting for placement"
    assert plan("tf1", below.membership, present(0), bounds=(3, 4)) is None  # still below: nothing changes
    assert plan("tf1", below.membership, present(0, 3), bounds=(3, 4)) is None  # a newcomer, still too few
    back = plan("tf1", below.membership, present(0, 3))
    assert back is not None and back.change is GROW and not back.membership.paused
    assert back.membership.members == members(worker_0=0, worker_3=1)  # compacted: every program starts anew
    assert back.restart == ()  # (they were stopped while paused: none runs to restart)


def test_arrivals_wait_for_their_batch_and_never_exceed_max():
    current = Membership("worker", 2, members(worker_0=0, worker_1=1))
    assert plan("tf1", current, present(0, 1, 2, 3), take=False) is None
    grown = plan("tf1", current, present(0, 1, 3, 2), bounds=(2, 3))
    assert grown is not None and grown.added == ("worker-2",)  # by app index, one place left under max 3
