"""What both sides of the leader rendezvous keep: a versioned view of the job's peers and the job's plan,
and what the bootstrap reads of it (:class:`Side`: the :class:`~marathon_tf.task.rendezvous.base.Rendezvous`
interface over the view). Also the wire format of ``GET /rendezvous``:
its path, the long poll's bounds, peers by task name (``{"ps-0": "host:port"}``) and deltas
(``null`` = removed), and the plan (``"plan"``: :meth:`marathon_tf.contract.plan.JobPlan.to_wire`).

The plan (:class:`~marathon_tf.contract.plan.JobPlan`: the membership of an elastic job, the round under way,
the ledger's counts, the verdict) has one writer, the deciding task's
:class:`~marathon_tf.task.rendezvous.coordinator.Coordinator` (:meth:`View.publish`); a follower adopts the
plan its leader sends as it is (:meth:`View.adopt`).
"""

from __future__ import annotations

import collections
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from marathon_tf.contract import naming
from marathon_tf.contract.cluster_spec import Membership
from marathon_tf.contract.errors import DiscoveryError
from marathon_tf.contract.plan import JobPlan, Round
from marathon_tf.contract.taskapi import LEADER, RENDEZVOUS
from marathon_tf.task.discovery import PeerKey, missing_message
from marathon_tf.task.rendezvous.base import Progress, Rendezvous

__all__ = ["PATH", "HINT_PATH", "MAX_WAIT", "LONG_POLL", "HISTORY", "GZIP_FROM", "View", "Side", "Poll", "WholeCache",
           "names", "patch", "keys", "changes", "diff", "cluster_key"]

PATH = RENDEZVOUS.path   # (contract/taskapi.py lists every route of the status port)
HINT_PATH = LEADER.path
MAX_WAIT = 30.0          # longest long poll the leader holds
LONG_POLL = 25.0         # what followers ask for
HISTORY = 1024           # changes the leader keeps to answer with deltas
GZIP_FROM = 16_384       # answers this large go gzipped to followers that accept it


def _gzip(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data, compresslevel=6, mtime=0)


@dataclass(frozen=True)
class Poll:
    """One long poll of ``GET /rendezvous?job=&after=&leader=&wait=&complete=`` as the leader and a relay read it."""

    after: int
    wait: float
    leader: str
    complete: bool
    gzip: bool

    @classmethod
    def parse(cls, query: Mapping[str, str], job: str) -> Poll | tuple[int, dict[str, str]]:
        """The poll, or the answer to a poll of another job (404) or of another shape (400)."""
        if query.get("job") not in (None, job):
            return 404, {"message": f"this is the leader of job {job!r}, not {query.get('job')!r}"}
        try:
            after = int(query.get("after", "-1"))
            wait = min(MAX_WAIT, max(0.0, float(query.get("wait", "0"))))
        except ValueError:
            return 400, {"message": "after must be an integer and wait a number of seconds"}
        return cls(after, wait, query.get("leader", ""), query.get("complete") in ("1", "true"),
                   "gzip" in query.get("_accept_encoding", ""))

    def answer(self, body: bytes, packed: bytes | None) -> tuple:
        """The status server's answer: gzipped where the follower accepts it and the body is large."""
        if packed is None and self.gzip and len(body) >= GZIP_FROM:
            packed = _gzip(body)  # a large delta (a follower far behind)
        if packed is not None and self.gzip:
            return 200, packed, {"Content-Encoding": "gzip"}  # 10,000 peers: ~5x less for each follower
        return 200, body


class WholeCache:
    """The whole view, encoded (and gzipped when large) once per version: every follower gets the same bytes."""

    def __init__(self) -> None:
        self._at: tuple[int, str | None] = (-1, None)
        self._body: bytes = b""
        self._packed: bytes | None = None

    def get(self, version: int, leader: str | None, document: Callable[[], dict[str, Any]]
            ) -> tuple[bytes, bytes | None]:
        if self._at != (version, leader):
            self._body = (json.dumps(document(), sort_keys=True) + "\n").encode()
            self._packed = _gzip(self._body) if len(self._body) >= GZIP_FROM else None
            self._at = (version, leader)
        return self._body, self._packed


def cluster_key(members: Sequence[PeerKey]) -> str:
    """A short fingerprint of the job's cluster members (``worker-0,worker-1,...``): a leader and a
    follower of different versions of the job's spec (a ``scale`` under way) tell each other apart."""
    import hashlib

    return hashlib.sha1(",".join(sorted(naming.task_name(*m) for m in members)).encode()).hexdigest()[:12]


def names(mapping: Mapping[PeerKey, str]) -> dict[str, str]:
    return {naming.task_name(*k): v for k, v in sorted(mapping.items())}


def patch(current: Mapping[PeerKey, str], delta: Any) -> dict[PeerKey, str]:
    out = dict(current)
    for name, value in (delta or {}).items() if isinstance(delta, dict) else ():
        key = naming.parse_task_name(str(name))
        if key is None:
            continue
        if isinstance(value, str):
            out[key] = value
        else:
            out.pop(key, None)
    return out


def keys(mapping: Any) -> dict[PeerKey, str]:
    out = {}
    for name, value in (mapping or {}).items() if isinstance(mapping, dict) else ():
        key = naming.parse_task_name(str(name))
        if key is not None and isinstance(value, str):
            out[key] = value
    return out


class View:
    """A versioned view of the peers: present ones with their address, missing ones with why.
    The last :data:`HISTORY` changes are kept as deltas, so a follower gets only what changed."""

    def __init__(self) -> None:
        lock = threading.RLock()
        self.cond = threading.Condition(lock)
        # the long polls of a forming job's followers (complete=1) wait here, on the same lock:
        # woken once it is complete, not by each of its thousands of changes while forming
        self.formed = threading.Condition(lock)
        self.peers: dict[PeerKey, str] = {}
        self.missing: dict[PeerKey, str] = {}
        self.version = 0
        self.deltas: collections.deque[tuple[int, dict, dict]] = collections.deque(maxlen=HISTORY)
        #: the job's plan: written by the deciding task's coordinator only (a follower adopts its leader's)
        self.plan = JobPlan()
        #: peers whose absence leaves the view complete: an elastic job's standbys (apps outside its membership)
        self.optional: frozenset[PeerKey] = frozenset()
        self._lock = lock
        self._also: list[threading.Condition] = []  # notified at every change too (condition())

    def condition(self) -> threading.Condition:
        """Another condition on the view's lock, notified at every change like ``cond`` (the leader's waits for a
        relay: a follower waiting there still hears of a new version or plan)."""
        with self.cond:
            made = threading.Condition(self._lock)
            self._also.append(made)
            return made

    def _notify(self) -> None:
        self.cond.notify_all()
        for also in self._also:
            also.notify_all()
        if not self.lacking():
            self.formed.notify_all()

    def lacking(self) -> dict[PeerKey, str]:
        """The missing peers the view needs (its standbys left out)."""
        return {p: d for p, d in self.missing.items() if p not in self.optional} if self.optional else self.missing

    def update(self, peers: Mapping[PeerKey, str], missing: Mapping[PeerKey, str]) -> bool:
        with self.cond:
            if dict(peers) == self.peers and dict(missing) == self.missing:
                return False
            self.deltas.append((self.version + 1, diff(self.peers, peers), diff(self.missing, missing)))
            self.peers, self.missing = dict(peers), dict(missing)
            self.version += 1
            self._notify()
            return True

    @property
    def round(self) -> Round | None:
        """The round the plan has under way (a group restart, an elastic job's resize:
        :mod:`marathon_tf.task.keeper`); None: none yet."""
        return self.plan.round

    @property
    def membership(self) -> Membership | None:
        """An elastic job's membership (:mod:`marathon_tf.task.resize`); None: a fixed-size job, or not formed yet."""
        return self.plan.membership

    def publish(self, plan: JobPlan, optional: frozenset[PeerKey] | None = None) -> bool:
        """The coordinator's new plan, at the next generation (a new version: the long polls answer at once);
        ``optional``: the peers the view may lack (an elastic job's standbys). False when nothing changed."""
        with self.cond:
            same = replace(plan, generation=self.plan.generation) == self.plan
            if same and (optional is None or optional == self.optional):
                return False
            return self._changed(self.plan if same else replace(plan, generation=self.plan.generation + 1), optional)

    def adopt(self, plan: JobPlan) -> bool:
        """A follower takes its leader's plan as it is (its generation included)."""
        with self.cond:
            return plan != self.plan and self._changed(plan, None)

    def _changed(self, plan: JobPlan, optional: frozenset[PeerKey] | None) -> bool:
        self.plan = plan
        if optional is not None:
            self.optional = optional
        self.deltas.append((self.version + 1, {}, {}))
        self.version += 1
        self._notify()
        return True

    def wake(self) -> None:
        """Wake every waiter (closing)."""
        with self.cond:
            self.cond.notify_all()
            self.formed.notify_all()

    def since(self, version: int) -> tuple[dict, dict] | None:
        """Every change after ``version`` as ({name: address or None}, {name: detail or None});
        None when the history no longer reaches back that far. Call with ``cond`` held."""
        if not self.deltas or version < self.deltas[0][0] - 1 or version > self.version:
            return None
        peers: dict[str, str | None] = {}
        missing: dict[str, str | None] = {}
        for v, dp, dm in self.deltas:
            if v > version:
                peers.update(dp)
                missing.update(dm)
        return peers, missing


def changes(old: Mapping[Any, str], new: Mapping[Any, str]) -> dict[Any, str | None]:
    """What turns ``old`` into ``new``: each changed or added key's new value, each removed key None."""
    out: dict[Any, str | None] = {k: v for k, v in new.items() if old.get(k) != v}
    out.update({k: None for k in old if k not in new})
    return out


def diff(old: Mapping[PeerKey, str], new: Mapping[PeerKey, str]) -> dict[str, str | None]:
    """:func:`changes` by task name (the wire's)."""
    return {naming.task_name(*k): v for k, v in changes(old, new).items()}


class Side(Rendezvous):
    """What the bootstrap uses of either side: the view, read through the
    :class:`~marathon_tf.task.rendezvous.base.Rendezvous` interface."""

    watch_every = 0.0  # moved() is local: check it at every tick
    carries_rounds = True

    def __init__(self, *, stop: threading.Event | None, clock: Callable[[], float], view: View | None = None):
        self.view = view if view is not None else View()
        self.clock = clock
        self.polls = 0
        self.leader_id: str | None = None  # the leader's id (a new one: a relaunched leader)
        self._stop = stop or threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def _start(self, target: Callable[[], None], name: str) -> None:
        self._thread = threading.Thread(target=self._guard(target), name=name, daemon=True)
        self._thread.start()

    def _guard(self, target):
        def run():
            while not self._done():
                try:
                    target()
                except Exception as e:  # a bug or an odd answer must not end discovery for good
                    from marathon_tf.task import stderr

                    stderr.log(f"rendezvous error (retrying): {type(e).__name__}: {e}")
                    self._wait(1.0)
        return run

    def _done(self) -> bool:
        return self._stop.is_set() or self._closed.is_set()

    def _wait(self, seconds: float) -> bool:
        """Sleep (woken by stop/close); True when it is time to end."""
        end = time.monotonic() + max(0.0, seconds)
        while not self._done():
            left = end - time.monotonic()
            if left <= 0:
                return False
            self._closed.wait(min(left, 0.2))
        return True

    def close(self) -> None:
        self._closed.set()
        self.view.wake()

    def wait(self, peers: Sequence[PeerKey], timeout: float,
             on_progress: Progress | None = None) -> dict[PeerKey, str] | None:
        """Addresses of every peer once the view has them all; None when stopped;
        DiscoveryError after ``timeout`` seconds naming what is missing."""
        deadline = self.clock() + timeout
        seen = -1
        found: dict[PeerKey, str] = {}
        lacking: dict[PeerKey, str] = {}
        while True:
            with self.view.cond:
                if self.view.version == seen and not self._done():
                    self.view.cond.wait(0.2)
                # the view's dicts are replaced, never changed: no copies (10,000 peers, every 0.2 s)
                version, present, missing = self.view.version, self.view.peers, self.view.missing
            if version != seen:  # only a new version is worth going through every peer
                unknown = self._unknown()
                found = {p: present[p] for p in peers if p in present}
                lacking = {p: missing.get(p, unknown) for p in peers if p not in present}
                if on_progress:
                    on_progress(found, lacking)
                seen = version
            if not lacking:
                return found
            if self._done():
                return None
            if self.clock() >= deadline:
                unknown = self._unknown()  # what the side knows now (a follower: where its leader is)
                lacking = {p: missing.get(p, unknown) for p in lacking}
                raise DiscoveryError(missing_message(lacking, timeout),
                                     hint="check that every task of the job is running and in Mesos-DNS")

    def _unknown(self) -> str:
        return "not seen yet"

    def moved(self, current: Mapping[PeerKey, str]) -> dict[PeerKey, str]:
        """Peers now at another address; nothing while one of them is missing (a task waits
        for the rewritten spec rather than restart with a stale address mixed in)."""
        with self.view.cond:
            present = self.view.peers  # replaced, never changed: no copy at every tick
        if any(p not in present for p in current):
            return {}
        return {p: present[p] for p in current if present[p] != current[p]}

    def restart_round(self) -> tuple[str | None, Round | None]:
        """(the leader's id, the group restart round it published last)."""
        with self.view.cond:
            return self.leader_id, self.view.round

    def restoring(self) -> bool:
        """Whether the plan says the deciding task's program is restoring the job's checkpoint."""
        with self.view.cond:
            return self.view.plan.restoring

    def settle(self, current: Mapping[PeerKey, str], timeout: float) -> dict[PeerKey, str] | None:
        """Wait until every peer in ``current`` is present, then the ones that moved."""
        found = self.wait(list(current), timeout)
        if found is None:
            return None
        return {p: a for p, a in found.items() if a != current[p]}
