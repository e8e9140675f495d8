"""A job's status (``marathon-tf status``, what ``watch`` and ``deploy`` follow, the API's ``JobStatus``),
in two steps:

* :func:`fetch` does all the I/O, once per look: the job's group (apps with their tasks, counts,
  deployments and last failures), Marathon's queue, every running task's ``/status`` (in parallel),
  and what only some jobs need: the agents' free resources for a job that waits to be placed, the
  local runner's state directory for a job with a logdir. It returns an :class:`Observed`.
* :func:`build` is pure: an :class:`Observed` → the typed :class:`~marathon_tf.user.results.JobStatus`,
  whose ``to_dict()`` is what ``status -o json`` prints. Marathon's JSON is read through
  :mod:`marathon_tf.marathon` (``model``: the typed apps and their newest task; ``tasks``: its ports, its
  age; ``queue``: why a task waits; ``jobstate``: the job's state, labels and deployed job file); the
  annotators add to it
  (:mod:`.observe`: waits named by the peer, stragglers, restarts; :mod:`.gang`: admission).

:func:`job_status` is both.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from marathon_tf.contract import labels as L
from marathon_tf.contract import naming, spread
from marathon_tf.contract.errors import MarathonNotFound, UsageError
from marathon_tf.contract.progress import eta_seconds, job_step
from marathon_tf.contract.taskapi import broadcast
from marathon_tf.marathon import transport
from marathon_tf.marathon import waiting as W
from marathon_tf.marathon.jobstate import (
    STOPPED,
    app_cluster,
    job_labels,
    job_state,
    planned_stop,
    restarting,
    standbys,
    stored_spec,
)
from marathon_tf.marathon.model import App, job_apps
from marathon_tf.marathon.queue import entries_by_app, launch_delay, stall_reason
from marathon_tf.marathon.queue import fetch as fetch_queue
from marathon_tf.marathon.tasks import RUNNING, age, task_port, task_url
from marathon_tf.user import gang, localstate, observe
from marathon_tf.user.results import JobStatus

__all__ = ["Observed", "GROUP_EMBEDS", "fetch", "build", "job_status", "version_cluster", "planned"]

#: Every embed a status view needs (any embed drops Marathon's defaults, so name them all).
GROUP_EMBEDS = ("group.groups", "group.apps", "group.apps.tasks", "group.apps.counts",
                "group.apps.deployments", "group.apps.lastTaskFailure")

ProbeGet = Callable[[str], dict | None]

#: A task's states on its way out: in an app at 0 instances it is shown ``stopped`` (the CLI and the API alike).
STOPPING = ("TASK_KILLING", "TASK_KILLED", "TASK_FINISHED", "TASK_FAILED", "TASK_GONE", "TASK_DROPPED")


@dataclass(frozen=True)
class Observed:
    """What one look at a job found (:func:`fetch`): everything :func:`build` reads."""

    job: str
    #: The job's apps by task name (``worker-3``), with their tasks, deployments and last failures (Marathon's
    #: app objects given are read as :class:`~marathon_tf.marathon.model.App`).
    apps: Mapping[str, App]
    #: ``GET /v2/queue`` entries by app id.
    queue: Mapping[Any, Mapping[str, Any]] = field(default_factory=dict)  # by app id (looked up with None too)
    #: Task name → its ``/status`` answer (None: none within 2 s), for every task that was asked.
    probes: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    #: Marathon is the local runner (asked only when a waiting task has a queue entry).
    local: bool = False
    #: The agents' free resources by agent id (a job waiting to be placed; None: not known).
    free: Mapping[str, Mapping[str, float]] | None = None
    #: The local runner's state directory (a job with a logdir on it), else None.
    work_dir: Path | None = None
    #: When it was looked at (Unix seconds; default: when made): ages and deadlines are counted from it.
    now: float = field(default_factory=time.time)
    #: The cluster (role → count) the tasks a planned restart stops ran with (their app version's), else None.
    previous_cluster: Mapping[str, int] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "apps", {name: App.parse(app) for name, app in self.apps.items()})


def _probe(url: str) -> dict | None:
    """A task's ``/status`` (None: no whole answer within 2 s)."""
    return transport.task_json(url, timeout=2.0)


def _safe(fn: Callable[[], Any], default: Any) -> Any:
    try:
        return fn()
    except Exception:  # noqa: BLE001 - the queue and the numbers are advisory: a Marathon without them has a status
        return default


def fetch(client: Any, job: str, *, probe: bool = True, probe_get: ProbeGet | None = None,
          now: Callable[[], float] = time.time, mesos: str | None = None) -> Observed:
    """One look at the job (see the module): raises :class:`UsageError` when it does not exist.
    ``mesos``: the Mesos master the user named (``--mesos`` / ``MESOS_URL``; None: the one Marathon
    names), read for a starting job's waits."""
    try:
        group = client.get_group(naming.group_id(job), embed=GROUP_EMBEDS)
    except MarathonNotFound:
        raise UsageError(f"job {job!r} does not exist on {client.url}",
                         hint="see the jobs with: marathon-tf list") from None
    # looked up by app ids that may be None
    queue: Mapping[Any, Mapping[str, Any]] = entries_by_app(_safe(lambda: fetch_queue(client), []))
    apps = job_apps(group)
    waiting = [app for app in apps.values() if app.newest_task() is None and queue.get(app.id)]
    local = client.is_local() if waiting else False
    urls = {}
    if job_labels(apps.values()).get(L.STATE):
        probe = False  # an ended job: its tasks are on their way out; the record says its last step
    for name, app in apps.items():
        task = app.newest_task()
        url = task_url(app, task, "status", "/status") if probe and task and task.state == RUNNING else None
        if url:
            urls[name] = url
    probes = broadcast(probe_get or _probe, urls)
    free = None
    if gang.waits_to_start(apps) or standbys(apps.values()):  # why they wait, in numbers
        from marathon_tf.user import capacity

        cap = _safe(lambda: capacity.read(client, mesos), None)
        free = _safe(lambda: cap.free_by_agent(), None) if cap is not None else None
    work = localstate.work_dir(client) if stored_spec(apps.values()).get("logdir") else None
    previous = _previous_cluster(client, apps)
    return Observed(job, apps, queue, probes, local, free, work, now(), previous)


def version_cluster(client: Any, app_id: str, version: str) -> dict[str, int] | None:
    """The cluster (role → count) an earlier version of an app ran with: one GET
    (``/v2/apps/<id>/versions/<version>``); None when it cannot be read."""
    old = _safe(lambda: client.request("GET", f"/v2/apps{app_id}/versions/{version}").body, None)
    return app_cluster(old) if isinstance(old, dict) else None


def _previous_cluster(client: Any, apps: Mapping[str, App]) -> dict[str, int] | None:
    """The cluster the tasks a planned restart stops ran with (their app's earlier version), read only
    while a new configuration restarts the job."""
    for app in apps.values():
        version = restarting(app)
        if version:
            return version_cluster(client, str(app.id), version)
    return None


def planned(why_cluster: Mapping[str, int] | None, apps: Mapping[str, Mapping[str, Any]]) -> tuple[str, str]:
    """``(why, change)`` of a planned restart from the cluster the stopped tasks ran with: ``scale`` and
    ``2 → 3 workers`` when the job's counts changed, else ``redeploy``."""
    from marathon_tf.contract import timeline as T

    return T.planned_for(why_cluster, next((c for c in map(app_cluster, apps.values()) if c), None))


def _restart(seen: Observed) -> dict[str, Any] | None:
    """The planned restart a new configuration of the job makes now (``scale``, a re-deploy): which
    tasks, why, and the line ``status`` says (``Restarting for scale (2 → 3 workers)``); None."""
    from marathon_tf.contract import timeline as T

    tasks = sorted(name for name, app in seen.apps.items() if restarting(app))
    if not tasks:
        return None
    why, change = planned(seen.previous_cluster, seen.apps)
    return {"why": why, "change": change, "tasks": tasks, "text": T.planned_text(why, change)}


def _row(name: str, app: App, seen: Observed) -> dict[str, Any]:
    """A task's row: its newest task (state, address, health, age), or why there is none."""
    role, index = naming.parse_task_name(name) or ("?", 0)
    row: dict[str, Any] = {"task": name, "role": role, "index": index, "appId": app.id, "instances": app.instances}
    task = app.newest_task()
    ended = bool(app.labels.get(L.STATE))
    if task and app.instances == 0 and (task.state in STOPPING or ended):
        # being stopped (a scale down; the job ended, whose record is on the app: a stock Marathon shows the
        # task TASK_RUNNING until its kill ends, no TASK_KILLING): `stopped`, as the next look will say
        task = None
    if task:
        port = task_port(app, task, "tf") or task_port(app, task, "http")
        row.update(state=task.state, host=task.host, port=port,
                   address=f"{task.host}:{port}" if port else task.host, health=task.health, taskId=task.id)
        started = task.since
        seconds = age(started, now=lambda: seen.now)
        if seconds is not None:
            row.update(startedAt=started, ageSeconds=seconds)
        if name in seen.probes:
            row["metricsUrl"] = task_url(app, task, "status", "/metrics")
    else:
        entry = seen.queue.get(app.id) or {}
        delay = launch_delay(entry)
        row["state"] = STOPPED if app.instances == 0 else "waiting" if delay is None else f"delayed {delay}s"
        why = stall_reason(entry, local=seen.local if entry else False)
        rule = spread.split(app)[2] if spread.LABEL in app.labels else ""
        if rule and row["state"] != STOPPED:  # the job's placement rule that holds it (marathon_tf.task.placer)
            row["placement"] = rule
            why = f"{rule}; {why}" if why else rule
        if why and row["state"] != STOPPED:
            row["waitingFor"] = why
    failure = app.last_failure
    planned = failure is not None and failure.state == "TASK_KILLED" and planned_stop(app, failure.version or "")
    if failure is not None and not planned:  # a planned restart's stop is no failure (contract/timeline PLANNED)
        row["lastFailure"] = failure.text
    if restarting(app):
        row["restarting"] = True
        row.pop("waitingFor", None)
    result = seen.probes.get(name)
    if result:
        row["phase"] = result.get("phase")
        row["step"] = result.get("step")
        row["restarts"] = result.get("restarts") or 0
        if result.get("steps_per_second") is not None:
            row["stepsPerSecond"] = result["steps_per_second"]
        if result.get("resumed_from") is not None:
            row["resumedFrom"] = result["resumed_from"]
        observe.take_probe(row, result)  # the peer it waits for, the job's view
    return row


def _counts(tasks: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for t in tasks:
        c = counts.setdefault(t["role"], {"total": 0, "staged": 0, "running": 0, "healthy": 0})
        c["total"] += 1
        if t.get("state") in ("TASK_STAGING", "TASK_STARTING"):
            c["staged"] += 1
        elif t.get("state") == RUNNING:
            c["running"] += 1
            if t.get("health") == "healthy":  # healthy among the running (a task that ended keeps its last result)
                c["healthy"] += 1
    return counts


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


# Over ruff's complexity limit (C901), as one piece: the status assembled from the record, the tasks and Marathon's
# queue.
def build(seen: Observed) -> JobStatus:  # noqa: C901
    """The job's status from one look at it (pure; see the module)."""
    job, apps = seen.job, seen.apps
    tasks = [_row(name, app, seen) for name, app in apps.items()]
    labels = job_labels(apps.values())
    state = job_state(apps.values())
    if state in (L.JobState.SUCCEEDED, L.JobState.FAILED):
        for row in tasks:  # stopping a finished job kills its tasks: that is no failure of theirs
            if str(row.get("lastFailure", "")).startswith("TASK_KILLED"):
                del row["lastFailure"]
    deployments = [d for app in apps.values() for d in app.deployments]
    out: dict[str, Any] = {"job": job, "groupId": naming.group_id(job), "state": state.value,
                           "deployments": sorted(set(deployments)), "tasks": tasks, "counts": _counts(tasks)}
    tb = next((r for r in tasks if r["role"] == "tensorboard" and r.get("state") == RUNNING), None)
    if tb and tb.get("port"):
        out["tensorboard"] = f"http://{tb['host']}:{tb['port']}"
    observe.annotate(out, seen.queue)  # waits named by the peer (with its state), stragglers
    observe.restarts(out, labels.get(L.RESTARTS))  # the job's failures and preemptions against its budget
    observe.saving(out, labels.get(L.GOODPUT),  # its goodput, its last save round, whether it has the save hook
                   naming.deciding_task(str(stored_spec(apps.values()).get("completion") or "")))
    restart = _restart(seen)
    if restart:  # a planned restart (scale, re-deploy): not a start that waits to be placed
        out["restarting"] = restart
    else:
        gang.annotate(out, apps, seen.queue, free=seen.free, now=seen.now)  # a starting job: placed per role; Queued
    _elastic(out, apps, seen, labels)
    if labels.get(L.FINISHED_AT):
        out["finishedAt"] = labels[L.FINISHED_AT]
    step = job_step((r["task"], r.get("step")) for r in tasks)  # the one definition of the job's step
    if labels.get(L.FINAL_STEP):
        final = labels[L.FINAL_STEP]
        out["finalStep"] = int(final) if final.isdigit() else final
    elif step is not None:
        out["step"] = step
    if labels.get(L.REASON):
        out["reason"] = labels[L.REASON]
    resumed = [r["resumedFrom"] for r in tasks if isinstance(r.get("resumedFrom"), int)]
    if resumed:
        out["resumedFrom"] = max(resumed)
    spec = stored_spec(apps.values())
    if spec.get("logdir"):
        out["logdir"] = spec["logdir"]
        host = next((v.get("host_path") for v in spec.get("volumes") or []
                     if v.get("container_path") == spec["logdir"]), None)
        if host:
            out["logdirVolume"] = host
        path = localstate.deployed_logdir(spec, seen.work_dir, job)
        if path:  # on this machine for the local runner, else on the agents
            out.update(logdirPath=path, logdirOnThisMachine=seen.work_dir is not None)
    target = (spec.get("progress") or {}).get("target_step")
    if target:
        out["targetStep"] = target
    if "step" in out:
        rates = [r["stepsPerSecond"] for r in tasks if r.get("step") == out["step"] and r.get("stepsPerSecond")]
        rate = max(rates) if rates else None
        out["progress"] = {"step": out["step"], "targetStep": target, "stepsPerSecond": rate,
                           "etaSeconds": _round(eta_seconds(out["step"], target, rate))}
    return JobStatus.from_dict(out)


def _elastic(out: dict[str, Any], apps: Mapping[str, App], seen: Observed,
             labels: Mapping[str, str]) -> None:
    """An elastic job's size (docs/elastic.md): ``elastic`` with the deciding task's word (its members, its
    changes) when it answers, the standbys and why they wait (Marathon's queue, as for a starting job)."""
    spec = stored_spec(apps.values())
    bounds = {r: (rd.get("count") or {}) for r, rd in (spec.get("roles") or {}).items()
              if isinstance(rd.get("count"), dict)}
    if not bounds:
        return
    role, count = next(iter(bounds.items()))
    lo, hi = int(count.get("min") or 1), int(count.get("max") or 1)
    decider = naming.deciding_task(str(spec.get("completion") or ""))
    said = ((seen.probes.get(decider) or {}).get("elastic") or {}) if seen.probes else {}
    role_apps = [a for name, a in apps.items() if name.startswith(role + "-")]
    waits = W.role_waits(role_apps, seen.queue, free=seen.free, now=seen.now).get(role)
    placed = waits.placed if waits is not None else 0
    target = sum(1 for a in role_apps if a.instances)  # scale worker=N: the apps past it are at 0
    view: dict[str, Any] = {"role": role, "min": lo, "max": hi, "placed": placed, "target": target,
                            "size": said.get("size", placed), "standbys": said.get("standbys")}
    for key in ("members", "generation", "paused", "changes", "vacant", "placedStandbys"):
        if said.get(key) is not None:
            view[key] = said[key]
    running = {n for n, a in apps.items() if n.startswith(role + "-") and a.instances}
    view["standbys"] = sorted(n for n in (view["standbys"] if view["standbys"] is not None else
                                          [n for n in running if not W.placed(apps[n])]) if n in running)
    if waits is not None and waits.waiting:
        view["waiting"] = waits.text()
        view["reasons"] = waits.to_dict()["reasons"]
    if labels.get(L.WORKERS):
        view["final"] = labels[L.WORKERS]
    members = view.get("members") or {}
    for row in out["tasks"]:
        if row["role"] == role and row["task"] not in members and (said or row.get("state") == "waiting"):
            row["standby"] = True
            if row.get("state") == "waiting":
                row["state"] = "standby"
    out["elastic"] = view


def job_status(client: Any, job: str, *, probe: bool = True, probe_get: ProbeGet | None = None,
               mesos: str | None = None) -> JobStatus:
    """The job's status now: :func:`build` of :func:`fetch` (``probe``: ask the running tasks too;
    ``mesos``: the master the user named)."""
    return build(fetch(client, job, probe=probe, probe_get=probe_get, mesos=mesos))
