"""An elastic job's size changes as typed rounds (task/resize, task/keeper, task/restarts): the deciding task's
resizer publishes each change that restarts programs as a :class:`~marathon_tf.contract.plan.Round` of kind
``resize`` whose reason is the change (``grow``, ``shrink``, ``below_min``), in the rendezvous view, and a member's
restarter follows only the rounds that name it. In-process: a real view, no network, no TensorFlow."""

import threading

import pytest

from marathon_tf.contract.plan import Round, RoundCause, RoundKind
from marathon_tf.task.keeper import Keeper
from marathon_tf.task.ledger import Ledger
from marathon_tf.task.machine import TaskMachine
from marathon_tf.task.rendezvous.coordinator import Coordinator
from marathon_tf.task.rendezvous.view import View
from marathon_tf.task.resize import Resizer
from marathon_tf.task.status_server import TaskStatus
from marathon_tf.task.timeline import TaskEvents


def resizer(make_ctx, keeper: Keeper | None, coordinator: Coordinator | None = None) -> tuple[Resizer, View]:
    ctx = make_ctx("worker", 0, cluster={"worker": 4}, elastic={"worker": (2, 4)}, style="multi_worker_mirrored")
    coordinator = coordinator or Coordinator(View())
    view = coordinator.view
    status = TaskStatus(job=ctx.job, task="worker-0", role="worker", index=0)
    r = Resizer(ctx, view, None, TaskEvents("worker-0"), status, stop=threading.Event(),
                publish_round=keeper.resize_round if keeper is not None else None, batch=0.0,
                machine=TaskMachine(status), coordinator=coordinator)
    return r, view


def place(view: View, *indexes: int) -> None:
    view.update({("worker", i): f"10.0.0.{i}:{2000 + i}" for i in indexes}, {})


@pytest.mark.parametrize("with_keeper", [True, False], ids=["keeper's-generations", "view's-own-generations"])
def test_a_size_change_is_a_resize_round_whose_reason_is_the_change(make_ctx, with_keeper):
    keeper, coordinator = None, Coordinator(View())  # the keeper publishes its rounds through the coordinator
    if with_keeper:
        keeper = Keeper(make_ctx("worker", 0, cluster={"worker": 4}), Ledger((3, 600.0), (5, 600.0)),
                        coordinator=coordinator)
    r, view = resizer(make_ctx, keeper, coordinator)
    place(view, 0, 1)
    r.step()  # formed with worker-0 and worker-1: nobody restarts, no round
    assert r.membership is not None and r.membership.size == 2 and view.round is None
    place(view, 0, 1, 2)
    r.step()  # worker-2 placed: a multi_worker_mirrored group restarts with it
    grew = view.round
    assert isinstance(grew, Round) and (grew.kind, grew.reason, grew.generation) == (RoundKind.RESIZE,
                                                                                     RoundCause.GROW, 1)
    assert grew.restart == ("worker-0", "worker-1") and grew.follows("worker-1") and not grew.follows("worker-2")
    assert view.membership == r.membership and r.membership.size == 3
    if keeper is not None:
        assert keeper.round == grew and keeper.generation == 1
    place(view, 0, 1)
    r.step()  # worker-2 gone: the group restarts without it
    shrank = view.round
    assert shrank is not None and (shrank.reason, shrank.generation) == (RoundCause.SHRINK, 2)
    place(view, 0)
    r.step()  # below the minimum: every program stops until enough are placed again
    below = view.round
    assert below is not None and (below.reason, below.generation) == (RoundCause.BELOW_MIN, 3)
    assert below.restart == ("worker-0",) and view.membership is not None and view.membership.paused


def test_the_workers_a_finished_decider_waits_for_are_the_plans_members_not_those_its_program_started_with(make_ctx):
    """A TF1 elastic job grows without restarting the programs already in: the deciding task's program started
    with 2 members, the plan has 3 by the time it finishes, and the job is done when all 3 are (before, it
    waited for 2 and said ``all 2 workers finished`` of a 3-worker job)."""
    from marathon_tf.contract.cluster_spec import Membership
    from marathon_tf.task.elastic import ElasticMember
    from marathon_tf.task.rendezvous.view import Side

    ctx = make_ctx(cluster={"ps": 1, "worker": 3}, elastic={"worker": (2, 3)})
    status = TaskStatus(job="j", task="worker-0", role="worker", index=0)
    member = ElasticMember(ctx, status, threading.Event(), machine=TaskMachine(status))
    side = Side(stop=None, clock=lambda: 0.0)
    member.attach(side)
    coordinator = Coordinator(side.view)
    two = Membership("worker", 1, {"worker-0": (0, "127.0.0.1:1"), "worker-1": (1, "127.0.0.1:2")})
    coordinator.resize(two)
    member.current = member.membership()  # what its program started with
    assert member.workers() == ["worker-0", "worker-1"]
    coordinator.resize(Membership("worker", 2, {**two.members, "worker-2": (2, "127.0.0.1:3")}))
    assert member.workers() == ["worker-0", "worker-1", "worker-2"] and member.size == 2
