"""Leader rendezvous: one task reads where the job's peers are, every other task asks it.

Without it every task of a job reads Marathon (``GET /v2/groups/<job>?embed=group.apps.tasks``,
~3 MB for 1,000 apps) or Mesos-DNS (one SRV query per peer) on each poll, so the load on them
grows with tasks x job size. With it:

* **The leader** is the job's deciding task (:func:`marathon_tf.task.policy.decider_task`:
  ``chief-0`` or ``worker-0``). Its bootstrap runs :class:`LeaderRendezvous`: a thread that
  looks up every peer through the ordinary :mod:`~marathon_tf.task.discovery` backend and publishes
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
  straight into the view: TASK_RUNNING places a peer, TASK_KILLED & co. make it missing); the DNS
  backends about every second for small jobs (a tenth of the DNS budget: Mesos-DNS trails
  Marathon's events by its refresh interval). Group GETs are spaced so
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

Both sides, and a task that reads the backend itself (:class:`DirectRendezvous`), offer the
bootstrap one interface, :class:`Rendezvous` (``wait``, ``moved``, ``settle``, ``restart_round``,
``close``, ``polls``, ``watch_every``, ``leader_address``); the sides' ``moved`` reads the
local view (no I/O), so the bootstrap checks it every tick (``watch_every``): a peer's move
reaches every task within a second. ``moved`` reports nothing while one of the peers is
missing, so a task never restarts with a stale address mixed in: it waits for the rewritten
spec. The job's plan (the keeper's group restart rounds, an elastic job's membership, the ledger's
counts, the verdict) travels in the leader's view (``carries_rounds``), written by its coordinator only.
``MTF_RENDEZVOUS=direct`` turns all of this off (every task reads the backend).

A job of more than :data:`~.relay.RELAY_ABOVE` followers is served through relays: the first hundredth of its
followers long-poll the leader and serve the view on their own status ports; the leader redirects every other
follower to one of them, so that forming it costs the leader about a hundred whole views, not one per task
(:mod:`.relay`).

Modules: :mod:`.base` (the interface), :mod:`.direct` (reading the backend itself), :mod:`.view`
(the versioned view both sides keep, what the bootstrap reads of it, the wire format of
``/rendezvous``), :mod:`.coordinator` (the one writer of the job's plan in the leader's view), :mod:`.leader`,
:mod:`.follower`, :mod:`.relay` (a large job's relays), :mod:`.hints` (the leader telling followers where it is);
this package wires them for a task (:func:`make_rendezvous`).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from marathon_tf.contract import naming
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.marathon.client import RetryPolicy
from marathon_tf.marathon.events import EventStream
from marathon_tf.task.discovery import Backend, MarathonBackend, PeerKey, make_backend
from marathon_tf.task.jobcontrol import client_from_env
from marathon_tf.task.policy import decider_task
from marathon_tf.task.rendezvous.base import Rendezvous
from marathon_tf.task.rendezvous.coordinator import Coordinator
from marathon_tf.task.rendezvous.direct import DirectRendezvous
from marathon_tf.task.rendezvous.follower import BUSY_TRIES, FollowerRendezvous, fallback_after, hint_wait_for
from marathon_tf.task.rendezvous.hints import Hints
from marathon_tf.task.rendezvous.leader import BYTE_BUDGET, DNS_QUERIES_PER_SECOND, FAST, HOT_WINDOW, LeaderRendezvous
from marathon_tf.task.rendezvous.relay import Tree
from marathon_tf.task.rendezvous.view import HINT_PATH, MAX_WAIT, PATH, View, cluster_key

__all__ = ["PATH", "HINT_PATH", "MAX_WAIT", "HOT_WINDOW", "BYTE_BUDGET", "DNS_QUERIES_PER_SECOND", "BUSY_TRIES",
           "rendezvous_mode", "leader_of", "hint_wait_for", "fallback_after", "Rendezvous", "DirectRendezvous",
           "LeaderRendezvous", "FollowerRendezvous", "Hints", "Coordinator", "View", "make_rendezvous", "cluster_key"]


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


def _locator(ctx: TaskContext, environ: Mapping[str, str], leader: PeerKey, session, dns_client):
    """``() -> Observation`` of the leader's status address: one small request."""
    status_ctx = replace(ctx, port_name=ctx.status_port_name)
    backend = make_backend(status_ctx, environ, session=session, dns_client=dns_client)
    if isinstance(backend, MarathonBackend):
        return lambda: backend.lookup_app(leader)
    return lambda: backend.lookup([leader])[leader]


def _event_stream(ctx: TaskContext, environ: Mapping[str, str]):
    """Marathon's ``status_update_event`` stream when ``MTF_MARATHON_URL`` is set, else None."""
    client = client_from_env(ctx, environ, retry=RetryPolicy(attempts=1, budget=5.0, initial=0.5, max_wait=1.0))
    if client is None:
        return None
    stream = EventStream(client, ("status_update_event",))
    stream.__enter__()
    return stream


def make_rendezvous(ctx: TaskContext, environ: Mapping[str, str], backend: Backend, *, me: PeerKey | None,
                    address: str | None, server, stop: threading.Event, slow: float,
                    rng: random.Random | None = None, session=None, dns_client=None, events=None,
                    log: Callable[[str], None] = lambda m: None, placement=None,
                    coordinator: Coordinator | None = None,
                    listeners: Sequence[Callable[[list[dict[str, Any]]], None]] = ()) -> Rendezvous | None:
    """The leader's or a follower's rendezvous for this task, started; None when the job
    uses direct reads (``MTF_RENDEZVOUS=direct``, no leading task, or the leader has no
    status endpoint to publish on). ``placement``: the leader's :class:`marathon_tf.task.placer.Placer`,
    whose held peers its view shows missing (no program starts before the job's placement rules hold).
    The leader's only: ``coordinator``, the job's plan's writer (made before the rendezvous: the restart
    ledger's keeper writes through it too; default a new one), and ``listeners``, called with each batch of
    the job's status updates (the keeper's)."""
    leader = leader_of(ctx)
    members = ctx.members()
    if rendezvous_mode(environ) == "direct" or leader is None or len(members) < 2:
        return None
    tree = Tree.of(members, leader)  # a large job's relays (.relay)
    if me == leader:
        if server is None or address is None:
            log("no status endpoint: not leading the rendezvous (the other tasks read the backend)")
            return None
        hints = None
        if isinstance(backend, MarathonBackend) and backend.also_port:  # it learns the followers' status
            # ports (make_backend's also_port): tell them where it is
            at = f"{address.rpartition(':')[0]}:{server.port}"
            hints = Hints(ctx.job, naming.task_name(*leader), at)
        else:  # DNS is cheap to ask: calm polls every second or so
            slow = min(slow, max(FAST[1], 10 * len(members) / DNS_QUERIES_PER_SECOND))
        lead = LeaderRendezvous(backend, members, me, address, job=ctx.job, slow=slow, stop=stop, rng=rng,
                                events=events if events is not None else _event_stream(ctx, environ), hints=hints,
                                placement=placement, coordinator=coordinator, listeners=listeners, tree=tree)
        server.add_route(PATH, lead.handle)
        log(f"leading the rendezvous of {len(members)} task(s): GET {PATH} on the status port")
        return lead.start()
    # a relay serves on its status port, where the leader sees it ask from (host networking: its own port)
    serve = server.port if server is not None and tree.serves(me) and ctx.network == "host" else None
    follower = FollowerRendezvous(_locator(ctx, environ, leader, session, dns_client), backend, members, me,
                                  job=ctx.job, session=session, stop=stop, rng=rng,
                                  leader_task=naming.task_name(*leader),
                                  hint_wait=hint_wait_for(len(members)) if ctx.discovery == "marathon" else 0.0,
                                  serve=serve)
    if server is not None:
        server.add_route(HINT_PATH, follower.hint)
    if follower.mirror is not None:  # (serve is set: the leader's view as this relay took it)
        server.add_route(PATH, follower.mirror.handle)
        log(f"relaying the rendezvous view to {len(members) // max(1, len(tree.relays))} follower(s) or so: "
            f"GET {PATH} on the status port")
    log(f"following the rendezvous leader {naming.task_name(*leader)}")
    return follower.start()
