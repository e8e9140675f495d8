"""Which tasks of a job train and with which spec: the bootstrap's membership strategy.

A fixed-size job's (:class:`FixedMembership`): every task the job file names trains, at its app's index, and a
peer's new address is a move (the spec rewritten). An elastic job's (:class:`marathon_tf.task.elastic.ElasticMember`,
a subclass): the members its deciding task publishes train, by TF index in the membership, and a member's new
address is a size change. The bootstrap asks its strategy at each of these points and never asks which one it
has:

* :meth:`~FixedMembership.peers_of`: the peers this task's program needs;
* :meth:`~FixedMembership.join`: before the first start, once the peers are looked up (an elastic task waits to
  be taken in);
* :meth:`~FixedMembership.again`: before a restart: the peers looked up again (:class:`Settled`: what changed);
* :meth:`~FixedMembership.cluster` and :meth:`~FixedMembership.size_of`: the spec's counts, addresses and index,
  and ``MARATHON_TF_WORKERS``;
* :meth:`~FixedMembership.moves`: of the peers seen elsewhere, those that moved (the spec rewritten);
* :meth:`~FixedMembership.workers`: the workers the job's end waits for (None: every worker app).

No TensorFlow here.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping

from marathon_tf.contract.cluster_spec import RenderedSpec
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.task.discovery import PeerKey
from marathon_tf.task.rendezvous import Rendezvous

__all__ = ["FixedMembership", "Settled"]


class Settled(enum.Enum):
    """What a look at the peers before a restart found (:meth:`FixedMembership.again`)."""

    SAME = "same"        # nothing to change: the program starts again with its spec
    MOVED = "moved"      # a peer is elsewhere: the spec is rewritten
    RESIZED = "resized"  # the membership may have changed: the spec is rewritten, and the rounds published
    #                      meanwhile are the new program's to follow, not to stop it again


class FixedMembership:
    """A fixed-size job's membership (see the module); ``log``: the bootstrap's."""

    #: the role whose tasks come and go (an elastic job's); None: none does
    role: str | None = None

    def __init__(self, ctx: TaskContext, *, log: Callable[[str], None] = lambda m: None):
        self.ctx, self.log = ctx, log

    def peers_of(self, me: PeerKey, members: list[PeerKey]) -> list[PeerKey]:
        """The peers this task's program needs: every other task of the job file."""
        return [m for m in members if m != me]

    def join(self, rendezvous: Rendezvous, peers: list[PeerKey],
             endpoints: dict[PeerKey, str]) -> list[PeerKey] | None:  # noqa: ARG002 (the elastic one needs them)
        """The peers to find before the first start (None: stopped meanwhile): all of them, now."""
        return peers

    def again(self, rendezvous: Rendezvous | None, peers: list[PeerKey], endpoints: dict[PeerKey, str],
              timeout: float) -> Settled | None:
        """Before a restart: the peers looked up once (one that moved meanwhile is in ``endpoints`` then; one that
        is down is waited for: a restart with its stale address would hang). None: stopped meanwhile."""
        if not peers or rendezvous is None:
            return Settled.SAME
        try:
            moved = rendezvous.settle({p: endpoints[p] for p in peers}, timeout)
        except Exception as e:  # a failing lookup must not stop the restart
            self.log(f"could not re-check the peers before the restart: {e}")
            moved = {}
        if moved is None:
            return None
        endpoints.update(moved)
        return Settled.MOVED if moved else Settled.SAME

    def cluster(self, counts: Mapping[str, int], endpoints: dict[PeerKey, str]
                ) -> tuple[Mapping[str, int], dict[PeerKey, str], int]:
        """(counts, endpoints, this task's TF index) of the spec its program starts with: the job file's."""
        return counts, endpoints, self.ctx.index

    def size_of(self, spec: RenderedSpec) -> int:
        """``MARATHON_TF_WORKERS``: the spec's workers."""
        return len(spec.cluster.get("worker", []))

    def moves(self, peers: list[PeerKey]) -> list[PeerKey]:
        """Of ``peers``, those whose new address is a move (the spec rewritten): every one."""
        return peers

    def workers(self) -> list[str] | None:
        """The workers the job's end waits for (asked when it does); None: every worker app."""
        return None
