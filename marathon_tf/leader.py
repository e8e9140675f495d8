"""Leader rendezvous: one task reads where the job's peers are, every other task asks it.

Without it every task of a job reads Marathon (``GET /v2/groups/<job>?embed=group.apps.tasks``,
~3 MB for 1,000 apps) or Mesos-DNS (one SRV query per peer) on each poll, so the load on them
grows with tasks x job size. With it:

* **The leader** is the job's deciding task (:func:`marathon_tf.lifecycle.decider_task`:
  ``chief-0`` or ``worker-0``). Its bootstrap runs :class:`LeaderRendezvous`: a thread that
  looks up every peer through the ordinary :mod:`~marathon_tf.discovery` backend and publishes
  the result, with a version, at ``GET /rendezvous`` on its status endpoint::

      {"job", "leader": <id of this bootstrap>, "leader_task": "chief-0", "version": 7,
       "complete": true, "peers": {"ps-0": "10.0.0.5:31001", ...}, "missing": {"worker-3": "..."}}

  ``?after=<version>&leader=<id>&wait=<s>`` is a long poll: the answer comes when the version
  (or the leader) differs, or after ``wait`` seconds (at most :data:`MAX_WAIT`).
  It polls fast (0.25 s doubling to 1 s) while a peer is missing, for :data:`AFTER_EVENT` s
  after a Marathon ``status_update_event`` of one of the job's apps (``/v2/events``, followed
  when ``MTF_MARATHON_URL`` is set) or, without that stream, for :data:`HOT_WINDOW` s after a
  change; otherwise slowly: the watch interval, or every :data:`RESYNC` s when events wake it
  (``marathon`` mode, where the updates themselves carry the task's host and ports and go
  straight into the view: TASK_RUNNING places a peer, TASK_KILLED & co. make it missing); the DNS backends about every second for small jobs (a tenth of the DNS
  budget: Mesos-DNS trails Marathon's events by its refresh interval). Group GETs are spaced so
  that the leader reads at most :data:`BYTE_BUDGET` bytes/s from Marathon; DNS polls at most
  :data:`DNS_QUERIES_PER_SECOND` queries/s. With the event stream, the first read waits for it
  to attach (:data:`ATTACH_WAIT`), and later group reads run in a thread of their own (a
  10,000-app group takes Marathon seconds) while status updates keep going into the view; an
  update newer than a read's start wins over what the read says, and a read that gets no
  answer at all leaves the known peers alone.
* **Every other task** runs :class:`FollowerRendezvous`: it finds the leader's status port
  with one small request (Mesos-DNS SRV ``_status._<leader label>._tcp.marathon.mesos.``, the
  Mesos-DNS HTTP API, or ``GET /v2/apps/<job>/<leader>?embed=app.tasks`` in ``marathon``
  mode), then long-polls it. In ``marathon`` mode the leader, which reads every task's ports
  anyway, first tells each follower where it is (``GET /leader?job=&task=&at=`` on the
  follower's status port, believed only from the leader's own host and checked by asking that
  address): a follower of a large job waits :func:`hint_wait_for` s for that before it asks
  Marathon, so forming costs Marathon next to nothing beyond the leader's reads. A leader that
  answered before and then times out is busy, not gone: it is asked again (:data:`BUSY_TRIES`)
  before it is looked up again. A leader that cannot be reached is looked up again (backoff
  scaled to the job); when there is none for :func:`fallback_after` seconds the follower reads
  the backend itself (the per-task rendezvous of old) until a leader answers again. A
  relaunched leader is a new leader (new id): followers take its view whole.

Both sides offer the bootstrap what :class:`marathon_tf.discovery.Rendezvous` does
(``wait``, ``moved``, ``settle``, ``polls``) plus ``close()``; their ``moved`` reads the
local view (no I/O), so the bootstrap checks it every tick (``watch_every``): a peer's move
reaches every task within a second. ``moved`` reports nothing while one of the peers is
missing, so a task never restarts with a stale address mixed in: it waits for the rewritten
spec. ``MTF_RENDEZVOUS=direct`` turns all of this off (every task reads the backend).
"""

from __future__ import annotations

import collections
import json
import random
import threading
import time
import uuid
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from marathon_tf import naming
from marathon_tf.discovery import (Backend, MarathonBackend, Observation, PeerKey,
                                   make_backend, missing_message, poll_schedule)
from marathon_tf.errors import DiscoveryError
from marathon_tf.lifecycle import decider_task
from marathon_tf.taskenv import TaskContext

__all__ = ["PATH", "HINT_PATH", "MAX_WAIT", "HOT_WINDOW", "BYTE_BUDGET", "DNS_QUERIES_PER_SECOND", "rendezvous_mode",
           "leader_of", "hint_wait_for", "fallback_after", "LeaderRendezvous", "FollowerRendezvous", "make_rendezvous"]

PATH = "/rendezvous"
HINT_PATH = "/leader"
MAX_WAIT = 30.0          # longest long poll the leader holds
LONG_POLL = 25.0         # what followers ask for
HISTORY = 1024           # changes the leader keeps to answer with deltas
RESYNC = 60.0            # calm re-reads when Marathon's event stream wakes the leader anyway
HOT_WINDOW = 10.0        # seconds of fast polling after a change (no event stream)
AFTER_EVENT = 3.0        # ... and after a status update of one of the job's apps
EVENT_FORMING = 5.0      # re-reads while forming when the status updates carry the addresses
GZIP_FROM = 16_384       # whole views this large go gzipped to followers that accept it
ATTACH_WAIT = 2.0        # the leader's first read waits this long for the event stream to attach
GONE = frozenset({"TASK_KILLING", "TASK_KILLED", "TASK_FINISHED", "TASK_FAILED", "TASK_LOST", "TASK_ERROR",
                  "TASK_GONE", "TASK_GONE_BY_OPERATOR", "TASK_DROPPED", "TASK_UNREACHABLE", "TASK_UNKNOWN"})
FAST = (0.25, 1.0)       # fast polling: first delay, cap
BUSY_TRIES = 3           # timeouts of a leader that answered before, before a follower looks it up again
BYTE_BUDGET = 300_000.0  # bytes/s the leader may read from Marathon in group GETs
DNS_QUERIES_PER_SECOND = 500.0


def rendezvous_mode(environ: Mapping[str, str]) -> str:
    """``MTF_RENDEZVOUS``: ``leader`` (default) or ``direct``."""
    mode = environ.get("MTF_RENDEZVOUS") or "leader"
    if mode not in ("leader", "direct"):
        raise ValueError(f"MTF_RENDEZVOUS must be leader or direct, not {mode!r}")
    return mode


def leader_of(ctx: TaskContext) -> PeerKey | None:
    """The leading task: the job's deciding task when it is a cluster member, else None."""
    key = naming.parse_task_name(decider_task(ctx.completion))
    return key if key in ctx.members() else None


def hint_wait_for(tasks: int) -> float:
    """Seconds a starting follower waits for the leader's hint before it asks Marathon itself:
    nothing to speak of for small jobs, up to 30 s for large ones."""
    return min(30.0, tasks / 50.0)


def fallback_after(tasks: int) -> float:
    """Seconds without a reachable leader before a follower reads the backend itself."""
    return max(10.0, tasks / 10.0)


def _gzip(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data, compresslevel=6, mtime=0)


def _names(mapping: Mapping[PeerKey, str]) -> dict[str, str]:
    return {naming.task_name(*k): v for k, v in sorted(mapping.items())}


def _patch(current: Mapping[PeerKey, str], delta: Any) -> dict[PeerKey, str]:
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


def _keys(mapping: Any) -> dict[PeerKey, str]:
    out = {}
    for name, value in (mapping or {}).items() if isinstance(mapping, dict) else ():
        key = naming.parse_task_name(str(name))
        if key is not None and isinstance(value, str):
            out[key] = value
    return out


class _View:
    """A versioned view of the peers: present ones with their address, missing ones with why.
    The last :data:`HISTORY` changes are kept as deltas, so a follower gets only what changed."""

    def __init__(self):
        lock = threading.RLock()
        self.cond = threading.Condition(lock)
        # the long polls of a forming job's followers (complete=1) wait here, on the same lock:
        # woken once it is complete, not by each of its thousands of changes while forming
        self.formed = threading.Condition(lock)
        self.peers: dict[PeerKey, str] = {}
        self.missing: dict[PeerKey, str] = {}
        self.version = 0
        self.deltas: collections.deque[tuple[int, dict, dict]] = collections.deque(maxlen=HISTORY)

    def update(self, peers: Mapping[PeerKey, str], missing: Mapping[PeerKey, str]) -> bool:
        with self.cond:
            if dict(peers) == self.peers and dict(missing) == self.missing:
                return False
            self.deltas.append((self.version + 1, _diff(self.peers, peers), _diff(self.missing, missing)))
            self.peers, self.missing = dict(peers), dict(missing)
            self.version += 1
            self.cond.notify_all()
            if not self.missing:
                self.formed.notify_all()
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


def _diff(old: Mapping[PeerKey, str], new: Mapping[PeerKey, str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {naming.task_name(*k): v for k, v in new.items() if old.get(k) != v}
    out.update({naming.task_name(*k): None for k in old if k not in new})
    return out


class _Side:
    """What the bootstrap uses (the :class:`~marathon_tf.discovery.Rendezvous` interface)."""

    watch_every = 0.0  # moved() is local: check it at every tick

    def __init__(self, *, stop: threading.Event | None, clock: Callable[[], float]):
        self.view = _View()
        self.clock = clock
        self.polls = 0
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
                    import sys

                    sys.stderr.write(f"marathon-tf bootstrap: rendezvous error (retrying): {type(e).__name__}: {e}\n")
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
             on_progress: Callable[[dict[PeerKey, str], dict[PeerKey, str]], None] | None = None
             ) -> dict[PeerKey, str] | None:
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

    def settle(self, current: Mapping[PeerKey, str], timeout: float) -> dict[PeerKey, str] | None:
        """Wait until every peer in ``current`` is present, then the ones that moved."""
        found = self.wait(list(current), timeout)
        if found is None:
            return None
        return {p: a for p, a in found.items() if a != current[p]}


class _Hints:
    """The leader tells each follower where it is, so that followers need not ask Marathon:
    ``GET http://<follower's status address>/leader?job=&task=&at=<leader's status address>``,
    a few tries each (a task's bootstrap starts its endpoint a moment after TASK_RUNNING).

    A try that fails is retried later (0.25 s doubling) from a heap, not by a sender thread
    sleeping: thousands of followers whose endpoints are not up yet must not hold up the
    hints of those that are."""

    def __init__(self, job: str, task: str, at: str, *, workers: int = 48, tries: int = 6,
                 closed: threading.Event | None = None, first_retry: float = 0.25):
        from concurrent.futures import ThreadPoolExecutor

        self.job, self.task, self.at, self.tries, self.first_retry = job, task, at, tries, first_retry
        self.closed = closed or threading.Event()
        self.sent = 0
        self.tried = 0
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rendezvous-hint")
        self._pending: dict[PeerKey, str] = {}
        self._lock = threading.Lock()
        self._due = threading.Condition(self._lock)
        self._retries: list[tuple[float, int, PeerKey, str, int]] = []  # heap: (when, seq, key, address, try)
        self._seq = 0
        self._retrier: threading.Thread | None = None

    def send(self, targets: Mapping[PeerKey, str | None]) -> None:
        """Hint every follower at a status address it has not been hinted at yet."""
        with self._lock:  # once per batch: 48 sender threads take this lock too
            new = [(k, a) for k, a in targets.items() if a and self._pending.get(k) != a]
            self._pending.update(new)
        for key, address in new:
            self._submit(key, address, 0)

    def _submit(self, key: PeerKey, address: str, attempt: int) -> None:
        try:
            self._pool.submit(self._one, key, address, attempt)
        except RuntimeError:  # shut down
            pass

    def _one(self, key: PeerKey, address: str, attempt: int) -> None:
        import http.client
        from urllib.parse import urlencode

        if self.closed.is_set() or self._pending.get(key) != address:
            return  # closed, or a newer address is being hinted
        path = f"{HINT_PATH}?{urlencode({'job': self.job, 'task': self.task, 'at': self.at})}"
        host, _, port = address.rpartition(":")
        self.tried += 1
        conn = http.client.HTTPConnection(host, int(port), timeout=2.0)  # light: thousands of these
        try:
            conn.request("GET", path)
            if conn.getresponse().status == 200:
                self.sent += 1
                return
        except (OSError, http.client.HTTPException, ValueError):
            pass
        finally:
            conn.close()
        import heapq

        with self._lock:
            if attempt + 1 >= self.tries:  # given up: a later read of the same address tries again
                if self._pending.get(key) == address:
                    del self._pending[key]
                return
            self._seq += 1
            heapq.heappush(self._retries, (time.monotonic() + self.first_retry * 2 ** attempt, self._seq, key,
                                           address, attempt + 1))
            self._due.notify()
            if self._retrier is None:
                self._retrier = threading.Thread(target=self._retry_loop, name="rendezvous-hint-retry", daemon=True)
                self._retrier.start()

    def _retry_loop(self) -> None:
        import heapq

        while True:
            with self._lock:
                while not self.closed.is_set() and (not self._retries or self._retries[0][0] > time.monotonic()):
                    self._due.wait(self._retries[0][0] - time.monotonic() if self._retries else None)
                if self.closed.is_set():
                    return
                _, _, key, address, attempt = heapq.heappop(self._retries)
            self._submit(key, address, attempt)

    def close(self) -> None:
        self.closed.set()
        with self._lock:
            self._due.notify_all()
        self._pool.shutdown(wait=False, cancel_futures=True)


# --- the leader ------------------------------------------------------------------------------------

class LeaderRendezvous(_Side):
    """The leader's side: look the peers up for everyone, publish, serve the long poll.

    ``events``: an object with ``available`` and ``wait(seconds) -> [event dict]`` (a
    :class:`marathon_tf.watch.EventStream` on ``status_update_event``), or None.
    ``slow``: mean seconds between polls once formed and calm.
    """

    def __init__(self, backend: Backend, members: Sequence[PeerKey], me: PeerKey, address: str, *, job: str,
                 slow: float, events=None, stop: threading.Event | None = None,
                 clock: Callable[[], float] = time.monotonic, rng: random.Random | None = None,
                 fast: tuple[float, float] = FAST, byte_budget: float = BYTE_BUDGET,
                 dns_qps: float = DNS_QUERIES_PER_SECOND, hot_window: float = HOT_WINDOW,
                 hints: _Hints | None = None):
        super().__init__(stop=stop, clock=clock)
        self.hints = hints
        self._status_of: dict[PeerKey, str | None] = {}  # followers' status addresses (for hints)
        self.backend, self.job, self.me, self.slow, self.events = backend, job, me, slow, events
        self.others = [m for m in members if m != me]
        self._others = frozenset(self.others)
        self._formed = False
        self._insurance = False  # the next read is only in case status updates were lost
        self._pool = None  # the thread of group reads that run while status updates go on
        self._stamp: dict[PeerKey, float] = {}  # when a status update last changed each peer
        self.rng = rng or random.Random()
        self.fast, self.byte_budget, self.dns_qps, self.hot_window = fast, byte_budget, dns_qps, hot_window
        self.leader_id = uuid.uuid4().hex[:16]
        self.events_seen = 0
        self._reconnects = 0
        self._changed = False
        self._full: tuple[int, bytes, bytes | None] = (-1, b"", None)  # version, JSON, gzipped JSON
        self._task_of: dict[PeerKey, Any] = {}  # the task id a status update last placed each peer at
        self._prefix = naming.group_id(job) + "/"
        self.view.update({me: address}, {p: "not asked yet" for p in self.others})

    def start(self) -> "LeaderRendezvous":
        self._start(self._loop, "rendezvous-leader")
        return self

    def close(self) -> None:
        super().close()
        if self.events is not None and hasattr(self.events, "close"):
            self.events.close()
        if self.hints is not None:
            self.hints.close()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def _hint(self, status_of: Mapping[PeerKey, str | None]) -> None:
        """Note followers' status addresses; hint the new ones."""
        new = {k: a for k, a in status_of.items() if a and self._status_of.get(k) != a}
        self._status_of.update(new)
        if self.hints is not None and new:
            self.hints.send(new)

    # -- the published view ---------------------------------------------------------------------
    def document(self) -> dict[str, Any]:
        """The whole view (what ``GET /rendezvous`` without ``after`` answers)."""
        with self.view.cond:
            return self._document(None)

    def _document(self, delta: tuple[dict, dict] | None) -> dict[str, Any]:
        view = self.view
        doc = {"job": self.job, "leader": self.leader_id, "leader_task": naming.task_name(*self.me),
               "version": view.version, "complete": not view.missing, "delta": delta is not None,
               "reads": self.polls, "events": self.events_seen, "event_stream": self._streaming()}
        if delta is None:
            doc.update(peers=_names(view.peers), missing=_names(view.missing))
        else:
            doc.update(peers=delta[0], missing=delta[1])
        return doc

    def handle(self, query: Mapping[str, str]) -> tuple:
        """``GET /rendezvous?job=&after=&leader=&wait=&complete=`` (a long poll).

        Answers when the version differs from ``after`` (with ``complete=1``: once the view is
        complete), the leader is not ``leader``, or after ``wait`` s. Same leader and ``after``
        within the history: only the changes since (``"delta": true``, removed entries null);
        else the whole view."""
        if query.get("job") not in (None, self.job):
            return 404, {"message": f"this is the leader of job {self.job!r}, not {query.get('job')!r}"}
        try:
            after = int(query.get("after", "-1"))
            wait = min(MAX_WAIT, max(0.0, float(query.get("wait", "0"))))
        except ValueError:
            return 400, {"message": "after must be an integer and wait a number of seconds"}
        leader, complete = query.get("leader", ""), query.get("complete") in ("1", "true")
        view = self.view
        gzip_ok = "gzip" in query.get("_accept_encoding", "")
        with view.cond:
            # complete=1 (a forming follower, even one that knows no leader yet): only the complete view
            (view.formed if complete else view.cond).wait_for(lambda: self._done() or (
                (leader != self.leader_id or view.version != after) and (not complete or not view.missing)),
                timeout=wait)
            delta = view.since(after) if leader == self.leader_id else None
            if delta is None:
                if self._full[0] != view.version:  # every follower gets the same whole view: encode it once
                    body = (json.dumps(self._document(None), sort_keys=True) + "\n").encode()
                    self._full = (view.version, body, _gzip(body) if len(body) >= GZIP_FROM else None)
                _, body, packed = self._full
            else:
                body, packed = (json.dumps(self._document(delta), sort_keys=True) + "\n").encode(), None
        if packed is None and gzip_ok and len(body) >= GZIP_FROM:
            packed = _gzip(body)  # a large delta (a follower far behind)
        if packed is not None and gzip_ok:
            return 200, packed, {"Content-Encoding": "gzip"}  # 10,000 peers: ~5x less for each follower
        return 200, body

    # -- the loop ---------------------------------------------------------------------------------
    def _loop(self) -> None:
        first, cap = self.fast
        self._delay, self._hot_until, next_read, last_read, gap = first, 0.0, 0.0, 0.0, 0.0
        self._await_stream(ATTACH_WAIT)  # read after the stream attached: no status update falls between
        pending = None  # a group read in flight (a 10,000-app group takes seconds): events go on meanwhile
        while not self._done():
            if (pending is None and time.monotonic() >= next_read and self._insurance
                    and self._events_carry_addresses() and not self.view.missing):
                # a re-read in case status updates were lost, but they completed the view: no need
                self._insurance, self._formed = False, True
                next_read = max(next_read, last_read + self._calm())
            if pending is None and time.monotonic() >= next_read:
                started = time.monotonic()
                if self.polls and self._events_carry_addresses():
                    pending = self._reader().submit(self._lookup)
                else:  # the first read (status updates wait in the stream's queue), or nothing else to do
                    next_read, last_read, gap = self._after_read(self._lookup(), started)
            if pending is not None and pending.done():
                next_read, last_read, gap = self._after_read(pending.result(), started)
                pending = None
            events = self._pause(0.1 if pending is not None else next_read - time.monotonic())
            if events is None:
                continue
            if events and self._events_carry_addresses():
                self._apply(events)
            else:  # a status update (or a reconnect that may have lost some): read again soon
                self._hot_until, self._delay = self.clock() + min(self.hot_window, AFTER_EVENT), first
                next_read = max(time.monotonic(), last_read + gap)  # never faster than the budget

    def _after_read(self, result, started: float) -> tuple[float, float, float]:
        """Merge a read into the view and plan the next: (next read, this read's start, budget gap)."""
        first, cap = self.fast
        missing, asked = self._merge(*result, started)
        now = self.clock()
        if self._changed and not self._streaming():
            self._hot_until, self._delay = now + self.hot_window, first  # no events to wake us: watch closely
        self._insurance = bool(missing) and self._events_carry_addresses()
        if self._insurance:
            pause = max(self._delay, EVENT_FORMING)  # the events bring the rest; re-read now and then
        elif missing or now < self._hot_until:
            pause, self._delay = self._delay * self.rng.uniform(0.8, 1.2), min(cap, self._delay * 2)
        else:
            pause = self._calm()
        gap = self._gap(asked)
        return started + max(pause, gap), started, gap

    def _calm(self) -> float:
        """Seconds to the next read once calm; with an event stream only a slow re-read in case
        an event was lost."""
        marathon = isinstance(self.backend, MarathonBackend)  # Mesos-DNS trails events: keep asking it
        calm = max(self.slow, RESYNC) if self._streaming() and marathon else self.slow
        self._delay = self.fast[0]
        return calm * self.rng.uniform(0.5, 1.5)

    def _reader(self):
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rendezvous-read")
        return self._pool

    def _await_stream(self, seconds: float) -> None:
        """Wait up to ``seconds`` for the event stream to attach (``attached``, when it says)."""
        end = time.monotonic() + seconds
        while (self._streaming() and not getattr(self.events, "attached", True) and not self._done()
               and time.monotonic() < end):
            self._closed.wait(0.02)

    def _lookup(self) -> tuple[dict[PeerKey, Observation], int, str | None]:
        """One lookup through the backend (no view change): (observations, peers asked, why
        Marathon gave no answer at all or None)."""
        with self.view.cond:
            missing = list(self.view.missing)
        asked = self.others if self._formed or isinstance(self.backend, MarathonBackend) else missing
        result = self.backend.lookup(asked) if asked else {}
        return result, len(asked), getattr(self.backend, "last_error", None)

    def _merge(self, result: Mapping[PeerKey, Observation], asked: int, error: str | None,
               started: float) -> tuple[dict[PeerKey, str], int]:
        """A lookup into the view: (missing peers, peers asked). A peer a status update placed
        or removed after the read began keeps what the update said; when Marathon gave no
        answer at all, the peers already known stay (the missing ones say why)."""
        with self.view.cond:
            present, missing = dict(self.view.peers), dict(self.view.missing)
        self.polls += 1
        if error is not None:
            missing = {p: error for p in missing}
            result = {}
        for peer, obs in result.items():
            if self._stamp.get(peer, -1.0) >= started:
                continue
            if obs.address:
                present[peer] = obs.address
                missing.pop(peer, None)
            else:
                present.pop(peer, None)
                missing[peer] = obs.detail
        self._changed = self.view.update(present, missing)
        if not missing:
            self._formed = True
        if error is None:
            self._hint(getattr(self.backend, "also_addresses", {}))
        return missing, asked

    def _events_carry_addresses(self) -> bool:
        """``marathon`` mode on host networking: a status update says where the task runs."""
        return (self._streaming() and isinstance(self.backend, MarathonBackend)
                and getattr(self.backend, "network", "host") == "host")

    def _apply(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Status updates into the view: TASK_RUNNING puts the task at ``host:ports[i]``; a
        terminal state (of the task we know, or of any when we know none) makes it missing."""
        with self.view.cond:
            present, missing = dict(self.view.peers), dict(self.view.missing)
        status_of = {}
        for event in events:
            key = naming.parse_app_id(self.job, str(event.get("appId") or ""))
            if key not in self._others:  # a set: a burst of 10,000 updates is not 10,000 x 10,000 compares
                continue
            state, task = str(event.get("taskStatus") or ""), event.get("taskId")
            ports, host = event.get("ports") or [], event.get("host")
            index = self.backend.port_indexes.get(key, 0)
            if state == "TASK_RUNNING" and host and len(ports) > index and ports[index]:
                present[key] = f"{host}:{ports[index]}"
                missing.pop(key, None)
                self._task_of[key] = task
                self._stamp[key] = time.monotonic()
                status = self.backend.also_indexes.get(key)
                if status is not None and len(ports) > status:
                    status_of[key] = f"{host}:{ports[status]}"
            elif state in GONE and self._task_of.get(key) in (None, task):
                present.pop(key, None)
                missing[key] = f"task {state}"
                self._task_of.pop(key, None)
                self._stamp[key] = time.monotonic()
        self.view.update(present, missing)
        self._hint(status_of)

    def _gap(self, asked: int) -> float:
        """The shortest time between two polls that keeps the leader within its budget."""
        if isinstance(self.backend, MarathonBackend):
            return self.backend.last_bytes / self.byte_budget
        return asked / self.dns_qps

    def _streaming(self) -> bool:
        return self.events is not None and bool(getattr(self.events, "available", False))

    def _relevant(self, event: Mapping[str, Any]) -> bool:
        return str(event.get("appId") or "").startswith(self._prefix)

    def _pause(self, seconds: float) -> list[dict[str, Any]] | None:
        """Wait up to ``seconds``: the job's status updates that came first ([] after a stream
        reconnect, which may have lost some), or None when none came."""
        end = time.monotonic() + max(0.0, seconds)
        while not self._done():
            left = end - time.monotonic()
            if left <= 0:
                return None
            if self._streaming():
                events = self.events.wait(min(left, 0.5))
                if events:  # a burst (a large job forming) is handled in batches, not one by one
                    events += self.events.wait(0.05)
                events = [e for e in events if self._relevant(e)]
                reconnects = getattr(self.events, "reconnects", 0)
                if events or reconnects != self._reconnects:
                    self.events_seen += len(events)
                    self._reconnects = reconnects
                    return events
            else:
                self._closed.wait(min(left, 0.2))
        return None


# --- a follower --------------------------------------------------------------------------------------

class FollowerRendezvous(_Side):
    """A follower's side: find the leader (``locate() -> Observation`` of its status address),
    long-poll it; without a leader for ``fallback`` seconds, read ``direct`` itself."""

    def __init__(self, locate: Callable[[], Observation], direct: Backend, members: Sequence[PeerKey],
                 me: PeerKey | None, *, job: str, session=None, stop: threading.Event | None = None,
                 clock: Callable[[], float] = time.monotonic, rng: random.Random | None = None,
                 schedule: tuple[float, float] | None = None, fallback: float | None = None,
                 long_poll: float = LONG_POLL, leader_task: str = "", hint_wait: float | None = None,
                 read_slack: float = 10.0):
        super().__init__(stop=stop, clock=clock)
        self.leader_task = leader_task
        self.hint_wait = hint_wait if hint_wait is not None else hint_wait_for(len(members))
        self.hints = 0
        self._hinted: str | None = None
        self._hint_event = threading.Event()
        self._resolved: dict[str, set[str]] = {}
        self.locate, self.direct, self.job, self.me = locate, direct, job, me
        self.others = [m for m in members if m != me]
        if session is None:
            import requests

            session = requests.Session()
        self.session = session
        self.rng = rng or random.Random()
        self.schedule = schedule or poll_schedule(len(members))
        self.fallback = fallback if fallback is not None else fallback_after(len(members))
        self.long_poll, self.read_slack = long_poll, read_slack  # a long poll's answer may take this much longer
        self.leader_address: str | None = None
        self.leader_id: str | None = None
        self.leader_detail = "not looked up yet"
        self.locates = self.long_polls = self.direct_reads = 0
        self._version = -1
        self._formed = False

    def start(self) -> "FollowerRendezvous":
        self._start(self._loop, "rendezvous-follower")
        return self

    def _unknown(self) -> str:
        return f"waiting for the leader ({self.leader_detail})"

    def hint(self, query: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        """``GET /leader?job=&task=&at=host:port`` from the leader: where it serves the view.
        Taken only from the job's leading task, sent from the host it names (the caller's
        address, which a web page elsewhere cannot take); the follower then checks that the
        address answers as this job's leader before it believes anything it says."""
        at = query.get("at") or ""
        host, _, port = at.rpartition(":")
        if query.get("job") != self.job or query.get("task") != self.leader_task or not host or not port.isdigit():
            return 400, {"message": "not a hint from this job's leader"}
        if query.get("_client") not in self._addresses(host):
            return 403, {"message": f"a hint for {at} must come from {host}"}
        self.hints += 1
        self._hinted = at
        self._hint_event.set()
        return 200, {"ok": True}

    def _addresses(self, host: str) -> set[str]:
        if host not in self._resolved:
            import socket

            try:
                self._resolved[host] = {str(a[4][0]) for a in socket.getaddrinfo(host, None)} | {host}
            except OSError:
                self._resolved[host] = {host}
        return self._resolved[host]

    def _await_hint(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for the leader's hint; True when it is time to end."""
        end = time.monotonic() + max(0.0, seconds)
        while not self._done() and not self._hint_event.is_set():
            left = end - time.monotonic()
            if left <= 0:
                break
            self._hint_event.wait(min(left, 0.2))
        return self._done()

    def _loop(self) -> None:
        first, cap = self.schedule
        delay, busy = first, 0
        lost_since = self.clock()
        # a large job's tasks neither ask all at once nor ask Marathon at all if the leader calls first
        if self._await_hint(max(self.hint_wait, self.rng.uniform(0, first))):
            return
        while not self._done():
            if self.leader_address is None:
                if self._hint_event.is_set():
                    self._hint_event.clear()
                    self.leader_address, self.leader_detail = self._hinted, f"leader at {self._hinted} (its hint)"
                else:
                    self.locates += 1
                    obs = self.locate()
                    self.leader_address = obs.address
                    self.leader_detail = "leader at " + obs.address if obs.address else "leader: " + obs.detail
            answered = self.leader_address is not None and self._poll_leader()
            if answered is True:
                lost_since, delay, busy = None, first, 0
                continue
            if answered == "busy" and busy < BUSY_TRIES:  # the leader answered before: busy, not gone
                busy += 1
                if self._await_hint(delay * self.rng.uniform(0.5, 1.5)):
                    return
                delay = min(cap, delay * 2)
                continue
            busy = 0
            self.leader_address = None
            if lost_since is None:
                lost_since = self.clock()
            if self.clock() - lost_since >= self.fallback:
                self._read_direct()
            if self._await_hint(delay * self.rng.uniform(0.5, 1.5)):
                return
            delay = min(cap, delay * 2)

    def _poll_leader(self) -> bool | str:
        """One long poll; False when the leader did not answer as a leader of this job,
        "busy" when a leader that answered before timed out (it is still there: ask it again
        rather than Marathon)."""
        params = {"job": self.job, "after": str(self._version), "leader": self.leader_id or "",
                  "wait": f"{self.long_poll:g}"}
        if not self._formed:  # no use for the partial views of a forming job (1,000s of them)
            params["complete"] = "1"
        try:
            resp = self.session.get(f"http://{self.leader_address}{PATH}", params=params,
                                    timeout=(10.0 if self.leader_id else 3.0, self.long_poll + self.read_slack))
            doc = resp.json() if resp.status_code == 200 else None
        except Exception as e:  # refused / reset / timeout / not JSON: look the leader up again
            self.leader_detail = f"leader at {self.leader_address} unreachable ({type(e).__name__})"
            return "busy" if self.leader_id and type(e).__name__ == "ReadTimeout" else False
        self.long_polls += 1
        self.polls += 1
        if not isinstance(doc, dict) or doc.get("job") != self.job or not isinstance(doc.get("version"), int):
            self.leader_detail = f"{self.leader_address} is not this job's leader"
            return False
        peers, missing = _keys(doc.get("peers")), _keys(doc.get("missing"))
        if doc.get("delta"):
            if str(doc.get("leader")) != self.leader_id:
                return False
            with self.view.cond:
                peers, missing = _patch(self.view.peers, doc.get("peers")), _patch(self.view.missing, doc.get("missing"))
        self.leader_id, self._version = str(doc.get("leader")), doc["version"]
        self.leader_detail = f"leader {doc.get('leader_task')} at {self.leader_address}"
        self.view.update(peers, missing)
        if doc.get("complete"):
            self._formed = True
        return True

    def _read_direct(self) -> None:
        """No leader for a while: read the backend like a task without a leader would."""
        self.direct_reads += 1
        self.polls += 1
        present, missing = {}, {}
        for peer, obs in self.direct.lookup(self.others).items():
            if obs.address:
                present[peer] = obs.address
            else:
                missing[peer] = obs.detail
        with self.view.cond:
            mine = {p: a for p, a in self.view.peers.items() if p == self.me}
        self.view.update({**mine, **present}, missing)
        self._version = -1  # a leader that comes back answers at once


# --- wiring ----------------------------------------------------------------------------------------

def _locator(ctx: TaskContext, environ: Mapping[str, str], leader: PeerKey, session, dns_client):
    """``() -> Observation`` of the leader's status address: one small request."""
    status_ctx = replace(ctx, port_name=ctx.status_port_name)
    backend = make_backend(status_ctx, environ, session=session, dns_client=dns_client)
    if isinstance(backend, MarathonBackend):
        return lambda: backend.lookup_app(leader)
    return lambda: backend.lookup([leader])[leader]


def _event_stream(ctx: TaskContext, environ: Mapping[str, str]):
    """Marathon's ``status_update_event`` stream when ``MTF_MARATHON_URL`` is set, else None."""
    from marathon_tf.lifecycle import client_from_env
    from marathon_tf.marathon import RetryPolicy
    from marathon_tf.watch import EventStream

    client = client_from_env(ctx, environ, retry=RetryPolicy(attempts=1, budget=5.0, initial=0.5, max_wait=1.0))
    if client is None:
        return None
    stream = EventStream(client, ("status_update_event",))
    stream.__enter__()
    return stream


def make_rendezvous(ctx: TaskContext, environ: Mapping[str, str], backend: Backend, *, me: PeerKey | None,
                    address: str | None, server, stop: threading.Event, slow: float,
                    rng: random.Random | None = None, session=None, dns_client=None, events=None,
                    log: Callable[[str], None] = lambda m: None):
    """The leader's or a follower's rendezvous for this task, started; None when the job
    uses direct reads (``MTF_RENDEZVOUS=direct``, no leading task, or the leader has no
    status endpoint to publish on)."""
    leader = leader_of(ctx)
    members = ctx.members()
    if rendezvous_mode(environ) == "direct" or leader is None or len(members) < 2:
        return None
    if me == leader:
        if server is None or address is None:
            log("no status endpoint: not leading the rendezvous (the other tasks read the backend)")
            return None
        hints = None
        if isinstance(backend, MarathonBackend):  # it learns the followers' status ports: tell them where it is
            backend.also_port = ctx.status_port_name
            at = f"{address.rpartition(':')[0]}:{server.port}"
            hints = _Hints(ctx.job, naming.task_name(*leader), at)
        else:  # DNS is cheap to ask: calm polls every second or so
            slow = min(slow, max(FAST[1], 10 * len(members) / DNS_QUERIES_PER_SECOND))
        lead = LeaderRendezvous(backend, members, me, address, job=ctx.job, slow=slow, stop=stop, rng=rng,
                                events=events if events is not None else _event_stream(ctx, environ), hints=hints)
        server.add_route(PATH, lead.handle)
        log(f"leading the rendezvous of {len(members)} task(s): GET {PATH} on the status port")
        return lead.start()
    follower = FollowerRendezvous(_locator(ctx, environ, leader, session, dns_client), backend, members, me,
                                  job=ctx.job, session=session, stop=stop, rng=rng,
                                  leader_task=naming.task_name(*leader),
                                  hint_wait=hint_wait_for(len(members)) if ctx.discovery == "marathon" else 0.0)
    if server is not None:
        server.add_route(HINT_PATH, follower.hint)
    log(f"following the rendezvous leader {naming.task_name(*leader)}")
    return follower.start()

