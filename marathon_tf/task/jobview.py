"""The deciding task's view of the whole job: tasks per role, its start, placement waits, stragglers.

Every :data:`INTERVAL` seconds (longer for big jobs: at most :data:`MAX_PER_SECOND` status reads a
second) :class:`JobView` makes one group ``GET`` (apps and their tasks), reads ``/v2/queue`` when a
task is not running, and ``GET /progress`` of every running chief and worker. It keeps, in the
task's status (``job_view``; ``/metrics`` shows it):

* ``roles``: per role, tasks in total and running;
* ``stragglers``: a chief or worker whose step reports (``report_rate``, see
  :mod:`marathon_tf.task.observer`) came at less than half the median of the *other* tasks of its
  role in :data:`STRAGGLER_LOOKS` looks in a row (a role needs two training tasks to compare);

and records the job's own events (:mod:`marathon_tf.contract.timeline`): ``submitted`` (the apps'
latest configuration version, ``App.config_version``), ``scaled`` (the cluster differs from the last
deployment's), ``all_running`` (the latest start once every task runs), ``deployed`` (every task running
and passing its health check: the latest of its start and its checks' first success, when Marathon's
deployment of such apps ends), ``placement_wait`` / ``placed``.

On Marathon 1.4–1.7 it also relaunches what Marathon left dead (:attr:`~marathon_tf.marathon.versions.Capabilities.
deployment_locks_relaunch`): a task that failed while a deployment held its app — the first deployment of the job
waiting for a task still starting or placed late, the placement's own deployments — is not relaunched then, nor once
the deployment ends, until Marathon's next periodic scale check (``--scale_apps_interval``, 300 s by default). An
app seen with no task, no launch-queue entry and no deployment in :data:`FORGOTTEN_LOOKS` looks in a row (Marathon
queues a failed task's relaunch as it expunges it: a look between the two sees neither; the next look comes
:data:`FORGOTTEN_AGAIN` s after one that saw it, or saw an app a deployment holds without the task it lost: the
lock's own case, restarted within seconds of the deployment's end) is restarted
(``POST /v2/apps/<id>/restart``: a deployment of that app alone, which launches its missing task); ``relaunched``
says so. A 409 (a deployment holds it now) waits for the next look (:class:`Relauncher`). The deciding task's own
app is looked at so by the first :data:`WATCHERS` other tasks of the job (:func:`watch_decider`): it may be the one
lost.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from marathon_tf.contract import labels as L
from marathon_tf.contract import naming
from marathon_tf.contract import timeline as T
from marathon_tf.contract.errors import MarathonConflict, MarathonError, MarathonNotFound
from marathon_tf.contract.phases import Phase
from marathon_tf.contract.progress import median
from marathon_tf.contract.taskapi import broadcast
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.marathon.client import Client
from marathon_tf.marathon.jobstate import restarting
from marathon_tf.marathon.model import App, Task, apps_by_id
from marathon_tf.marathon.queue import entries_by_app, placement
from marathon_tf.marathon.record import GROUP_EMBEDS
from marathon_tf.marathon.tasks import RUNNING, task_url, wall
from marathon_tf.task.jobcontrol import read_status
from marathon_tf.task.policy import decider_task
from marathon_tf.task.status_server import TaskStatus
from marathon_tf.task.timeline import TaskEvents

__all__ = ["JobView", "Relauncher", "watch_decider", "watches_decider", "stragglers", "INTERVAL", "STRAGGLER_LOOKS",
           "FORGOTTEN_LOOKS", "WATCHERS"]

INTERVAL = 10.0
MAX_PER_SECOND = 25.0
STRAGGLER_LOOKS = 3
STRAGGLER_RATIO = 0.5
#: Looks in a row that see an app without a task, a launch-queue entry or a deployment before it is restarted
#: (Marathon 1.4-1.7; see the module).
FORGOTTEN_LOOKS = 2
#: Seconds until the next look when one saw such an app (Marathon queues a relaunch within a moment of the end).
FORGOTTEN_AGAIN = 2.0
#: The other tasks of the job that look at the deciding task's own app so (the first ones of the cluster spec).
WATCHERS = 2
_COMPARED = ("chief", "worker")


def stragglers(rates: Mapping[str, float | None]) -> set[str]:
    """Tasks whose rate is below :data:`STRAGGLER_RATIO` × the median of the others of their role."""
    out = set()
    by_role: dict[str, dict[str, float]] = {}
    for task, rate in rates.items():
        if rate is not None:
            by_role.setdefault(task.rsplit("-", 1)[0], {})[task] = rate
    for tasks in by_role.values():
        for task, rate in tasks.items():
            others = [r for t, r in tasks.items() if t != task]
            if others and median(others) > 0 and rate < STRAGGLER_RATIO * median(others):
                out.add(task)
    return out


def _apps(group: Mapping[str, Any]) -> dict[str, App]:
    """The job's apps by id."""
    return apps_by_id(group)


class JobView:
    def __init__(self, ctx: TaskContext, client: Client, status: TaskStatus, events: TaskEvents, *,
                 get_json: Callable[[str], dict[str, Any] | None] = read_status, interval: float = INTERVAL,
                 log: Callable[[str], None] = lambda m: None):
        self.ctx, self.client, self.status, self.events = ctx, client, status, events
        self.get_json, self.log = get_json, log
        members = sum(int(n) for r, n in ctx.cluster.items() if r in _COMPARED)
        self.interval = max(interval, members / MAX_PER_SECOND)
        self._slow: dict[str, int] = {}
        self._recorded: set[tuple[str, str]] = set()  # (kind, version) recorded once per deployment
        self._waiting: dict[str, str] = {}
        self.relauncher = Relauncher(client, events, log)
        self.urls: dict[str, str] = {}  # task -> its status port's base URL (for the end's events)

    def start(self, stop: threading.Event) -> threading.Thread:
        def run() -> None:
            while not stop.is_set():
                try:
                    if self.look() == "ended":
                        return
                except MarathonError as e:
                    self.log(f"job view: Marathon: {e}")
                stop.wait(FORGOTTEN_AGAIN if self.relauncher.pending else self.interval)  # (a second look soon)
        thread = threading.Thread(target=run, name="job-view", daemon=True)
        thread.start()
        return thread

    def look(self) -> str | None:
        """One look at the job (see the module's docstring); "ended" once the job has its record."""
        apps = _apps(self.client.get_group(naming.group_id(self.ctx.job), embed=GROUP_EMBEDS + (
            "group.apps.deployments", "group.apps.lastTaskFailure")))  # (a planned restart: not a placement wait)
        if any(a.labels.get(L.STATE) for a in apps.values()):
            return "ended"
        roles: dict[str, dict[str, int]] = {}
        running: dict[str, tuple[App, Task]] = {}
        for app_id, app in sorted(apps.items()):
            task_name = app_id.rstrip("/").rsplit("/", 1)[-1]
            parsed = naming.parse_task_name(task_name)
            if parsed is None or app.instances == 0:
                continue
            counts = roles.setdefault(parsed[0], {"total": 0, "running": 0})
            counts["total"] += 1
            live = app.newest_task((RUNNING,))
            if live is not None:
                counts["running"] += 1
                running[task_name] = (app, live)
        version = self._submitted(apps)
        self._placement(apps, running)
        self._deployment(apps, running, version)
        rates, watched = self._rates(running)
        for task in list(self._slow):
            if task not in rates:
                del self._slow[task]
        slow = stragglers(rates)
        for task in rates:
            self._slow[task] = self._slow.get(task, 0) + 1 if task in slow else 0
        self.status.update(job_view={
            "roles": roles, "watched": watched, "rates": rates, "looked_at": round(time.time(), 3),
            "stragglers": sorted(t for t, n in self._slow.items() if n >= STRAGGLER_LOOKS)})
        return None

    def _once(self, kind: str, key: str, message: str, at: float | None, **details: Any) -> None:
        """Record ``kind`` once per deployment (``key``: its version)."""
        if (kind, key) not in self._recorded:
            self._recorded.add((kind, key))
            self.events.record(kind, message, task="job", at=at, **details)

    def _submitted(self, apps: Mapping[str, App]) -> str:
        """The deployment's version (the apps' latest config change); ``submitted`` (and ``scaled``, when
        the cluster differs from the last deployment's in the job's events) recorded once."""
        version = max((a.config_version for a in apps.values() if a.config_version), default="")
        if version and (T.SUBMITTED, version) not in self._recorded:
            earlier = [e for e in self.events.shared() if e.get("kind") == T.SUBMITTED and e.get("version") != version]
            before = (earlier[-1].get("cluster") if earlier else None) or {}
            cluster = {r: int(n) for r, n in self.ctx.cluster.items()}
            if before and before != cluster:
                change = T.cluster_change(before, cluster)
                self._once(T.SCALED, version, f"scaled: {change}", wall(version), why="scale", change=change)
            self._once(T.SUBMITTED, version, f"deployed version {version}", wall(version), version=version,
                       cluster=cluster)
        return version

    def _deployment(self, apps: Mapping[str, App], running: Mapping[str, tuple[App, Task]], version: str) -> None:
        """``all_running`` and ``deployed``, once per deployment."""
        if not version:
            return
        wanted = [n for n, a in apps.items() if a.instances and naming.parse_task_name(n.rsplit("/", 1)[-1])]
        if len(running) < len(wanted):
            return
        started = [wall(t.started_at) for _, t in running.values()]
        if all(started):
            self._once(T.ALL_RUNNING, version, f"all {len(running)} tasks running",
                       max(s for s in started if s is not None))
        healthy = []
        for app, task in running.values():
            results = task.health_results
            if app.get("healthChecks") and not (results and all(r.alive for r in results)):
                return
            healthy.append(max([wall(task.started_at) or 0.0] + [wall(r.first_success) or 0.0 for r in results]))
        if healthy and not any(a.deployments for a in apps.values()):
            self._once(T.DEPLOYED, version, "deployment done: every task running and healthy", max(healthy))

    def _placement(self, apps: Mapping[str, App], running: Mapping[str, tuple[App, Task]]) -> None:
        missing = {app_id: app_id.rsplit("/", 1)[-1] for app_id, a in apps.items()  # (a planned restart is no wait)
                   if a.instances and app_id.rsplit("/", 1)[-1] not in running and not restarting(a)}
        for task in [t for t in self._waiting if t not in missing.values()]:
            self.events.record(T.PLACED, f"{task} runs after waiting to be placed ({self._waiting.pop(task)})",
                               task=task)
        if not missing:
            self.relauncher.look({}, {})
            return
        try:
            queue = entries_by_app(self.client.queue())
        except MarathonError:
            queue = None
        for app_id, task in missing.items():
            why = placement((queue or {}).get(app_id))
            if why and self._waiting.get(task) != why:
                self._waiting[task] = why
                self.events.record(T.PLACEMENT_WAIT, f"{task} waits to be placed: {why}", task=task)
        if queue is not None:
            self.relauncher.look({a: apps[a] for a in missing}, queue)

    def _rates(self, running: Mapping[str, tuple[App, Task]]) -> tuple[dict[str, float | None], list[str]]:
        """The report rate of every training chief and worker (this task's own from its status)."""
        urls = {}
        for task, (app, t) in running.items():
            base = task_url(app, t, self.ctx.status_port_name)
            if base:
                self.urls[task] = base
            if task.rsplit("-", 1)[0] in _COMPARED and task != self.ctx.task and base:
                urls[task] = base + "/progress"
        results = broadcast(self.get_json, urls)
        if self.ctx.role in _COMPARED:
            results[self.ctx.task] = self.status.light()
        rates = {task: (p or {}).get("report_rate") for task, p in results.items()
                 if p and p.get("phase") == Phase.RUNNING and p.get("first_step_at")}
        return rates, sorted(results)

    def status_urls(self) -> dict[str, str]:
        """Every running task's status base URL, looked up now (one group GET; the last look's when Marathon
        does not answer): whom a save round holds (:mod:`marathon_tf.task.saving`)."""
        try:
            apps = _apps(self.client.get_group(naming.group_id(self.ctx.job), embed=GROUP_EMBEDS))
        except MarathonError:
            return dict(self.urls)
        for app_id, app in apps.items():
            task, name = app.newest_task((RUNNING,)), app_id.rstrip("/").rsplit("/", 1)[-1]
            base = task_url(app, task, self.ctx.status_port_name) if task is not None else None
            if base and naming.parse_task_name(name):
                self.urls[name] = base
        return dict(self.urls)

    def end_labels(self, state: str, reason: str) -> dict[str, dict[str, str]]:
        """What the job's record adds on this (the deciding) task's app: the job's events
        (``marathon-tf/events``), with the end itself. Without a shared events file, every running
        task is asked for its own (``/events``) first: they stop with the record."""
        self.events.record(T.JOB_ENDED, f"{state}: {reason}", task="job", state=state)
        events = self.events.shared() or self.events.mine()
        if not self.events.path:
            urls = [base + "/events" for task, base in self.urls.items() if task != self.ctx.task]
            for body in broadcast(self.get_json, urls):
                events += (body or {}).get("events") or []
        app_id = naming.app_id(self.ctx.job, self.ctx.role, self.ctx.index)
        return {app_id: {L.EVENTS: T.compact(events)}}


class Relauncher:
    """Marathon 1.4-1.7: an app it left without its task, restarted (see the module). :meth:`look` takes the apps
    of a look that have no running task, and the launch queue's entries by app id."""

    def __init__(self, client: Client, events: TaskEvents, log: Callable[[str], None]):
        self.client, self.events, self.log = client, events, log
        self._seen: dict[str, tuple[int, float]] = {}  # app id -> (looks in a row, first seen)
        self._locked = False  # the last look saw an app a deployment holds without the task it lost

    @property
    def pending(self) -> bool:
        """Whether the next look comes soon: one saw an app that it may restart, or one a deployment holds
        without the task it lost (restarted soon after the deployment's end)."""
        return bool(self._seen) or self._locked

    def look(self, missing: Mapping[str, App], queue: Mapping[str, Any]) -> None:
        locks = bool(missing) and self.client.capabilities().deployment_locks_relaunch
        self._locked = locks and any(not app.tasks and app.deployments and app.last_failure is not None
                                     for app in missing.values())
        forgotten = {a for a, app in missing.items() if not app.tasks and not app.deployments and a not in queue}
        for app_id in [a for a in self._seen if a not in forgotten]:
            del self._seen[app_id]
        if not forgotten or not locks:
            return
        now = time.monotonic()
        for app_id in sorted(forgotten):
            looks, since = self._seen.get(app_id, (0, now))
            self._seen[app_id] = (looks + 1, since)
            if looks + 1 < FORGOTTEN_LOOKS:
                continue
            task = app_id.rsplit("/", 1)[-1]
            try:
                self.client.restart_app(app_id)
            except MarathonConflict:
                continue  # a deployment holds it now: it may launch it; looked at again next time
            del self._seen[app_id]
            message = (f"{task} relaunched: {self.client.capabilities().shown} left it without a task, a launch-queue "
                       f"entry or a deployment ({looks + 1} looks over {now - since:.0f} s; a task that failed while "
                       f"a deployment held its app is relaunched there only at the next scale check): its app "
                       f"restarted")
            self.log(message)
            self.events.record(T.RELAUNCHED, message, task=task, waited=round(now - since, 1))


def watches_decider(ctx: TaskContext) -> bool:
    """Whether this task is one of the :data:`WATCHERS` that look at the deciding task's own app."""
    decider = decider_task(ctx.completion)
    others = [naming.task_name(*m) for m in ctx.members() if naming.task_name(*m) != decider]
    return ctx.task in others[:WATCHERS]


def watch_decider(ctx: TaskContext, client: Client, events: TaskEvents, stop: threading.Event, *,
                  interval: float = INTERVAL, log: Callable[[str], None] = lambda m: None) -> threading.Thread:
    """Marathon 1.4-1.7: look at the deciding task's own app every ``interval`` s as the deciding task looks at
    the others (:class:`Relauncher`), until the job ends or ``stop``; on another version, nothing."""
    parsed = naming.parse_task_name(decider_task(ctx.completion))
    assert parsed is not None  # (a task name the policy made)
    decider = naming.app_id(ctx.job, *parsed)
    relauncher = Relauncher(client, events, log)

    def look() -> bool:
        if not client.capabilities().deployment_locks_relaunch:
            return False
        try:  # (one app's GET embeds its tasks and deployments, unasked)
            app = App.parse(client.get_app(decider))
        except MarathonNotFound:
            return False  # the job is gone
        if app.labels.get(L.STATE):
            return False  # the job ended: its record is on the deciding task's app
        missing = {decider: app} if app.instances and not app.tasks else {}
        relauncher.look(missing, entries_by_app(client.queue()) if missing else {})
        return True

    def run() -> None:
        while not stop.is_set():
            try:
                if not look():
                    return
            except MarathonError as e:
                log(f"deciding task's watch: Marathon: {e}")
            stop.wait(FORGOTTEN_AGAIN if relauncher.pending else interval)
    thread = threading.Thread(target=run, name="decider-watch", daemon=True)
    thread.start()
    return thread
