"""Untrusted ``job.json`` → an immutable, validated :class:`JobSpec`.

Validation is done with marshmallow; unknown keys are errors (every one of
them is listed), and every problem is reported as one line naming the file and
the field path, e.g. ``job.json: roles.worker.gpus: must be >= 0``.

This module is pure: it reads the job file (and, for relative ``fetch`` paths,
checks that the file exists) but does no network I/O.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping
from urllib.parse import urlparse

from marshmallow import RAISE, Schema, ValidationError, fields, post_load, pre_load, validate, validates_schema

from . import naming
from .errors import SpecError

__all__ = [
    "JobSpec",
    "Role",
    "Discovery",
    "Restart",
    "Volume",
    "Fetch",
    "STYLES",
    "load_job",
    "load_dict",
    "json_schema",
    "MAX_COUNT",
]

STYLES = ("tf1", "parameter_server", "multi_worker_mirrored", "custom")
SPEC_STYLES = ("tf_config", "flags", "both")
COMPLETIONS = ("chief", "worker0", "all_workers")
DISCOVERY_MODES = ("mesos-dns", "mesos-dns-http", "marathon")
CONSTRAINT_OPERATORS = ("UNIQUE", "CLUSTER", "GROUP_BY", "LIKE", "UNLIKE", "MAX_PER", "IS")
MAX_COUNT = 10_000

_DEFAULT_SPEC_STYLE = {"tf1": "flags", "parameter_server": "tf_config",
                       "multi_worker_mirrored": "tf_config", "custom": "both"}
_DEFAULT_COMPLETION = {"tf1": "all_workers", "parameter_server": "chief",
                       "multi_worker_mirrored": "all_workers", "custom": "worker0"}
_ROLE_DEFAULTS = {
    "chief": {"cpus": 1.0, "mem": 2048.0},
    "ps": {"cpus": 1.0, "mem": 1024.0},
    "worker": {"cpus": 1.0, "mem": 2048.0},
    "evaluator": {"cpus": 1.0, "mem": 2048.0},
    "tensorboard": {"cpus": 0.5, "mem": 512.0},
}
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESERVED_LABEL_PREFIX = "marathon-tf/"
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
DEFAULT_PREWARM = ("tensorflow",)
_NAMESERVER = re.compile(r"^(?P<host>[A-Za-z0-9.\-:\[\]]+?)(?::(?P<port>[0-9]{1,5}))?$")


# --------------------------------------------------------------------------- the result


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
    constraints: tuple[tuple[str, ...], ...] | None = None


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
    progress_timeout_seconds: float | None = None   # watchdog: no new step for this long = failed
    first_step_timeout_seconds: float | None = None  # watchdog: no first step this long after start


@dataclass(frozen=True)
class JobSpec:
    """A validated job. ``roles`` always holds all five roles (absent ones with count 0)."""

    name: str
    command: tuple[str, ...] | str | None
    roles: Mapping[str, Role]
    style: str = "custom"
    cluster_spec: str = "both"
    completion: str = "worker0"
    image: str | None = None
    containerizer: str = "mesos"
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    constraints: tuple[tuple[str, ...], ...] = ()
    volumes: tuple[Volume, ...] = ()
    fetch: tuple[Fetch, ...] = ()
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    logdir: str = ""
    discovery: Discovery = Discovery()
    restart: Restart = Restart()
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

    def tasks(self) -> list[tuple[str, int]]:
        """Every (role, index) of the job, in render order."""
        return [(r, i) for r in naming.ROLES for i in range(self.roles[r].count)]

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
                        "permanent_exit_codes": list(self.restart.permanent_exit_codes)},
            "network": _drop_none({"mode": self.network, "name": self.network_name}),
            "roles": {},
        }
        if self.image:
            out["image"] = self.image
        if self.target_step is not None:
            out["progress"] = {"target_step": self.target_step}
        if self.prewarm != DEFAULT_PREWARM:
            out["prewarm"] = list(self.prewarm) or False
        if self.command is not None:
            out["command"] = list(self.command) if isinstance(self.command, tuple) else self.command
        for r in naming.ROLES:
            role = self.roles[r]
            if not role.count:
                continue
            rd: dict[str, Any] = {"count": role.count, "cpus": role.cpus, "mem": role.mem,
                                  "disk": role.disk, "gpus": role.gpus}
            if role.image:
                rd["image"] = role.image
            if role.command is not None:
                rd["command"] = list(role.command) if isinstance(role.command, tuple) else role.command
            if role.env:
                rd["env"] = dict(role.env)
            if role.constraints is not None:
                rd["constraints"] = [list(c) for c in role.constraints]
            out["roles"][r] = rd
        return out

    # -- changes -----------------------------------------------------------------
    def with_counts(self, counts: Mapping[str, int]) -> "JobSpec":
        """A copy with new role counts, validated like a fresh job.json."""
        data = self.to_dict()
        for role, n in counts.items():
            rd = data["roles"].setdefault(role, {})
            rd["count"] = n
        return load_dict(data, source=self.source)

    def with_overrides(self, **changes: Any) -> "JobSpec":
        return replace(self, **changes)


def _drop_none(d: dict) -> dict:
    return {k: v for k, v in d.items() if v is not None}


# --------------------------------------------------------------------------- fields


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _check_text(value: str, prefix: str = "") -> None:
    if not _is_text(value):
        raise ValidationError(f"{prefix}must be valid Unicode text (no lone surrogates)")


class _StrictNumber(fields.Float):
    """A JSON number: rejects strings, booleans, NaN and infinities."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValidationError("must be a number")
        if not math.isfinite(value):
            raise ValidationError("must be a finite number")
        return float(value)


class _StrictInt(fields.Integer):
    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ValidationError("must be an integer")
        return value


class _Str(fields.String):
    """A non-empty string without NUL or other control characters (newline/tab allowed
    only where ``multiline``)."""

    def __init__(self, *a, multiline: bool = False, allow_empty: bool = False, **kw):
        super().__init__(*a, **kw)
        self.multiline = multiline
        self.allow_empty = allow_empty

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, str):
            raise ValidationError("must be a string")
        _check_text(value)
        if not value and not self.allow_empty:
            raise ValidationError("must not be empty")
        bad = [c for c in value if ord(c) < 32 and not (self.multiline and c in "\n\t\r")]
        if bad or "\x7f" in value:
            raise ValidationError(f"must not contain control characters (found {bad[0] if bad else chr(127)!r})")
        return value


class _Command(fields.Field):
    """An argv list of strings, or one shell string."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, str):
            if not value.strip():
                raise ValidationError("must not be empty")
            if "\x00" in value:
                raise ValidationError("must not contain NUL bytes")
            _check_text(value)
            return value
        if isinstance(value, list):
            if not value:
                raise ValidationError("must not be an empty list")
            for i, arg in enumerate(value):
                if not isinstance(arg, str):
                    raise ValidationError(f"item {i} must be a string")
                if "\x00" in arg:
                    raise ValidationError(f"item {i} must not contain NUL bytes")
                _check_text(arg, f"item {i} ")
            return tuple(value)
        raise ValidationError("must be a list of strings or a shell command string")


class _Prewarm(fields.Field):
    """``false``, ``true`` (the default modules) or a non-empty list of module names."""

    def _deserialize(self, value, attr, data, **kwargs):
        if value is False:
            return ()
        if value is True:
            return DEFAULT_PREWARM
        if not isinstance(value, list) or not value:
            raise ValidationError("must be false, true or a non-empty list of module names")
        for i, name in enumerate(value):
            if not isinstance(name, str) or not _MODULE.match(name):
                raise ValidationError(f"item {i} must be a module name like \"tensorflow\" or \"numpy.linalg\"")
        return tuple(dict.fromkeys(value))


class _StrMap(fields.Field):
    """A JSON object of string → string, keys checked by ``key_check``."""

    def __init__(self, *a, key_check=None, **kw):
        super().__init__(*a, **kw)
        self.key_check = key_check

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, dict):
            raise ValidationError("must be an object of strings")
        errors: dict[str, list[str]] = {}
        for k, v in value.items():
            problem = self.key_check(k) if self.key_check else None
            if problem:
                errors.setdefault(k, []).append(problem)
            elif not isinstance(v, str):
                errors.setdefault(k, []).append("must be a string (quote numbers and booleans)")
            elif "\x00" in v:
                errors.setdefault(k, []).append("must not contain NUL bytes")
            elif not _is_text(k) or not _is_text(v):
                errors.setdefault(k, []).append("must be valid Unicode text (no lone surrogates)")
        if errors:
            raise ValidationError(errors)
        return MappingProxyType(dict(value))


def _env_key_problem(key: str) -> str | None:
    if not _ENV_KEY.match(key):
        return "is not a valid environment variable name"
    if key.startswith("MTF_"):
        return "MTF_* variables are reserved for marathon-tf"
    return None


def _label_key_problem(key: str) -> str | None:
    if not key or any(ord(c) < 32 for c in key):
        return "is not a valid label key"
    if key.startswith(_RESERVED_LABEL_PREFIX):
        return f"labels starting with {_RESERVED_LABEL_PREFIX!r} are reserved for marathon-tf"
    return None


class _Constraint(fields.Field):
    """Marathon's ``[field, OPERATOR]`` or ``[field, OPERATOR, value]``."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, list) or len(value) not in (2, 3) or not all(isinstance(x, str) for x in value):
            raise ValidationError('must be ["field", "OPERATOR"] or ["field", "OPERATOR", "value"]')
        fld, op = value[0], value[1]
        if not fld:
            raise ValidationError("the field must not be empty")
        if op not in CONSTRAINT_OPERATORS:
            raise ValidationError(f"unknown operator {op!r} (one of {', '.join(CONSTRAINT_OPERATORS)})")
        val = value[2] if len(value) == 3 else None
        if op == "UNIQUE" and val is not None:
            raise ValidationError("UNIQUE takes no value")
        if op in ("LIKE", "UNLIKE", "IS", "MAX_PER") and val is None:
            raise ValidationError(f"{op} needs a value")
        if op in ("LIKE", "UNLIKE"):
            try:
                re.compile(val)
            except re.error as e:
                raise ValidationError(f"{op} value is not a valid regular expression: {e}")
        if op in ("MAX_PER", "GROUP_BY") and val is not None and not re.fullmatch(r"[0-9]+", val):
            raise ValidationError(f"{op} value must be an integer")
        return tuple(value)


# --------------------------------------------------------------------------- schemas


class _Base(Schema):
    class Meta:
        unknown = RAISE


class _RoleSchema(_Base):
    count = _StrictInt(validate=validate.Range(min=0, max=MAX_COUNT, error="must be between {min} and {max}"))
    cpus = _StrictNumber(validate=validate.Range(min=0.001, max=4096, error="must be between {min} and {max}"))
    mem = _StrictNumber(validate=validate.Range(min=1, max=16 * 1024 * 1024, error="must be between {min} and {max} (MiB)"))
    disk = _StrictNumber(validate=validate.Range(min=0, max=1024 ** 3, error="must be >= {min}"))
    gpus = _StrictInt(validate=validate.Range(min=0, max=1024, error="must be >= {min}"))
    image = _Str()
    command = _Command()
    env = _StrMap(key_check=_env_key_problem)
    constraints = fields.List(_Constraint())


class _RolesSchema(_Base):
    chief = fields.Nested(_RoleSchema)
    ps = fields.Nested(_RoleSchema)
    worker = fields.Nested(_RoleSchema)
    evaluator = fields.Nested(_RoleSchema)
    tensorboard = fields.Nested(_RoleSchema)


class _VolumeSchema(_Base):
    host_path = _Str(required=True)
    container_path = _Str(required=True)
    mode = fields.String(load_default="RW", validate=validate.OneOf(["RW", "RO"], error="must be RW or RO"))

    @validates_schema
    def _paths(self, data, **kwargs):
        errors = {}
        if ".." in data.get("host_path", "/").split("/"):
            errors["host_path"] = ["must not contain '..' (an absolute path, or one relative to the run's state)"]
        if ".." in data.get("container_path", "x").split("/"):
            errors["container_path"] = ["must not contain '..'"]
        if errors:
            raise ValidationError(errors)


class _FetchSchema(_Base):
    uri = _Str(required=True)
    extract = fields.Boolean(load_default=True)
    executable = fields.Boolean(load_default=False)
    cache = fields.Boolean(load_default=False)
    dest_path = _Str()


class _FetchField(fields.Field):
    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, str):
            value = {"uri": value}
        if not isinstance(value, dict):
            raise ValidationError('must be a URI string or {"uri": ...}')
        return _FetchSchema().load(value)


class _DiscoverySchema(_Base):
    mode = fields.String(validate=validate.OneOf(DISCOVERY_MODES, error="must be one of {choices}"))
    domain = _Str(validate=validate.Regexp(r"^[a-z0-9]([a-z0-9.\-]*[a-z0-9])?$", error="must be a DNS domain like 'mesos'"))
    framework = _Str(validate=validate.Regexp(r"^[a-z0-9]([a-z0-9\-]*[a-z0-9])?$", error="must be a DNS label like 'marathon'"))
    nameserver = _Str(allow_empty=True)
    http_api = _Str(allow_empty=True)
    marathon_url = _Str(allow_empty=True)
    startup_timeout = _StrictNumber(validate=validate.Range(min=1, max=7 * 86400, error="must be between {min} and {max} seconds"))

    @validates_schema
    def _check(self, data, **kwargs):
        ns = data.get("nameserver")
        if ns:
            m = _NAMESERVER.match(ns)
            if not m or (m.group("port") and not 0 < int(m.group("port")) < 65536):
                raise ValidationError("must be ip[:port]", "nameserver")
        for key in ("http_api", "marathon_url"):
            url = data.get(key)
            if url and (urlparse(url).scheme not in ("http", "https") or not urlparse(url).netloc):
                raise ValidationError("must be an http(s) URL", key)
        if data.get("mode") == "mesos-dns-http" and not data.get("http_api"):
            raise ValidationError("mode mesos-dns-http needs discovery.http_api", "http_api")


class _RestartSchema(_Base):
    max_failures = _StrictInt(validate=validate.Range(min=0, max=100_000, error="must be >= {min}"))
    window_seconds = _StrictNumber(validate=validate.Range(min=1, error="must be >= {min}"))
    permanent_exit_codes = fields.List(_StrictInt(validate=validate.Range(min=1, max=127, error="must be between {min} and {max}")))
    backoff_seconds = _StrictNumber(validate=validate.Range(min=0, max=86400, error="must be between {min} and {max}"))
    backoff_factor = _StrictNumber(validate=validate.Range(min=1, max=100, error="must be between {min} and {max}"))
    max_launch_delay_seconds = _StrictNumber(validate=validate.Range(min=0, max=86400, error="must be between {min} and {max}"))
    progress_timeout_seconds = _StrictNumber(validate=validate.Range(min=1, error="must be >= {min}"))
    first_step_timeout_seconds = _StrictNumber(validate=validate.Range(min=1, error="must be >= {min}"))


class _ProgressSchema(_Base):
    target_step = _StrictInt(validate=validate.Range(min=1, error="must be >= {min}"))


class _NetworkSchema(_Base):
    mode = fields.String(load_default="host", validate=validate.OneOf(["host", "container"], error="must be one of {choices}"))
    name = _Str(validate=validate.Regexp(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$", error="must be a network name"))


class _JobSchema(_Base):
    name = _Str(required=True)
    image = _Str()
    command = _Command()
    env = _StrMap(key_check=_env_key_problem)
    style = fields.String(load_default="custom", validate=validate.OneOf(STYLES, error="must be one of {choices}"))
    cluster_spec = fields.String(validate=validate.OneOf(SPEC_STYLES, error="must be one of {choices}"))
    completion = fields.String(validate=validate.OneOf(COMPLETIONS, error="must be one of {choices}"))
    containerizer = fields.String(load_default="mesos", validate=validate.OneOf(["mesos", "docker"], error="must be one of {choices}"))
    roles = fields.Nested(_RolesSchema, required=True)
    constraints = fields.List(_Constraint())
    volumes = fields.List(fields.Nested(_VolumeSchema))
    fetch = fields.List(_FetchField())
    labels = _StrMap(key_check=_label_key_problem)
    logdir = _Str(allow_empty=True)
    discovery = fields.Nested(_DiscoverySchema)
    restart = fields.Nested(_RestartSchema)
    network = fields.Nested(_NetworkSchema)
    bootstrap = _Str()
    progress = fields.Nested(_ProgressSchema)
    prewarm = _Prewarm()

    @pre_load
    def _object(self, data, **kwargs):
        if not isinstance(data, dict):
            raise ValidationError("the job must be a JSON object")
        return data

    @validates_schema
    def _name(self, data, **kwargs):
        name = data.get("name")
        if name is None:
            return
        roles = data.get("roles") or {}
        longest = max(
            (f"{r}-{max(int((roles.get(r) or {}).get('count', 0)) - 1, 0)}" for r in naming.ROLES),
            key=len)
        problems = naming.job_name_problems(name, longest)
        if problems:
            raise ValidationError(problems, "name")

    @validates_schema
    def _cross(self, data, **kwargs):
        roles = data.get("roles")
        if roles is None:
            return
        count = {r: (roles.get(r) or {}).get("count", 0) for r in naming.ROLES}
        style = data.get("style", "custom")
        errors: dict[str, list[str]] = {}

        def err(path, msg):
            errors.setdefault(path, []).append(msg)

        if count["chief"] > 1:
            err("roles.chief.count", "a job has at most one chief")
        if count["tensorboard"] > 1:
            err("roles.tensorboard.count", "a job has at most one tensorboard")
        if not any(count[r] for r in naming.CLUSTER_ROLES):
            err("roles", "the job has no task: give roles.worker a count >= 1")
        if style in ("tf1", "parameter_server") and count["ps"] < 1:
            err("roles.ps.count", f"style {style} (parameter-server training) needs at least one ps")
        if style in ("tf1", "parameter_server", "multi_worker_mirrored") and count["worker"] < 1:
            err("roles.worker.count", f"style {style} needs at least one worker")
        if style == "parameter_server" and count["chief"] != 1:
            err("roles.chief.count", "style parameter_server needs exactly one chief (the coordinator)")
        if style == "multi_worker_mirrored" and count["ps"]:
            err("roles.ps.count", "style multi_worker_mirrored has no parameter servers; set roles.ps.count to 0")
        completion = data.get("completion") or _DEFAULT_COMPLETION[style]
        if completion == "chief" and count["chief"] != 1:
            err("completion", "'chief' needs roles.chief.count = 1")
        if completion in ("worker0", "all_workers") and count["worker"] < 1:
            err("completion", f"{completion!r} needs at least one worker")
        if data.get("containerizer") == "docker":
            for r in naming.ROLES:
                if (roles.get(r) or {}).get("gpus", 0) > 0:
                    err(f"roles.{r}.gpus", "GPUs need the Mesos containerizer (UCR): remove \"containerizer\": \"docker\"")
        for r in naming.ROLES:
            rd = roles.get(r) or {}
            if rd.get("count", 0) and r != "tensorboard" and data.get("command") is None and rd.get("command") is None:
                err(f"roles.{r}.command", "no command: set \"command\" for the job or for this role")
        if count["tensorboard"] and not data.get("logdir"):
            err("logdir", "the tensorboard role needs the job's logdir")
        net = data.get("network") or {}
        if net.get("name") and net.get("mode", "host") != "container":
            err("network.name", "a network name needs network.mode 'container'")
        if errors:
            raise ValidationError(errors)

    @post_load
    def _build(self, data, **kwargs) -> JobSpec:
        style = data.get("style", "custom")
        roles_in = data["roles"]
        roles = {}
        for r in naming.ROLES:
            rd = dict(roles_in.get(r) or {})
            defaults = _ROLE_DEFAULTS[r]
            roles[r] = Role(
                name=r,
                count=rd.get("count", 0),
                cpus=rd.get("cpus", defaults["cpus"]),
                mem=rd.get("mem", defaults["mem"]),
                disk=rd.get("disk", 0.0),
                gpus=rd.get("gpus", 0),
                image=rd.get("image"),
                command=rd.get("command"),
                env=rd.get("env", MappingProxyType({})),
                constraints=tuple(rd["constraints"]) if "constraints" in rd else None,
            )
        disc = data.get("discovery") or {}
        rst = data.get("restart") or {}
        net = data.get("network") or {}
        return JobSpec(
            name=data["name"],
            command=data.get("command"),
            roles=MappingProxyType(roles),
            style=style,
            cluster_spec=data.get("cluster_spec") or _DEFAULT_SPEC_STYLE[style],
            completion=data.get("completion") or _DEFAULT_COMPLETION[style],
            image=data.get("image"),
            containerizer=data.get("containerizer", "mesos"),
            env=data.get("env", MappingProxyType({})),
            constraints=tuple(data.get("constraints") or ()),
            volumes=tuple(Volume(**v) for v in data.get("volumes") or ()),
            fetch=tuple(Fetch(**f) for f in data.get("fetch") or ()),
            labels=data.get("labels", MappingProxyType({})),
            logdir=data.get("logdir", ""),
            discovery=Discovery(**disc),
            restart=Restart(**{**rst, "permanent_exit_codes": tuple(rst.get("permanent_exit_codes", ()))}),
            network=net.get("mode", "host"),
            network_name=net.get("name"),
            bootstrap=data.get("bootstrap", "marathon-tf bootstrap"),
            target_step=(data.get("progress") or {}).get("target_step"),
            prewarm=data.get("prewarm", DEFAULT_PREWARM),
        )


# --------------------------------------------------------------------------- loading


def _flatten(messages: Any, path: str = "") -> list[tuple[str, str]]:
    """marshmallow's nested messages → ``(field.path[0].sub, message)`` pairs."""
    out: list[tuple[str, str]] = []
    if isinstance(messages, dict):
        for key, value in messages.items():
            if key == "_schema":
                sub = path
            elif isinstance(key, int):
                sub = f"{path}[{key}]"
            elif "." in str(key) and not path:
                sub = str(key)  # already a dotted path from a schema validator
            else:
                sub = f"{path}.{key}" if path else str(key)
            out.extend(_flatten(value, sub))
    elif isinstance(messages, list):
        for m in messages:
            out.extend(_flatten(m, path))
    else:
        out.append((path, _lower_first(str(messages))))
    return out


def _lower_first(msg: str) -> str:
    if msg == "Unknown field.":
        return "unknown key"
    if msg == "Missing data for required field.":
        return "is required"
    if msg == "Field may not be null.":
        return "must not be null"
    if msg.startswith("Not a valid") or msg.startswith("Invalid"):
        msg = msg.rstrip(".")
        return msg[0].lower() + msg[1:]
    return msg


def _allowed_keys(path: str) -> list[str] | None:
    """The keys allowed at the object holding ``path`` (for 'unknown key' hints)."""
    schema: Schema = _JobSchema()
    parts = [p for p in re.split(r"\.|\[\d+\]", path) if p][:-1]
    for part in parts:
        f = schema.fields.get(part)
        if isinstance(f, fields.List):
            f = f.inner
        if isinstance(f, fields.Nested):
            schema = f.schema
        elif isinstance(f, _FetchField):
            schema = _FetchSchema()
        else:
            return None
    return sorted(schema.fields)


def _resolve_fetch(spec: JobSpec, base_dir: Path | None) -> tuple[JobSpec, list[tuple[str, str]]]:
    """Relative fetch paths become ``file://`` URIs of files next to the job file."""
    problems = []
    out = []
    for i, f in enumerate(spec.fetch):
        parsed = urlparse(f.uri)
        if parsed.scheme:
            if parsed.scheme not in ("http", "https", "ftp", "ftps", "hdfs", "s3", "s3a", "s3n", "file", "docker"):
                problems.append((f"fetch[{i}].uri", f"unsupported URI scheme {parsed.scheme!r}"))
            out.append(f)
            continue
        path = Path(f.uri)
        if not path.is_absolute():
            if base_dir is None:
                problems.append((f"fetch[{i}].uri", "a relative path needs a job file to be relative to"))
                out.append(f)
                continue
            path = (base_dir / path).resolve()
        if not path.exists():
            problems.append((f"fetch[{i}].uri", f"no such file: {path}"))
        out.append(replace(f, uri=path.as_uri(), client_path=True))
    return replace(spec, fetch=tuple(out)), problems


def load_dict(data: Any, *, source: str = "job.json", base_dir: Path | None = None) -> JobSpec:
    """Validate an already-parsed job; raises :class:`SpecError` listing every problem."""
    try:
        spec: JobSpec = _JobSchema().load(data)
    except ValidationError as e:
        problems = []
        for path, msg in _flatten(e.messages):
            if msg == "unknown key":
                allowed = _allowed_keys(path)
                if allowed:
                    msg = f"unknown key (allowed: {', '.join(allowed)})"
            problems.append((path, msg))
        raise SpecError(source, problems) from None
    spec = replace(spec, source=source)
    spec, problems = _resolve_fetch(spec, base_dir)
    if problems:
        raise SpecError(source, problems)
    return spec


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    seen: dict[str, Any] = {}
    for k, v in pairs:
        if k in seen:
            raise ValueError(f"duplicate key {k!r}")
        seen[k] = v
    return seen


def parse_json(raw: bytes, source: str) -> Any:
    """Bytes of a job file → JSON value, with one-line errors."""
    if not raw.strip():
        raise SpecError(source, [("", "the file is empty")])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(source, [("", f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})")]) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates,
                          parse_constant=lambda c: (_ for _ in ()).throw(ValueError(f"{c} is not valid JSON")))
    except json.JSONDecodeError as e:
        raise SpecError(source, [("", f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}")]) from None
    except RecursionError:
        raise SpecError(source, [("", "invalid JSON: nested too deeply")]) from None
    except ValueError as e:
        raise SpecError(source, [("", f"invalid JSON: {e}")]) from None


def load_job(path: str | os.PathLike) -> JobSpec:
    """Read and validate a job file. Errors are :class:`SpecError` (exit 2)."""
    source = os.fspath(path)
    p = Path(source)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise SpecError(source, [("", "no such file")]) from None
    except IsADirectoryError:
        raise SpecError(source, [("", "is a directory, not a job file")]) from None
    except PermissionError:
        raise SpecError(source, [("", "permission denied")]) from None
    except OSError as e:
        raise SpecError(source, [("", f"cannot read: {e.strerror}")]) from None
    return load_dict(parse_json(raw, source), source=source, base_dir=p.resolve().parent)


# --------------------------------------------------------------------------- JSON Schema


def json_schema() -> dict[str, Any]:
    """The job spec as JSON Schema (draft 2020-12), for editors."""
    num = {"type": "number"}
    string = {"type": "string", "minLength": 1}
    strmap = {"type": "object", "additionalProperties": {"type": "string"}}
    command = {"oneOf": [string, {"type": "array", "items": {"type": "string"}, "minItems": 1}],
               "description": "argv list, or one shell command string"}
    constraint = {"type": "array", "minItems": 2, "maxItems": 3, "items": {"type": "string"},
                  "description": "Marathon constraint: [field, OPERATOR(, value)]; operators "
                                 + ", ".join(CONSTRAINT_OPERATORS)}
    role = {
        "type": "object", "additionalProperties": False,
        "properties": {
            "count": {"type": "integer", "minimum": 0, "maximum": MAX_COUNT},
            "cpus": {**num, "minimum": 0.001}, "mem": {**num, "minimum": 1, "description": "MiB"},
            "disk": {**num, "minimum": 0}, "gpus": {"type": "integer", "minimum": 0},
            "image": string, "command": command, "env": strmap,
            "constraints": {"type": "array", "items": constraint},
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://marathon-tf.dev/schema/job.json",
        "title": "marathon-tf job",
        "type": "object",
        "additionalProperties": False,
        "required": ["name", "roles"],
        "properties": {
            "name": {**string, "description": "Marathon group id, e.g. 'mnist' or 'ml/mnist'",
                     "pattern": r"^([a-z0-9]([a-z0-9.\-]*[a-z0-9])?)(/[a-z0-9]([a-z0-9.\-]*[a-z0-9])?)*$"},
            "image": {**string, "description": "container image (run with the Mesos containerizer, UCR)"},
            "command": command,
            "env": strmap,
            "style": {"enum": list(STYLES), "default": "custom"},
            "cluster_spec": {"enum": list(SPEC_STYLES)},
            "completion": {"enum": list(COMPLETIONS)},
            "containerizer": {"enum": ["mesos", "docker"], "default": "mesos"},
            "roles": {"type": "object", "additionalProperties": False,
                      "properties": {r: role for r in naming.ROLES}},
            "constraints": {"type": "array", "items": constraint},
            "volumes": {"type": "array", "items": {
                "type": "object", "additionalProperties": False, "required": ["host_path", "container_path"],
                "properties": {"host_path": string, "container_path": string, "mode": {"enum": ["RW", "RO"]}}}},
            "fetch": {"type": "array", "items": {"oneOf": [string, {
                "type": "object", "additionalProperties": False, "required": ["uri"],
                "properties": {"uri": string, "extract": {"type": "boolean"}, "executable": {"type": "boolean"},
                               "cache": {"type": "boolean"}, "dest_path": string}}]}},
            "labels": strmap,
            "logdir": {"type": "string"},
            "discovery": {"type": "object", "additionalProperties": False, "properties": {
                "mode": {"enum": list(DISCOVERY_MODES)}, "domain": string, "framework": string,
                "nameserver": {"type": "string"}, "http_api": {"type": "string"},
                "marathon_url": {"type": "string"}, "startup_timeout": {**num, "minimum": 1}}},
            "restart": {"type": "object", "additionalProperties": False, "properties": {
                "max_failures": {"type": "integer", "minimum": 0}, "window_seconds": {**num, "minimum": 1},
                "permanent_exit_codes": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 127}},
                "backoff_seconds": {**num, "minimum": 0}, "backoff_factor": {**num, "minimum": 1},
                "max_launch_delay_seconds": {**num, "minimum": 0},
                "progress_timeout_seconds": {**num, "minimum": 1},
                "first_step_timeout_seconds": {**num, "minimum": 1}}},
            "network": {"type": "object", "additionalProperties": False, "properties": {
                "mode": {"enum": ["host", "container"]}, "name": string}},
            "bootstrap": {**string, "default": "marathon-tf bootstrap"},
            "progress": {"type": "object", "additionalProperties": False, "properties": {
                "target_step": {"type": "integer", "minimum": 1}}},
            "prewarm": {"oneOf": [{"type": "boolean"}, {"type": "array", "minItems": 1, "items": {
                "type": "string", "pattern": _MODULE.pattern}}], "default": list(DEFAULT_PREWARM),
                "description": "modules a Python trainer imports while its peers are discovered "
                               "(a pre-warmed interpreter); false: start the program the ordinary way"},
        },
    }
