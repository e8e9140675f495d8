"""An elastic job's size, decided by its deciding task (docs/elastic.md).

:class:`Resizer` runs in the deciding task's bootstrap beside the rendezvous leader
(:class:`~marathon_tf.task.rendezvous.LeaderRendezvous`), whose view says which of the elastic role's
apps run now (a standby that Marathon placed appears there with its address; a member whose task is
gone disappears). From that it decides, with the pure table :func:`marathon_tf.task.sizing.plan_resize`:

* **form**: the job starts once ``min`` of them run (and the deciding task, when it is one of them),
  taking in any others placed within :data:`BATCH` s;
* **grow**: standbys placed while it runs are taken in once they are *ready* (their pre-warmed interpreter
  has imported TensorFlow: their ``/progress`` ``elastic.ready``; at most :data:`READY_WAIT` s after they
  appear: :class:`ReadyCheck`; the job trains on meanwhile), gathered for :data:`BATCH` s from the first
  ready one (or until every app is in) and taken in as one change, after a save round that holds the job's
  training at the checkpoint the restarted programs resume from (:mod:`marathon_tf.task.saving`: nothing
  is trained twice);
* **shrink**: a member gone (lost beyond its in-place restart, preempted, drained, its agent lost) is
  let go at once while at least ``min`` remain: nothing is counted for it beyond what the keeper's
  ledger makes of its end (a preemption or an agent's loss is never a failure);
* **below min**: fewer than ``min`` left: every program stops (after a save where one is possible) and
  the job waits for placement; past ``admission.timeout`` in that state it is released like a job that
  was never placed (``NotPlaced``).

Each change is published in the rendezvous view as a new :class:`~marathon_tf.contract.cluster_spec.Membership`
(who trains, at which TF index and address) and, when programs must restart, as a *resize round* of the
keeper's generations (:meth:`marathon_tf.task.keeper.Keeper.resize_round`) naming the tasks whose
program restarts: the members' bootstraps (:mod:`marathon_tf.task.elastic`) follow both. Each change is
an event (``grew``, ``shrank``, ``below_min``: :mod:`marathon_tf.contract.timeline`) and shows in the
deciding task's ``/status`` ``elastic`` and ``/metrics``. This module never imports TensorFlow.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from marathon_tf.contract import naming
from marathon_tf.contract import timeline as T
from marathon_tf.contract.cluster_spec import Membership
from marathon_tf.contract.plan import Round, RoundCause, RoundKind
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.marathon import transport
from marathon_tf.task.machine import TaskMachine
from marathon_tf.task.policy import decider_task
from marathon_tf.task.rendezvous.coordinator import Coordinator
from marathon_tf.task.rendezvous.view import View
from marathon_tf.task.saving import Saving
from marathon_tf.task.sizing import BELOW_MIN, FORM, GROW, Resize, plan_resize
from marathon_tf.task.status_server import TaskStatus
from marathon_tf.task.timeline import TaskEvents

__all__ = ["Resizer", "ReadyCheck", "BATCH", "SAVE_TIMEOUT", "READY_WAIT"]

#: Seconds the arrivals of standbys are gathered into one change (from the first one).
BATCH = 2.0
#: Seconds a save round before a size change may take.
SAVE_TIMEOUT = 30.0
#: Seconds a standby that does not say it is ready is waited for before it is taken in anyway.
READY_WAIT = 30.0
_EVENTS = {GROW: T.GREW, BELOW_MIN: T.BELOW_MIN}


class ReadyCheck:
    """``check(task, address) -> bool``: whether the standby ``task`` placed at ``address`` says it is ready (its
    ``/progress`` ``elastic.ready``), looked at most every :data:`LOOK` s; ``urls() -> {task: status base URL}``
    (the deciding task's view of the job, looked up again for each new placement)."""

    LOOK = 0.3

    def __init__(self, urls: Callable[[], Mapping[str, str]], get_json: Callable[[str], Any] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.urls, self.clock = urls, clock
        self._get = get_json
        self._known: dict[str, str] = {}
        self._said: dict[tuple[str, str], tuple[float, bool]] = {}
        self._urls_for: dict[str, str] = {}  # task -> the address its URL was looked up for

    def __call__(self, task: str, address: str = "") -> bool:
        now = self.clock()
        said = self._said.get((task, address))
        if said is not None and (said[1] or now - said[0] < self.LOOK):
            return said[1]
        if task not in self._known or self._urls_for.get(task) != address:
            try:
                self._known = dict(self.urls())
                self._urls_for[task] = address
            except Exception:  # noqa: BLE001 - not known now: asked again at the next look
                self._known = {}
        url = self._known.get(task)
        ready = False
        if url:
            answer = (self._get or partial(transport.task_json, timeout=1.0))(url + "/progress") or {}
            ready = bool((answer.get("elastic") or {}).get("ready"))
        self._said[(task, address)] = (now, ready)
        return ready


class Resizer:
    """The deciding task's side of an elastic job (see the module). ``publish_round(reason, cause, restart, grace)``:
    the keeper's resize round (None: the view's own generations); ``release() -> reason``: the job released
    as NotPlaced (its minimum not placed again within ``admission.timeout``; None: nobody can release it)."""

    def __init__(self, ctx: TaskContext, view: View, saving: Saving | None, events: TaskEvents, status: TaskStatus, *,
                 stop: threading.Event,
                 publish_round: Callable[[RoundCause, str, Sequence[str], float], Any] | None = None,
                 release: Callable[[], str | None] | None = None, log: Callable[[str], None] = lambda m: None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 batch: float = BATCH, ready: Callable[[str, str], bool] | None = None,
                 ready_wait: float = READY_WAIT, machine: TaskMachine,
                 coordinator: Coordinator):
        self.ctx, self.view, self.saving, self.events, self.status = ctx, view, saving, events, status
        #: where the membership and the rounds it starts are published (the job's plan has one writer)
        self.coordinator = coordinator
        #: the deciding task's own state machine: its program's end is the job's (no more changes after it)
        self.machine = machine
        self.role, self.bounds = next(iter(ctx.elastic.items()))
        self.apps = [(self.role, i) for i in range(int(ctx.cluster.get(self.role, 0)))]
        self.decider = decider_task(ctx.completion)
        self._stop, self.publish_round, self.release, self.log = stop, publish_round, release, log
        self.clock, self.wall, self.batch = clock, wall, batch
        #: ``ready(task, address)``: a standby placed can start its program without waiting for its imports
        #: (None: any)
        self.ready, self.ready_wait = ready, ready_wait
        self._seen: dict[str, float] = {}  # arrivals: when each was first seen (clock), at its address
        self._where: dict[str, str] = {}
        self.membership: Membership | None = None
        self.changes = {"grew": 0, "shrank": 0, "below_min": 0}
        self._first_arrival: float | None = None  # (clock, wall) of the first standby placed not yet taken in
        self._first_wall: float | None = None
        self._below_since: float | None = None
        self._released = False
        self._thread: threading.Thread | None = None

    def start(self) -> Resizer:
        self._thread = threading.Thread(target=self._run, name="elastic-resizer", daemon=True)
        self._thread.start()
        return self

    # -- the loop ---------------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.step() is False:
                    return
            except Exception as e:  # noqa: BLE001 - a bug here must not end the job's elasticity for good
                self.log(f"elastic: {type(e).__name__}: {e}")
                self._stop.wait(1.0)

    def present(self) -> dict[str, str]:
        """The role's apps that run now, by task name (from the rendezvous view)."""
        with self.view.cond:
            self.view.cond.wait(0.25)
            peers = self.view.peers
        return {naming.task_name(*k): a for k, a in peers.items() if k[0] == self.role}

    def step(self) -> bool | None:
        """One look: decide and apply a change; False once the job's training is over (stop looking)."""
        present = self.present()
        if self.machine.final and self.membership is not None:
            return False  # the deciding task's program ended: the job is over, no more changes
        current, now = self.membership, self.clock()
        new = [t for t in present if current is None or (current.members.get(t) or (0, None))[1] != present[t]]
        self._seen = {t: self._seen.get(t, now) if self._where.get(t) == present[t] else now for t in new}
        self._where = {t: present[t] for t in new}
        if current is not None and self.ready is not None and self.ctx.style != "tf1":  # a joiner stops nobody in tf1
            waiting = [t for t in new if t not in current.members and now - self._seen[t] < self.ready_wait
                       and not self.ready(t, present[t])]
            if waiting:  # not ready yet: the job trains on without them meanwhile
                new = [t for t in new if t not in waiting]
                present = {t: a for t, a in present.items() if t not in waiting}
        if new and self._first_arrival is None:
            self._first_arrival, self._first_wall = now, self.wall()
        elif not new:
            self._first_arrival = self._first_wall = None
        lo, hi = self.bounds
        take = self._first_arrival is not None and (now - self._first_arrival >= self.batch or len(present) >= hi)
        plan = plan_resize(style=self.ctx.style, role=self.role, bounds=self.bounds, current=current, present=present,
                           take=take, decider=self.decider)
        if plan is not None:
            self.apply(plan, since=self._first_wall if plan.added else None)
            if plan.added:
                self._first_arrival = self._first_wall = None
        self._below_min(now)
        return None

    def _below_min(self, now: float) -> None:
        """Below min past ``admission.timeout``: release the job (NotPlaced), once."""
        paused = self.membership is not None and self.membership.paused
        if not paused:
            self._below_since = None
            return
        self._below_since = now if self._below_since is None else self._below_since
        if not self._released and self.release is not None and now - self._below_since >= self.ctx.admission[0]:
            self._released = True
            reason = self.release()
            self.log(f"elastic: below the minimum of {self.bounds[0]} workers for {self.ctx.admission[0]:g} s "
                     f"(admission.timeout): " + (f"released ({reason})" if reason else "could not release the job"))

    # -- a change -----------------------------------------------------------------------------------------
    def apply(self, plan: Resize, since: float | None = None) -> None:
        """Save first (where the plan says so), publish the membership and the round, tell about it."""
        began = self.wall()
        saved = None
        if plan.save and self.saving is not None:
            saved = self.saving.save(f"{plan.change}: {plan.cause}", hold=True, timeout=SAVE_TIMEOUT)
            if not saved.ok:
                self.log(f"elastic: no save before the change ({saved.message}): the programs restart from the "
                         f"last checkpoint")
        lost_group = self.ctx.style == "multi_worker_mirrored" and bool(plan.removed)
        grace = 0.0 if (saved is not None and saved.ok) or lost_group else float(self.ctx.grace_seconds)
        membership = plan.membership
        self.membership = membership
        optional = frozenset(k for k in self.apps if naming.task_name(*k) not in membership.members)
        self.coordinator.resize(membership, optional)
        if plan.restart:
            self._publish(plan.change, plan.restart, plan.cause, grace)
        size = membership.size
        kind = _EVENTS.get(plan.change, T.SHRANK) if plan.change != FORM else None
        if kind is not None:
            key = {T.GREW: "grew", T.SHRANK: "shrank", T.BELOW_MIN: "below_min"}[kind]
            self.changes[key] += 1
            extra: dict[str, Any] = {"cause": plan.cause, "size": size, "previous": plan.previous,
                                     "restart": list(plan.restart), "workers": sorted(membership.members)}
            if since is not None:
                extra["since"] = round(since, 3)
            if saved is not None and saved.ok:
                extra["step"] = saved.step
            self.events.record(kind, f"{T.REASONS[kind].lower()} to {size} worker{'s' if size != 1 else ''} "
                                     f"({plan.cause})" + (f"; restarting {', '.join(plan.restart)}" if plan.restart
                                                          else "; no program restarts"), **extra)
        self.log(f"elastic: {plan.change} (generation {membership.generation}): {plan.cause}; members "
                 + ", ".join(f"{t}={i}" for t, (i, _) in sorted(membership.members.items(), key=lambda m: m[1][0]))
                 + (f"; restarting {', '.join(plan.restart)}" if plan.restart else "")
                 + f" ({self.wall() - began:.2f} s)")
        self.status.update(elastic=self.summary())

    def _publish(self, reason: RoundCause, restart: Sequence[str], cause: str, grace: float) -> None:
        if self.publish_round is not None:
            self.publish_round(reason, cause, restart, grace)
            return
        # no keeper (no Marathon to keep a ledger with): the plan's own generations of rounds
        generation = self.coordinator.next_round_generation()
        self.coordinator.start_round(Round(generation, RoundKind.RESIZE, reason, cause, delay=0.0, grace=grace,
                                  restart=tuple(sorted(restart))))

    def record(self) -> str:
        """The job's size for its record (``marathon-tf/workers``): ``3 of 2..4; grew 2, shrank 1``."""
        m = self.membership
        changes = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in self.changes.items() if v)
        return f"{m.size if m else 0} of {self.bounds[0]}..{self.bounds[1]}" + (f"; {changes}" if changes else "")

    def summary(self) -> dict[str, Any]:
        """What ``/status`` ``elastic`` says on the deciding task (and ``/metrics``, ``status``)."""
        lo, hi = self.bounds
        m = self.membership
        members = m.members if m is not None else {}
        with self.view.cond:
            placed = {naming.task_name(*k) for k in self.view.peers if k[0] == self.role}
        standbys = [naming.task_name(*k) for k in self.apps if naming.task_name(*k) not in members]
        return {"role": self.role, "min": lo, "max": hi, "size": len(members),
                "generation": m.generation if m is not None else 0, "paused": bool(m and m.paused),
                "members": {t: i for t, (i, _) in sorted(members.items())},
                "vacant": sorted(m.vacant) if m is not None else [],
                "standbys": standbys, "placedStandbys": sorted(t for t in standbys if t in placed),
                "changes": dict(self.changes), "decider": True}
