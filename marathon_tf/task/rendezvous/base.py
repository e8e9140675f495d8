"""What a task's bootstrap reads of its rendezvous, whichever kind it is (:class:`Rendezvous`).

Three kinds implement it: the job's leader (:class:`~marathon_tf.task.rendezvous.leader.LeaderRendezvous`),
every other task as a follower (:class:`~marathon_tf.task.rendezvous.follower.FollowerRendezvous`),
and, without a leader (``MTF_RENDEZVOUS=direct``), a task that reads the discovery backend itself
(:class:`~marathon_tf.task.rendezvous.direct.DirectRendezvous`). The bootstrap finds its peers
(:meth:`~Rendezvous.wait`), watches for the ones that moved (:meth:`~Rendezvous.moved`, every
:attr:`~Rendezvous.watch_every` s), settles them before a restart in place (:meth:`~Rendezvous.settle`)
and, where the keeper's group restart rounds travel through the leader (:attr:`~Rendezvous.carries_rounds`),
follows them (:meth:`~Rendezvous.restart_round`).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence

from marathon_tf.contract.plan import Round
from marathon_tf.task.discovery import PeerKey

__all__ = ["Rendezvous", "Progress"]

#: ``on_progress(found, missing)``: what :meth:`Rendezvous.wait` has found so far, and why the rest is missing.
Progress = Callable[[dict[PeerKey, str], dict[PeerKey, str]], None]


class Rendezvous(abc.ABC):
    """A task's rendezvous with its peers (see the module)."""

    #: lookups made so far (of the backend, or long polls of the leader)
    polls: int = 0
    #: seconds between two looks for peers that moved: 0.0 when :meth:`moved` reads a local view (every
    #: tick), None when it reads the backend (the bootstrap's watch interval, longer for large jobs)
    watch_every: float | None = None
    #: the keeper's group restart rounds come through it (:meth:`restart_round`)
    carries_rounds: bool = False
    #: the status address (``host:port``) of the rendezvous leader, where the job's keeper listens
    #: (a follower's; None where it is not known or this task leads)
    leader_address: str | None = None

    @abc.abstractmethod
    def wait(self, peers: Sequence[PeerKey], timeout: float, on_progress: Progress | None = None
             ) -> dict[PeerKey, str] | None:
        """Addresses of every peer; None when the task is stopped meanwhile; DiscoveryError after
        ``timeout`` seconds naming what is missing."""

    @abc.abstractmethod
    def moved(self, current: Mapping[PeerKey, str]) -> dict[PeerKey, str]:
        """The peers now at an address other than ``current``'s (a missing peer is not a move)."""

    @abc.abstractmethod
    def settle(self, current: Mapping[PeerKey, str], timeout: float) -> dict[PeerKey, str] | None:
        """Before a restart in place: wait until every peer of ``current`` is there, then the ones
        that moved; None when stopped meanwhile."""

    def restart_round(self) -> tuple[str | None, Round | None]:
        """(the rendezvous leader's id, the group restart round it published last); (None, None)
        where no rounds come through."""
        return None, None

    def restoring(self) -> bool:
        """Whether the job's plan says the deciding task's program is restoring the job's checkpoint (False where
        no plan comes through)."""
        return False

    def close(self) -> None:  # noqa: B027 - a no-op by default, not abstract: only backends with threads override it
        """Stop its threads (the task ends)."""
