"""What the Python API returns: typed, immutable views of the same data as ``-o json``.

Every object keeps the dictionary the CLI prints with ``-o json`` (``to_dict()``), and names the
fields a program reads most as attributes: ``status.state``, ``status.tasks[0].step``. Marathon adds
fields between versions; what is not named here is still in ``to_dict()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from marathon_tf.contract.errors import JobFailed, MarathonTFError, NotPlaced
from marathon_tf.contract.labels import RECORDED, JobState

__all__ = ["TaskStatus", "JobStatus", "JobSummary", "Deployment", "ScaleResult", "Checkpoint", "LogLine",
           "LocalRunResult"]

_STATES = {s.value for s in JobState}


@dataclass(frozen=True)
class TaskStatus:
    """One task of a job (a row of ``marathon-tf status``)."""

    task: str
    role: str
    index: int
    state: str | None = None
    address: str | None = None
    health: str | None = None
    phase: str | None = None
    step: int | None = None
    restarts: int | None = None
    last_failure: str | None = None
    data: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> TaskStatus:
        return cls(task=row["task"], role=row.get("role", ""), index=row.get("index", 0), state=row.get("state"),
                   address=row.get("address"), health=row.get("health"), phase=row.get("phase"),
                   step=row.get("step"), restarts=row.get("restarts"), last_failure=row.get("lastFailure"),
                   data=dict(row))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)


@dataclass(frozen=True)
class JobStatus:
    """A job's state (``marathon-tf status -o json``): ``Starting``, ``Deploying``, ``Running``,
    ``Stopped``, ``Queued`` (released at its admission deadline; its next attempt is due at
    ``admission["nextAttemptAt"]``), or its recorded end ``Succeeded`` / ``Failed`` / ``NotPlaced``
    with ``reason``. ``admission``: for a starting job, per role how many tasks are placed and why
    the rest wait, and its deadline (see :mod:`marathon_tf.user.gang`). ``elastic``: an elastic job's size
    (``size``, ``min``, ``max``, ``members``, ``standbys`` and why they wait, its changes; docs/elastic.md)."""

    job: str
    #: A :class:`~marathon_tf.contract.labels.JobState` (a ``str``: ``status.state == "Running"``).
    state: str
    tasks: tuple[TaskStatus, ...] = ()
    step: int | None = None
    target_step: int | None = None
    final_step: int | None = None
    reason: str | None = None
    logdir: str | None = None
    #: Where the logdir is on this machine (local jobs), or on the agents (an absolute volume path).
    logdir_path: str | None = None
    admission: dict[str, Any] | None = field(default=None, compare=False)
    elastic: dict[str, Any] | None = field(default=None, compare=False)
    #: A planned restart under way (``scale``, a re-deploy): ``why``, ``change``, ``tasks``, ``text``
    #: (``Restarting for scale (2 → 3 workers)``); None otherwise.
    restarting: dict[str, Any] | None = field(default=None, compare=False)
    data: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, status: dict[str, Any]) -> JobStatus:
        state = status.get("state", "")
        return cls(job=status["job"], state=JobState(state) if state in _STATES else state,
                   tasks=tuple(TaskStatus.from_dict(t) for t in status.get("tasks") or []),
                   step=status.get("step"), target_step=status.get("targetStep"), final_step=status.get("finalStep"),
                   reason=status.get("reason"), logdir=status.get("logdir"), logdir_path=status.get("logdirPath"),
                   admission=status.get("admission"), restarting=status.get("restarting"),
                   elastic=status.get("elastic"), data=dict(status))

    @property
    def ended(self) -> bool:
        """Whether its record says how it ended (Succeeded, Failed, NotPlaced)."""
        return self.state in RECORDED

    @property
    def succeeded(self) -> bool:
        return self.state == JobState.SUCCEEDED

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)

    def updated(self, **fields: Any) -> JobStatus:
        """The same status with more (or other) fields."""
        return JobStatus.from_dict({"job": self.job, "state": self.state, **self.data, **fields})

    def error(self) -> MarathonTFError | None:
        """The error a job that ended so is (exit code on its class): :class:`JobFailed` (Failed),
        :class:`NotPlaced`; None for any other state. It carries this status (``status``)."""
        reason = f": {self.reason}" if self.reason else ""
        if self.state == JobState.FAILED:
            return JobFailed(f"job {self.job} failed{reason}", status=self)
        if self.state == JobState.NOT_PLACED:
            return NotPlaced(f"job {self.job} was not placed{reason}", status=self)
        return None


@dataclass(frozen=True)
class JobSummary:
    """A row of ``marathon-tf list``."""

    job: str
    tasks: int
    running: int
    state: str

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "tasks": self.tasks, "running": self.running, "state": self.state}


@dataclass(frozen=True)
class Deployment:
    """What ``deploy`` did (``marathon-tf deploy -o json``). ``changed`` is False when the job was
    already running exactly so (nothing was sent); ``plan`` is Marathon's plan of a dry run;
    ``resumed`` tells, for a job that had ended, whether it resumes (True) or started afresh (False)."""

    job: str
    group_id: str
    deployment_id: str | None = None
    version: str | None = None
    changed: bool = True
    plan: dict[str, Any] | None = None
    resumed: bool | None = None
    marathon_url: str = ""
    mesos_dns: str = ""  # the local runner's (deploy --local)
    #: What became of an earlier run's checkpoints, said loudly (``resumes from …``, ``removed …``).
    note: str | None = None
    #: What the capacity check said: the job does not fit what is free now (it waits).
    admission: str | None = None
    #: Why the capacity was not checked (the Mesos master cannot be read); not in :meth:`to_dict`.
    admission_note: str | None = None
    #: A running job deployed with a changed file: the tasks that start, stop, restart and stay (as
    #: ``scale`` lists them); None for a new job, an ended one, or one whose deployed file is unreadable.
    tasks: dict[str, list[str]] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"job": self.job, "groupId": self.group_id, "changed": self.changed}
        if self.tasks is not None:
            out["tasks"] = self.tasks
        if self.plan is not None:
            out["plan"] = self.plan
        elif self.changed:
            out.update(deploymentId=self.deployment_id, version=self.version)
        if self.resumed is not None:
            out.update(resumed=self.resumed, note=self.note)
        if self.admission:
            out["admission"] = self.admission
        return out


@dataclass(frozen=True)
class ScaleResult:
    """What ``scale`` did (``marathon-tf scale -o json``): the tasks that start, stop, restart and stay."""

    job: str
    changed: bool
    start: tuple[str, ...] = ()
    stop: tuple[str, ...] = ()
    restart: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    deployment_id: str | None = None
    plan: dict[str, Any] | None = None
    group_id: str | None = None
    version: str | None = None
    #: What the capacity check said of the tasks that start: they do not fit what is free now.
    admission: str | None = None
    #: Why the capacity was not checked (the Mesos master cannot be read); not in :meth:`to_dict`.
    admission_note: str | None = None
    #: The checkpoint the job saved before the change (``{"task", "step", "path", "seconds"}``), or None.
    saved: dict[str, Any] | None = None
    #: Why no checkpoint was saved first (its program has no save hook, …): it resumes from its last one.
    save_note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"job": self.job, "changed": self.changed,
                               "tasks": {"start": list(self.start), "stop": list(self.stop),
                                         "restart": list(self.restart), "unchanged": list(self.unchanged)}}
        if self.group_id is not None:
            out["groupId"] = self.group_id
        if self.plan is not None:
            out["plan"] = self.plan
        elif self.changed:
            out.update(deploymentId=self.deployment_id, version=self.version)
        if self.admission:
            out["admission"] = self.admission
        if self.saved:
            out["saved"] = self.saved
        if self.save_note:
            out["saveNote"] = self.save_note
        return out


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint a job saved when asked (``marathon-tf checkpoint -o json``, ``JobHandle.checkpoint()``):
    its global ``step`` and ``path`` (under the task's sandbox: the job's logdir first, e.g.
    ``ckpt/model.ckpt-3012``), the ``task`` whose program saved it, how long the round took
    (``seconds``); ``logdir_path``: where the logdir is on this machine (a local job) or on the agents."""

    job: str
    task: str
    step: int | None
    path: str | None
    seconds: float = 0.0
    logdir_path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"job": self.job, "task": self.task, "step": self.step, "path": self.path,
                               "seconds": self.seconds}
        if self.logdir_path:
            out["logdirPath"] = self.logdir_path
        return out


class LogLine(NamedTuple):
    """One line of a task's output: ``task`` (``worker-1``), ``stream`` (``stdout``/``stderr``), ``text``."""

    task: str
    stream: str
    text: str


@dataclass(frozen=True)
class LocalRunResult:
    """A job run to its end on this machine (``marathon-tf deploy --local -o json``)."""

    job: str
    state: str
    seconds: float
    state_dir: str
    status: JobStatus
    logdir_path: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.state == JobState.SUCCEEDED

    def error(self) -> MarathonTFError | None:
        """The error the run's end is (:meth:`JobStatus.error`), or None when it succeeded."""
        return self.status.error()

    def to_dict(self) -> dict[str, Any]:
        out = {"job": self.job, "state": self.state, "seconds": round(self.seconds, 3), "stateDir": self.state_dir,
               "status": self.status.to_dict()}
        if self.logdir_path:
            out["logdirPath"] = self.logdir_path
        return out
