"""What a task's bootstrap does to its job as a whole: wait for the workers, record the job's end.

Marathon relaunches any task that exits, even with 0, so a training job ends only when one of
its bootstraps says so: it writes the job's record into the labels of every app of the job and
sets their instances to 0 in ONE bulk ``PUT /v2/apps?force=true``
(:func:`marathon_tf.marathon.record.finish_job`). Marathon then kills every task and relaunches
nothing; the apps stay, so ``marathon-tf status`` shows ``Succeeded``/``Failed``, when, the
final step and the reason. What leads there is decided by :mod:`marathon_tf.task.policy`.

* :class:`JobControl` (the bootstrap's, when Marathon can be reached: ``MTF_MARATHON_URL``):
  :meth:`~JobControl.finish` records the end (retried until Marathon took it);
  :meth:`~JobControl.await_workers` waits under ``all_workers`` (:func:`await_workers`, bounded:
  a worker that shows nothing new for :data:`AWAIT_SILENCE` s fails the job, named) until every
  other worker's bootstrap reports the phase ``succeeded``; :meth:`~JobControl.watch_hopeless`
  fails the job when a task can never start.
* :func:`job_lifecycle`: the job-aware policy and control a task's bootstrap runs with (the deciding
  task keeps the job's restart ledger, the others report to it).

Everything that talks to the outside (Marathon client, status GETs, clocks, sleep) is injected.
This module imports requests/tenacity (through :mod:`marathon_tf.marathon.client`) but never
TensorFlow, jinja2 or marshmallow: the bootstrap imports it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from marathon_tf.contract import labels as L
from marathon_tf.contract import naming
from marathon_tf.contract.errors import MarathonError
from marathon_tf.contract.phases import Phase
from marathon_tf.contract.progress import STEP_ROLES, job_step
from marathon_tf.contract.taskapi import broadcast
from marathon_tf.contract.taskenv import TaskContext, marathon_token
from marathon_tf.marathon import tasks, transport
from marathon_tf.marathon.client import DEFAULT_TIMEOUT, Client, RetryPolicy
from marathon_tf.marathon.model import apps_by_id
from marathon_tf.marathon.record import GROUP_EMBEDS, finish_job, hopeless_verdict
from marathon_tf.task import stderr
from marathon_tf.task.budget import RestartBudget
from marathon_tf.task.jobpolicy import JobPolicy
from marathon_tf.task.keeper import Keeper, Reporter, stop_asked
from marathon_tf.task.ledger import Ledger
from marathon_tf.task.logdir import failures_path
from marathon_tf.task.placer import Placer
from marathon_tf.task.policy import decider_task, is_decider
from marathon_tf.task.status_server import TaskStatus
from marathon_tf.task.timeline import TaskEvents

if TYPE_CHECKING:  # (the rendezvous package reads this module's client_from_env)
    from marathon_tf.task.rendezvous.coordinator import Coordinator

__all__ = ["JobControl", "RecordParts", "await_workers", "client_from_env", "job_lifecycle", "read_status",
           "AWAIT_SILENCE"]


def _log(message: str) -> None:
    stderr.log(message)  # every credential the task holds scrubbed


def read_status(url: str) -> dict[str, Any] | None:
    """A task's status document (``/status``, ``/progress``, ``/events``) at ``url``; None when it
    does not answer with one within 4 s (the task API's one client)."""
    return transport.task_json(url, timeout=4.0)


#: A pending worker that shows nothing new (step, phase, restarts) this long fails the wait (seconds).
AWAIT_SILENCE = 300.0


def _shown(status: Mapping[str, Any] | None, phase: str) -> str:
    """``running, at step 3990; waiting for ps-0: its TF server does not answer`` (what a worker shows)."""
    parts = [phase]
    if status and status.get("step") is not None:
        parts[0] += f", at step {status['step']}"
    waiting = (status or {}).get("waiting_for") or {}
    if waiting.get("peer"):
        parts.append(f"waiting for {waiting['peer']}: {waiting.get('why')}")
    return "; ".join(parts)


def await_workers(client: Client, ctx: TaskContext, *, timeout: float = AWAIT_SILENCE, interval: float = 2.0,
                  get_json: Callable[[str], dict[str, Any] | None] = read_status,
                  clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], object] = time.sleep,
                  stop: Callable[[], bool] = lambda: False, log: Callable[[str], None] = lambda m: None,
                  workers: Callable[[], Sequence[str] | None] | None = None) -> tuple[str, str] | None:
    """Wait until every other worker's bootstrap reports its phase ``succeeded``.

    One Marathon request per poll (the group with its apps' tasks) finds each worker's status
    port; then each worker's ``/status`` is read. Returns ``(SUCCEEDED, reason)``, or
    ``(FAILED, reason)`` when one reports ``failed``, or when one shows nothing new (its phase,
    step, restarts) for ``timeout`` seconds: a worker that still trains is waited for, a silent one
    is named with what it last showed (its step, the peer it waits for). None when ``stop()``
    became true or the job already carries a record (someone else decided). ``workers()``: the workers that
    train (an elastic job's members, :mod:`marathon_tf.task.elastic`; None, or no ``workers``: every worker app).
    """
    named = workers() if workers is not None else None
    every = list(named) if named is not None else [naming.task_name("worker", i)
                                                   for i in range(int(ctx.cluster.get("worker", 0)))]
    others = [name for name in every if name != ctx.task]
    phases: dict[str, str] = {name: "unknown" for name in others}
    seen: dict[str, tuple] = {}
    quiet_since: dict[str, float] = {name: clock() for name in others}
    shown: dict[str, str] = {name: "unknown" for name in others}
    while True:
        try:
            group = client.get_group(naming.group_id(ctx.job), embed=GROUP_EMBEDS)
        except MarathonError as e:
            log(f"waiting for the other workers: Marathon: {e}")
            group = None
        if group is not None:
            apps = apps_by_id(group)
            if any(a.labels.get(L.STATE) for a in apps.values()):
                return None
            for name in others:
                # a name naming.task_name made: it parses
                app = apps.get(naming.app_id(ctx.job, *cast(tuple[str, int], naming.parse_task_name(name))))
                task = tasks.newest_running(app)
                url = tasks.task_url(app, task, ctx.status_port_name, "/status") if app and task is not None else None
                status = get_json(url) if url else None
                if status is None:
                    phases[name] = "unreachable" if app else "no app"
                else:
                    phases[name] = str(status.get("phase"))
                    if phases[name] == Phase.FAILED:
                        detail = status.get("last_error") or f"exit code {status.get('exit_code')}"
                        return L.FAILED, f"{name} failed after {ctx.task} finished: {detail}"
                now = (phases[name], (status or {}).get("step"), (status or {}).get("restarts"))
                if seen.get(name) != now:
                    seen[name], quiet_since[name] = now, clock()
                shown[name] = _shown(status, phases[name])
            if all(phases[n] == Phase.SUCCEEDED for n in others):
                return L.SUCCEEDED, f"all {len(others) + 1} workers finished"
        silent = [n for n in others if phases[n] != Phase.SUCCEEDED and clock() - quiet_since[n] >= timeout]
        if silent:
            named = ", ".join(f"{n} ({shown[n]})" for n in silent)
            return L.FAILED, f"{ctx.task} finished but not every worker did: nothing new for {timeout:g} s from {named}"
        if stop():
            return None
        sleep(interval)
        if stop():
            return None


def client_from_env(ctx: TaskContext, environ: Mapping[str, str], *,
                    retry: RetryPolicy | None = None, timeout: tuple[float, float] | None = None) -> Client | None:
    """A Marathon client for ``MTF_MARATHON_URL`` with ``MARATHON_TOKEN`` (or the token file
    ``MARATHON_TOKEN_FILE`` names) or ``MARATHON_USER``/``MARATHON_PASSWORD`` from the task's
    environment; None without a URL."""
    if not ctx.marathon_url:
        return None
    token = marathon_token(environ)
    user = environ.get("MARATHON_USER") or None
    password = environ.get("MARATHON_PASSWORD") if user else None
    return Client(ctx.marathon_url, token=token, user=user, password=password,
                  retry=retry or RetryPolicy(attempts=8, budget=60.0, initial=0.5, max_wait=10.0),
                  timeout=timeout or DEFAULT_TIMEOUT, quote_refusals=False)


@dataclass(frozen=True)
class RecordParts:
    """What the task knows of its job beyond Marathon, for the job's record (:meth:`JobControl.finish`): each
    asked when the record is written. ``extra_labels(state, reason) -> {app id: labels}`` (the job's events);
    ``counts()``: the restart counts; ``goodput()``: the job's goodput; ``elastic()``: an elastic job's size
    (``3 of 2..4; grew 2, shrank 1``)."""

    extra_labels: Callable[[str, str], Mapping[str, Mapping[str, str]]] | None = None
    counts: Callable[[], Mapping[str, Any] | None] = lambda: None
    goodput: Callable[[], Mapping[str, Any] | None] = lambda: None
    elastic: Callable[[], str | None] = lambda: None


class JobControl:
    """What a bootstrap does to the job as a whole: wait for the workers and record its end. ``keeper``: the
    job's restart ledger when this task keeps it; ``placement``: the job's placement rules across its tasks,
    enforced here (the deciding task, ``MTF_PLACEMENT``).

    ``finish`` retries until Marathon took the record or ``stop()`` is true (the bootstrap
    keeps serving its phase meanwhile); credentials stay inside the client and are never logged.
    """

    def __init__(self, ctx: TaskContext, client: Client, *, keeper: Keeper | None = None,
                 placement: Placer | None = None, await_timeout: float = AWAIT_SILENCE,
                 poll_interval: float = 2.0, retry_interval: float = 10.0,
                 get_json: Callable[[str], dict[str, Any] | None] = read_status,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 log: Callable[[str], None] = lambda m: None):
        self.ctx, self.client, self.keeper, self.placement = ctx, client, keeper, placement
        self.await_timeout, self.poll_interval, self.retry_interval = await_timeout, poll_interval, retry_interval
        self.get_json, self.clock, self.wall, self.log = get_json, clock, wall, log
        self.finished: tuple[str, str] | None = None

    def await_workers(self, stop: threading.Event,
                      workers: Callable[[], Sequence[str] | None] | None = None) -> tuple[str, str] | None:
        """:func:`await_workers`; ``workers()``: the workers that train (an elastic job's members; None: every
        worker app)."""
        return await_workers(self.client, self.ctx, timeout=self.await_timeout, interval=self.poll_interval,
                             get_json=self.get_json, clock=self.clock, sleep=stop.wait, stop=stop.is_set,
                             log=self.log, workers=workers)

    def watch_hopeless(self, stop: threading.Event, fail: Callable[[str], object],
                       interval: float = 10.0) -> threading.Thread:
        """The deciding task's watch over the other tasks (tensorboard included): a task that can
        never start (:func:`marathon_tf.marathon.record.hopeless_failures`; Marathon relaunches it
        for ever, and the job would stay deploying) fails the job with its reason (``fail(reason)``: the
        bootstrap records it). One group GET at once (a relaunched deciding task learns its own predecessor's end,
        which no bootstrap could report: its keeper died with it), then one per ``interval``; stops when ``stop``
        is set or the job has its record."""
        def run() -> None:
            while not stop.is_set():
                try:
                    group = self.client.get_group(naming.group_id(self.ctx.job),
                                                  embed=GROUP_EMBEDS + ("group.apps.lastTaskFailure",))
                    verdict = hopeless_verdict(self.client, self.ctx.job, group=group)
                except MarathonError:
                    stop.wait(interval)
                    continue
                if self.keeper is not None:  # ends of tasks nobody reported (marathon_tf.task.keeper)
                    self.keeper.observe_group(group)
                if verdict == "":
                    return
                if verdict:
                    fail(verdict)
                    return
                stop.wait(interval)
        thread = threading.Thread(target=run, name="hopeless-watch", daemon=True)
        thread.start()
        return thread

    def steps(self) -> dict[str, int | None]:
        """The last step of every other running chief and worker (their ``/progress``; one group GET):
        what the job's final step is made of besides this task's own. Empty when Marathon cannot be read."""
        try:
            apps = apps_by_id(self.client.get_group(naming.group_id(self.ctx.job), embed=GROUP_EMBEDS))
        except MarathonError:
            return {}
        urls = {}
        for app_id, app in apps.items():
            key = naming.parse_app_id(self.ctx.job, app_id)
            task = tasks.newest_running(app)
            if key is None or key[0] not in STEP_ROLES or naming.task_name(*key) == self.ctx.task or task is None:
                continue
            url = tasks.task_url(app, task, self.ctx.status_port_name, "/progress")
            if url:
                urls[naming.task_name(*key)] = url
        if not urls:
            return {}
        return {name: (body or {}).get("step") for name, body in broadcast(self.get_json, urls).items()}

    def finish(self, state: str, reason: str, final_step: int | None, stop: threading.Event,
               parts: RecordParts = RecordParts()) -> bool:
        """Record ``state`` on the job (retrying until done or stopped); whether this task wrote it.
        ``final_step``: this task's own step; the record's is the job's
        (:func:`marathon_tf.contract.progress.job_step`: the largest of it and the other chiefs' and
        workers' last steps); ``parts``: what else the record says (the job's events, counts, goodput, size)."""
        final_step = job_step({**self.steps(), self.ctx.task: final_step})
        extra = parts.extra_labels(state, reason) if parts.extra_labels else None
        if self.keeper is not None:
            self.keeper.end()  # the stops that follow are the job's end, not preemptions
        counts = parts.counts() or (self.keeper.ledger.summary() if self.keeper is not None else None)
        good = parts.goodput()
        more = {L.RESTARTS: json.dumps(dict(counts), sort_keys=True, separators=(",", ":"))} if counts else {}
        size = parts.elastic()
        if size:
            more[L.WORKERS] = size
        if good:  # the job's goodput at its end (its recoveries are in its events)
            more[L.GOODPUT] = json.dumps({k: v for k, v in good.items() if k != "recoveries"}, sort_keys=True,
                                         separators=(",", ":"))
        while not stop.is_set():
            try:
                wrote = finish_job(self.client, self.ctx.job, state, reason=reason, final_step=final_step,
                                   now=self.wall, extra=extra, record_extra=more or None)
            except MarathonError as e:
                self.log(f"could not record the job as {state} yet ({e.message}); retrying in "
                         f"{self.retry_interval:g} s")
                stop.wait(self.retry_interval)
                continue
            self.finished = (state, reason)
            self.log(f"job {self.ctx.job} {state}: {reason}" if wrote else
                     f"job {self.ctx.job} already has its record; not overwriting it")
            return wrote
        return False


def job_lifecycle(ctx: TaskContext, environ: Mapping[str, str], *, status: TaskStatus | None = None,
                  events: TaskEvents | None = None, coordinator: Coordinator | None = None,
                  locate: Callable[[], str | None] = lambda: None) -> dict:
    """The job-aware ``policy`` and ``control`` for a task: the deciding task keeps the job's restart
    ledger (:class:`~marathon_tf.task.keeper.Keeper`: it shows the counts in ``status``, records the ends it
    classifies itself in ``events`` and publishes its rounds and counts through ``coordinator``, the job's plan's
    writer), the others report to it (:class:`~marathon_tf.task.keeper.Reporter`, at the address ``locate``
    gives: the rendezvous leader's, once it is known). The bootstrap's assembly calls it with its parts
    (:class:`marathon_tf.task.bootstrap.Bootstrap`'s ``lifecycle``)."""
    n, window = ctx.restart_budget
    path = failures_path(ctx, environ)
    client = client_from_env(ctx, environ)
    keeper = reporter = placement = None
    if ctx.role != "tensorboard":
        if client is not None and is_decider(ctx):
            keeper = Keeper(ctx, Ledger(ctx.restart_budget, ctx.preemption_budget), client=client, path=path, log=_log,
                            coordinator=coordinator, status=status, events=events)
            if ctx.placement:  # rules across the job's tasks (UNIQUE …): this task places them (task/placer.py)
                placement = Placer.of(client, ctx, threading.Event(), _log).start()
        elif not is_decider(ctx):
            reporter = Reporter(ctx, locate)
    control = JobControl(ctx, client, keeper=keeper, placement=placement, log=_log) if client is not None else None
    _log(f"restart budget: {n} failure(s) in {window:g} s and {ctx.preemption_budget[0]} preemption(s), job-wide ("
         + ("kept here" if keeper else f"kept by {decider_task(ctx.completion)}")
         + (f"; also in {path}" if path else "")
         + ")")
    budget = RestartBudget(n, window, task=ctx.task, path=path)
    version = environ.get("MARATHON_APP_VERSION") or None
    # One quick look when a program ends (a Marathon that does not answer must not hold up a restart in place):
    quick = client_from_env(ctx, environ, retry=RetryPolicy(attempts=1, budget=3.0, initial=0.1, max_wait=0.5),
                            timeout=(2.0, 3.0))
    planned = (lambda: stop_asked(quick, ctx.job, ctx.task, version)) if quick is not None else None
    return {"policy": JobPolicy(ctx, budget, environ, keeper=keeper, reporter=reporter, planned=planned),
            "control": control}
