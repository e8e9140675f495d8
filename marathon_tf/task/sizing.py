"""An elastic job's size: the table the deciding task decides each change of it with (pure).

An elastic job's size (docs/elastic.md) is decided by the deciding task, from which of the
elastic role's apps run now (:func:`plan_resize`, a :class:`Resize`): the job *forms* with the apps placed
(at least ``min``), *grows* when standbys are placed (after a save: nothing is trained twice), *shrinks*
when a member is gone, and waits *below min* (every program stopped) until enough are placed again.
Who restarts follows what TensorFlow 2.21 allows (measured, docs/elastic.md)::

    style                  grow                                  shrink (a worker gone)
    multi_worker_mirrored  every worker, from the save            every worker, from the last checkpoint
    parameter_server       the chief (coordinator) and the        nobody: the coordinator trains on
                           workers renumbered, from the save      (the lost index stays vacant)
    tf1                    nobody: the newcomer joins             nobody (the lost index stays vacant)

The deciding task's :class:`marathon_tf.task.resize.Resizer` calls :func:`plan_resize` with what it sees and
publishes the answer as the job plan's membership and its round.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from marathon_tf.contract import naming
from marathon_tf.contract.cluster_spec import Membership
from marathon_tf.contract.plan import RoundCause

__all__ = ["Resize", "plan_resize", "FORM", "GROW", "SHRINK", "BELOW_MIN"]

#: A :class:`Resize`'s change.
FORM, GROW, SHRINK, BELOW_MIN = RoundCause.FORM, RoundCause.GROW, RoundCause.SHRINK, RoundCause.BELOW_MIN


@dataclass(frozen=True)
class Resize:
    """A change of an elastic job's size (:func:`plan_resize`): the new ``membership`` (its generation one
    up), the tasks whose program stops for it (``restart``: they start again with the new spec, or wait
    while the job is below its minimum), whether a save round comes first (``save``: a program to save
    with runs and the job's state is whole), which apps it took in and let go, and why."""

    change: RoundCause
    membership: Membership
    restart: tuple[str, ...] = ()
    save: bool = False
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    cause: str = ""

    @property
    def previous(self) -> int:
        return self.membership.size - len(self.added) + len(self.removed)


def _app_index(task: str) -> int:
    key = naming.parse_task_name(task)
    return key[1] if key else 1 << 30


def plan_resize(*, style: str, role: str, bounds: tuple[int, int], current: Membership | None,
                present: Mapping[str, str], take: bool, decider: str) -> Resize | None:
    """The next change of an elastic job's size, or None. ``present``: the role's apps that run now
    (``worker-2`` -> its TF address); ``take``: arrivals may be taken in now (the caller batched them);
    ``decider``: the deciding task (a member of the role is always index 0: it runs the rendezvous).

    Indexes: *compacted* (0..n-1, earlier members first in their order, newcomers by app index) whenever
    every program of the role restarts anyway (``multi_worker_mirrored``, a job resuming from below its
    minimum) and when a ``parameter_server`` job grows (its coordinator restarts); otherwise *kept*: a
    member lost leaves its index vacant and a newcomer takes the lowest vacant one (``tf1``; a
    ``parameter_server`` job that shrinks, whose coordinator trains on)."""
    lo, hi = bounds
    elastic_decider = (naming.parse_task_name(decider) or ("",))[0] == role

    def order(tasks: Sequence[str]) -> list[str]:
        return sorted(tasks, key=lambda t: (t != decider, _app_index(t)))

    if current is None:  # forming: the decider (when it is one of them) and at least min placed
        if (elastic_decider and decider not in present) or len(present) < lo or not (take or len(present) >= hi):
            return None
        chosen = order(list(present))[:hi]
        members = {t: (i, present[t]) for i, t in enumerate(chosen)}
        return Resize(FORM, Membership(role, 1, members, cause=f"{len(chosen)} of {lo}..{hi} placed"),
                      added=tuple(chosen), cause=f"formed with {', '.join(chosen)}")
    lost = [t for t, (_, address) in current.members.items() if present.get(t) != address]
    kept = {t: m for t, m in current.members.items() if t not in lost}
    arrivals = order([t for t in present if t not in kept]) if take else []
    arrivals = arrivals[:max(0, hi - len(kept))]
    size = len(kept) + len(arrivals)
    if not lost and not arrivals:
        return None
    mwms, pss = style == "multi_worker_mirrored", style == "parameter_server"
    coordinator = ("chief-0",) if pss else ()
    what = "; ".join(x for x in (f"{', '.join(sorted(lost))} gone" if lost else "",
                                 f"{', '.join(arrivals)} placed" if arrivals else "") if x)
    vacant: dict[int, str]
    if size < lo:  # below its minimum: every program stops until enough are placed again
        if not lost:
            return None  # newcomers, still too few: taken in once enough are there
        vacant = {**current.vacant, **{current.members[t][0]: current.members[t][1] for t in lost}}
        restart = () if current.paused else coordinator + tuple(order(list(kept)))
        membership = Membership(role, current.generation + 1, dict(kept), vacant, True,
                                f"{what}: {size} of at least {lo}")
        return Resize(BELOW_MIN, membership, restart, save=bool(restart) and not mwms, removed=tuple(sorted(lost)),
                      cause=f"{what}: below the minimum of {lo}; waiting for placement")
    compact = mwms or current.paused or (pss and bool(arrivals))
    if compact:
        chosen = order(list(sorted(kept, key=lambda t: kept[t][0]))) if elastic_decider else \
            sorted(kept, key=lambda t: kept[t][0])
        chosen += arrivals
        members = {t: (i, kept[t][1] if t in kept else present[t]) for i, t in enumerate(chosen)}
        vacant = {}
    else:
        members = dict(kept)
        vacant = {**current.vacant, **{current.members[t][0]: current.members[t][1] for t in lost}}
        used = {i for i, _ in members.values()}
        for t in arrivals:
            free = min([i for i in vacant if i not in used] or [max(used | set(vacant), default=-1) + 1])
            members[t] = (free, present[t])
            used.add(free)
            vacant.pop(free, None)
    top = max((i for i, _ in members.values()), default=-1)
    vacant = {i: a for i, a in vacant.items() if i < top and i not in {j for j, _ in members.values()}}
    running = [t for t in kept if not current.paused]
    if mwms:
        restart = tuple(order(running))
    elif pss and compact and not current.paused:
        restart = coordinator + tuple(order([t for t in running if members[t][0] != kept[t][0]]))
    else:
        restart = ()
    save = bool(restart) and not current.paused and (not mwms or not lost)
    change = GROW if size > len(current.members) or (arrivals and not lost) else SHRINK
    membership = Membership(role, current.generation + 1, members, vacant, False, what)
    return Resize(change, membership, restart, save, tuple(arrivals), tuple(sorted(lost)),
                  f"{what}: {len(current.members)} -> {size} of {lo}..{hi}")
