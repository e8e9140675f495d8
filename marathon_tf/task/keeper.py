"""Who keeps the job's restart ledger, and how the other tasks talk to it.

* :class:`Keeper` runs in the deciding task's bootstrap (:func:`marathon_tf.task.policy.decider_task`).
  It records every end of a program the bootstraps report (``POST /ledger`` on its status port;
  its own program's directly), watches Marathon for the ends nobody reported (the rendezvous
  leader's ``status_update_event`` stream, and one group ``GET`` with the apps' last task failures
  every 10 s: :meth:`Keeper.observe_events`, :meth:`Keeper.observe_group`), and answers with the job's
  counts (:class:`~marathon_tf.task.ledger.Answer`), from which the reporting bootstrap decides
  (:func:`marathon_tf.task.policy.decide`).
  ``GET /ledger`` shows the entries.
* **Group restarts.** Where TensorFlow cannot take one member back alone (every member of a
  ``multi_worker_mirrored`` job; a ps), the keeper starts a *round*: its generation goes up and
  the job's coordinator, given to the keeper when it is made, writes it into the job's plan (``"plan"`` of
  ``GET /rendezvous``, :mod:`marathon_tf.task.rendezvous.coordinator`); every member's
  bootstrap then stops its program (SIGTERM, the round's grace) and starts it again in place, at
  the same address. Only the round's first report is counted: the peers' programs that fail
  because of it report an older generation and are its consequences. Failure rounds in a row wait
  :func:`marathon_tf.task.budget.backoff` before they restart.
* **Attribution.** A failure within :data:`~marathon_tf.task.ledger.ATTRIBUTION` seconds of a
  preemption or an infrastructure death (by the keeper's clock) is taken for its consequence
  (a PS chief fails when its ps is preempted); an answer that would end the job waits until
  that time has passed. So is a failure of a program that still ran in an older generation than
  the group restart round another task's end started (it failed because its group went down,
  before the round reached it: :meth:`Keeper._before_round`): one restart of the job's group is one
  failure, the round's first report.
* **What is not counted.** Stops marathon-tf asked for: the job's end (the keeper knows it
  ended) and a new version of a task's app (``scale``, a re-deploy: the app's configuration version,
  ``App.config_version``, is newer than the task's version, or the app is gone).
* :class:`Reporter` is the other bootstraps' side: it finds the keeper (the rendezvous leader's
  address, else one lookup), posts, and sends its own task's earlier entries along, so a
  relaunched keeper learns them again. Without an answer the bootstrap falls back on its own
  count (:class:`marathon_tf.task.budget.RestartBudget`).

Why a task decides from the job's counts and not from its own: a relaunched task starts a fresh
bootstrap, so a per-task count restarts at 0 with every relaunch and a job whose program always
fails would be relaunched for ever (issue 21).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from marathon_tf.contract import labels as L
from marathon_tf.contract import naming
from marathon_tf.contract import timeline as T
from marathon_tf.contract.errors import MarathonError, MarathonNotFound
from marathon_tf.contract.plan import Counts, PlannedStop, Round, RoundCause, RoundKind, StopReason
from marathon_tf.contract.taskapi import LEDGER, LedgerReport, TaskApiError, TaskClient
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.marathon import transport
from marathon_tf.marathon.jobstate import app_cluster, planned_stop
from marathon_tf.marathon.model import Event, apps_by_id
from marathon_tf.marathon.tasks import wall
from marathon_tf.task.budget import STREAK_RESET, backoff
from marathon_tf.task.ledger import (
    ATTRIBUTION,
    FAILURE,
    INFRASTRUCTURE,
    PREEMPTION,
    Answer,
    Entry,
    Ledger,
    append_file,
    bucket,
    classify_status,
    read_file,
)

if TYPE_CHECKING:  # the deciding task's parts the keeper writes to (made before it: task.bootstrap's assembly)
    from marathon_tf.task.rendezvous.coordinator import Coordinator
    from marathon_tf.task.status_server import TaskStatus
    from marathon_tf.task.timeline import TaskEvents

__all__ = ["Keeper", "Reporter", "PATH", "STOPPED", "asked_for", "stop_asked"]

PATH = LEDGER.path
#: A report's kind when the bootstrap itself was stopped (SIGTERM): the keeper decides what it was.
STOPPED = "stopped"
#: Grace a failure round gives the peers' programs (they are usually stuck in a collective).
FAILURE_ROUND_GRACE = 5.0


class Keeper:
    """The job's ledger in the deciding task (see the module). ``client``: Marathon (None: stops
    are taken for preemptions without looking); ``path``: the logdir's ``failures.jsonl``."""

    def __init__(self, ctx: TaskContext, ledger: Ledger, *, client=None, path: str | None = None,
                 log: Callable[[str], None] = lambda m: None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, coordinator: Coordinator | None = None,
                 status: TaskStatus | None = None, events: TaskEvents | None = None):
        self.ctx, self.ledger, self.client, self.path, self.log = ctx, ledger, client, path, log
        self.clock, self.sleep = clock, sleep
        #: the job's plan's writer (the rendezvous leader's): the rounds and the counts are published through it
        self.coordinator = coordinator
        #: the deciding task's status (``ledger``: the counts) and events (the entries the keeper makes itself,
        #: a stop it classified, Marathon's word: their own bootstrap could not record them)
        self.status, self.events = status, events
        self.id = uuid.uuid4().hex[:12]
        self.generation = 0
        self.round: Round | None = None  # the group restart or resize round under way (its generation's)
        self._round_root: tuple[str, float] | None = None  # (entry id, when) of the current round's first report
        self._streak, self._last_failure_round = 0, -1e18
        self._received: dict[str, float] = {}  # entry id -> when it arrived (the keeper's clock)
        self._lock = threading.RLock()
        self.ended = False
        for entry in read_file(path):  # what an earlier keeper (or the tasks' own budgets) wrote
            self.ledger.add(entry)

    def end(self) -> None:
        """The job's end is being recorded: the stops that follow are its end, not preemptions."""
        self.ended = True

    # -- recording ----------------------------------------------------------------------------------
    def record(self, entry: Entry, *, generation: int | None = None, group: bool = False,
               history: Iterable[Entry] = ()) -> Answer:
        """Record one end of a program; the answer a reporter gets (the job's counts)."""
        for old in history:  # a task's own earlier entries: a relaunched keeper learns them again
            if old.id != entry.id and self.ledger.add(old):
                self._received.setdefault(old.id, -1e18)
        with self._lock:
            if self.ended:
                return self.answer(entry, counted=False, ended=True)
            new = self.ledger.add(entry)
            if new:
                self._received[entry.id] = self.clock()
                if group and generation is not None:
                    self._group(entry, generation)
                else:
                    self._attribute(entry)
                    if self._before_round(entry, generation):
                        self.ledger.set_counted(entry.id, False)
                self._persist(entry.id)
                self._say(entry)
        counted = (self.ledger.get(entry.id) or entry).counted
        if counted and entry.kind == FAILURE and self.ledger.over(entry):
            # the failure that would end the job: first give a preemption it may be the consequence of its time
            waited = ATTRIBUTION - (self.clock() - self._received.get(entry.id, self.clock()))
            if waited > 0:
                self.sleep(waited)
        return self.answer(entry)

    def answer(self, entry: Entry, *, counted: bool | None = None, ended: bool = False) -> Answer:
        """The job's counts after ``entry`` (its bucket's failures: an evaluator's are its own)."""
        kept = self.ledger.get(entry.id) or entry
        summary = self.ledger.summary()
        return Answer(counted=kept.counted if counted is None else counted, kind=kept.kind, keeper=self.id,
                      failures=self.ledger.count(FAILURE, bucket(entry.task)),
                      max_failures=self.ledger.max_failures, window_seconds=self.ledger.window,
                      preemptions=summary["preemptions"], max_preemptions=self.ledger.max_preemptions,
                      generation=self.generation, ended=ended or self.ended,
                      round=self.round)

    def _group(self, entry: Entry, generation: int) -> None:
        """A member of a group-restart role: the first report of a generation starts a round, later
        ones (an older generation) are its consequences, unless a preemption or infrastructure
        death comes within the attribution time of a round a failure started (then it takes over)."""
        if generation < self.generation:
            round_root = self._round_root
            root = self.ledger.get(round_root[0]) if round_root else None
            if (round_root is not None and root is not None and root.kind == FAILURE
                    and entry.kind in (PREEMPTION, INFRASTRUCTURE) and self.clock() - round_root[1] <= ATTRIBUTION):
                self.ledger.set_counted(root.id, False)
                self._round_root = (entry.id, round_root[1])
                if self.round is not None:
                    self.round = replace(self.round, reason=RoundCause(entry.kind), cause=self._cause(entry),
                                         delay=0.0)
                    self._publish()
            else:
                self.ledger.set_counted(entry.id, False)
            return
        self._attribute(entry)
        if not self.ledger.over(self.ledger.get(entry.id) or entry):  # the job fails instead: no round
            self._start_round(entry)

    def _before_round(self, entry: Entry, generation: int | None) -> bool:
        """Whether ``entry`` is a failure of a program that ran in an older generation than the job's
        group restart round under way, which another task's end started: the program failed because
        its group was going down (a ParameterServerStrategy chief whose ps failed, before the round
        reached it), a consequence of that round, not a failure of its own. Every member follows the
        rounds, whatever its own restart scope, so a program still in an older generation was part
        of the group being restarted."""
        if entry.kind != FAILURE or generation is None or generation >= self.generation or not self._round_root:
            return False
        root = self.ledger.get(self._round_root[0])
        return root is not None and root.task != entry.task

    def _attribute(self, entry: Entry) -> None:
        """Failures within :data:`ATTRIBUTION` s of a preemption/infrastructure death are its consequence."""
        now = self._received.get(entry.id, self.clock())
        near = [e for e in self.ledger.entries() if e.id != entry.id and e.task != entry.task
                and abs(self._received.get(e.id, -1e18) - now) <= ATTRIBUTION]
        if entry.kind == FAILURE and any(e.kind in (PREEMPTION, INFRASTRUCTURE) for e in near):
            self.ledger.set_counted(entry.id, False)
        elif entry.kind in (PREEMPTION, INFRASTRUCTURE):
            for e in near:
                if e.kind == FAILURE and e.counted:
                    self.ledger.set_counted(e.id, False)

    def _start_round(self, entry: Entry) -> None:
        now = self.clock()
        if entry.kind == FAILURE and (self.ledger.get(entry.id) or entry).counted:
            self._streak = self._streak + 1 if now - self._last_failure_round <= STREAK_RESET else 1
            self._last_failure_round = now
            delay, grace = backoff(self._streak), min(FAILURE_ROUND_GRACE, self.ctx.grace_seconds)
        else:
            delay, grace = 0.0, self.ctx.grace_seconds
        if (naming.parse_task_name(entry.peer or entry.task) or ("",))[0] == "ps":
            grace = 0.0  # the job's variables were on that ps: nothing can be saved, a stop would only wait on it
        self.generation += 1
        self._round_root = (entry.id, now)
        self.round = Round(self.generation, RoundKind.RESTART, RoundCause(entry.kind), self._cause(entry),
                           delay=delay, grace=grace)
        self._publish()

    def resize_round(self, reason: RoundCause, cause: str, restart: Sequence[str], grace: float) -> Round:
        """An elastic job's size change (:mod:`marathon_tf.task.resize`; ``reason``: grow, shrink, below_min): a
        round that only the ``restart`` tasks follow (their programs stop and start with the new membership's
        spec); nothing is counted."""
        with self._lock:
            self.generation += 1
            self._round_root = None
            self.round = Round(self.generation, RoundKind.RESIZE, reason, cause, delay=0.0, grace=grace,
                               restart=tuple(sorted(restart)))
            self._publish()
            return self.round

    def _publish(self) -> None:
        """The round under way, in the job's plan (followed by the members it names)."""
        if self.coordinator is not None and self.round is not None:
            self.coordinator.start_round(self.round)

    def _counted(self) -> None:
        """The counts changed: the deciding task's status shows them, and the job's plan carries them."""
        summary = self.ledger.summary()
        if self.status is not None:
            self.status.update(ledger=summary)
        if self.coordinator is not None:
            self.coordinator.counts(Counts.from_wire(summary))

    @staticmethod
    def _cause(entry: Entry) -> str:
        what = {FAILURE: "failed", PREEMPTION: "was preempted", INFRASTRUCTURE: "was killed with the runner's "
                "machinery"}.get(entry.kind, entry.kind)
        if entry.peer:  # a program hung on a frozen peer: the round is the peer's restart
            return f"{entry.peer} does not answer ({entry.task} hung waiting for it)"
        return f"{entry.task} {what}" + (f" (exit {entry.code})" if entry.code is not None else "")

    def _persist(self, entry_id: str) -> None:
        entry = self.ledger.get(entry_id)
        if entry is not None:
            append_file(self.path, entry)

    def _say(self, entry: Entry) -> None:
        kept = self.ledger.get(entry.id) or entry
        s = self.ledger.summary()
        if kept.kind == FAILURE:
            count = f"failure {s['failures']} of at most {s['max_failures']} in {s['window_seconds']:g} s"
        elif kept.kind == PREEMPTION:
            count = f"preemption {s['preemptions']} of at most {s['max_preemptions']}"
        else:
            count = "not counted"
        if not kept.counted:
            count = "not counted: a consequence of an earlier end"
        self.log(f"ledger: {kept.task} {kept.kind} ({count}): {kept.reason[:300]}")
        self._counted()

    # -- stops: asked for by marathon-tf, or a preemption ---------------------------------------------
    def stopped(self, entry: Entry, app_version: str | None, *, generation: int | None = None,
                group: bool = False) -> Answer:
        """A bootstrap was stopped (SIGTERM). Nothing is counted when the job ended or the task's app
        has a newer configuration (marathon-tf's scale or a re-deploy); otherwise a preemption.
        A group round starts at once (its members must restart whatever the classification)."""
        if self.ended:
            return self.answer(entry, counted=False, ended=True)
        key = naming.parse_task_name(entry.task)
        leaves = key is not None and self.ctx.elastic_role(key[0]) is not None  # the job shrinks instead
        with self._lock:
            if group and not leaves and generation is not None and generation >= self.generation:
                self._start_round(entry)
        threading.Thread(target=self._classify_stop, args=(entry, app_version), daemon=True,
                         name="ledger-stop").start()
        return self.answer(entry, counted=False)

    def _classify_stop(self, entry: Entry, app_version: str | None) -> None:
        asked = self._asked_for(entry.task, app_version)
        if asked:
            self.log(f"ledger: {entry.task} was stopped ({asked.text}): not counted")
            return
        self._take(entry, unless_ended=True)

    def _take(self, entry: Entry, *, unless_ended: bool = False) -> None:
        """Record an entry the keeper made itself (a classified stop, Marathon's word) and tell about it."""
        with self._lock:
            if (unless_ended and self.ended) or not self.ledger.add(entry):
                return
            self._received[entry.id] = self.clock()
            self._attribute(entry)
            self._persist(entry.id)
            self._say(entry)
        if self.events is not None:
            kept = self.ledger.get(entry.id) or entry
            self.events.record(T.PREEMPTED if kept.kind == PREEMPTION else T.TASK_FAILED, f"{kept.task}: {kept.reason}",
                               task=kept.task)

    def _asked_for(self, task: str, version: str | None) -> StopReason | None:
        """Why a stop of ``task`` was marathon-tf's (or its app's owner's) doing, or None."""
        if self.ended:
            return StopReason.JOB_ENDED
        return asked_for(self.client, self.ctx.job, task, version)

    # -- what Marathon saw --------------------------------------------------------------------------
    def observe_events(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Marathon's ``status_update_event`` s of the job's apps (:class:`~marathon_tf.marathon.model.Event`):
        terminal states nobody reported."""
        for event in map(Event.parse, events):
            if event.event_type not in (None, "status_update_event"):
                continue
            key = naming.parse_app_id(self.ctx.job, event.app_id or "")
            if key is None:
                continue
            self._observed(naming.task_name(*key), event.task_id or "", event.task_status or "", event.message,
                           wall(event.timestamp) or time.time(), event.version or "")

    def observe_group(self, group: Mapping[str, Any]) -> None:
        """One look at the job's apps (tasks, last task failure): ends of the current configuration
        nobody reported, unreachable tasks. Marathon keeps an app's ``lastTaskFailure`` for TASK_FAILED,
        ERROR, LOST, DROPPED, GONE, GONE_BY_OPERATOR, UNKNOWN (and a health check's kill), not for
        an ordinary TASK_KILLED (1.4 to 1.11): kills are seen in the events and the bootstraps' reports."""
        for app in apps_by_id(group).values():
            key = naming.parse_app_id(self.ctx.job, app.id or "")
            if key is None or key[0] == "tensorboard":
                continue
            task = naming.task_name(*key)
            if app.labels.get(L.STATE):
                self.ended = True
                return
            current, failure = app.config_version, app.last_failure
            if failure is not None and failure.task_id and (not current or (failure.version or "") >= current):
                self._observed(task, failure.task_id, failure.state or "", failure.message,
                               wall(failure.timestamp) or time.time(), "", from_failure=True)
            for t in app.tasks:
                if t.state in ("TASK_UNREACHABLE", "TASK_LOST", "TASK_UNKNOWN"):
                    self._observed(task, t.id or "", t.state, "", time.time(), "")

    def _observed(self, task: str, task_id: str, state: str, message: str, when: float, version: str,
                  from_failure: bool = False) -> None:
        if not task_id or task.startswith("tensorboard-") or self.ended:
            return
        kind = classify_status(state, message, self.ctx.preemption_exit_codes)
        if kind is None or self.ledger.claimed(task_id) or self.ledger.get(f"marathon:{task_id}"):
            return
        entry = Entry(id=f"marathon:{task_id}", task=task, kind=kind, time=when, task_id=task_id, source="marathon",
                      reason=f"{state}: {message}".strip(": ") + " (Marathon's status: no word from its bootstrap)")
        if self.client is not None and not (state == "TASK_KILLED" and from_failure):
            # a kill, or a task that failed or exited while marathon-tf stopped it (a `delete`'s ps that exits
            # for a relaunch its removed app will never have): counted only if the stop was not planned. A
            # health check's kill (lastTaskFailure TASK_KILLED) is Marathon's own verdict: taken as it is.
            threading.Thread(target=self._classify_stop, args=(entry, version or None), daemon=True,
                             name="ledger-observed").start()
            return
        self._take(entry)

    # -- HTTP ---------------------------------------------------------------------------------------
    def post(self, query: Mapping[str, str], body: Any) -> tuple[int, dict[str, Any]]:
        """``POST /ledger`` with ``{"job", "entry", "generation", "group", "history", "stopped",
        "app_version"}``."""
        if not isinstance(body, dict) or body.get("job") != self.ctx.job:
            return 400, {"message": f"not a report for job {self.ctx.job!r}"}
        try:
            report = LedgerReport.from_json(body)
        except TaskApiError as e:
            return 400, {"message": str(e)}
        raw = dict(report.entry)
        stopped = raw.get("kind") == STOPPED
        if stopped:
            raw["kind"] = PREEMPTION
        entry = Entry.from_dict(raw)
        if entry is None or naming.parse_task_name(entry.task) is None:
            return 400, {"message": "the report's entry is missing or malformed"}
        entry = Entry(**{**entry.__dict__, "source": "bootstrap", "counted": True})
        generation, group = report.generation, report.group
        history = [e for e in (Entry.from_dict(h) for h in report.history) if e is not None and e.task == entry.task]
        if stopped:
            for old in history:
                self.ledger.add(old)
            return 200, self.stopped(entry, report.app_version, generation=generation, group=group).to_dict()
        return 200, self.record(entry, generation=generation, group=group, history=history).to_dict()

    def get(self, query: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        """``GET /ledger``: the counts and the entries (newest last)."""
        return 200, {"job": self.ctx.job, "keeper": self.id, "generation": self.generation,
                     "round": self.round.to_wire() if self.round is not None else None,
                     "summary": self.ledger.summary(), "entries": [e.to_dict() for e in self.ledger.entries()[-200:]]}


def asked_for(client, job: str, task: str, version: str | None) -> StopReason | None:
    """Why a stop of ``task`` (launched with its app's ``version``) is marathon-tf's (or its app's owner's)
    doing: its app removed (``delete``), given a new configuration (``scale``, a re-deploy) or carrying the
    job's end; None when Marathon says nothing of the kind, or cannot be asked (no ``client``, an error).
    Marathon stores the new target before it kills anything (the app is gone from ``GET /v2/apps/{id}``
    as soon as its group's ``DELETE`` is answered), so this holds from the first kill on."""
    asked = stop_asked(client, job, task, version)
    return asked.reason if asked is not None else None


def stop_asked(client, job: str, task: str, version: str | None) -> PlannedStop | None:
    """:func:`asked_for` with the cluster (role → count) the task's app has now, from the same one ``GET``: a
    bootstrap's own stop says what restarts it (``scale`` from 2 to 3 workers, a re-deploy:
    :meth:`~marathon_tf.contract.plan.PlannedStop.restart`)."""
    key = naming.parse_task_name(task)
    if client is None or key is None:
        return None
    try:
        app = client.get_app(naming.app_id(job, *key))
    except MarathonNotFound:
        return PlannedStop(StopReason.APP_REMOVED)
    except MarathonError:
        return None
    reason = planned_stop(app, version)  # the one classification of a planned stop (status, events use it too)
    return PlannedStop(reason, app_cluster(app)) if reason is not None else None


class Reporter:
    """A bootstrap's way to the keeper. ``locate() -> "host:port"`` of the deciding task's status
    endpoint (or None: not known now); ``session``: default a bounded one
    (:func:`marathon_tf.marathon.transport.session`)."""

    def __init__(self, ctx: TaskContext, locate: Callable[[], str | None], *, session=None,
                 timeout: float = 3.0, tries: int = 3, wait: Callable[[float], Any] = time.sleep):
        self.ctx, self.locate, self.timeout, self.tries, self.wait = ctx, locate, timeout, tries, wait
        self.session = session if session is not None else transport.session()
        self.mine: list[Entry] = []  # this task's own entries (sent along: a relaunched keeper learns them)
        self.keeper: str | None = None

    def report(self, entry: Entry, *, generation: int | None = None, group: bool = False,
               stopped: bool = False, app_version: str | None = None) -> Answer | None:
        """Tell the keeper; its answer, or None when it cannot be reached (then decide alone)."""
        report = LedgerReport(self.ctx.job, {**entry.to_dict(), "kind": STOPPED if stopped else entry.kind},
                              generation, group, tuple(e.to_dict() for e in self.mine[-50:]), app_version)
        self.mine.append(entry)
        client = TaskClient(self.session)
        for attempt in range(self.tries):
            address = self.locate()
            if not address and attempt == 0:
                return None  # no keeper known (no rendezvous leader): decide alone, at once
            if address:
                reply = client.report(address, report, timeout=(self.timeout, self.timeout + ATTRIBUTION + 2))
                answer = Answer.from_dict(reply.body) if reply.ok else None  # None: the keeper is away
                if answer is not None:
                    self.keeper = answer.keeper
                    return answer
            if attempt + 1 < self.tries:
                self.wait(0.5 * (attempt + 1))
        return None
