"""The job spec's model: immutable dataclasses (:class:`JobSpec` and its parts), the allowed
values and the defaults. What :mod:`marathon_tf.user.spec.schema` builds from a valid job file,
and what rendering and the verbs read. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from marathon_tf.contract import naming

__all__ = ["JobSpec", "Role", "Discovery", "Restart", "Admission", "Volume", "Fetch", "STYLES", "SPEC_STYLES",
           "COMPLETIONS", "DISCOVERY_MODES", "CONSTRAINT_OPERATORS", "MAX_COUNT", "DEFAULT_PREWARM", "ELASTIC_ROLES",
           "ELASTIC_STYLES", "ELASTIC_LIMITS"]

STYLES = ("tf1", "parameter_server", "multi_worker_mirrored", "custom")
SPEC_STYLES = ("tf_config", "flags", "both")
COMPLETIONS = ("chief", "worker0", "all_workers")
DISCOVERY_MODES = ("mesos-dns", "mesos-dns-http", "marathon")
CONSTRAINT_OPERATORS = ("UNIQUE", "CLUSTER", "GROUP_BY", "LIKE", "UNLIKE", "MAX_PER", "IS")
MAX_COUNT = 10_000

#: How each style's program is told the cluster unless ``cluster_spec`` says otherwise: ``custom`` gets
#: TF_CONFIG only (docs/job-file.md), as flags appended to a program we know nothing about break it
#: (``["sleep", "60"]`` -> ``sleep: unrecognized option '--ps_hosts=...'``); ``tf1`` programs read flags.
_DEFAULT_SPEC_STYLE = {"tf1": "flags", "parameter_server": "tf_config",
                       "multi_worker_mirrored": "tf_config", "custom": "tf_config"}
_DEFAULT_COMPLETION = {"tf1": "all_workers", "parameter_server": "chief",
                       "multi_worker_mirrored": "all_workers", "custom": "worker0"}
_ROLE_DEFAULTS = {
    "chief": {"cpus": 1.0, "mem": 2048.0},
    "ps": {"cpus": 1.0, "mem": 1024.0},
    "worker": {"cpus": 1.0, "mem": 2048.0},
    "evaluator": {"cpus": 1.0, "mem": 2048.0},
    "tensorboard": {"cpus": 0.5, "mem": 512.0},
}
DEFAULT_PREWARM = ("tensorflow",)

#: The roles whose count may be elastic (``{"min": m, "max": n}``; docs/elastic.md).
ELASTIC_ROLES = ("worker",)
#: The styles whose programs marathon-tf knows how to grow and shrink.
ELASTIC_STYLES = ("tf1", "parameter_server", "multi_worker_mirrored")
#: What an elastic worker count does in each style, one line each (``validate`` says it; docs/elastic.md).
ELASTIC_LIMITS = {
    "tf1": "workers join and leave without stopping the others (the program passes its cluster in its session "
           "config: ClusterSpec propagation); worker-0 is the chief and never a standby",
    "parameter_server": "a lost worker is left behind without a restart (the coordinator trains on); a newcomer "
                        "is taken in by restarting the coordinator from a save at the new size",
    "multi_worker_mirrored": "every size change restarts the group from a save (from the last checkpoint when a "
                             "worker was lost); worker-0 is the chief and never a standby",
}


@dataclass(frozen=True)
class Role:
    name: str
    count: int
    cpus: float
    mem: float
    disk: float = 0.0
    gpus: int = 0
    image: str | None = None
    command: tuple[str, ...] | str | None = None
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: the role's own rules (None: the job's); UNIQUE, MAX_PER, GROUP_BY and CLUSTER without a value
    #: hold across the role's tasks (:mod:`marathon_tf.contract.spread`)
    constraints: tuple[tuple[str, ...], ...] | None = None
    #: copied into each of the role's apps as it is (None: the job's): Marathon's per-app meaning
    constraints_per_task: tuple[tuple[str, ...], ...] | None = None
    #: an elastic count's minimum (``{"min": m, "max": n}``: ``count`` is the maximum, one app each); None: fixed
    min_count: int | None = None

    @property
    def elastic(self) -> bool:
        return self.min_count is not None

    @property
    def count_text(self) -> str:
        """``2`` or ``2..4``."""
        return f"{self.min_count}..{self.count}" if self.min_count is not None else str(self.count)


@dataclass(frozen=True)
class Volume:
    host_path: str
    container_path: str
    mode: str = "RW"


@dataclass(frozen=True)
class Fetch:
    uri: str
    extract: bool = True
    executable: bool = False
    cache: bool = False
    dest_path: str | None = None
    #: Given as a path of the job file's machine (``train.py``, ``/home/me/x``), not as a URI.
    client_path: bool = False


@dataclass(frozen=True)
class Discovery:
    mode: str = "mesos-dns"
    domain: str = "mesos"
    framework: str = "marathon"
    nameserver: str = ""
    http_api: str = ""
    marathon_url: str = "http://marathon.mesos:8080"
    startup_timeout: float = 600.0


@dataclass(frozen=True)
class Restart:
    max_failures: int = 5
    window_seconds: float = 600.0
    permanent_exit_codes: tuple[int, ...] = ()
    backoff_seconds: float = 1.0
    backoff_factor: float = 1.15
    max_launch_delay_seconds: float = 300.0
    # watchdog: no new step for this long = failed (None: adaptive, 0: off)
    progress_timeout_seconds: float | None = None
    # watchdog: no first step this long after start (None: adaptive, 0: off)
    first_step_timeout_seconds: float | None = None
    #: preemptions (a task stopped from outside, or a program exiting with a preemption code) within
    #: :data:`PREEMPTION_WINDOW` seconds before the job fails; never counted against ``max_failures``
    max_preemptions: int = 100
    preemption_exit_codes: tuple[int, ...] = (42, 143)
    #: every app's ``taskKillGracePeriodSeconds``: SIGTERM, this long to save, then SIGKILL
    grace_seconds: float = 30.0


@dataclass(frozen=True)
class Admission:
    """The all-or-nothing start (issue 20): every task placed within ``timeout`` seconds of the
    submission, else the job is released (every app at 0 instances, recorded ``NotPlaced``) and,
    ``retries`` times, submitted again after a jittered backoff of about ``backoff_seconds`` (doubling)."""

    timeout: float = 600.0
    retries: int = 0
    backoff_seconds: float = 60.0


@dataclass(frozen=True)
class JobSpec:
    """A validated job. ``roles`` always holds all five roles (absent ones with count 0)."""

    name: str
    command: tuple[str, ...] | str | None
    roles: Mapping[str, Role]
    style: str = "custom"
    cluster_spec: str = "tf_config"
    completion: str = "worker0"
    image: str | None = None
    containerizer: str = "mesos"
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: job-wide rules: UNIQUE, MAX_PER, GROUP_BY and CLUSTER without a value hold across the tasks of
    #: every role without constraints of its own (:mod:`marathon_tf.contract.spread`); others per task
    constraints: tuple[tuple[str, ...], ...] = ()
    #: copied into every app as it is (Marathon's own meaning: among one app's instances)
    constraints_per_task: tuple[tuple[str, ...], ...] = ()
    volumes: tuple[Volume, ...] = ()
    fetch: tuple[Fetch, ...] = ()
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    logdir: str = ""
    discovery: Discovery = Discovery()
    restart: Restart = Restart()
    admission: Admission = Admission()
    network: str = "host"
    network_name: str | None = None
    bootstrap: str = "marathon-tf bootstrap"
    prewarm: tuple[str, ...] = DEFAULT_PREWARM  # () = off
    source: str = "job.json"
    #: ``progress.target_step``: the step at which training is done (for status' ETA), if known.
    target_step: int | None = None

    # -- queries ---------------------------------------------------------------
    def role(self, name: str) -> Role:
        return self.roles[name]

    def counts(self) -> dict[str, int]:
        return {r: self.roles[r].count for r in naming.ROLES if self.roles[r].count}

    def cluster_counts(self) -> dict[str, int]:
        """Counts of the TF cluster members (chief, ps, worker)."""
        return {r: self.roles[r].count for r in naming.CLUSTER_ROLES if self.roles[r].count}

    def elastic(self) -> dict[str, tuple[int, int]]:
        """The roles with an elastic count: ``{"worker": (min, max)}`` ({} for a fixed-size job)."""
        return {r: (int(m), self.roles[r].count) for r in naming.ROLES
                if (m := self.roles[r].min_count) is not None and self.roles[r].count}

    def tasks(self) -> list[tuple[str, int]]:
        """Every (role, index) of the job, in render order."""
        return [(r, i) for r in naming.ROLES for i in range(self.roles[r].count)]

    def required_tasks(self) -> list[tuple[str, int]]:
        """The tasks the job cannot start without (admission's all-or-nothing unit): every task, but only
        the first ``min`` of an elastic role (the others are standbys that hold nothing until placed)."""
        return [(r, i) for r in naming.ROLES for i in range(_required(self.roles[r]))]

    def to_dict(self) -> dict[str, Any]:
        """The normalized job as job.json (loadable by :func:`load_dict`)."""
        out: dict[str, Any] = {
            "name": self.name,
            "style": self.style,
            "cluster_spec": self.cluster_spec,
            "completion": self.completion,
            "containerizer": self.containerizer,
            "env": dict(self.env),
            "labels": dict(self.labels),
            "logdir": self.logdir,
            "bootstrap": self.bootstrap,
            "constraints": [list(c) for c in self.constraints],
            "volumes": [{"host_path": v.host_path, "container_path": v.container_path, "mode": v.mode}
                        for v in self.volumes],
            "fetch": [_drop_none({"uri": f.uri, "extract": f.extract, "executable": f.executable,
                                  "cache": f.cache, "dest_path": f.dest_path}) for f in self.fetch],
            "discovery": dict(self.discovery.__dict__),
            "restart": {**_drop_none(self.restart.__dict__),
                        "permanent_exit_codes": list(self.restart.permanent_exit_codes),
                        "preemption_exit_codes": list(self.restart.preemption_exit_codes)},
            "network": _drop_none({"mode": self.network, "name": self.network_name}),
            "roles": {},
        }
        if self.constraints_per_task:
            out["constraints_per_task"] = [list(c) for c in self.constraints_per_task]
        if self.image:
            out["image"] = self.image
        if self.target_step is not None:
            out["progress"] = {"target_step": self.target_step}
        if self.admission != Admission():
            out["admission"] = dict(self.admission.__dict__)
        if self.prewarm != DEFAULT_PREWARM:
            out["prewarm"] = list(self.prewarm) or False
        if self.command is not None:
            out["command"] = list(self.command) if isinstance(self.command, tuple) else self.command
        for r in naming.ROLES:
            role = self.roles[r]
            if not role.count:
                continue
            count: Any = {"min": role.min_count, "max": role.count} if role.min_count is not None else role.count
            rd: dict[str, Any] = {"count": count, "cpus": role.cpus, "mem": role.mem,
                                  "disk": role.disk, "gpus": role.gpus}
            if role.image:
                rd["image"] = role.image
            if role.command is not None:
                rd["command"] = list(role.command) if isinstance(role.command, tuple) else role.command
            if role.env:
                rd["env"] = dict(role.env)
            if role.constraints is not None:
                rd["constraints"] = [list(c) for c in role.constraints]
            if role.constraints_per_task is not None:
                rd["constraints_per_task"] = [list(c) for c in role.constraints_per_task]
            out["roles"][r] = rd
        return out

    # -- changes (new counts, validated like a fresh job.json: spec.load.with_counts) -----------------
    def with_overrides(self, **changes: Any) -> JobSpec:
        return replace(self, **changes)


def _drop_none(d: dict) -> dict:
    return {k: v for k, v in d.items() if v is not None}


def _required(role: Role) -> int:
    """How many of ``role``'s tasks the job cannot start without: its ``min`` when elastic, else all."""
    return role.count if role.min_count is None else role.min_count
