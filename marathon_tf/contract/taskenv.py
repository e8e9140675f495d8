"""The contract between the rendered Marathon app and the in-container bootstrap.

``render`` writes a :class:`TaskContext` into every app's ``env`` with
:meth:`TaskContext.to_env`; the bootstrap reads it back with
:meth:`TaskContext.from_env`. Nothing else should spell these variable names.

Both directions come from one table, :data:`VARS`: for every field of the context, its variable,
how its text is read and written (:class:`Kind`) and whether it is written when it has its default
value. A field the table does not name cannot be carried (a test holds the table to the dataclass).

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
``MTF_ELASTIC``            JSON ``{"worker": [2, 4]}``: the roles with an elastic count (min, max); their
                           apps (``max`` of them) are the job's candidates, the deciding task takes
                           them in as they are placed (docs/elastic.md); unset: none
``MTF_ADMISSION``          ``TIMEOUT/RETRIES/BACKOFF``: the job's admission (``admission.timeout``,
                           ``.retries``, ``.backoff_seconds``); unset: ``600/0/60``. A task placed
                           while its peers wait releases the job when the deadline passes
                           (:mod:`marathon_tf.task.admission`)
``MTF_PLACEMENT``          ``1``: the job has placement rules across its tasks (``UNIQUE`` …), which
                           its leader enforces through Marathon (:mod:`marathon_tf.task.placer`)
=========================  ==============================================================

The bootstrap adds one variable of its own to the *training program's* environment
(:data:`WORKERS_VAR`): ``MARATHON_TF_WORKERS``, the number of workers in the cluster spec the program
was started with (an elastic job's current size; a fixed job's worker count).

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
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from types import MappingProxyType
from typing import Any

__all__ = ["TaskContext", "ENV_PREFIX", "PREWARM_SOCKET_VAR", "FORKED_PID_FILE", "TOKEN_FILE_VAR", "WORKERS_VAR",
           "marathon_token", "secret", "Kind", "Var", "VARS", "prewarm_modules"]

ENV_PREFIX = "MTF_"
#: Names a file that holds the Marathon token a task authenticates with.
TOKEN_FILE_VAR = "MARATHON_TOKEN_FILE"
#: A shared fork server's socket, set by a local runner that pre-warms interpreters for its tasks.
PREWARM_SOCKET_VAR = "MTF_PREWARM_SOCKET"
#: The training program's environment: how many workers its cluster spec holds (set by the bootstrap).
WORKERS_VAR = "MARATHON_TF_WORKERS"
#: The file in a task's sandbox where a program forked by that shared server leaves its pid: it is the
#: server's child, not its bootstrap's, and the local runner's kill reaches it there as a real agent's
#: reaches a program its bootstrap started (``marathon_tf.local.proctree``).
FORKED_PID_FILE = ".marathon-tf-forked-pid"


def marathon_token(environ: Mapping[str, str]) -> str | None:
    """The Marathon token of a task: ``MARATHON_TOKEN``, else the (stripped) content of the file
    ``MARATHON_TOKEN_FILE`` names (relative: to ``MESOS_SANDBOX``); None when neither gives one."""
    return secret(environ, "MARATHON_TOKEN", TOKEN_FILE_VAR)


def secret(environ: Mapping[str, str], var: str, file_var: str) -> str | None:
    """A credential a task holds: the variable ``var`` (stripped), else the (stripped) content of the file
    ``file_var`` names (relative: to ``MESOS_SANDBOX``); None when neither gives one."""
    if (environ.get(var) or "").strip():
        return environ[var].strip()
    path = environ.get(file_var)
    if not path:
        return None
    import os

    try:
        with open(os.path.join(environ.get("MESOS_SANDBOX") or "", path)) as f:
            return f.read().strip() or None
    except OSError:
        return None


@dataclass(frozen=True)
class TaskContext:
    """What a task knows of its job (see the module for the variables that carry each field)."""

    job: str
    role: str
    index: int
    cluster: Mapping[str, int]
    discovery: str = "mesos-dns"
    mesos_dns: str = ""
    mesos_dns_http: str = ""
    dns_domain: str = "mesos"
    dns_framework: str = "marathon"
    marathon_url: str = ""
    spec_style: str = "both"
    port_name: str = "tf"
    status_port_name: str = "status"
    network: str = "host"
    startup_timeout: float = 600.0
    style: str = "custom"
    completion: str = "worker0"
    restart_budget: tuple[int, float] = (5, 600.0)
    #: (no new step for, no first step within) seconds; None = adaptive (the default), 0 = off
    progress_timeouts: tuple[float | None, float | None] = (None, None)
    target_step: int | None = None
    permanent_exit_codes: tuple[int, ...] = ()
    logdir: str = ""
    prewarm: tuple[str, ...] = ("tensorflow",)
    gpus: int = 0
    #: (N, SECONDS): the job fails after N preemptions within SECONDS (never counted as failures)
    preemption_budget: tuple[int, float] = (100, 86400.0)
    preemption_exit_codes: tuple[int, ...] = (42, 143)
    grace_seconds: float = 30.0
    #: (timeout seconds, retries, backoff seconds): the job's admission (see :mod:`marathon_tf.task.admission`)
    admission: tuple[float, int, float] = (600.0, 0, 60.0)
    #: the roles with an elastic count: ``{"worker": (min, max)}`` (docs/elastic.md); empty: a fixed-size job
    elastic: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    #: the job has placement rules across its tasks, which its leader enforces (:mod:`marathon_tf.task.placer`)
    placement: bool = False

    def to_env(self) -> dict[str, str]:
        """The variables of :data:`VARS` (a field at its default only when the table says ``always``)."""
        env = {}
        for var in VARS:
            text = var.kind.write(getattr(self, var.field))
            if var.always or text != var.kind.write(_DEFAULTS[var.field]):
                env[var.name] = text
        return env

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> TaskContext:
        """Read the context back; raises ValueError naming the variable that is wrong."""
        return cls(**{var.field: var.read(environ) for var in VARS})

    @property
    def task(self) -> str:
        return f"{self.role}-{self.index}"

    def members(self) -> list[tuple[str, int]]:
        """Every (role, index) of the TF cluster, chief first, then ps, then workers."""
        out: list[tuple[str, int]] = []
        for role in ("chief", "ps", "worker"):
            out.extend((role, i) for i in range(int(self.cluster.get(role, 0))))
        return out

    def elastic_role(self, role: str) -> tuple[int, int] | None:
        """(min, max) when ``role``'s count is elastic, else None."""
        bounds = self.elastic.get(role)
        return (int(bounds[0]), int(bounds[1])) if bounds else None


_DEFAULTS: dict[str, Any] = {f.name: f.default if f.default_factory is MISSING else f.default_factory()
                             for f in fields(TaskContext)}


# --- the table -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """How one field's value is written as text (``write``) and read back (``read``: ValueError, or
    anything ``read`` raises, becomes ``error``: what the text must look like)."""

    read: Callable[[str], Any]
    write: Callable[[Any], str]
    error: str = ""


@dataclass(frozen=True)
class Var:
    """One field of :class:`TaskContext` in the environment.

    ``required``: the task cannot start without it (unset or empty: "is not set"); ``always``: written
    even at its default value (else only when its text differs from the default's); ``empty``: an
    empty value is read like any other text (else it means the default); ``runner``: a local
    runner's variable that wins over this one when set (see the module)."""

    field: str
    name: str
    kind: Kind
    required: bool = False
    always: bool = False
    empty: bool = False
    runner: str = ""

    def read(self, environ: Mapping[str, str]) -> Any:
        raw = (environ.get(self.runner) if self.runner else None) or environ.get(self.name)
        if self.required and not raw:
            raise ValueError(f"{self.name} is not set (is this task rendered by marathon-tf?)")
        if raw is None or (raw == "" and not self.empty):
            return _DEFAULTS[self.field]
        try:
            return self.kind.read(raw)
        except (ValueError, TypeError):
            raise ValueError(f"{self.name} {self.kind.error}") from None


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _cluster(raw: str) -> dict[str, int]:
    cluster = json.loads(raw)
    if not isinstance(cluster, dict):
        raise ValueError
    return {str(k): int(v) for k, v in cluster.items()}


def _elastic(raw: str) -> Mapping[str, tuple[int, int]]:
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError
    out = {}
    for role, bounds in data.items():
        lo, hi = (int(b) for b in bounds)
        if not 1 <= lo <= hi:
            raise ValueError
        out[str(role)] = (lo, hi)
    return MappingProxyType(out)


def _budget(window: float, example: str) -> Kind:
    """``N/SECONDS`` (SECONDS empty: ``window``)."""
    def read(raw: str) -> tuple[int, float]:
        n, _, seconds = raw.partition("/")
        return int(n), float(seconds or window)
    return Kind(read, lambda v: f"{v[0]}/{_num(v[1])}", f"must look like N/SECONDS, e.g. {example}")


def _codes(none: str = "") -> Kind:
    """Comma-separated integers (``none`` besides: the word for no code at all)."""
    return Kind(lambda raw: tuple(int(c) for c in raw.split(",") if c.strip() and c.strip() != (none or None)),
                lambda v: ",".join(str(c) for c in v) or none, "must be comma-separated integers")


def _progress(raw: str) -> tuple[float | None, float | None]:
    parts = raw.split("/")
    return (float(parts[0]) if parts[0] else None, float(parts[1]) if len(parts) > 1 and parts[1] else None)


def _admission(raw: str) -> tuple[float, int, float]:
    timeout, retries, backoff = raw.split("/")
    return float(timeout), int(retries), float(backoff)


def prewarm_modules(raw: str | None) -> tuple[str, ...]:
    """``MTF_PREWARM`` -> the modules a pre-warmed trainer imports (unset: the default; false: none)."""
    if raw is None:
        return _DEFAULTS["prewarm"]
    if raw.strip().lower() in ("", "false", "0", "off", "no"):
        return ()
    return tuple(m.strip() for m in raw.split(",") if m.strip())


_TEXT = Kind(str, str)
_SECONDS = Kind(float, _num, "must be a number of seconds")
_OPTIONAL_INT = Kind(int, lambda v: str(int(v)) if v else "", "must be an integer")

#: Every field of :class:`TaskContext` and its variable. Read in this order: the first wrong one is named.
VARS: tuple[Var, ...] = (
    Var("cluster", "MTF_CLUSTER", Kind(_cluster, lambda v: json.dumps(dict(v), sort_keys=True, separators=(",", ":")),
                                       "must be a JSON object of role counts, e.g. {\"ps\":1,\"worker\":2}"),
        required=True, always=True),
    Var("index", "MTF_INDEX", Kind(int, str, "must be an integer"), required=True, always=True),
    Var("job", "MTF_JOB", _TEXT, required=True, always=True),
    Var("role", "MTF_ROLE", _TEXT, required=True, always=True),
    Var("discovery", "MTF_DISCOVERY", _TEXT, always=True),
    Var("mesos_dns", "MESOS_DNS", _TEXT, runner="MTF_RUNNER_MESOS_DNS"),
    Var("mesos_dns_http", "MTF_MESOS_DNS_HTTP", _TEXT, runner="MTF_RUNNER_MESOS_DNS_HTTP"),
    Var("dns_domain", "MTF_DNS_DOMAIN", _TEXT, always=True),
    Var("dns_framework", "MTF_DNS_FRAMEWORK", _TEXT, always=True),
    Var("marathon_url", "MTF_MARATHON_URL", _TEXT, runner="MTF_RUNNER_MARATHON_URL"),
    Var("spec_style", "MTF_SPEC_STYLE", _TEXT, always=True),
    Var("port_name", "MTF_PORT_NAME", _TEXT, always=True),
    Var("status_port_name", "MTF_STATUS_PORT_NAME", _TEXT, always=True),
    Var("network", "MTF_NETWORK", _TEXT, always=True),
    Var("startup_timeout", "MTF_STARTUP_TIMEOUT", _SECONDS, always=True),
    Var("style", "MTF_STYLE", _TEXT, always=True),
    Var("completion", "MTF_COMPLETION", _TEXT, always=True),
    Var("restart_budget", "MTF_RESTART_BUDGET", _budget(600.0, "5/600"), always=True, empty=True),
    Var("permanent_exit_codes", "MTF_PERMANENT_EXIT_CODES", _codes()),
    Var("preemption_budget", "MTF_PREEMPTION_BUDGET", _budget(86400.0, "100/86400")),
    Var("preemption_exit_codes", "MTF_PREEMPTION_EXIT_CODES", _codes(none="none"), empty=True),
    Var("grace_seconds", "MTF_GRACE_SECONDS", _SECONDS),
    Var("logdir", "MTF_LOGDIR", _TEXT),
    Var("progress_timeouts", "MTF_PROGRESS_TIMEOUT",
        Kind(_progress, lambda v: "/".join("" if t is None else _num(t) for t in v),
             "must look like SECONDS[/FIRST_STEP_SECONDS], e.g. 120/600")),
    Var("target_step", "MTF_TARGET_STEP", _OPTIONAL_INT),
    Var("prewarm", "MTF_PREWARM", Kind(prewarm_modules, lambda v: ",".join(v) or "false"), empty=True),
    Var("gpus", "MTF_GPUS", Kind(int, str, "must be a whole number of GPUs")),
    Var("admission", "MTF_ADMISSION", Kind(_admission, lambda v: f"{_num(v[0])}/{int(v[1])}/{_num(v[2])}",
                                           "must look like TIMEOUT/RETRIES/BACKOFF, e.g. 600/3/60")),
    Var("elastic", "MTF_ELASTIC", Kind(_elastic, lambda v: json.dumps({r: list(b) for r, b in v.items()},
                                                                        sort_keys=True, separators=(",", ":"))
                                       if v else "",
                                       "must be a JSON object of role: [min, max], e.g. {\"worker\":[2,4]}")),
    Var("placement", "MTF_PLACEMENT", Kind(lambda raw: raw.strip().lower() in ("1", "true", "yes"),
                                           lambda v: "1" if v else "", "must be 1 or empty")),
)
