"""The job file's marshmallow schemas: the shape of every key (unknown keys are errors), the rules
across keys (roles a style needs, completion, GPUs and the containerizer…), and the
:class:`~marathon_tf.user.spec.model.JobSpec` built from a valid document.
"""

from __future__ import annotations

import functools
import re
from types import MappingProxyType
from typing import Any
from urllib.parse import urlparse

from marshmallow import RAISE, Schema, ValidationError, fields, post_load, pre_load, validate, validates_schema

from marathon_tf.contract import naming
from marathon_tf.contract.spread import relational
from marathon_tf.user.spec.fields import (
    MAX_JOB_BYTES,
    MAX_TASK_BYTES,
    _Command,
    _Constraint,
    _Count,
    _env_key_problem,
    _label_key_problem,
    _Prewarm,
    _Str,
    _StrictInt,
    _StrictNumber,
    _StrMap,
    size_text,
)
from marathon_tf.user.spec.hints import blocked, failed_paths
from marathon_tf.user.spec.model import (
    _DEFAULT_COMPLETION,
    _DEFAULT_SPEC_STYLE,
    _ROLE_DEFAULTS,
    COMPLETIONS,
    DEFAULT_PREWARM,
    DISCOVERY_MODES,
    ELASTIC_ROLES,
    ELASTIC_STYLES,
    SPEC_STYLES,
    STYLES,
    Admission,
    Discovery,
    Fetch,
    JobSpec,
    Restart,
    Role,
    Volume,
)

_NAMESERVER = re.compile(r"^(?P<host>[A-Za-z0-9.\-:\[\]]+?)(?::(?P<port>[0-9]{1,5}))?$")


class _Base(Schema):
    class Meta:
        unknown = RAISE


class _RoleSchema(_Base):
    count = _Count()
    cpus = _StrictNumber(validate=validate.Range(min=0.001, max=4096, error="must be between {min} and {max}"))
    mem = _StrictNumber(validate=validate.Range(min=1, max=16 * 1024 * 1024,
                                                error="must be between {min} and {max} (MiB)"))
    disk = _StrictNumber(validate=validate.Range(min=0, max=1024 ** 3, error="must be >= {min}"))
    gpus = _StrictInt(validate=validate.Range(min=0, max=1024, error="must be >= {min}"))
    image = _Str()
    command = _Command()
    env = _StrMap(key_check=_env_key_problem, environment=True)
    constraints = fields.List(_Constraint())
    constraints_per_task = fields.List(_Constraint())


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

    @validates_schema(skip_on_field_errors=False)
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
        return fetch_schema().load(value)


class _DiscoverySchema(_Base):
    mode = fields.String(validate=validate.OneOf(DISCOVERY_MODES, error="must be one of {choices}"))
    domain = _Str(validate=validate.Regexp(r"^[a-z0-9]([a-z0-9.\-]*[a-z0-9])?$",
                                           error="must be a DNS domain like 'mesos'"))
    framework = _Str(validate=validate.Regexp(r"^[a-z0-9]([a-z0-9\-]*[a-z0-9])?$",
                                              error="must be a DNS label like 'marathon'"))
    nameserver = _Str(allow_empty=True)
    http_api = _Str(allow_empty=True)
    marathon_url = _Str(allow_empty=True)
    startup_timeout = _StrictNumber(validate=validate.Range(min=1, max=7 * 86400,
                                                            error="must be between {min} and {max} seconds"))

    @validates_schema(pass_original=True, skip_on_field_errors=False)
    def _check(self, data, original, **kwargs):
        errors: dict[str, list[str]] = {}
        ns = data.get("nameserver")
        if ns:
            m = _NAMESERVER.match(ns)
            if not m or (m.group("port") and not 0 < int(m.group("port")) < 65536):
                errors["nameserver"] = ["must be ip[:port]"]
        for key in ("http_api", "marathon_url"):
            url = data.get(key)
            if url and (urlparse(url).scheme not in ("http", "https") or not urlparse(url).netloc):
                errors[key] = ["must be an http(s) URL"]
        if data.get("mode") == "mesos-dns-http" and not original.get("http_api"):
            errors["http_api"] = ["mode mesos-dns-http needs discovery.http_api"]
        if errors:
            raise ValidationError(errors)


class _RestartSchema(_Base):
    max_failures = _StrictInt(validate=validate.Range(min=0, max=100_000, error="must be >= {min}"))
    window_seconds = _StrictNumber(validate=validate.Range(min=1, error="must be >= {min}"))
    permanent_exit_codes = fields.List(_StrictInt(validate=validate.Range(min=1, max=127,
                                                                          error="must be between {min} and {max}")))
    backoff_seconds = _StrictNumber(validate=validate.Range(min=0, max=86400, error="must be between {min} and {max}"))
    backoff_factor = _StrictNumber(validate=validate.Range(min=1, max=100, error="must be between {min} and {max}"))
    max_launch_delay_seconds = _StrictNumber(validate=validate.Range(min=0, max=86400,
                                                                     error="must be between {min} and {max}"))
    # not set: adaptive (the default); 0: off (marathon_tf.task.watchdog)
    progress_timeout_seconds = _StrictNumber(validate=validate.Range(min=0, error="must be >= {min} (0: off)"))
    first_step_timeout_seconds = _StrictNumber(validate=validate.Range(min=0, error="must be >= {min} (0: off)"))
    max_preemptions = _StrictInt(validate=validate.Range(min=0, max=100_000, error="must be >= {min}"))
    preemption_exit_codes = fields.List(_StrictInt(validate=validate.Range(min=1, max=255,
                                                                           error="must be between {min} and {max}")))
    grace_seconds = _StrictNumber(validate=validate.Range(min=1, max=3600, error="must be between {min} and {max}"))

    @validates_schema
    def _codes_mean_one_thing(self, data, **kwargs):
        both = sorted(set(data.get("permanent_exit_codes") or ()) & set(data.get("preemption_exit_codes") or ()))
        if both:
            raise ValidationError({"preemption_exit_codes": [
                f"{', '.join(map(str, both))} also in permanent_exit_codes: "
                "a code is a failure or a preemption, not both"]})


class _AdmissionSchema(_Base):
    timeout = _StrictNumber(validate=validate.Range(min=1, max=7 * 86400,
                                                    error="must be between {min} and {max} seconds"))
    retries = _StrictInt(validate=validate.Range(min=0, max=1000, error="must be between {min} and {max}"))
    backoff_seconds = _StrictNumber(validate=validate.Range(min=0, max=86400, error="must be between {min} and {max}"))


class _ProgressSchema(_Base):
    target_step = _StrictInt(validate=validate.Range(min=1, error="must be >= {min}"))


class _NetworkSchema(_Base):
    mode = fields.String(load_default="host",
                         validate=validate.OneOf(["host", "container"], error="must be one of {choices}"))
    name = _Str(validate=validate.Regexp(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$", error="must be a network name"))


class _JobSchema(_Base):
    name = _Str(required=True)
    image = _Str()
    command = _Command()
    env = _StrMap(key_check=_env_key_problem, environment=True)
    style = fields.String(load_default="custom", validate=validate.OneOf(STYLES, error="must be one of {choices}"))
    cluster_spec = fields.String(validate=validate.OneOf(SPEC_STYLES, error="must be one of {choices}"))
    completion = fields.String(validate=validate.OneOf(COMPLETIONS, error="must be one of {choices}"))
    containerizer = fields.String(load_default="mesos",
                                  validate=validate.OneOf(["mesos", "docker"], error="must be one of {choices}"))
    roles = fields.Nested(_RolesSchema, required=True)
    constraints = fields.List(_Constraint())
    constraints_per_task = fields.List(_Constraint())
    volumes = fields.List(fields.Nested(_VolumeSchema))
    fetch = fields.List(_FetchField())
    labels = _StrMap(key_check=_label_key_problem)
    logdir = _Str(allow_empty=True)
    discovery = fields.Nested(_DiscoverySchema)
    restart = fields.Nested(_RestartSchema)
    admission = fields.Nested(_AdmissionSchema)
    network = fields.Nested(_NetworkSchema)
    bootstrap = _Str()
    progress = fields.Nested(_ProgressSchema)
    prewarm = _Prewarm()

    @pre_load
    def _object(self, data, **kwargs):
        if not isinstance(data, dict):
            raise ValidationError("the job must be a JSON object")
        return data

    @validates_schema(pass_original=True, skip_on_field_errors=False)
    def _rules(self, data, original, **kwargs):
        """The rules across keys. They run also when some keys failed (every problem of the file is
        reported in one pass), but a rule that reads a key which failed, or whose misspelling was
        given instead, stays silent: what follows from a reported error is not reported again."""
        failed = failed_paths(self, original, data)
        errors: dict[str, list[str]] = {}

        def err(path: str, msg: str | list[str], *reads: str, reads_path: bool = True) -> None:
            if not blocked(failed, (path, *reads) if reads_path else reads):
                errors.setdefault(path, []).extend([msg] if isinstance(msg, str) else msg)

        roles = data.get("roles")
        name = data.get("name")
        if name is not None:  # the longest task name counts only when every count is known
            counts = [f"roles.{r}.count" for r in naming.ROLES]
            longest = "ps-0" if not isinstance(roles, dict) or blocked(failed, counts) else max(
                (f"{r}-{max(int((roles.get(r) or {}).get('count', 0)) - 1, 0)}" for r in naming.ROLES), key=len)
            problems = naming.job_name_problems(name, longest)
            if problems:
                err("name", problems)
        if isinstance(roles, dict):
            self._cross(data, roles, err)
        if (data.get("discovery") or {}).get("marathon_url") == "":
            placed = [(f"constraints[{i}]", c) for i, c in enumerate(data.get("constraints") or [])]
            placed += [(f"roles.{r}.constraints[{i}]", c)
                       for r, rd in (roles if isinstance(roles, dict) else {}).items()
                       for i, c in enumerate((rd or {}).get("constraints") or [])]
            for path, c in placed:
                if relational(c):
                    err(path, f"{c[1]} holds across tasks, which the job's leader places through Marathon: it needs "
                              f"discovery.marathon_url (for Marathon's per-app meaning write it in "
                              f"constraints_per_task)", "discovery.marathon_url")
        net = data.get("network") or {}
        if net.get("name") and net.get("mode", "host") != "container":
            err("network.name", "a network name needs network.mode 'container'", "network.mode")
        if net.get("mode") == "container" and not net.get("name"):
            # Marathon >= 1.5 takes a nameless container network only with --default_network_name; 1.4 has
            # no top-level networks.
            err("network.name", "a container network needs its name (Marathon >= 1.5: the CNI network's name, "
                                "e.g. \"dcos\")", "network.mode")
        logdir = data.get("logdir")
        if isinstance(logdir, str) and ".." in logdir.replace("\\", "/").split("/"):
            err("logdir", "must not contain '..': the logdir stays inside the task's sandbox (a relative path) or "
                          "names a folder of the job's volumes")
        if isinstance(roles, dict):
            self._sizes(data, roles, err)
        if errors:
            raise ValidationError(errors)

    @staticmethod
    def _sizes(data: Any, roles: Any, err: Any) -> None:
        """A task's environment and command within :data:`MAX_TASK_BYTES`, the job's within
        :data:`MAX_JOB_BYTES` (each variable and argument alone: the fields check it)."""

        def env_bytes(env: Any) -> int:
            return sum(len(k.encode()) + len(v.encode()) + 2 for k, v in (env or {}).items()
                       if isinstance(k, str) and isinstance(v, str))

        def command_bytes(command: Any) -> int:
            args = [command] if isinstance(command, str) else list(command or ())
            return sum(len(a.encode()) + 1 for a in args if isinstance(a, str))

        job_env, total, biggest = data.get("env") or {}, 0, ("env", 0)
        for r in naming.ROLES:
            rd = roles.get(r) or {}
            count = rd.get("count", 0)
            tasks = int(getattr(count, "max", count) or 0)
            if not tasks or not isinstance(rd, dict):
                continue
            own_command = rd.get("command") is not None
            parts = {"env": env_bytes({k: v for k, v in job_env.items() if k not in (rd.get("env") or {})}),
                     f"roles.{r}.env": env_bytes(rd.get("env")),
                     f"roles.{r}.command" if own_command else "command":
                         command_bytes(rd.get("command") if own_command else data.get("command"))}
            task = sum(parts.values())
            where = max(parts, key=lambda k: parts[k])
            if task > MAX_TASK_BYTES:
                err(where, f"the {r} tasks' environment and command are {size_text(task)}; a task's are at most "
                           f"{size_text(MAX_TASK_BYTES)} (Marathon keeps an app's definition in a ZooKeeper node "
                           f"of under 1 MiB); put large data in a file (fetch, or a volume)")
                return
            total += tasks * task
            if tasks * task > biggest[1]:
                biggest = (where, tasks * task)
        if total > MAX_JOB_BYTES:
            err(biggest[0], f"the job's tasks carry {size_text(total)} of environment and command together; a "
                            f"job's are at most {size_text(MAX_JOB_BYTES)} (marathon-tf reads the job's group back "
                            f"within its 32 MiB answer limit); put large data in a file (fetch, or a volume)")

    @staticmethod
    # Over ruff's complexity limit (C901), as one piece: the rules across keys: a branch per rule, each reported on its
    # own.
    def _cross(data, roles, err) -> None:  # noqa: C901
        count = {r: (roles.get(r) or {}).get("count", 0) for r in naming.ROLES}
        style = data.get("style", "custom")
        cluster_counts = [f"roles.{r}.count" for r in naming.CLUSTER_ROLES]
        if count["chief"] > 1:
            err("roles.chief.count", "a job has at most one chief")
        if count["tensorboard"] > 1:
            err("roles.tensorboard.count", "a job has at most one tensorboard")
        if not any(count[r] for r in naming.CLUSTER_ROLES):
            err("roles", "the job has no task: give roles.worker a count >= 1", *cluster_counts, reads_path=False)
        if style in ("tf1", "parameter_server") and count["ps"] < 1:
            err("roles.ps.count", f"style {style} (parameter-server training) needs at least one ps", "style")
        if style in ("tf1", "parameter_server", "multi_worker_mirrored") and count["worker"] < 1:
            err("roles.worker.count", f"style {style} needs at least one worker", "style")
        if style == "parameter_server" and count["chief"] != 1:
            err("roles.chief.count", "style parameter_server needs exactly one chief (the coordinator)", "style")
        if style == "multi_worker_mirrored" and count["ps"]:
            err("roles.ps.count", "style multi_worker_mirrored has no parameter servers; set roles.ps.count to 0",
                "style")
        completion = data.get("completion") or _DEFAULT_COMPLETION[style]
        if completion == "chief" and count["chief"] != 1:
            err("completion", "'chief' needs roles.chief.count = 1", "style", "roles.chief.count")
        if completion in ("worker0", "all_workers") and count["worker"] < 1:
            err("completion", f"{completion!r} needs at least one worker", "style", "roles.worker.count")
        if data.get("containerizer") == "docker":
            for r in naming.ROLES:
                if (roles.get(r) or {}).get("gpus", 0) > 0:
                    err(f"roles.{r}.gpus",
                        "GPUs need the Mesos containerizer (UCR): remove \"containerizer\": \"docker\"")
        for r in naming.ROLES:
            rd = roles.get(r) or {}
            if rd.get("count", 0) and r != "tensorboard" and data.get("command") is None and rd.get("command") is None:
                err(f"roles.{r}.command", "no command: set \"command\" for the job or for this role", "command",
                    f"roles.{r}.count")
        if count["tensorboard"] and not data.get("logdir"):
            err("logdir", "the tensorboard role needs the job's logdir", "roles.tensorboard.count")
        for r in naming.ROLES:
            if getattr(count[r], "min", None) is None:
                continue
            if r not in ELASTIC_ROLES:
                why = ("an evaluator is outside the training cluster: nothing grows or shrinks with it"
                       if r == "evaluator" else f"a job's {r} tasks are not interchangeable")
                err(f"roles.{r}.count", f"only the worker count can be elastic ({{\"min\", \"max\"}}): {why}; "
                                        f"give it a number")
            elif style not in ELASTIC_STYLES:
                err(f"roles.{r}.count", f"style {style}: marathon-tf cannot know what the program does when its "
                                        f"cluster changes; elastic workers need style "
                                        f"{', '.join(ELASTIC_STYLES[:-1])} or {ELASTIC_STYLES[-1]}", "style")

    @post_load
    def _build(self, data, **kwargs) -> JobSpec:
        style = data.get("style", "custom")
        roles_in = data["roles"]
        roles = {}
        for r in naming.ROLES:
            rd = dict(roles_in.get(r) or {})
            defaults = _ROLE_DEFAULTS[r]
            count = rd.get("count", 0)
            roles[r] = Role(
                name=r,
                count=int(count),
                min_count=getattr(count, "min", None),
                cpus=rd.get("cpus", defaults["cpus"]),
                mem=rd.get("mem", defaults["mem"]),
                disk=rd.get("disk", 0.0),
                gpus=rd.get("gpus", 0),
                image=rd.get("image"),
                command=rd.get("command"),
                env=rd.get("env", MappingProxyType({})),
                constraints=tuple(rd["constraints"]) if "constraints" in rd else None,
                constraints_per_task=tuple(rd["constraints_per_task"]) if "constraints_per_task" in rd else None,
            )
        disc = data.get("discovery") or {}
        rst = data.get("restart") or {}
        net = data.get("network") or {}
        admission: dict[str, Any] = {k: float(v) if k != "retries" else v
                                     for k, v in (data.get("admission") or {}).items()}
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
            constraints_per_task=tuple(data.get("constraints_per_task") or ()),
            volumes=tuple(Volume(**v) for v in data.get("volumes") or ()),
            fetch=tuple(Fetch(**f) for f in data.get("fetch") or ()),
            labels=data.get("labels", MappingProxyType({})),
            logdir=data.get("logdir", ""),
            discovery=Discovery(**disc),
            restart=Restart(**{**rst, "permanent_exit_codes": tuple(rst.get("permanent_exit_codes", ())),
                               "preemption_exit_codes": tuple(rst.get("preemption_exit_codes",
                                                                      Restart.preemption_exit_codes))}),
            admission=Admission(**admission),
            network=net.get("mode", "host"),
            network_name=net.get("name"),
            bootstrap=data.get("bootstrap", "marathon-tf bootstrap"),
            target_step=(data.get("progress") or {}).get("target_step"),
            prewarm=data.get("prewarm", DEFAULT_PREWARM),
        )


# Each schema made once: a schema is reusable, and making one copies every declared field (a fifth of a CLI verb's
# CPU when it was made at each validation).
@functools.cache
def job_schema() -> _JobSchema:
    """The job's schema."""
    return _JobSchema()


@functools.cache
def fetch_schema() -> _FetchSchema:
    """A ``fetch`` entry's schema."""
    return _FetchSchema()
