"""The contract between the rendered Marathon app and the in-container bootstrap.

``render`` writes a :class:`TaskContext` into every app's ``env`` with
:meth:`TaskContext.to_env`; the bootstrap reads it back with
:meth:`TaskContext.from_env`. Nothing else should spell these variable names.

Variables (all strings, as Marathon requires):

=========================  ==============================================================
``MTF_JOB``                job name, e.g. ``ml/mnist`` (Marathon group ``/ml/mnist``)
``MTF_ROLE``               ``chief`` | ``ps`` | ``worker`` | ``evaluator`` | ``tensorboard``
``MTF_INDEX``              the task's index within its role
``MTF_CLUSTER``            JSON ``{"chief": 1, "ps": 2, "worker": 4}``: the cluster-member counts
``MTF_DISCOVERY``          ``mesos-dns`` (SRV records) | ``mesos-dns-http`` (its ``/v1/services`` API)
                           | ``marathon`` (Marathon's tasks API)
``MESOS_DNS``              Mesos-DNS nameserver ``ip[:port]`` (empty: the system resolver)
``MTF_MESOS_DNS_HTTP``     Mesos-DNS HTTP API base URL, e.g. ``http://10.0.0.1:8123``
``MTF_DNS_DOMAIN``         Mesos-DNS domain (default ``mesos``)
``MTF_DNS_FRAMEWORK``      framework name in DNS names (default ``marathon``)
``MTF_MARATHON_URL``       Marathon base URL(s), comma-separated, for ``marathon`` discovery
                           and for stopping a finished job (credentials never go here:
                           the bootstrap reads ``MARATHON_USER``/``MARATHON_PASSWORD``/
                           ``MARATHON_TOKEN`` from its environment, e.g. Marathon secrets)
``MTF_SPEC_STYLE``         ``tf_config`` | ``flags`` | ``both``
``MTF_PORT_NAME``          name of the TF server port (``tf``: Marathon sets ``PORT_TF``)
``MTF_STATUS_PORT_NAME``   name of the bootstrap's status port (``status``: ``PORT_STATUS``)
``MTF_NETWORK``            ``host`` | ``container``
``MTF_STARTUP_TIMEOUT``    seconds to wait for every peer before failing
``MTF_STYLE``              ``tf1`` | ``parameter_server`` | ``multi_worker_mirrored`` | ``custom``
``MTF_COMPLETION``         ``chief`` | ``worker0`` | ``all_workers``: whose exit 0 ends the job
``MTF_RESTART_BUDGET``     ``N/SECONDS``: the job fails after N failures within SECONDS
``MTF_PERMANENT_EXIT_CODES``  comma-separated trainer exit codes that are not retried
``MTF_PREEMPTION_BUDGET``  ``N/SECONDS``: the job fails after N preemptions within SECONDS (unset: 100/86400)
``MTF_PREEMPTION_EXIT_CODES``  comma-separated trainer exit codes that mean "preempted" (unset: ``42,143``)
``MTF_GRACE_SECONDS``      the app's ``taskKillGracePeriodSeconds``: how long a stopped task has to
                           save before SIGKILL (unset: 30)
``MTF_LOGDIR``             the job's log / checkpoint directory as the task sees it (may be empty)
``MTF_PROGRESS_TIMEOUT``   ``SECONDS[/FIRST_STEP_SECONDS]``: the progress watchdog; each part empty:
                           adaptive (unset: both adaptive, the default), ``0``: off
``MTF_TARGET_STEP``        the job's ``progress.target_step`` (the metrics' progress and ETA)
``MTF_PREWARM``            comma-separated modules a pre-warmed Python trainer imports before the
                           cluster spec is known, or ``false``; unset: ``tensorflow``
``MTF_GPUS``               the GPUs the app asks for (the app's ``gpus``; unset: none): the
                           bootstrap checks at start that the task can see that many
``MTF_ADMISSION``          ``TIMEOUT/RETRIES/BACKOFF``: the job's admission (``admission.timeout``,
                           ``.retries``, ``.backoff_seconds``); unset: ``600/0/60``. A task placed
                           while its peers wait releases the job when the deadline passes
                           (:mod:`marathon_tf.task.admission`)
=========================  ==============================================================

A runner that is its own Marathon + Mesos-DNS (``marathon-tf local serve`` / ``deploy --local``)
adds ``MTF_RUNNER_MESOS_DNS``, ``MTF_RUNNER_MESOS_DNS_HTTP`` and ``MTF_RUNNER_MARATHON_URL`` to
every task's environment; they win over ``MESOS_DNS``, ``MTF_MESOS_DNS_HTTP`` and
``MTF_MARATHON_URL``, so the same rendered app runs on a cluster and on one machine. A runner
that shares pre-warmed interpreters between its tasks gives each Python task the socket of one in
``MTF_PREWARM_SOCKET`` (:data:`PREWARM_SOCKET_VAR`). (A job file cannot set ``MTF_*`` variables, so
only the runner can.)

Credentials: the bootstrap authenticates to Marathon with ``MARATHON_TOKEN``, else the token in the
file ``MARATHON_TOKEN_FILE`` names (:data:`TOKEN_FILE_VAR`, :func:`marathon_token`), else
``MARATHON_USER``/``MARATHON_PASSWORD``. The local runner with ``--auth`` hands each task a token of
its own in such a file (never in the environment, where ``env`` would print it into the logs); on a
cluster, a file-based secret (DC/OS Enterprise) can be named the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping

__all__ = ["TaskContext", "ENV_PREFIX", "PREWARM_SOCKET_VAR", "TOKEN_FILE_VAR", "marathon_token"]

ENV_PREFIX = "MTF_"
#: Names a file that holds the Marathon token a task authenticates with.
TOKEN_FILE_VAR = "MARATHON_TOKEN_FILE"


def marathon_token(environ: Mapping[str, str]) -> str | None:
    """The Marathon token of a task: ``MARATHON_TOKEN``, else the (stripped) content of the file
    ``MARATHON_TOKEN_FILE`` names (relative: to ``MESOS_SANDBOX``); None when neither gives one."""
    if environ.get("MARATHON_TOKEN"):
        return environ["MARATHON_TOKEN"]
    path = environ.get(TOKEN_FILE_VAR)
    if not path:
        return None
    import os

    try:
        with open(os.path.join(environ.get("MESOS_SANDBOX") or "", path)) as f:
            return f.read().strip() or None
    except OSError:
        return None
#: A shared fork server's socket, set by a local runner that pre-warms interpreters for its tasks.
PREWARM_SOCKET_VAR = "MTF_PREWARM_SOCKET"

_DEFAULTS = {
    "discovery": "mesos-dns",
    "dns_domain": "mesos",
    "dns_framework": "marathon",
    "spec_style": "both",
    "port_name": "tf",
    "status_port_name": "status",
    "network": "host",
    "startup_timeout": 600.0,
    "style": "custom",
    "completion": "worker0",
    "prewarm": ("tensorflow",),
    "preemption_budget": (100, 86400.0),
    "preemption_exit_codes": (42, 143),
    "grace_seconds": 30.0,
    "admission": (600.0, 0, 60.0),
}


@dataclass(frozen=True)
class TaskContext:
    job: str
    role: str
    index: int
    cluster: Mapping[str, int]
    discovery: str = _DEFAULTS["discovery"]
    mesos_dns: str = ""
    mesos_dns_http: str = ""
    dns_domain: str = _DEFAULTS["dns_domain"]
    dns_framework: str = _DEFAULTS["dns_framework"]
    marathon_url: str = ""
    spec_style: str = _DEFAULTS["spec_style"]
    port_name: str = _DEFAULTS["port_name"]
    status_port_name: str = _DEFAULTS["status_port_name"]
    network: str = _DEFAULTS["network"]
    startup_timeout: float = _DEFAULTS["startup_timeout"]
    style: str = _DEFAULTS["style"]
    completion: str = _DEFAULTS["completion"]
    restart_budget: tuple[int, float] = (5, 600.0)
    #: (no new step for, no first step within) seconds; None = adaptive (the default), 0 = off
    progress_timeouts: tuple[float | None, float | None] = (None, None)
    target_step: int | None = None
    permanent_exit_codes: tuple[int, ...] = field(default_factory=tuple)
    logdir: str = ""
    prewarm: tuple[str, ...] = _DEFAULTS["prewarm"]
    gpus: int = 0
    #: (N, SECONDS): the job fails after N preemptions within SECONDS (never counted as failures)
    preemption_budget: tuple[int, float] = _DEFAULTS["preemption_budget"]
    preemption_exit_codes: tuple[int, ...] = _DEFAULTS["preemption_exit_codes"]
    grace_seconds: float = _DEFAULTS["grace_seconds"]
    #: (timeout seconds, retries, backoff seconds): the job's admission (see :mod:`marathon_tf.task.admission`)
    admission: tuple[float, int, float] = _DEFAULTS["admission"]

    def to_env(self) -> dict[str, str]:
        env = {
            "MTF_JOB": self.job,
            "MTF_ROLE": self.role,
            "MTF_INDEX": str(self.index),
            "MTF_CLUSTER": json.dumps(dict(self.cluster), sort_keys=True, separators=(",", ":")),
            "MTF_DISCOVERY": self.discovery,
            "MTF_DNS_DOMAIN": self.dns_domain,
            "MTF_DNS_FRAMEWORK": self.dns_framework,
            "MTF_SPEC_STYLE": self.spec_style,
            "MTF_PORT_NAME": self.port_name,
            "MTF_STATUS_PORT_NAME": self.status_port_name,
            "MTF_NETWORK": self.network,
            "MTF_STARTUP_TIMEOUT": _num(self.startup_timeout),
            "MTF_STYLE": self.style,
            "MTF_COMPLETION": self.completion,
            "MTF_RESTART_BUDGET": f"{self.restart_budget[0]}/{_num(self.restart_budget[1])}",
        }
        if self.mesos_dns:
            env["MESOS_DNS"] = self.mesos_dns
        if self.mesos_dns_http:
            env["MTF_MESOS_DNS_HTTP"] = self.mesos_dns_http
        if self.marathon_url:
            env["MTF_MARATHON_URL"] = self.marathon_url
        if self.permanent_exit_codes:
            env["MTF_PERMANENT_EXIT_CODES"] = ",".join(str(c) for c in self.permanent_exit_codes)
        if self.logdir:
            env["MTF_LOGDIR"] = self.logdir
        if any(t is not None for t in self.progress_timeouts):
            env["MTF_PROGRESS_TIMEOUT"] = "/".join("" if t is None else _num(t) for t in self.progress_timeouts)
        if self.target_step:
            env["MTF_TARGET_STEP"] = str(int(self.target_step))
        if tuple(self.prewarm) != _DEFAULTS["prewarm"]:
            env["MTF_PREWARM"] = ",".join(self.prewarm) or "false"
        if self.gpus:
            env["MTF_GPUS"] = str(self.gpus)
        if tuple(self.preemption_budget) != _DEFAULTS["preemption_budget"]:
            env["MTF_PREEMPTION_BUDGET"] = f"{self.preemption_budget[0]}/{_num(self.preemption_budget[1])}"
        if tuple(self.preemption_exit_codes) != _DEFAULTS["preemption_exit_codes"]:
            env["MTF_PREEMPTION_EXIT_CODES"] = ",".join(str(c) for c in self.preemption_exit_codes) or "none"
        if float(self.grace_seconds) != _DEFAULTS["grace_seconds"]:
            env["MTF_GRACE_SECONDS"] = _num(self.grace_seconds)
        if tuple(self.admission) != _DEFAULTS["admission"]:
            timeout, retries, backoff = self.admission
            env["MTF_ADMISSION"] = f"{_num(timeout)}/{int(retries)}/{_num(backoff)}"
        return env

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> "TaskContext":
        """Read the context back; raises ValueError naming the variable that is wrong."""

        def need(name: str) -> str:
            value = environ.get(name, "")
            if not value:
                raise ValueError(f"{name} is not set (is this task rendered by marathon-tf?)")
            return value

        raw_cluster = need("MTF_CLUSTER")
        try:
            cluster = json.loads(raw_cluster)
            if not isinstance(cluster, dict):
                raise ValueError
            cluster = {str(k): int(v) for k, v in cluster.items()}
        except (ValueError, TypeError):
            raise ValueError("MTF_CLUSTER must be a JSON object of role counts, e.g. {\"ps\":1,\"worker\":2}")
        raw_index = need("MTF_INDEX")
        try:
            index = int(raw_index)
        except ValueError:
            raise ValueError("MTF_INDEX must be an integer")
        budget = environ.get("MTF_RESTART_BUDGET", "5/600")
        try:
            n, _, window = budget.partition("/")
            restart_budget = (int(n), float(window or 600))
        except ValueError:
            raise ValueError("MTF_RESTART_BUDGET must look like N/SECONDS, e.g. 5/600")
        codes = environ.get("MTF_PERMANENT_EXIT_CODES", "")
        try:
            permanent = tuple(int(c) for c in codes.split(",") if c.strip())
        except ValueError:
            raise ValueError("MTF_PERMANENT_EXIT_CODES must be comma-separated integers")
        raw = environ.get("MTF_PREEMPTION_BUDGET", "")
        try:
            n, _, window = raw.partition("/")
            preemption_budget = (int(n), float(window or 86400)) if raw else _DEFAULTS["preemption_budget"]
        except ValueError:
            raise ValueError("MTF_PREEMPTION_BUDGET must look like N/SECONDS, e.g. 100/86400")
        raw = environ.get("MTF_PREEMPTION_EXIT_CODES")
        try:
            preemption_codes = _DEFAULTS["preemption_exit_codes"] if raw is None else tuple(
                int(c) for c in raw.split(",") if c.strip() and c.strip() != "none")
        except ValueError:
            raise ValueError("MTF_PREEMPTION_EXIT_CODES must be comma-separated integers")
        try:
            grace = float(environ.get("MTF_GRACE_SECONDS") or _DEFAULTS["grace_seconds"])
        except ValueError:
            raise ValueError("MTF_GRACE_SECONDS must be a number of seconds")
        try:
            timeout = float(environ.get("MTF_STARTUP_TIMEOUT") or _DEFAULTS["startup_timeout"])
        except ValueError:
            raise ValueError("MTF_STARTUP_TIMEOUT must be a number of seconds")
        try:
            progress = environ.get("MTF_PROGRESS_TIMEOUT", "").split("/")
            progress_timeouts = (float(progress[0]) if progress[0] else None,
                                 float(progress[1]) if len(progress) > 1 and progress[1] else None)
        except ValueError:
            raise ValueError("MTF_PROGRESS_TIMEOUT must look like SECONDS[/FIRST_STEP_SECONDS], e.g. 120/600")
        try:
            gpus = int(environ.get("MTF_GPUS") or 0)
        except ValueError:
            raise ValueError("MTF_GPUS must be a whole number of GPUs")
        try:
            target_step = int(environ["MTF_TARGET_STEP"]) if environ.get("MTF_TARGET_STEP") else None
        except ValueError:
            raise ValueError("MTF_TARGET_STEP must be an integer")
        admission = _DEFAULTS["admission"]
        if environ.get("MTF_ADMISSION"):
            try:
                a_timeout, a_retries, a_backoff = environ["MTF_ADMISSION"].split("/")
                admission = (float(a_timeout), int(a_retries), float(a_backoff))
            except ValueError:
                raise ValueError("MTF_ADMISSION must look like TIMEOUT/RETRIES/BACKOFF, e.g. 600/3/60")
        return cls(
            job=need("MTF_JOB"),
            role=need("MTF_ROLE"),
            index=index,
            cluster=cluster,
            discovery=environ.get("MTF_DISCOVERY") or _DEFAULTS["discovery"],
            mesos_dns=environ.get("MTF_RUNNER_MESOS_DNS") or environ.get("MESOS_DNS", ""),
            mesos_dns_http=environ.get("MTF_RUNNER_MESOS_DNS_HTTP") or environ.get("MTF_MESOS_DNS_HTTP", ""),
            dns_domain=environ.get("MTF_DNS_DOMAIN") or _DEFAULTS["dns_domain"],
            dns_framework=environ.get("MTF_DNS_FRAMEWORK") or _DEFAULTS["dns_framework"],
            marathon_url=environ.get("MTF_RUNNER_MARATHON_URL") or environ.get("MTF_MARATHON_URL", ""),
            spec_style=environ.get("MTF_SPEC_STYLE") or _DEFAULTS["spec_style"],
            port_name=environ.get("MTF_PORT_NAME") or _DEFAULTS["port_name"],
            status_port_name=environ.get("MTF_STATUS_PORT_NAME") or _DEFAULTS["status_port_name"],
            network=environ.get("MTF_NETWORK") or _DEFAULTS["network"],
            startup_timeout=timeout,
            style=environ.get("MTF_STYLE") or _DEFAULTS["style"],
            completion=environ.get("MTF_COMPLETION") or _DEFAULTS["completion"],
            restart_budget=restart_budget,
            permanent_exit_codes=permanent,
            logdir=environ.get("MTF_LOGDIR", ""),
            progress_timeouts=progress_timeouts,
            target_step=target_step,
            prewarm=prewarm_modules(environ.get("MTF_PREWARM")),
            gpus=gpus,
            preemption_budget=preemption_budget,
            preemption_exit_codes=preemption_codes,
            grace_seconds=grace,
            admission=admission,
        )

    @property
    def task(self) -> str:
        return f"{self.role}-{self.index}"

    def members(self) -> list[tuple[str, int]]:
        """Every (role, index) of the TF cluster, chief first, then ps, then workers."""
        out = []
        for role in ("chief", "ps", "worker"):
            out.extend((role, i) for i in range(int(self.cluster.get(role, 0))))
        return out


def prewarm_modules(raw: str | None) -> tuple[str, ...]:
    """``MTF_PREWARM`` -> the modules a pre-warmed trainer imports (unset: the default; false: none)."""
    if raw is None:
        return _DEFAULTS["prewarm"]
    if raw.strip().lower() in ("", "false", "0", "off", "no"):
        return ()
    return tuple(m.strip() for m in raw.split(",") if m.strip())


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)
