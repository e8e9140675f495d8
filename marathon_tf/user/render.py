"""``JobSpec`` → a Marathon app group (a plain dict), through the Jinja templates.

One Marathon app per TF task (``/<job>/<role>-<index>``, ``instances: 1``),
each with two dynamic ports (``tf`` for the TF server, ``status`` for the
bootstrap), a Mesos-level HTTP health check on the bootstrap's status port,
the ``MTF_*`` environment the bootstrap reads (see :mod:`marathon_tf.contract.taskenv`)
and labels naming job, role and index.

The templates live in ``app_templates/`` (``group.json.j2``, ``task.json.j2``,
``tensorboard.json.j2``); a directory given with ``templates_dir`` overrides any
of them. Every value reaches the template through ``tojson``; each rendered
template is parsed back with ``json.loads`` and checked, so a broken custom
template is reported instead of sent. No network I/O here.

What is rendered depends on the Marathon it is for (``marathon_version``: the version its ``/v2/info``
says, or ``render --marathon-version``; :mod:`marathon_tf.marathon.versions`): the ``unreachableStrategy``
that version accepts, and a job that version cannot run (a container network on 1.4, the ``IS``
operator or ``@hostname`` before 1.6) is refused naming the version (:func:`check_version`). Without a
version the newest is assumed (what is rendered for 1.11).
"""

from __future__ import annotations

import functools
import json
import math
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import jinja2

from marathon_tf import __version__
from marathon_tf.contract import labels as L
from marathon_tf.contract import naming, spread
from marathon_tf.contract.errors import UsageError
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.marathon import versions
from marathon_tf.user.spec import JobSpec
from marathon_tf.user.versioned import constraint_problems, for_marathon

__all__ = ["render_group", "render_group_json", "render_app", "default_templates_dir", "RenderError", "LABEL_PREFIX",
           "SPEC_LABEL", "RoleFacts", "role_facts", "template_environment", "render_template",
           "placement_scopes", "placement_lines", "leader_task", "VersionRefused", "check_version",
           "MarathonVersionLike"]

#: Marathon's app label for ``--gpu_scheduling_behavior`` (1.5.7+): ``restricted``, a task without GPUs declines
#: an agent with free GPUs (``DeclinedScarceResources``), as 1.8's default does for every app.
GPU_BEHAVIOR_LABEL = "GPU_SCHEDULING_BEHAVIOR"

#: What names the Marathon a job is rendered for: its version as ``/v2/info`` says it (``"1.4.3"``), parsed,
#: or its answers (:class:`~marathon_tf.marathon.versions.Capabilities`); None: the newest.
MarathonVersionLike = str | versions.MarathonVersion | versions.Capabilities | None

LABEL_PREFIX = L.PREFIX
SPEC_LABEL = L.SPEC
TF_PORT, STATUS_PORT, TB_PORT = "tf", "status", "http"
# Fixed ports inside the container when the job uses a container network (each task
# has its own IP there, so fixed container ports cannot collide).
_CONTAINER_PORTS = {TF_PORT: 2222, STATUS_PORT: 8090, TB_PORT: 6006}

_HEALTH = {"grace": 300, "interval": 10, "timeout": 5, "max_failures": 3, "delay": 1}
#: preemptions are counted over the last day (``restart.max_preemptions``)
PREEMPTION_WINDOW = 86400.0


def _grace(spec: JobSpec) -> int:
    """``taskKillGracePeriodSeconds`` (whole seconds: Marathon's field is an integer) from ``restart.grace_seconds``."""
    return int(math.ceil(spec.restart.grace_seconds))


class RenderError(UsageError):
    """A template produced something that is not a valid app or group."""


class VersionRefused(UsageError):
    """The job needs what the Marathon it is for does not have (exit 2, nothing sent)."""


def check_version(spec: JobSpec, marathon_version: MarathonVersionLike, *, where: str = "") -> None:
    """Refuse (:class:`VersionRefused`, exit 2) a job the Marathon it is for cannot run, naming its version
    (``where``: how that Marathon is named, e.g. ``at http://m:8080``): a container network before 1.5,
    the ``IS`` operator or an ``@`` field before 1.6, a Marathon older than 1.4. Nothing is sent."""
    caps = versions.capabilities(marathon_version)
    who = f"{caps.shown}{' ' + where if where else ''}"
    if not caps.supported:
        raise VersionRefused(f"{spec.source}: {who} is older than marathon-tf supports (Marathon 1.4 – 1.11)",
                             hint="upgrade Marathon to 1.4 or newer")
    if spec.network == "container" and not caps.has_networks:
        raise VersionRefused(
            f"{spec.source}: network.mode container needs Marathon 1.5 or newer; {who} drops top-level networks "
            f"and container.portMappings (its api/v2/json/Formats.scala reads portMappings only under "
            f"container.docker), so every task would fail with a misleading health-check portIndex error",
            hint='use host networking (leave out "network", or {"mode": "host"}), or upgrade Marathon to 1.5+')
    problems = constraint_problems(spec, caps)
    if problems:
        raise VersionRefused(f"{spec.source}: {problems[0]}; {who} would not hold the job to it"
                             + (f" (and {len(problems) - 1} more like it)" if len(problems) > 1 else ""),
                             hint="use hostname instead of @hostname, LIKE with the value instead of IS, or "
                                  "upgrade Marathon to 1.6+; give GROUP_BY a count (one app holds one task: "
                                  "constraints_per_task's GROUP_BY constrains nothing; constraints spread the job's "
                                  "tasks)")


def default_templates_dir() -> Path:
    """``app_templates/`` inside the installed package, or beside it in a source checkout."""
    package = Path(__file__).resolve().parent.parent  # marathon_tf/
    for candidate in (package / "app_templates", package.parent / "app_templates"):
        if (candidate / "task.json.j2").is_file():
            return candidate
    raise RenderError("marathon-tf's app_templates/ directory is missing from the installation")


@functools.lru_cache(maxsize=8)
def _environment(templates_dir: str | None) -> jinja2.Environment:
    loaders: list[jinja2.BaseLoader] = []
    if templates_dir:
        if not Path(templates_dir).is_dir():
            raise RenderError(f"--templates {templates_dir}: not a directory")
        loaders.append(jinja2.FileSystemLoader(templates_dir))
    loaders.append(jinja2.FileSystemLoader(str(default_templates_dir())))
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )
    env.policies["json.dumps_kwargs"] = {"sort_keys": True, "ensure_ascii": False}
    return env


# Placeholders for the per-task values while a role's template is rendered once: control
# characters, which no validated job value can contain; in the JSON text tojson writes them as
# \u0001 escapes (a template that prints them without tojson is rendered the full way).
_STAMP_ID, _STAMP_INDEX = "\x01mtf-app-id\x01", "\x01mtf-index\x01"
_STAMP_ID_JSON, _STAMP_INDEX_JSON = (json.dumps(v)[1:-1] for v in (_STAMP_ID, _STAMP_INDEX))
_STAMP_APPS = "\x01mtf-apps\x01"


def _render_text(env: jinja2.Environment, name: str, context: dict[str, Any]) -> str:
    try:
        return env.get_template(name).render(**context)
    except jinja2.TemplateError as e:
        lineno = getattr(e, "lineno", None)
        where = f" line {lineno}" if lineno else ""
        raise RenderError(f"template {name}{where}: {e.message}") from None


def _render_json(env: jinja2.Environment, name: str, context: dict[str, Any]) -> dict[str, Any]:
    return _parse_json(name, _render_text(env, name, context))


def template_environment(templates_dir: str | None = None) -> jinja2.Environment:
    """The Jinja environment every target's templates are rendered in (``app_templates/``, overridden
    file by file by ``templates_dir``; StrictUndefined; ``tojson`` sorts keys)."""
    return _environment(str(templates_dir) if templates_dir else None)


def render_template(env: jinja2.Environment, name: str, context: dict[str, Any]) -> dict[str, Any]:
    """Template ``name`` rendered and parsed back: a JSON object, else a :class:`RenderError` naming it."""
    return _render_json(env, name, context)


@dataclass(frozen=True)
class RoleFacts:
    """What a role's tasks run, from the job's keys and the role's own (which win): the same for
    every target (Marathon here, the export targets in :mod:`marathon_tf.user.targets`)."""

    image: str | None
    #: the role's command, else the job's; tensorboard's own only (None: TensorBoard on the logdir)
    command: tuple[str, ...] | str | None
    env: dict[str, str]
    constraints: tuple[tuple[str, ...], ...]
    #: where ``constraints`` come from in the job file: ``constraints`` or ``roles.<role>.constraints``
    constraints_key: str
    #: ``constraints_per_task``, the role's or the job's: copied into every app as they are
    per_task: tuple[tuple[str, ...], ...] = ()
    per_task_key: str = "constraints_per_task"


def role_facts(spec: JobSpec, role_name: str) -> RoleFacts:
    role = spec.role(role_name)
    own = role.constraints is not None
    own_per_task = role.constraints_per_task is not None
    command = role.command if role.command is not None or role_name == "tensorboard" else spec.command
    return RoleFacts(image=role.image or spec.image, command=command, env={**spec.env, **role.env},
                     constraints=tuple(role.constraints if role.constraints is not None else spec.constraints),
                     constraints_key=f"roles.{role_name}.constraints" if own else "constraints",
                     per_task=tuple(role.constraints_per_task if role.constraints_per_task is not None
                                    else spec.constraints_per_task),
                     per_task_key=f"roles.{role_name}.constraints_per_task" if own_per_task else "constraints_per_task")


def leader_task(spec: JobSpec) -> str:
    """The job's deciding task, which leads its rendezvous and its placement (``chief-0`` or ``worker-0``)."""
    return "chief-0" if spec.completion == "chief" else "worker-0"


def placement_scopes(spec: JobSpec) -> list[spread.Scope]:
    """The job's placement scopes (:mod:`marathon_tf.contract.spread`): the job's relational rules over
    the roles without constraints of their own, each role's over its tasks; only scopes with rules."""
    leader = leader_task(spec)
    members: dict[str, list[str]] = {}
    keys: dict[str, str] = {}
    rules: dict[str, tuple[spread.Rule, ...]] = {}
    for role in naming.ROLES:
        count = spec.role(role).count
        if not count:
            continue
        facts = role_facts(spec, role)
        name = "job" if facts.constraints_key == "constraints" else role
        rules[name] = spread.rules_of(facts.constraints)[1]
        keys[name] = facts.constraints_key
        members.setdefault(name, []).extend(naming.task_name(role, i) for i in range(count))
    return [spread.Scope(name, keys[name], rules[name], tuple(tasks), leader if leader in tasks else tasks[0])
            for name, tasks in members.items() if rules[name]]


def _group(env: jinja2.Environment, group_id: str, apps: list[dict[str, Any]]) -> dict[str, Any]:
    """The group template rendered once with a placeholder for ``apps``, which is then put in
    as the parsed list (no JSON round trip of every app); checked against a full rendering with
    the first two apps, else rendered the full way."""
    if len(apps) <= 2:
        return _render_json(env, "group.json.j2", {"group_id": group_id, "apps": apps})
    try:
        shell = _render_json(env, "group.json.j2", {"group_id": group_id, "apps": _STAMP_APPS})
    except Exception:  # a placeholder a custom template cannot take: the full way reports real errors
        shell = {}
    keys = [k for k, v in shell.items() if v == _STAMP_APPS]
    few = apps[:2]
    if len(keys) == 1 and _render_json(env, "group.json.j2", {"group_id": group_id, "apps": few}) == {
            **shell, keys[0]: few}:
        shell[keys[0]] = apps
        return shell
    return _render_json(env, "group.json.j2", {"group_id": group_id, "apps": apps})


def _parse_json(name: str, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise RenderError(f"template {name} produced invalid JSON at line {e.lineno} column {e.colno}: "
                          f"{e.msg}") from None
    if not isinstance(value, dict):
        raise RenderError(f"template {name} must produce a JSON object")
    return value


def _shell_command(command: tuple[str, ...] | str) -> str:
    """The user's command as one shell word list: an argv list is quoted exactly;
    a shell string is passed as a single argument for the bootstrap to run with sh -c."""
    if isinstance(command, str):
        return shlex.quote(command)
    return shlex.join(command)


def _container(spec: JobSpec, image: str | None) -> dict[str, Any] | None:
    volumes = [{"containerPath": v.container_path, "hostPath": v.host_path, "mode": v.mode}
               for v in spec.volumes]
    container: dict[str, Any] = {}
    if image:
        container["type"] = "DOCKER" if spec.containerizer == "docker" else "MESOS"
        container["docker"] = {"image": image}
    elif volumes or spec.network == "container":
        container["type"] = "MESOS"
    if volumes:
        container["volumes"] = volumes
    return container or None


def _ports(spec: JobSpec, names: tuple[str, ...]) -> tuple[list | None, list | None]:
    """(portDefinitions, container portMappings) for the job's network mode."""
    # the status port says where its metrics are: Prometheus' marathon_sd_configs reads port labels
    # (__meta_marathon_port_definition_label_metrics / __meta_marathon_port_mapping_label_metrics)
    labels = {STATUS_PORT: {"labels": {"metrics": "/metrics"}}}
    if spec.network == "container":
        return None, [{"containerPort": _CONTAINER_PORTS[n], "name": n, "protocol": "tcp", **labels.get(n, {})}
                      for n in names]
    return [{"port": 0, "name": n, "protocol": "tcp", **labels.get(n, {})} for n in names], None


def _networks(spec: JobSpec) -> list[dict[str, str]] | None:
    if spec.network != "container":
        return None
    net = {"mode": "container"}
    if spec.network_name:
        net["name"] = spec.network_name
    return [net]


def _fetch(spec: JobSpec) -> list[dict[str, Any]]:
    out = []
    for f in spec.fetch:
        item: dict[str, Any] = {"uri": f.uri, "extract": f.extract, "executable": f.executable, "cache": f.cache}
        if f.dest_path:
            item["destPath"] = f.dest_path
        out.append(item)
    return out


def _restart(spec: JobSpec) -> dict[str, Any]:
    r = spec.restart
    return {
        "backoff_seconds": int(math.ceil(r.backoff_seconds)),
        "backoff_factor": r.backoff_factor,
        "max_launch_delay_seconds": int(math.ceil(r.max_launch_delay_seconds)),
    }


def _task_context(spec: JobSpec, role: str, index: int) -> TaskContext:
    d = spec.discovery
    return TaskContext(
        job=spec.name, role=role, index=index, cluster=spec.cluster_counts(),
        discovery=d.mode, mesos_dns=d.nameserver, mesos_dns_http=d.http_api,
        dns_domain=d.domain, dns_framework=d.framework, marathon_url=d.marathon_url,
        spec_style=spec.cluster_spec, port_name=TF_PORT, status_port_name=STATUS_PORT,
        network=spec.network, startup_timeout=d.startup_timeout, style=spec.style,
        completion=spec.completion,
        restart_budget=(spec.restart.max_failures, spec.restart.window_seconds),
        permanent_exit_codes=spec.restart.permanent_exit_codes, logdir=spec.logdir,
        progress_timeouts=(spec.restart.progress_timeout_seconds, spec.restart.first_step_timeout_seconds),
        target_step=spec.target_step,
        prewarm=spec.prewarm, gpus=spec.role(role).gpus,
        preemption_budget=(spec.restart.max_preemptions, PREEMPTION_WINDOW),
        preemption_exit_codes=spec.restart.preemption_exit_codes, grace_seconds=spec.restart.grace_seconds,
        admission=(spec.admission.timeout, spec.admission.retries, spec.admission.backoff_seconds),
        elastic=spec.elastic(),
    )


def _tasks_text(tasks: tuple[str, ...]) -> str:
    shown = ", ".join(tasks[:4]) + (f" … ({len(tasks)} tasks)" if len(tasks) > 4 else "")
    return shown


def placement_lines(spec: JobSpec) -> list[str]:
    """What the job's constraints mean, one line per kind (``validate``): rules across a scope's tasks
    (job or role), the same for each task, and ``constraints_per_task`` in each app as they are."""
    out = []
    for scope in placement_scopes(spec):
        where = "the job's tasks" if scope.name == "job" else f"the {scope.name} tasks"
        rules = ", ".join(spread.constraint_text(r.constraint()) for r in scope.rules)
        out.append(f"{scope.key} {rules}: across {where} ({_tasks_text(scope.tasks)}), not within each app; "
                   f"{scope.first} first, then the job's leader {leader_task(spec)} places the others one at a "
                   f"time (UNLIKE/LIKE of the hosts or values their siblings hold) and moves one that lands "
                   f"beside a sibling; the programs start once it holds. Marathon's per-app meaning: "
                   f"constraints_per_task")
    seen: set[tuple[str, tuple]] = set()
    for role in spec.counts():
        facts = role_facts(spec, role)
        kept = spread.rules_of(facts.constraints)[0]
        if kept and (facts.constraints_key, kept) not in seen:
            seen.add((facts.constraints_key, kept))
            out.append(f"{facts.constraints_key} {', '.join(spread.constraint_text(c) for c in kept)}: hold for "
                       f"each task (the same within one app or across many)")
        if facts.per_task and (facts.per_task_key, facts.per_task) not in seen:
            seen.add((facts.per_task_key, facts.per_task))
            relational = [c for c in facts.per_task if spread.relational(c)]
            out.append(f"{facts.per_task_key} {', '.join(spread.constraint_text(c) for c in facts.per_task)}: copied "
                       f"into each app as they are; Marathon compares them among one app's instances"
                       + (", and each task is an app of its own, so "
                          + ", ".join(spread.constraint_text(c) for c in relational)
                          + " constrains nothing across tasks" if relational else ""))
    return out


class _Renderer:
    """Holds what every app of one job shares, so rendering 10,000 tasks stays linear."""

    def __init__(self, spec: JobSpec, templates_dir: str | None, marathon_version: MarathonVersionLike = None):
        self.spec = spec
        self.caps = versions.capabilities(marathon_version)
        check_version(spec, self.caps)
        self.env = _environment(str(templates_dir) if templates_dir else None)
        self.group_id = naming.group_id(spec.name)
        self.shared = {
            "restart": _restart(spec),
            "health": dict(_HEALTH),
            "kill_grace_seconds": _grace(spec),
            "fetch": _fetch(spec),
            "networks": _networks(spec),
            "instances": 1,
            "unreachable": self.caps.unreachable_strategy,
        }
        self.spec_label = json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":"))
        self._per_role: dict[str, dict[str, Any]] = {}
        #: task name -> its placement scope (tasks of a job or role rule)
        self.scopes = {t: scope for scope in placement_scopes(spec) for t in scope.tasks}
        #: the label its tasks without GPUs carry where only it keeps them off the GPU agents (1.5.7 - 1.7)
        self.gpu_label = {GPU_BEHAVIOR_LABEL: "restricted"} if self.caps.gpu_restriction_by_label and any(
            spec.role(r).gpus for r in naming.ROLES if spec.role(r).count) else {}

    def _role_parts(self, role_name: str) -> dict[str, Any]:
        """What every task of a role shares (command, container, env, constraints)."""
        if role_name in self._per_role:
            return self._per_role[role_name]
        spec, role, facts = self.spec, self.spec.role(role_name), role_facts(self.spec, role_name)
        port_names = (TB_PORT,) if role_name == "tensorboard" else (TF_PORT, STATUS_PORT)
        port_definitions, port_mappings = _ports(spec, port_names)
        container = _container(spec, facts.image)
        if port_mappings:
            container = {**(container or {"type": "MESOS"}), "portMappings": port_mappings}
        command = facts.command  # tensorboard's: its own (the job's command is the trainer's)
        if role_name == "tensorboard":
            if command is None:
                port_var = "$PORT_HTTP"
                cmd = (f"tensorboard --logdir {shlex.quote(spec.logdir)} "
                       f"--port \"{port_var}\" --bind_all")
            else:
                cmd = command if isinstance(command, str) else shlex.join(command)
        else:
            assert command is not None  # validated: every member role has a command
            cmd = f"{spec.bootstrap} -- {_shell_command(command)}"
        parts = {
            "role": role,
            "cmd": cmd,
            "container": container,
            "port_definitions": port_definitions,
            "status_port_index": port_names.index(STATUS_PORT) if STATUS_PORT in port_names else 0,
            "user_env": facts.env,
            "constraints": [for_marathon(c, self.caps) for c in self._constraints(facts)],
            "template": "tensorboard.json.j2" if role_name == "tensorboard" else "task.json.j2",
        }
        self._per_role[role_name] = parts
        return parts

    @staticmethod
    def _constraints(facts: RoleFacts) -> list[tuple[str, ...]]:
        """What every app of a role carries: ``constraints_per_task`` as they are, the rules' per-task
        constraints (LIKE, UNLIKE, IS, CLUSTER value) and, for a rule on an attribute, that the agent has it."""
        kept, rules = spread.rules_of(facts.constraints)
        out = list(facts.per_task) + list(kept)
        for rule in rules:
            presence = rule.presence()
            if presence is not None and presence not in out:
                out.append(presence)
        return out

    def _context(self, role_name: str, index: int, app_id: str, index_text: str) -> dict[str, Any]:
        parts = self._role_parts(role_name)
        env = dict(parts["user_env"])
        task_ctx = _task_context(self.spec, role_name, index)
        if self.scopes:
            task_ctx = replace(task_ctx, placement=True)
        env.update(task_ctx.to_env())
        env["MTF_INDEX"] = index_text
        labels = {**({} if self.spec.role(role_name).gpus else self.gpu_label), **self.spec.labels}
        labels.update({L.JOB: self.spec.name, L.ROLE: role_name, L.INDEX: index_text, L.VERSION: __version__})
        if role_name == "worker" and index == 0:
            labels[SPEC_LABEL] = self.spec_label
        if self.spec.role(role_name).elastic:  # the role's bounds, in the Marathon UI too (docs/elastic.md)
            labels[L.ELASTIC] = self.spec.role(role_name).count_text
        out = {**self.shared, **parts, "app_id": app_id, "env": env, "labels": labels}
        scope = self.scopes.get(naming.task_name(role_name, index))
        if scope is not None:  # a task of a placement rule: the first is placed at once, the others held
            labels[spread.RULES_LABEL] = scope.label()
            if naming.task_name(role_name, index) != scope.first:
                labels[spread.LABEL] = spread.label_value((spread.HOLD,), spread.held_why(scope))
                out["constraints"] = parts["constraints"] + [list(spread.HOLD)]
        return out

    def _unheld(self, role_name: str) -> int:
        """How many of a role's first tasks render differently from the rest: worker-0 (the spec
        label) and the first task of a placement scope (not held)."""
        first = naming.task_name(role_name, 0)
        return 1 if role_name == "worker" or (first in self.scopes and self.scopes[first].first == first) else 0

    def _checked(self, template: str, app_id: str, app: dict[str, Any]) -> dict[str, Any]:
        if app.get("id") != app_id:
            raise RenderError(f"template {template} must keep the app id {app_id!r} (got {app.get('id')!r})")
        if "unreachableStrategy" in app and not self.caps.accepts_unreachable(app["unreachableStrategy"]):
            raise RenderError(f"template {template} writes unreachableStrategy "
                              f"{json.dumps(app['unreachableStrategy'], sort_keys=True)}, which {self.caps.shown} "
                              f"refuses (its state/UnreachableStrategy.scala)",
                              hint='write "unreachableStrategy": {{ unreachable | tojson }} (what that version takes)')
        return app

    def app(self, role_name: str, index: int) -> dict[str, Any]:
        """One task's app, rendered through its template (the reference :meth:`apps` is checked against)."""
        app_id = naming.app_id(self.spec.name, role_name, index)
        template = self._role_parts(role_name)["template"]
        return self._checked(template, app_id, _render_json(
            self.env, template, self._context(role_name, index, app_id, str(index))))

    def _plan(self, role_name: str, count: int) -> tuple[dict[int, dict[str, Any]], str | None]:
        """A role's apps as (index -> app rendered the full way, JSON text with placeholders for
        every other index, or None). The template is rendered once with placeholders for the
        per-task values (app id, index); each task is stamped from that text, so the cost per task
        is a string replace. The first and the last stamped task are also rendered the full way
        and must come out the same; if not (a custom template that does more with those values
        than print them), every task is rendered the full way."""
        first = self._unheld(role_name)  # worker-0 (the spec label), a scope's first task: rendered the full way
        if count <= 2 or (first and count <= 3):
            return {i: self.app(role_name, i) for i in range(count)}, None
        template = self._role_parts(role_name)["template"]
        try:
            text = _render_text(self.env, template, self._context(role_name, count - 1, _STAMP_ID, _STAMP_INDEX))
            stamped = {i: self._stamp(template, text, role_name, i) for i in (first, count - 1)}
        except Exception:  # placeholders a custom template cannot take: the full way reports real errors
            stamped = None
        if stamped is None or any(stamped[i] != self.app(role_name, i) for i in stamped):
            return {i: self.app(role_name, i) for i in range(count)}, None
        return {**{i: self.app(role_name, i) for i in range(first)}, **stamped}, text

    def apps(self, role_name: str, count: int) -> list[dict[str, Any]]:
        """Every task's app of a role (see :meth:`_plan`)."""
        full, text = self._plan(role_name, count)
        template = self._role_parts(role_name)["template"]
        # text is None only when full has every index
        return [full[i] if i in full else self._stamp(template, cast(str, text), role_name, i) for i in range(count)]

    def app_texts(self, role_name: str, count: int) -> tuple[list[str], list[dict[str, Any]]]:
        """Every task's app of a role as compact JSON text with sorted keys (what
        ``json.dumps(app, separators=(",", ":"), sort_keys=True)`` gives), stamped from one
        compact text; and the first two apps as dicts (for checking the group template)."""
        full, text = self._plan(role_name, count)
        compact = None if text is None else _compact(json.loads(text))
        # text (and compact) is None only when full has every index
        out = [_compact(full[i]) if i in full else cast(str, compact).replace(
                   _STAMP_ID_JSON, naming.app_id(self.spec.name, role_name, i)).replace(_STAMP_INDEX_JSON, str(i))
               for i in range(count)]
        template = self._role_parts(role_name)["template"]
        return out, [full[i] if i in full else self._stamp(template, cast(str, text), role_name, i)
                     for i in range(min(2, count))]

    def _stamp(self, template: str, text: str, role_name: str, index: int) -> dict[str, Any]:
        app_id = naming.app_id(self.spec.name, role_name, index)
        return self._checked(template, app_id, _parse_json(
            template, text.replace(_STAMP_ID_JSON, app_id).replace(_STAMP_INDEX_JSON, str(index))))


def render_app(spec: JobSpec, role: str, index: int, *, templates_dir: str | None = None,
               marathon_version: MarathonVersionLike = None) -> dict[str, Any]:
    """One task's Marathon app (for ``marathon_version``: see the module)."""
    return _Renderer(spec, templates_dir, marathon_version).app(role, index)


def render_group(spec: JobSpec, *, templates_dir: str | None = None,
                 marathon_version: MarathonVersionLike = None) -> dict[str, Any]:
    """The job's Marathon group: ``{"id": "/<job>", "apps": [...]}``, for the Marathon ``marathon_version``
    names (None: the newest); :class:`VersionRefused` for a job that Marathon cannot run."""
    r = _Renderer(spec, templates_dir, marathon_version)
    apps = [app for role in naming.ROLES for app in r.apps(role, spec.role(role).count)]
    group = _group(r.env, r.group_id, apps)
    if group.get("id") != r.group_id:
        raise RenderError(f"template group.json.j2 must keep the group id {r.group_id!r}")
    return group


def render_group_json(spec: JobSpec, *, templates_dir: str | None = None,
                      marathon_version: MarathonVersionLike = None) -> str:
    """The job's Marathon group as compact JSON text with sorted keys: exactly
    ``json.dumps(render_group(spec), separators=(",", ":"), sort_keys=True)``, built from the
    stamped texts without making and serialising a dict per app (what ``marathon-tf render``
    prints when its output goes to a program)."""
    r = _Renderer(spec, templates_dir, marathon_version)
    texts: list[str] = []
    few: list[dict[str, Any]] = []
    for role in naming.ROLES:
        role_texts, role_few = r.app_texts(role, spec.role(role).count)
        texts += role_texts
        few += role_few
    if len(texts) > 2:
        try:
            shell = _render_json(r.env, "group.json.j2", {"group_id": r.group_id, "apps": _STAMP_APPS})
        except Exception:  # a placeholder a custom template cannot take
            shell = {}
        keys = [k for k, v in shell.items() if v == _STAMP_APPS]
        if len(keys) == 1 and shell.get("id") == r.group_id and _render_json(
                r.env, "group.json.j2", {"group_id": r.group_id, "apps": few[:2]}) == {**shell, keys[0]: few[:2]}:
            return _compact(shell).replace(_compact(_STAMP_APPS), "[" + ",".join(texts) + "]", 1)
    return _compact(render_group(spec, templates_dir=templates_dir, marathon_version=r.caps))


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)
