"""A job as its apps say it: its labels, the job file it was deployed with, and its state.

:func:`job_state` is the one place a job's :class:`~marathon_tf.contract.labels.JobState` is computed
(``status``, ``watch``, ``list``, the Python API, ``local serve``'s announcements): from the record
labels when the job has ended, else from its apps (their newest task, instances, deployments).

* A record (``marathon-tf/state``): ``Succeeded``, ``Failed``, ``NotPlaced``; a ``NotPlaced`` record
  with a next attempt (``marathon-tf/next-attempt-at``) is ``Queued``: it is submitted again.
* No record: ``Stopped`` when every app is at 0 instances with no task; ``Running`` when every app's
  newest task runs; ``Deploying`` while a deployment names one of the apps; else ``Starting``. An
  elastic role's apps that wait while at least its minimum run are its *standbys* (:func:`standbys`):
  they keep a job neither from ``Running`` nor its deployment from being done (docs/elastic.md).

:func:`planned_stop`: whether a task's stop was marathon-tf's own doing (the job's end, or a new
configuration of its app: ``scale``, a re-deploy), the one classification the keeper (task side) and
``status`` / ``events`` (user side) use; :func:`restarting`: the job's tasks that a new configuration is
restarting now (a planned restart, :data:`marathon_tf.contract.timeline.RESTARTING`; not a task the job's
placement moved or held: :func:`marathon_tf.contract.spread.displaced`).

:func:`converged`: whether the apps show no deployment left to do (a deployment id Marathon has not
listed yet may be done already: :func:`marathon_tf.user.watch.wait_deployment`).

The apps may come with their tasks (``group.apps.tasks``, ``apps.tasks``), or without them as
``GET /v2/apps`` lists them by default: then their counts (``tasksRunning``, ``tasksStaged``) say
the same. Pure: Marathon's apps in (plain dicts or :class:`~marathon_tf.marathon.model.App`, read through
the latter), values out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from marathon_tf.contract import labels as L
from marathon_tf.contract.plan import StopReason
from marathon_tf.contract.spread import displaced
from marathon_tf.marathon.model import App, Task
from marathon_tf.marathon.tasks import RUNNING

__all__ = ["job_labels", "stored_spec", "task_state", "job_state", "converged", "standbys", "planned_stop",
           "restarting", "replaced", "config_version", "app_cluster", "STOPPED"]

#: A task row's state for an app at 0 instances without a task (``status``' STATE column).
STOPPED = "stopped"


def job_labels(apps: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Every ``marathon-tf/`` label of the job's apps, merged (the record is on every app)."""
    out: dict[str, str] = {}
    for app in apps:
        out.update({k: v for k, v in App.parse(app).labels.items() if k.startswith(L.PREFIX)})
    return out


def stored_spec(apps: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The job file as deployed (the ``marathon-tf/spec`` label worker-0 carries), or {} if unreadable."""
    for app in apps:
        raw = App.parse(app).labels.get(L.SPEC)
        if raw:
            try:
                spec = json.loads(raw)
            except ValueError:
                return {}
            return spec if isinstance(spec, dict) else {}
    return {}


def task_state(app: Mapping[str, Any]) -> str | None:
    """The state of the app's task: its newest task's (``TASK_RUNNING``, …), :data:`STOPPED` for an
    app at 0 instances without one, None while it waits to be placed. Without embedded tasks, from
    the app's counts."""
    app = App.parse(app)
    if "tasks" in app:
        task = app.newest_task()
        if task is not None:
            return task.state
    elif app.tasks_running:
        return RUNNING
    elif app.tasks_staged:
        return "TASK_STAGING"
    return STOPPED if app.instances == 0 else None


def _bounds(app: App) -> tuple[int, int] | None:
    low, sep, high = (app.labels.get(L.ELASTIC) or "").partition("..")
    return (int(low), int(high)) if sep and low.isdigit() and high.isdigit() else None


def standbys(apps: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ids of an elastic role's apps that wait (no task running) while at least its minimum run."""
    out: list[str] = []
    roles: dict[str, tuple[tuple[int, int], list[App]]] = {}
    for app in map(App.parse, apps):
        bounds = _bounds(app)
        if bounds is not None:
            roles.setdefault(str(app.labels.get(L.ROLE)), (bounds, []))[1].append(app)
    for (low, _), role_apps in roles.values():
        waiting = [a for a in role_apps if task_state(a) != RUNNING]
        if len(role_apps) - len(waiting) >= low:
            out += [str(a.id) for a in waiting if task_state(a) != STOPPED]
    return out


def job_state(apps: Iterable[Mapping[str, Any]]) -> L.JobState:
    """The job's state (see the module)."""
    parsed = [App.parse(a) for a in apps]
    recorded = job_labels(parsed).get(L.STATE)
    if recorded in L.RECORDED:
        if recorded == L.NOT_PLACED and job_labels(parsed).get(L.NEXT_ATTEMPT_AT):
            return L.JobState.QUEUED
        return L.JobState(recorded)
    waiting = set(standbys(parsed))
    states = [task_state(app) for app in parsed if app.id not in waiting]
    if states and all(s == STOPPED for s in states):
        return L.JobState.STOPPED
    if states and all(s == RUNNING for s in states):
        return L.JobState.RUNNING
    if any(app.deployments for app in parsed):
        return L.JobState.DEPLOYING
    return L.JobState.STARTING


def converged(apps: Iterable[Mapping[str, Any]]) -> bool:
    """Whether the job's apps (with their tasks and deployments) show no deployment left to do: none
    names a deployment, and each runs exactly its ``instances`` tasks launched at or after its
    ``versionInfo.lastConfigChangeAt``; False for no app."""
    parsed = [App.parse(a) for a in apps]
    waiting = set(standbys(parsed))
    for app in parsed:
        if app.id in waiting:
            continue  # an elastic job's standby: it waits in Marathon's queue for as long as it takes
        if app.deployments:
            return False
        current = [t for t in app.tasks if t.state == RUNNING and (t.version or "") >= app.config_version]
        if len(current) != app.instances:
            return False
    return bool(parsed)


def config_version(app: Mapping[str, Any]) -> str:
    """The app's current configuration (``versionInfo.lastConfigChangeAt``, else its version): a task
    launched before it runs an older one (a scaling alone does not change it)."""
    return App.parse(app).config_version


def replaced(app: Mapping[str, Any], task: Mapping[str, Any]) -> bool:
    """Whether ``task`` is on its way out: a deployment names its app and the task was launched with an
    older configuration (``scale``, a re-deploy, a placement write: Marathon kills it and launches one
    with the new configuration, ``upgradeStrategy`` 0/0). A peer found there would be gone in a moment:
    its address is not the one the job's new cluster spec will have. A configuration change without a
    deployment (a forced one cancelled it) replaces nothing: Marathon leaves such tasks running."""
    if not App.parse(app).deployments:
        return False
    version, changed = Task.parse(task).version or "", config_version(app)
    return bool(version and changed and version < changed)


def app_cluster(app: Mapping[str, Any] | None) -> dict[str, int] | None:
    """The cluster (role → count) the app's tasks are given (its ``MTF_CLUSTER``), or None when it does not say
    (no app, no such variable, not a JSON object of counts)."""
    if app is None:
        return None
    try:
        cluster = json.loads(str(App.parse(app).env.get("MTF_CLUSTER") or ""))
        return {str(r): int(n) for r, n in cluster.items()} if isinstance(cluster, dict) else None
    except (ValueError, TypeError):
        return None


def planned_stop(app: Mapping[str, Any] | None, version: str | None) -> StopReason | None:
    """Why a stop of a task of ``app`` that was launched with the app version ``version`` was
    marathon-tf's own doing (:class:`~marathon_tf.contract.plan.StopReason`): ``JOB_ENDED`` (the app carries the
    job's record), ``APP_REMOVED`` (None app), ``NEW_CONFIGURATION`` (``scale``, a re-deploy: every task of the
    job restarts with the new cluster spec); None when nothing says so (a failure, a preemption)."""
    if app is None:
        return StopReason.APP_REMOVED
    app = App.parse(app)
    if app.labels.get(L.STATE):
        return StopReason.JOB_ENDED
    changed = app.config_version
    if version and changed and changed > version:
        return StopReason.NEW_CONFIGURATION
    return None


def restarting(app: Mapping[str, Any]) -> str | None:
    """The version of the task a new configuration of ``app`` is restarting now, or None: while a
    deployment names the app, its newest task was launched with an older configuration (it is being
    stopped), or it has none yet and its last one was stopped for the new configuration."""
    app = App.parse(app)
    if not app.deployments or app.labels.get(L.STATE):
        return None
    moved = displaced(app)  # the job's placement moved or held this task: a placement wait, no restart
    task = app.newest_task()
    if task is not None:
        return str(task.version) if replaced(app, task) and not (moved and task.id == moved) else None
    failure = app.last_failure
    if failure is None:
        return None
    version = failure.version or ""
    if failure.state == "TASK_KILLED" and planned_stop(app, version) and not (moved and failure.task_id == moved):
        return version
    return None
