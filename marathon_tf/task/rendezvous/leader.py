"""The leader's side of the rendezvous: look the peers up for everyone (through the ordinary
discovery backend, woken by Marathon's status updates when it can), publish the view, answer the
followers' long polls at ``GET /rendezvous`` (see :mod:`marathon_tf.task.rendezvous`)."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from marathon_tf.contract import naming
from marathon_tf.contract.plan import JobPlan
from marathon_tf.marathon.model import Event
from marathon_tf.task.discovery import Backend, MarathonBackend, Observation, PeerKey
from marathon_tf.task.rendezvous.coordinator import Coordinator
from marathon_tf.task.rendezvous.hints import Hints
from marathon_tf.task.rendezvous.relay import REGISTERED_FOR, Tree
from marathon_tf.task.rendezvous.view import Poll, Side, View, WholeCache, cluster_key, names

__all__ = ["LeaderRendezvous", "HOT_WINDOW", "BYTE_BUDGET", "DNS_QUERIES_PER_SECOND", "FAST"]

RESYNC = 60.0            # calm re-reads when Marathon's event stream wakes the leader anyway
HOT_WINDOW = 10.0        # seconds of fast polling after a change (no event stream)
AFTER_EVENT = 3.0        # ... and after a status update of one of the job's apps
EVENT_FORMING = 5.0      # re-reads while forming when the status updates carry the addresses
ATTACH_WAIT = 2.0        # the leader's first read waits this long for the event stream to attach
GONE = frozenset({"TASK_KILLING", "TASK_KILLED", "TASK_FINISHED", "TASK_FAILED", "TASK_LOST", "TASK_ERROR",
                  "TASK_GONE", "TASK_GONE_BY_OPERATOR", "TASK_DROPPED", "TASK_UNREACHABLE", "TASK_UNKNOWN"})
FAST = (0.25, 1.0)       # fast polling: first delay, cap
BYTE_BUDGET = 300_000.0  # bytes/s the leader may read from Marathon in group GETs
DNS_QUERIES_PER_SECOND = 500.0
_NO_PLAN = JobPlan()     # a fixed-size job before any round: nothing to carry


class LeaderRendezvous(Side):
    """The leader's side: look the peers up for everyone, publish, serve the long poll.

    ``events``: an object with ``available`` and ``wait(seconds) -> [event]`` (a
    :class:`marathon_tf.marathon.events.EventStream` on ``status_update_event``; an event that is a plain
    dict is read as an :class:`~marathon_tf.marathon.model.Event`), or None.
    ``slow``: mean seconds between polls once formed and calm.
    """

    def __init__(self, backend: Backend, members: Sequence[PeerKey], me: PeerKey, address: str, *, job: str,
                 slow: float, events=None, stop: threading.Event | None = None,
                 clock: Callable[[], float] = time.monotonic, rng: random.Random | None = None,
                 fast: tuple[float, float] = FAST, byte_budget: float = BYTE_BUDGET,
                 dns_qps: float = DNS_QUERIES_PER_SECOND, hot_window: float = HOT_WINDOW,
                 hints: Hints | None = None, placement=None, coordinator: Coordinator | None = None,
                 listeners: Sequence[Callable[[list[dict[str, Any]]], None]] = (), tree: Tree | None = None):
        #: the one writer of the job's plan in this view (the deciding task leads the rendezvous; its restart
        #: ledger's keeper writes through the same coordinator, made before either)
        self.coordinator = coordinator if coordinator is not None else Coordinator(View())
        super().__init__(stop=stop, clock=clock, view=self.coordinator.view)
        #: the job's placement (:class:`marathon_tf.task.placer.Placer`): a peer it holds is missing
        self.placement = placement
        self._raw_lock = threading.Lock()
        self._raw: tuple[dict[PeerKey, str], dict[PeerKey, str]] = ({me: address},
                                                                    {p: "not asked yet" for p in members if p != me})
        self._moved_at: dict[PeerKey, float] = {}  # when each peer's address last changed (monotonic)
        self.hints = hints
        self._status_of: dict[PeerKey, str | None] = {}  # followers' status addresses (for hints)
        self.backend, self.job, self.me, self.slow, self.events = backend, job, me, slow, events
        self.others = [m for m in members if m != me]
        self._others = frozenset(self.others)
        self.cluster = cluster_key(members)
        self._formed = False
        self._insurance = False  # the next read is only in case status updates were lost
        self._pool: ThreadPoolExecutor | None = None  # the thread of group reads that run while status updates go on
        self._stamp: dict[PeerKey, float] = {}  # when a status update last changed each peer
        self.rng = rng or random.Random()
        self.fast, self.byte_budget, self.dns_qps, self.hot_window = fast, byte_budget, dns_qps, hot_window
        self.leader_id = uuid.uuid4().hex[:16]
        self.events_seen = 0
        self._reconnects = 0
        self._changed = False
        self._whole = WholeCache()
        #: a large job's relays (:mod:`.relay`): who they are, where each registered it serves, and when
        self.tree = tree if tree is not None else Tree()
        self._relays: dict[PeerKey, tuple[str, float]] = {}
        self._relay_waits: dict[PeerKey, threading.Condition] = {}
        self._task_of: dict[PeerKey, Any] = {}  # the task id a status update last placed each peer at
        self._prefix = naming.group_id(job) + "/"
        #: called with each batch of the job's status updates (the keeper's ledger reads them too)
        self.listeners: list[Callable[[list[dict[str, Any]]], None]] = list(listeners)
        self.view.update({me: address}, {p: "not asked yet" for p in self.others})
        if placement is not None:
            placement.listeners.append(self.recheck)
            self.listeners.append(lambda events: placement.wake())

    def start(self) -> LeaderRendezvous:
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

    # -- what the view shows: the lookups, less the peers the placement holds ------------------------
    def _publish(self, present: Mapping[PeerKey, str], missing: Mapping[PeerKey, str]) -> bool:
        """The lookups' result (``present``, ``missing``) into the view, through the placement's hold;
        whether the lookups changed."""
        with self._raw_lock:
            old = self._raw[0]
            now = time.monotonic()
            moved = [p for p, a in present.items() if old.get(p) != a]
            for p in moved:
                self._moved_at[p] = now
            changed = moved or set(old) != set(present) or self._raw[1] != dict(missing)
            self._raw = (dict(present), dict(missing))
            self._show()
        if moved and self.placement is not None:
            self.placement.wake()
        return bool(changed)

    def _show(self) -> None:
        present, missing = dict(self._raw[0]), dict(self._raw[1])
        if self.placement is not None:
            held = self.placement.hold({naming.task_name(*p): self._moved_at.get(p, 0.0) for p in present
                                        if p != self.me})
            for p in [p for p in present if naming.task_name(*p) in held]:
                missing[p] = held[naming.task_name(*p)]
                del present[p]
        self.view.update(present, missing)

    def recheck(self) -> None:
        """The placement looked again: show the view through its new verdict."""
        with self._raw_lock:
            self._show()

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
        doc: dict[str, Any] = {"job": self.job, "leader": self.leader_id, "leader_task": naming.task_name(*self.me),
               "cluster": self.cluster,
               "version": view.version, "complete": not view.lacking(), "delta": delta is not None,
               "reads": self.polls, "events": self.events_seen, "event_stream": self._streaming()}
        if view.plan != _NO_PLAN:  # the job's plan, written by its coordinator (one wire form: contract/plan)
            doc["plan"] = view.plan.to_wire()
        if delta is None:
            doc.update(peers=names(view.peers), missing=names(view.missing))
        else:
            doc.update(peers=delta[0], missing=delta[1])
        return doc

    def handle(self, query: Mapping[str, str]) -> tuple:
        """``GET /rendezvous?job=&after=&leader=&wait=&complete=&me=&serve=&relay=`` (a long poll).

        Answers when the version differs from ``after`` (with ``complete=1``: once the view is
        complete), the leader is not ``leader``, or after ``wait`` s. Same leader and ``after``
        within the history: only the changes since (``"delta": true``, removed entries null);
        else the whole view. A large job's follower (``me``) whose relay registered is redirected to it
        (``"redirect"``; not with ``relay=0``); a relay registers with ``serve=<its status port>``
        (:mod:`.relay`)."""
        poll = Poll.parse(query, self.job)
        if not isinstance(poll, Poll):
            return poll
        deadline = time.monotonic() + poll.wait
        if self.tree.relays:
            redirect = self._relaying(query, poll)
            if redirect is not None:
                return 200, redirect
        view = self.view
        with view.cond:
            # complete=1 (a forming follower, even one that knows no leader yet): only the complete view
            (view.formed if poll.complete else view.cond).wait_for(lambda: self._done() or self._news(poll),
                                                                   timeout=max(0.0, deadline - time.monotonic()))
            delta = view.since(poll.after) if poll.leader == self.leader_id else None
            if delta is None:  # every follower gets the same whole view: encoded once
                body, packed = self._whole.get(view.version, self.leader_id, lambda: self._document(None))
            else:
                body, packed = (json.dumps(self._document(delta), sort_keys=True) + "\n").encode(), None
        return poll.answer(body, packed)

    def _news(self, poll: Poll) -> bool:
        """Whether the view has what ``poll`` waits for: another leader or version (with ``complete=1``: and
        nothing missing). Call with the view's lock held."""
        return ((poll.leader != self.leader_id or self.view.version != poll.after)
                and (not poll.complete or not self.view.lacking()))

    # -- relays (a large job: :mod:`.relay`) ------------------------------------------------------
    def _relaying(self, query: Mapping[str, str], poll: Poll) -> dict[str, Any] | None:
        """A relay's poll registers it; a follower whose relay is registered gets the redirect to it, waiting
        for that (at most the poll's wait) while the view is not what it asks for. None: answer it here."""
        me = naming.parse_task_name(query.get("me") or "")
        serve = query.get("serve") or ""
        if me is not None and self.tree.serves(me) and serve.isdigit() and query.get("_client"):
            with self.view.cond:
                host = query["_client"]
                self._relays[me] = (f"[{host}]:{serve}" if ":" in host else f"{host}:{serve}", time.monotonic())
                self._relay_wait(me).notify_all()
            return None
        relay = self.tree.relay_of(me)
        if relay is None or query.get("relay") == "0":
            return None
        view = self.view
        with view.cond:
            self._relay_wait(relay).wait_for(
                lambda: self._done() or self._registered(relay) is not None or self._news(poll), timeout=poll.wait)
            at = self._registered(relay)
            if at is None:
                return None
            return {"job": self.job, "leader": self.leader_id, "leader_task": naming.task_name(*self.me),
                    "cluster": self.cluster, "version": view.version,
                    "redirect": {"task": naming.task_name(*relay), "at": at}}

    def _registered(self, relay: PeerKey) -> str | None:
        """Where ``relay`` serves, while its registration is fresh (call with the view's lock held)."""
        at, when = self._relays.get(relay, (None, 0.0))
        return at if at is not None and time.monotonic() - when < REGISTERED_FOR else None

    def _relay_wait(self, relay: PeerKey) -> threading.Condition:
        """The condition a relay's followers wait on at the leader (on the view's lock; call with it held)."""
        wait = self._relay_waits.get(relay)
        if wait is None:
            wait = self._relay_waits[relay] = self.view.condition()
        return wait

    # -- the loop ---------------------------------------------------------------------------------
    def _loop(self) -> None:
        first, cap = self.fast
        self._delay, self._hot_until, next_read, last_read, gap = first, 0.0, 0.0, 0.0, 0.0
        self._await_stream(ATTACH_WAIT)  # read after the stream attached: no status update falls between
        pending = None  # a group read in flight (a 10,000-app group takes seconds): events go on meanwhile
        while not self._done():
            if (pending is None and time.monotonic() >= next_read and self._insurance
                    and self._events_carry_addresses() and not self.view.lacking()):
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

    def _after_read(self, result: tuple[Mapping[PeerKey, Observation], int, str | None],
                    started: float) -> tuple[float, float, float]:
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
        with self._raw_lock:
            present, missing = dict(self._raw[0]), dict(self._raw[1])
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
        self._changed = self._publish(present, missing)
        optional = self.view.optional  # an elastic job's standbys: not waited for (the events say when one runs)
        missing = {p: d for p, d in missing.items() if p not in optional} if optional else missing
        if not missing:
            self._formed = True
        if error is None:
            self._hint(getattr(self.backend, "also_addresses", {}))
        return missing, asked

    def _events_carry_addresses(self) -> bool:
        """``marathon`` mode on host networking: a status update says where the task runs."""
        return (self._streaming() and isinstance(self.backend, MarathonBackend)
                and getattr(self.backend, "network", "host") == "host")

    def _apply(self, events: Sequence[Event]) -> None:
        """Status updates into the view: TASK_RUNNING puts the task at ``host:ports[i]``; a
        terminal state (of the task we know, or of any when we know none) makes it missing."""
        backend = cast(MarathonBackend, self.backend)  # called only when _events_carry_addresses()
        with self._raw_lock:
            present, missing = dict(self._raw[0]), dict(self._raw[1])
        status_of = {}
        for event in events:
            key = naming.parse_app_id(self.job, event.app_id or "")
            if key not in self._others:  # a set: a burst of 10,000 updates is not 10,000 x 10,000 compares
                continue
            state, task, ports, host = event.task_status or "", event.task_id, event.ports, event.host
            index = backend.port_indexes.get(key, 0)
            if state == "TASK_RUNNING" and host and len(ports) > index and ports[index]:
                present[key] = f"{host}:{ports[index]}"
                missing.pop(key, None)
                self._task_of[key] = task
                self._stamp[key] = time.monotonic()
                status = backend.also_indexes.get(key)
                if status is not None and len(ports) > status:
                    status_of[key] = f"{host}:{ports[status]}"
            elif state in GONE and self._task_of.get(key) in (None, task):
                present.pop(key, None)
                missing[key] = f"task {state}"
                self._task_of.pop(key, None)
                self._stamp[key] = time.monotonic()
        self._publish(present, missing)
        self._hint(status_of)

    def _gap(self, asked: int) -> float:
        """The shortest time between two polls that keeps the leader within its budget."""
        if isinstance(self.backend, MarathonBackend):
            return self.backend.last_bytes / self.byte_budget
        return asked / self.dns_qps

    def _streaming(self) -> bool:
        return self.events is not None and bool(getattr(self.events, "available", False))

    def _relevant(self, event: Event) -> bool:
        return (event.app_id or "").startswith(self._prefix)

    def _pause(self, seconds: float) -> list[Event] | None:
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
                events = [e for e in map(Event.parse, events) if self._relevant(e)]
                for listener in self.listeners if events else ():
                    try:
                        listener(events)
                    except Exception as e:  # a listener's bug must not stop the rendezvous
                        from marathon_tf.task import stderr

                        stderr.log(f"status update listener: {type(e).__name__}: {e}")
                reconnects = getattr(self.events, "reconnects", 0)
                if events or reconnects != self._reconnects:
                    self.events_seen += len(events)
                    self._reconnects = reconnects
                    return events
            else:
                self._closed.wait(min(left, 0.2))
        return None
