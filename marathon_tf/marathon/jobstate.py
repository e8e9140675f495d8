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
the same. Pure: plain dicts in, values out (``.get()`` only).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from marathon_tf.contract import labels as L
from marathon_tf.contract.plan import StopReason
from marathon_tf.contract.spread import displaced
from marathon_tf.marathon.tasks import RUNNING, newest

__all__ = ["job_labels", "stored_spec", "task_state", "job_state", "converged", "standbys", "planned_stop",
           "restarting", "replaced", "config_version", "STOPPED"]

#: A task row's state for an app at 0 instances without a task (``status``' STATE column).
STOPPED = "stopped"


def job_labels(apps: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Every ``marathon-tf/`` label of the job's apps, merged (the record is on every app)."""
    out: dict[str, str] = {}
    for app in apps:
        out.update({k: str(v) for k, v in (app.get("labels") or {}).items() if k.startswith(L.PREFIX)})
    return out


def stored_spec(apps: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The job file as deployed (the ``marathon-tf/spec`` label worker-0 carries), or {} if unreadable."""
    for app in apps:
        raw = (app.get("labels") or {}).get(L.SPEC)
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
    if "tasks" in app:
        task = newest(app.get("tasks"))
        if task is not None:
            return str(task.get("state"))
    elif app.get("tasksRunning"):
        return RUNNING
    elif app.get("tasksStaged"):
        return "TASK_STAGING"
    return STOPPED if app.get("instances", 1) == 0 else None


def _bounds(app: Mapping[str, Any]) -> tuple[int, int] | None:
    low, sep, high = str((app.get("labels") or {}).get(L.ELASTIC) or "").partition("..")
    return (int(low), int(high)) if sep and low.isdigit() and high.isdigit() else None


def standbys(apps: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ids of an elastic role's apps that wait (no task running) while at least its minimum run."""
    apps = list(apps)
    out: list[str] = []
    roles: dict[str, tuple[tuple[int, int], list[Mapping[str, Any]]]] = {}
    for app in apps:
        bounds = _bounds(app)
        if bounds is not None:
            roles.setdefault(str((app.get("labels") or {}).get(L.ROLE)), (bounds, []))[1].append(app)
    for (low, _), role_apps in roles.values():
        waiting = [a for a in role_apps if task_state(a) != RUNNING]
        if len(role_apps) - len(waiting) >= low:
            out += [str(a.get("id")) for a in waiting if task_state(a) != STOPPED]
    return out


def job_state(apps: Iterable[Mapping[str, Any]]) -> L.JobState:
    """The job's state (see the module)."""
    apps = list(apps)
    recorded = job_labels(apps).get(L.STATE)
    if recorded in L.RECORDED:
        if recorded == L.NOT_PLACED and job_labels(apps).get(L.NEXT_ATTEMPT_AT):
            return L.JobState.QUEUED
        return L.JobState(recorded)
    waiting = set(standbys(apps))
    states = [task_state(app) for app in apps if app.get("id") not in waiting]
    if states and all(s == STOPPED for s in states):
        return L.JobState.STOPPED
    if states and all(s == RUNNING for s in states):
        return L.JobState.RUNNING
    if any(app.get("deployments") for app in apps):
        return L.JobState.DEPLOYING
    return L.JobState.STARTING


def converged(apps: Iterable[Mapping[str, Any]]) -> bool:
    """Whether the job's apps (with their tasks and deployments) show no deployment left to do: none
    names a deployment, and each runs exactly its ``instances`` tasks launched at or after its
    ``versionInfo.lastConfigChangeAt``; False for no app."""
    apps = list(apps)
    waiting = set(standbys(apps))
    for app in apps:
        if app.get("id") in waiting:
            continue  # an elastic job's standby: it waits in Marathon's queue for as long as it takes
        if app.get("deployments"):
            return False
        changed = (app.get("versionInfo") or {}).get("lastConfigChangeAt") or app.get("version") or ""
        current = [t for t in app.get("tasks") or []
                   if t.get("state") == RUNNING and (t.get("version") or "") >= changed]
        if len(current) != app.get("instances", 1):
            return False
    return bool(apps)


def config_version(app: Mapping[str, Any]) -> str:
    """The app's current configuration (``versionInfo.lastConfigChangeAt``, else its version): a task
    launched before it runs an older one (a scaling alone does not change it)."""
    return str((app.get("versionInfo") or {}).get("lastConfigChangeAt") or app.get("version") or "")


def replaced(app: Mapping[str, Any], task: Mapping[str, Any]) -> bool:
    """Whether ``task`` is on its way out: a deployment names its app and the task was launched with an
    older configuration (``scale``, a re-deploy, a placement write: Marathon kills it and launches one
    with the new configuration, ``upgradeStrategy`` 0/0). A peer found there would be gone in a moment:
    its address is not the one the job's new cluster spec will have. A configuration change without a
    deployment (a forced one cancelled it) replaces nothing: Marathon leaves such tasks running."""
    if not app.get("deployments"):
        return False
    version, changed = str(task.get("version") or ""), config_version(app)
    return bool(version and changed and version < changed)


def planned_stop(app: Mapping[str, Any] | None, version: str | None) -> StopReason | None:
    """Why a stop of a task of ``app`` that was launched with the app version ``version`` was
    marathon-tf's own doing (:class:`~marathon_tf.contract.plan.StopReason`): ``JOB_ENDED`` (the app carries the
    job's record), ``APP_REMOVED`` (None app), ``NEW_CONFIGURATION`` (``scale``, a re-deploy: every task of the
    job restarts with the new cluster spec); None when nothing says so (a failure, a preemption)."""
    if app is None:
        return StopReason.APP_REMOVED
    if (app.get("labels") or {}).get(L.STATE):
        return StopReason.JOB_ENDED
    changed = config_version(app)
    if version and changed and changed > version:
        return StopReason.NEW_CONFIGURATION
    return None


def restarting(app: Mapping[str, Any]) -> str | None:
    """The version of the task a new configuration of ``app`` is restarting now, or None: while a
    deployment names the app, its newest task was launched with an older configuration (it is being
    stopped), or it has none yet and its last one was stopped for the new configuration."""
    if not app.get("deployments") or (app.get("labels") or {}).get(L.STATE):
        return None
    moved = displaced(app)  # the job's placement moved or held this task: a placement wait, no restart
    task = newest(app.get("tasks"))
    if task is not None:
        return str(task.get("version")) if replaced(app, task) and not (moved and task.get("id") == moved) else None
    ltf = app.get("lastTaskFailure") or {}
    version = str(ltf.get("version") or "")
    if ltf.get("state") == "TASK_KILLED" and planned_stop(app, version) \
            and not (moved and ltf.get("taskId") == moved):
        return version
    return None
