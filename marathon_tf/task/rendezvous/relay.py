"""Relays: a large job's followers long-poll a few of their own, not all the leader.

Every task needs the whole view (every peer's address: ~50 kB gzipped at 10,000 peers), so a leader that answers
every follower itself sends N whole views to form a job of N tasks: N² bytes (486 MB at 10,000). Above
:data:`RELAY_ABOVE` followers the job's members are a two-level tree (:class:`Tree`, computed alike by every task
from the job's spec): the first ``ceil(F / FANOUT)`` followers, in the cluster spec's order, are **relays**, each
serving the followers ``j`` with ``j mod relays`` its position. A relay long-polls the leader like any follower and
says where it serves (``serve=<its status port>``; the leader takes the host from the request itself, so a task can
only offer itself); it keeps what the leader sent, versions, deltas and the plan as they are (:class:`Mirror`), and
answers ``GET /rendezvous`` on its own status port as the leader would. Every other follower asks the leader first
(``me=<task>``); the leader answers with a small redirect (``"redirect": {"task", "at"}``) once its relay has
registered, and the follower long-polls that relay. A relay that fails a follower (refused, timed out, not this
job's, another cluster spec) sends it back to the leader for :data:`RELAY_PAUSE` seconds (``relay=0``: the leader
answers it itself). The leader's versions and id pass through unchanged, so a follower moving between a relay and
the leader keeps its deltas.

Pure bookkeeping and the relay's long poll; the HTTP around it is the status server's (:mod:`..status_server`).
"""

from __future__ import annotations

import collections
import json
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from marathon_tf.task.discovery import PeerKey
from marathon_tf.task.rendezvous.view import HISTORY, Poll, WholeCache, changes

__all__ = ["Tree", "Mirror", "FANOUT", "RELAY_ABOVE", "RELAY_PAUSE", "REGISTERED_FOR"]

FANOUT = 100            # followers one relay serves (and about how many relays the leader serves)
RELAY_ABOVE = 1000      # followers the leader serves alone; above this, relays carry the view
RELAY_PAUSE = 60.0      # seconds a follower its relay failed asks the leader itself
REGISTERED_FOR = 60.0   # a relay's registration at the leader lasts this long after its last poll


@dataclass(frozen=True)
class Tree:
    """Who serves whom: ``relays`` long-poll the leader; every other follower long-polls its relay."""

    relays: tuple[PeerKey, ...] = ()
    position: Mapping[PeerKey, int] = field(default_factory=dict)  # a follower's place among the followers

    @classmethod
    def of(cls, members: Sequence[PeerKey], leader: PeerKey | None, *, above: int = RELAY_ABOVE,
           fanout: int = FANOUT) -> Tree:
        followers = [m for m in members if m != leader]
        if leader is None or len(followers) <= above:
            return cls()
        count = math.ceil(len(followers) / max(1, fanout))
        return cls(tuple(followers[:count]), {m: j for j, m in enumerate(followers)})

    def serves(self, me: PeerKey | None) -> bool:
        """Whether ``me`` is a relay."""
        return me is not None and self.position.get(me, len(self.relays)) < len(self.relays)

    def relay_of(self, me: PeerKey | None) -> PeerKey | None:
        """The relay ``me`` long-polls; None: it polls the leader (a small job, a relay, or no follower)."""
        j = self.position.get(me) if me is not None else None
        if j is None or j < len(self.relays):
            return None
        return self.relays[j % len(self.relays)]


def _names(value: Any) -> dict[str, str | None]:
    """A document's ``peers``/``missing`` (whole or a delta) as sent, less what is not a name's string or null."""
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str) or v is None}


class Mirror:
    """What a relay serves: its leader's view as last taken (:meth:`take`), at the leader's own versions, with the
    changes between them (each a set of final values, so a follower between two of them still patches right), and
    the long poll over it (:meth:`handle`)."""

    def __init__(self, job: str, via: str, done: Callable[[], bool]):
        self.job, self.via, self._done = job, via, done
        lock = threading.RLock()
        self.cond = threading.Condition(lock)
        self.formed = threading.Condition(lock)  # complete=1 polls wait here: woken once, not at every change
        self.leader: str | None = None
        self.leader_task = ""
        self.cluster: Any = None
        self.version = -1
        self.complete = False
        self.peers: dict[str, str] = {}
        self.missing: dict[str, str] = {}
        self.plan: Any = None
        self.history: collections.deque[tuple[int, int, dict, dict]] = collections.deque(maxlen=HISTORY)
        self._whole = WholeCache()

    def take(self, doc: Mapping[str, Any]) -> None:
        """A leader's answer (whole or a delta), as the relay's follower side took it."""
        leader, version = str(doc.get("leader")), doc.get("version")
        if not isinstance(version, int):
            return
        with self.cond:
            same = leader == self.leader
            if same and version <= self.version:
                return  # nothing new (a long poll that timed out), or older (kept out)
            if doc.get("delta") and same:
                dpeers, dmissing = _names(doc.get("peers")), _names(doc.get("missing"))
                peers = {k: v for k, v in {**self.peers, **dpeers}.items() if v is not None}
                missing = {k: v for k, v in {**self.missing, **dmissing}.items() if v is not None}
            else:
                peers = {k: v for k, v in _names(doc.get("peers")).items() if v is not None}
                missing = {k: v for k, v in _names(doc.get("missing")).items() if v is not None}
                dpeers, dmissing = changes(self.peers, peers), changes(self.missing, missing)
            if same:
                self.history.append((self.version, version, dpeers, dmissing))
            else:
                self.history.clear()
            self.leader, self.leader_task, self.cluster = leader, str(doc.get("leader_task") or ""), doc.get("cluster")
            self.version, self.complete, self.plan = version, bool(doc.get("complete")), doc.get("plan")
            self.peers, self.missing = peers, missing
            self.cond.notify_all()
            if self.complete:
                self.formed.notify_all()

    def wake(self) -> None:
        with self.cond:
            self.cond.notify_all()
            self.formed.notify_all()

    def since(self, after: int) -> tuple[dict, dict] | None:
        """Every change after version ``after`` (call with ``cond`` held); None: the history does not reach it."""
        if not self.history or after < self.history[0][0] or after > self.version:
            return None
        peers: dict[str, str | None] = {}
        missing: dict[str, str | None] = {}
        for _, to, dpeers, dmissing in self.history:
            if to > after:
                peers.update(dpeers)
                missing.update(dmissing)
        return peers, missing

    def document(self, delta: tuple[dict, dict] | None) -> dict[str, Any]:
        doc: dict[str, Any] = {"job": self.job, "leader": self.leader, "leader_task": self.leader_task,
                               "cluster": self.cluster, "version": self.version, "complete": self.complete,
                               "delta": delta is not None, "via": self.via}
        if self.plan is not None:
            doc["plan"] = self.plan
        peers, missing = delta if delta is not None else (self.peers, self.missing)
        doc.update(peers=dict(sorted(peers.items())), missing=dict(sorted(missing.items())))
        return doc

    def handle(self, query: Mapping[str, str]) -> tuple:
        """``GET /rendezvous`` at the relay: the leader's long poll, answered from the mirror. A follower at or ahead
        of the mirror's version waits for a newer one; none yet after ``wait``: 503 (the follower asks the leader)."""
        poll = Poll.parse(query, self.job)
        if not isinstance(poll, Poll):
            return poll
        with self.cond:
            (self.formed if poll.complete else self.cond).wait_for(lambda: self._done() or (
                self.leader is not None and (poll.leader != self.leader or self.version > poll.after)
                and (not poll.complete or self.complete)), timeout=poll.wait)
            if self.leader is None:
                return 503, {"message": f"relay {self.via} has no view of job {self.job} yet"}
            delta = self.since(poll.after) if poll.leader == self.leader else None
            if delta is None:
                body, packed = self._whole.get(self.version, self.leader, lambda: self.document(None))
            else:
                body, packed = (json.dumps(self.document(delta), sort_keys=True) + "\n").encode(), None
        return poll.answer(body, packed)

