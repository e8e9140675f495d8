"""The job's coordinator: the deciding task's one writer of the job's plan.

The plan (:class:`~marathon_tf.contract.plan.JobPlan`) is what the job's tasks do together: an elastic job's
membership (decided by :class:`marathon_tf.task.resize.Resizer`), the round under way (started by the restart
ledger's :class:`marathon_tf.task.keeper.Keeper`, or by the resizer where no keeper runs), the ledger's counts,
whether the deciding task's own program is restoring the job's checkpoint (its bootstrap) and, once the job is
over, its verdict. Each of those deciders tells the coordinator; the coordinator writes the next
generation of the plan into the leader's view (:meth:`marathon_tf.task.rendezvous.view.View.publish`), and the
rendezvous long poll carries it to every follower in its one wire form (``"plan"`` of ``GET /rendezvous``), where
each task's bootstrap reconciles to it (the rounds that name it restart its program; a membership that leaves it
out keeps it standing by). A follower that missed an update, reconnects or follows a relaunched leader reads the
current plan: it is a level, not a stream of edges.

No I/O of its own; no TensorFlow.
"""

from __future__ import annotations

import threading
from dataclasses import replace

from marathon_tf.contract.cluster_spec import Membership
from marathon_tf.contract.labels import JobState
from marathon_tf.contract.plan import Counts, JobPlan, Round
from marathon_tf.task.discovery import PeerKey
from marathon_tf.task.rendezvous.view import View

__all__ = ["Coordinator"]


class Coordinator:
    """Writes the job's plan into ``view`` (see the module). Thread-safe: each change is one read-modify-write of
    the plan under its own lock."""

    def __init__(self, view: View):
        self.view = view
        self._lock = threading.Lock()

    @property
    def plan(self) -> JobPlan:
        with self.view.cond:
            return self.view.plan

    def _write(self, optional: frozenset[PeerKey] | None = None, **changes) -> bool:
        with self._lock:
            return self.view.publish(replace(self.plan, **changes), optional)

    def start_round(self, round_: Round | None) -> bool:
        """A round begins (the keeper's group restart, an elastic job's resize), or its cause changed."""
        return self._write(round=round_)

    def next_round_generation(self) -> int:
        """The generation a new round takes where no keeper numbers them (no Marathon to keep a ledger with)."""
        current = self.plan.round
        return (current.generation if current is not None else 0) + 1

    def resize(self, membership: Membership | None, optional: frozenset[PeerKey] = frozenset()) -> bool:
        """An elastic job's new membership; ``optional``: the apps outside it (its standbys), which the view may
        lack without being incomplete."""
        return self._write(optional, membership=membership)

    def counts(self, counts: Counts) -> bool:
        """The restart ledger's counts changed."""
        return self._write(counts=counts)

    def restoring(self, now: bool) -> bool:
        """Whether the deciding task's program is restoring the job's checkpoint now (started from one, no step
        yet): where each worker trains on its own (TF1), a worker's program starts only once it is not."""
        return self._write(restoring=now)

    def verdict(self, state: JobState) -> bool:
        """The job is over: Succeeded or Failed (it is recorded in Marathon too)."""
        return self._write(verdict=state)
