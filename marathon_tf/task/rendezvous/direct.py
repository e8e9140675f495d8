"""The rendezvous of a task that reads the discovery backend itself (``MTF_RENDEZVOUS=direct``, or a
job without a leader): poll until every peer is known (backoff + jitter), then watch for moves."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence

from marathon_tf.contract.errors import DiscoveryError
from marathon_tf.task.discovery import Backend, PeerKey, missing_message, poll_schedule
from marathon_tf.task.rendezvous.base import Progress, Rendezvous

__all__ = ["DirectRendezvous"]


class DirectRendezvous(Rendezvous):
    """Poll a backend until every peer is known (backoff + jitter), then watch for moves.
    Without explicit delays, the backoff follows :func:`poll_schedule` for the job's size."""

    def __init__(self, backend: Backend, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] = time.sleep, rng: random.Random | None = None,
                 stop: Callable[[], bool] = lambda: False, initial_delay: float | None = None,
                 max_delay: float | None = None):
        self.backend, self.clock, self.sleep = backend, clock, sleep
        self.rng, self.stop = rng or random.Random(), stop
        self.initial_delay, self.max_delay = initial_delay, max_delay
        self.polls = 0
        self.last_seen: dict[PeerKey, str] = {}

    def wait(self, peers: Sequence[PeerKey], timeout: float,
             on_progress: Progress | None = None) -> dict[PeerKey, str] | None:
        """Addresses of every peer; None if ``stop()`` became true; DiscoveryError at the deadline."""
        deadline = self.clock() + timeout
        found: dict[PeerKey, str] = {}
        missing = list(peers)
        first, cap = poll_schedule(len(peers) + 1)
        delay = self.initial_delay if self.initial_delay is not None else first
        max_delay = self.max_delay if self.max_delay is not None else cap
        while True:
            self.polls += 1
            for peer, obs in self.backend.lookup(missing).items():
                if obs.address:
                    found[peer] = obs.address
                    self.last_seen.pop(peer, None)
                else:
                    self.last_seen[peer] = obs.detail
            missing = [p for p in missing if p not in found]
            if on_progress:
                on_progress(dict(found), {p: self.last_seen.get(p, "not asked yet") for p in missing})
            if not missing:
                return found
            remaining = deadline - self.clock()
            if remaining <= 0:
                raise DiscoveryError(missing_message({p: self.last_seen.get(p, "?") for p in missing}, timeout),
                                     hint="check that every task of the job is running and in Mesos-DNS")
            if self.stop():
                return None
            self.sleep(min(remaining, delay * self.rng.uniform(0.5, 1.5)))
            if self.stop():
                return None
            delay = min(max_delay, delay * 2)

    def settle(self, current: Mapping[PeerKey, str], timeout: float) -> dict[PeerKey, str] | None:
        """Before an in-place restart: wait until every peer is seen running (a peer that is down
        is waited for, not left at its stale address), then the peers at a new address.
        None if ``stop()`` became true; DiscoveryError at the deadline."""
        self.polls += 1
        moved, missing = {}, []
        for peer, obs in self.backend.lookup(list(current)).items():
            if not obs.address:
                missing.append(peer)
            elif obs.address != current.get(peer):
                moved[peer] = obs.address
        if missing:
            found = self.wait(missing, timeout)
            if found is None:
                return None
            moved.update({p: a for p, a in found.items() if a != current.get(p)})
        return moved

    def moved(self, current: Mapping[PeerKey, str]) -> dict[PeerKey, str]:
        """One watch poll: the peers now seen at an address other than ``current``'s.
        A peer that is missing (relaunching) is not a move: its new address will be."""
        self.polls += 1
        out = {}
        for peer, obs in self.backend.lookup(list(current)).items():
            if obs.address and obs.address != current.get(peer):
                out[peer] = obs.address
        return out
