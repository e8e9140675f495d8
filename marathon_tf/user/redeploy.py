"""Deploying a job again: what is left of its earlier run, and what deploying it now would do.

* The job runs exactly as this job file renders: nothing to send (``no change``).
* The job has ended (its record says Succeeded or Failed), or, on the local runner, it was deleted
  and left its volumes: its tasks would start again and resume from the checkpoints in its logdir.
  That is not done silently: the caller must say ``resume`` (go on from the checkpoints) or
  ``fresh`` (remove them first: only where marathon-tf can reach them, the local runner's volumes;
  a cluster's shared storage is the user's to clear).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marathon_tf.contract import labels as L
from marathon_tf.contract import naming
from marathon_tf.contract.errors import MarathonNotFound, UsageError
from marathon_tf.marathon.client import Client
from marathon_tf.marathon.jobstate import job_labels, job_state, stored_spec
from marathon_tf.marathon.model import Deployment, job_apps
from marathon_tf.user import localstate
from marathon_tf.user.render import render_group
from marathon_tf.user.spec import JobSpec

__all__ = ["Previous", "ended", "previous_run", "deployed_group", "await_stopped", "start_fresh",
           "purge_deleted"]


@dataclass
class Previous:
    """What an earlier run of the job left: ``state`` (``Succeeded``, ``Failed``, or ``deleted``
    when only its local volumes are left), where its checkpoints are, and the group (if any)."""

    state: str
    finished_at: str | None = None
    checkpoints: str | None = None
    work_dir: Path | None = None  # the local runner's state: its volumes of the job can be removed here
    group: dict[str, Any] | None = None

    def question(self, job: str) -> UsageError:
        when = f" at {self.finished_at}" if self.finished_at else ""
        what = (f"job {job} has ended ({self.state}{when})" if self.state != "deleted"
                else f"job {job} ran on this local Marathon before and left its volumes")
        where = f" in {self.checkpoints}" if self.checkpoints else ""
        return UsageError(f"{what}: deploying it again resumes from its checkpoints{where}",
                          hint="say which: --resume (go on from the checkpoints) or --fresh (start from scratch)")


def _group(client: Client, job: str) -> dict[str, Any] | None:
    try:
        return client.get_group(naming.group_id(job), embed=("group.groups", "group.apps", "group.apps.tasks"))
    except MarathonNotFound:
        return None


def _has_files(path: Path) -> bool:
    return path.is_dir() and any(p.is_file() for p in path.rglob("*"))


def ended(group: dict[str, Any]) -> str | None:
    """The job's recorded end (``Succeeded`` / ``Failed``), None while it has none."""
    state = job_state(job_apps(group).values())
    return state.value if state in (L.JobState.SUCCEEDED, L.JobState.FAILED) else None


def previous_run(client: Client, spec: JobSpec) -> tuple[Previous | None, dict[str, Any] | None]:
    """``(what an earlier, ended run left or None, the job's group as Marathon has it or None)``: an
    ended job counts when its logdir outlives its tasks (a volume, an absolute path); one whose
    logdir was inside each sandbox has nothing to resume from."""
    group = _group(client, spec.name)
    work = localstate.work_dir(client)
    if group is None:
        if work is not None and _has_files(localstate.volumes_dir(work, spec.name)):
            return Previous("deleted", checkpoints=localstate.deployed_logdir(spec.to_dict(), work, spec.name),
                            work_dir=work), None
        return None, None
    state = ended(group)
    if state is None:
        return None, group
    checkpoints = localstate.deployed_logdir(stored_spec(job_apps(group).values()) or spec.to_dict(), work, spec.name)
    if checkpoints is None:  # its logdir was inside each sandbox (or none): nothing to resume from
        return None, group
    finished = job_labels(job_apps(group).values()).get(L.FINISHED_AT)
    return Previous(state, finished, checkpoints, work, group), group


def deployed_group(group: dict[str, Any], spec: JobSpec, templates_dir: str | None,
                   marathon_version: Any = None) -> dict[str, Any] | None:
    """The running job (``group``, as Marathon has it) as we render it: its stored job file rendered for
    ``marathon_version`` (Marathon's copy carries its own defaults, so ours are compared); None when the
    stored file cannot be read back or rendered for this Marathon now (then deploy it again)."""
    from marathon_tf.user.spec import load_dict

    stored = stored_spec(job_apps(group).values())
    if not stored:
        return None
    try:
        return render_group(load_dict(stored, source=spec.source), templates_dir=templates_dir,
                            marathon_version=marathon_version)
    except Exception:  # noqa: BLE001 - unreadable, or what was deployed this Marathon cannot run as rendered now
        return None


def await_stopped(client: Client, job: str, *, wait: float = 60.0, sleep: Callable[[float], None] = time.sleep) -> None:
    """An ended job's record stopped its tasks in a deployment (instances 0): wait, at most ``wait``
    seconds, until no deployment touches the job's apps, so that starting it again is not refused
    as locked (Marathon's 409 "App is locked by one or more deployments")."""
    prefix = naming.group_id(job) + "/"
    deadline = time.monotonic() + wait
    while any(app.startswith(prefix) for d in map(Deployment.parse, client.deployments()) for app in d.affected_apps):
        if time.monotonic() >= deadline:
            raise UsageError(f"{job}'s tasks are still stopping after {wait:g} s (its end's deployment); "
                             f"nothing was sent", hint="try again in a moment")
        sleep(0.25)


def start_fresh(client: Client, job: str, previous: Previous, *, wait: float = 60.0,
                sleep: Callable[[float], None] = time.sleep) -> Path | None:
    """Remove an ended local job's volumes once none of its tasks runs (its record stopped them);
    a cluster's checkpoints cannot be reached from here: refused with where they are."""
    if previous.work_dir is None:
        where = previous.checkpoints or "the job's volume on the agents"
        raise UsageError(f"--fresh: the checkpoints of {job} are on the agents' storage ({where}), which "
                         f"marathon-tf cannot reach from here",
                         hint="remove them there (or give the job another volume host_path / logdir), "
                              "then deploy with --resume")
    deadline = time.monotonic() + wait
    while previous.group is not None:
        group = _group(client, job)
        if group is None or not any(app.tasks for app in job_apps(group).values()):
            break
        if time.monotonic() >= deadline:
            raise UsageError(f"--fresh: tasks of {job} are still stopping after {wait:g} s; nothing was removed",
                             hint="try again in a moment")
        sleep(0.5)
    return localstate.purge_volumes(previous.work_dir, job)


def purge_deleted(client: Client, job: str, work_dir: Path, deployment_id: str | None, *, wait: float = 60.0,
                  sleep: Callable[[float], None] = time.sleep) -> Path | None:
    """After ``DELETE`` of a local job's group: once its deployment is done (every task stopped),
    remove the job's volumes; the folder removed, or None when there was none."""
    deadline = time.monotonic() + wait
    while deployment_id and any(Deployment.parse(d).id == deployment_id for d in client.deployments()):
        if time.monotonic() >= deadline:
            raise UsageError(f"--purge: {job} was deleted, but its tasks are still stopping after {wait:g} s; "
                             f"its volumes were kept", hint=f"remove {localstate.volumes_dir(work_dir, job)} later")
        sleep(0.25)
    return localstate.purge_volumes(work_dir, job)
