"""The local Marathon's in-memory model: apps, groups, tasks and their JSON views.

Marathon JSON stays plain dicts. An app's *definition* is the normalized app
document the user gave (defaults filled in, server-set fields stripped); its
*run spec* is the definition the scheduler currently launches, which a
deployment step switches over (see ``deployments.py``). The JSON views emulate
Marathon 1.8 (fields the third-party client ``marathon`` 0.13 understands).
"""

from __future__ import annotations

import copy
import math
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from marathon_tf.contract import naming

from .validation import NEWEST_RULES, AppRules

__all__ = [
    "now_ts", "canonical_path", "parent_path", "normalize_app", "is_scale_only",
    "Task", "AppState", "State", "AGENT_ID", "FRAMEWORK_ID", "TERMINAL_STATES",
]

AGENT_ID = "a1b2c3d4-0000-4000-8000-000000000000-S0"
FRAMEWORK_ID = "a1b2c3d4-0000-4000-8000-000000000000-0000"
TERMINAL_STATES = {"TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_ERROR", "TASK_LOST",
                   "TASK_GONE", "TASK_DROPPED"}

#: Fields the server sets; never part of a definition.
SERVER_FIELDS = {"version", "versionInfo", "tasksStaged", "tasksRunning", "tasksHealthy",
                 "tasksUnhealthy", "deployments", "tasks", "lastTaskFailure", "taskStats",
                 "readinessCheckResults", "ports", "uris_resolved"}

_APP_DEFAULTS: dict[str, Any] = {
    "instances": 1, "cpus": 1.0, "mem": 128.0, "disk": 0.0, "gpus": 0, "executor": "",
    "constraints": [], "labels": {}, "env": {}, "fetch": [], "requirePorts": False,
    "backoffSeconds": 1, "backoffFactor": 1.15, "maxLaunchDelaySeconds": 300,
    "healthChecks": [], "readinessChecks": [], "dependencies": [],
    "upgradeStrategy": {"minimumHealthCapacity": 1.0, "maximumOverCapacity": 1.0},
    "unreachableStrategy": {"inactiveAfterSeconds": 0, "expungeAfterSeconds": 0},
    "killSelection": "YOUNGEST_FIRST", "networks": [{"mode": "host"}],
}
MAX_VERSIONS = 50
_HC_DEFAULTS = {"gracePeriodSeconds": 300, "intervalSeconds": 60, "timeoutSeconds": 20,
                "maxConsecutiveFailures": 3, "delaySeconds": 15}


def now_ts(at: float | None = None) -> str:
    """Marathon's timestamp format ``yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`` (UTC)."""
    dt = datetime.fromtimestamp(time.time() if at is None else at, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def _parse_ts(ts: str) -> float:
    """Inverse of :func:`now_ts`."""
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


def canonical_path(path_id: str, base: str = "/") -> str:
    """Marathon's ``PathId.canonicalPath``: resolve a relative id against ``base``."""
    if not path_id.startswith("/"):
        path_id = base.rstrip("/") + "/" + path_id
    parts: list[str] = []
    for seg in path_id.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if parts:
                parts.pop()
        else:
            parts.append(seg)
    return "/" + "/".join(parts)


def parent_path(path_id: str) -> str:
    """``/a/b/c`` -> ``/a/b``; ``/a`` -> ``/``."""
    head = path_id.rstrip("/").rsplit("/", 1)[0]
    return head or "/"


def normalize_app(raw: dict, app_id: str, unreachable: dict | None = None) -> dict:
    """A full app definition: ``raw`` without server fields, defaults filled in (``unreachable``: the
    played version's ``unreachableStrategy`` default, ``versions.Played.unreachable_default``; None: 0/0)."""
    app = copy.deepcopy(_APP_DEFAULTS)
    if unreachable is not None:
        app["unreachableStrategy"] = dict(unreachable)
    for key, value in raw.items():
        if key not in SERVER_FIELDS:
            app[key] = copy.deepcopy(value)
    app["id"] = app_id
    if "portDefinitions" not in raw:
        has_mappings = bool((raw.get("container") or {}).get("portMappings"))
        app["portDefinitions"] = [] if has_mappings else [{"port": 0, "name": "default", "protocol": "tcp"}]
    app["portDefinitions"] = [{"protocol": "tcp", **pd} for pd in app["portDefinitions"] or []]
    checks = []
    for hc in app.get("healthChecks") or []:
        hc = {**_HC_DEFAULTS, "protocol": "HTTP", **hc}
        if hc["protocol"] in ("HTTP", "HTTPS", "MESOS_HTTP", "MESOS_HTTPS"):
            hc.setdefault("path", "/")
        if hc["protocol"] != "COMMAND" and "port" not in hc:
            hc.setdefault("portIndex", 0)
        checks.append(hc)
    app["healthChecks"] = checks
    app["fetch"] = [{"extract": True, "executable": False, "cache": False, **f} for f in app.get("fetch") or []]
    for key in ("cpus", "mem", "disk"):
        if isinstance(app.get(key), (int, float)) and not isinstance(app.get(key), bool):
            app[key] = float(app[key])
    return app


def is_scale_only(old: dict, new: dict) -> bool:
    """True when the two definitions differ in ``instances`` only (Marathon's ``isOnlyScaleChange``)."""
    return {**old, "instances": 0} == {**new, "instances": 0} and old.get("instances") != new.get("instances")


@dataclass
class Task:
    """One Marathon task (Mesos task) of an app instance."""

    id: str
    app_id: str
    instance_id: str
    version: str
    config_version: str
    ports: list[int]
    sandbox: str
    staged_at: str = field(default_factory=now_ts)
    state: str = "TASK_STAGING"
    started_at: str | None = None
    started_mono: float | None = None
    pid: int | None = None
    killing: bool = False
    health: dict[int, dict] = field(default_factory=dict)
    #: The agent it runs on (its id and hostname), what it takes of it, and its GPUs' indices.
    agent_id: str = AGENT_ID
    host: str = "127.0.0.1"
    consumed: tuple = ()
    gpus: tuple[int, ...] = ()
    #: Agent lost: since when (``time.monotonic()``) the task is TASK_UNREACHABLE; ``inactive`` once
    #: Marathon stopped counting it (``unreachableStrategy.inactiveAfterSeconds``), after which it
    #: is expunged (``expungeAfterSeconds``).
    unreachable_since: float | None = None
    inactive: bool = False

    @property
    def active(self) -> bool:
        """Not in a terminal state."""
        return self.state not in TERMINAL_STATES

    @property
    def running(self) -> bool:
        return self.state == "TASK_RUNNING" and not self.killing

    def healthy(self, n_checks: int) -> bool | None:
        """True/False once every check has a result; None while any is unknown."""
        if n_checks == 0:
            return None
        results = [r for r in (self.health.get(i) for i in range(n_checks)) if r is not None]
        if len(results) < n_checks:
            return None
        return all(r["alive"] for r in results)

    def to_json(self, service_ports: Iterable[int] = ()) -> dict:
        """The 1.8 task JSON."""
        return {
            "id": self.id, "appId": self.app_id, "host": self.host, "slaveId": self.agent_id,
            "state": self.state, "stagedAt": self.staged_at, "startedAt": self.started_at,
            "version": self.version, "ports": list(self.ports), "servicePorts": list(service_ports),
            "ipAddresses": [{"ipAddress": self.host, "protocol": "IPv4"}],
            "healthCheckResults": [dict(self.health[i]) for i in sorted(self.health)],
            "localVolumes": [],
        }


@dataclass
class AppState:
    """An app of the root group plus its runtime: tasks, backoff, the current run spec."""

    id: str
    definition: dict
    version: str
    last_scaling_at: str
    last_config_change_at: str
    service_ports: list[int] = field(default_factory=list)
    run_def: dict | None = None
    run_config_version: str | None = None
    target: int = 0
    tasks: dict[str, Task] = field(default_factory=dict)
    backoff: float | None = None
    launch_after: float = 0.0
    queued_since: str | None = None
    last_task_failure: dict | None = None
    removed: bool = False
    #: version -> the app as it was then (definition, service ports, versionInfo), oldest first.
    history: dict[str, dict] = field(default_factory=dict)

    def record_version(self) -> None:
        """Keep the current definition under :attr:`version` (Marathon keeps ``zk_max_versions``: 50)."""
        self.history[self.version] = {"definition": copy.deepcopy(self.definition),
                                      "service_ports": list(self.service_ports),
                                      "versionInfo": {"lastScalingAt": self.last_scaling_at,
                                                      "lastConfigChangeAt": self.last_config_change_at}}
        while len(self.history) > MAX_VERSIONS:
            del self.history[next(iter(self.history))]

    def active_tasks(self) -> list[Task]:
        return [t for t in self.tasks.values() if t.active]

    def counts(self) -> dict:
        """``tasksStaged/Running/Healthy/Unhealthy``."""
        n_checks = len(self.definition.get("healthChecks") or [])
        active = self.active_tasks()
        running = [t for t in active if t.state == "TASK_RUNNING"]
        return {
            "tasksStaged": sum(1 for t in active if t.state in ("TASK_STAGING", "TASK_STARTING")),
            "tasksRunning": len(running),
            "tasksHealthy": sum(1 for t in running if t.healthy(n_checks) is True),
            "tasksUnhealthy": sum(1 for t in running if t.healthy(n_checks) is False),
        }

    def reset_backoff(self) -> None:
        self.backoff = None
        self.launch_after = 0.0


class State:
    """The root group: groups (id -> dependencies, version) and apps (id -> AppState)."""

    def __init__(self, host: str = "127.0.0.1", rules: AppRules = NEWEST_RULES) -> None:
        self.host = host
        #: The played version's app rules: its features, its ``unreachableStrategy`` default and validator
        #: (``versions.Played.app_rules``).
        self.rules = rules
        self.groups: dict[str, dict] = {"/": {"dependencies": [], "version": now_ts()}}
        self.apps: dict[str, AppState] = {}
        self._next_service_port = 10000
        #: root version -> the root group then: {"apps": {id: (definition, version)}, "groups": {id: {...}}}.
        #: Definitions are shared, not copied: they are replaced on change, never edited in place.
        self.root_history: dict[str, dict] = {}
        #: Bumped by :meth:`touch` on every change a view can show (the server's answers are cached
        #: per generation; the state is saved when it moved on).
        self.generation = 0

    def touch(self, *_: Any, **__: Any) -> None:
        """Something a view shows changed (apps, groups, tasks, health, deployments)."""
        self.generation += 1

    # -- queries -------------------------------------------------------------------------
    def visible_apps(self) -> dict[str, AppState]:
        """Apps of the current root group (apps being stopped are hidden, as in Marathon)."""
        return {k: a for k, a in self.apps.items() if not a.removed}

    def definitions(self) -> dict[str, dict]:
        return {k: a.definition for k, a in self.visible_apps().items()}

    def task_json(self, task: Task) -> dict:
        """A task's JSON with its app's service ports."""
        app = self.apps.get(task.app_id)
        return task.to_json(app.service_ports if app else ())

    def find_task(self, task_id: str) -> Task | None:
        for app in self.apps.values():
            if task_id in app.tasks:
                return app.tasks[task_id]
        return None

    def new_task_id(self, app_id: str) -> tuple[str, str]:
        """(task id, instance id) in the 1.8+ format ``<safePath>.instance-<uuid>._app.1``."""
        instance = f"{naming.safe_path(app_id)}.instance-{uuid.uuid1()}"
        return f"{instance}._app.1", instance

    # -- mutation ------------------------------------------------------------------------
    def _assign_service_ports(self, definition: dict, previous: Iterable[int]) -> list[int]:
        prev = list(previous)
        ports = []
        for i, pd in enumerate(definition.get("portDefinitions") or []):
            if pd.get("port"):
                ports.append(int(pd["port"]))
            elif i < len(prev):
                ports.append(prev[i])
            else:
                ports.append(self._next_service_port)
                self._next_service_port = 10000 + (self._next_service_port - 9999) % 10000
        return ports

    # Over ruff's complexity limit (C901), as one piece: one deployment step applied: a branch per step kind.
    def apply(self, apps: dict[str, dict], groups: dict[str, list], version: str) -> dict[str, str]:  # noqa: C901
        """Make ``apps``/``groups`` the root group; return app id -> change kind
        (``new``, ``scale``, ``restart``, ``removed``; unchanged apps are left out)."""
        self.touch()
        changes: dict[str, str] = {}
        for app_id, app in list(self.visible_apps().items()):
            if app_id not in apps:
                app.removed = True
                changes[app_id] = "removed"
        for app_id, definition in apps.items():
            current = self.apps.get(app_id)
            if current is None or current.removed:
                ports = self._assign_service_ports(definition, current.service_ports if current else [])
                if current is None:
                    current = AppState(app_id, definition, version, version, version, ports)
                    self.apps[app_id] = current
                else:
                    current.removed = False
                    current.definition, current.service_ports = definition, ports
                    current.version = current.last_scaling_at = current.last_config_change_at = version
                    current.history.clear()
                changes[app_id] = "new"
            elif current.definition == definition:
                continue
            elif is_scale_only(current.definition, definition):
                current.definition = definition
                current.version = current.last_scaling_at = version
                changes[app_id] = "scale"
            else:
                current.service_ports = self._assign_service_ports(definition, current.service_ports)
                current.definition = definition
                current.version = current.last_scaling_at = current.last_config_change_at = version
                changes[app_id] = "restart"
        for app_id in changes:
            if changes[app_id] != "removed":
                self.apps[app_id].record_version()
        old_groups = self.groups
        self.groups = {}
        for gid, deps in groups.items():
            before = old_groups.get(gid)
            self.groups[gid] = {"dependencies": list(deps),
                                "version": before["version"] if before else version}
        touched = set(changes) | {g for g in groups if old_groups.get(g, {}).get("dependencies") != groups[g]}
        for path in touched:
            while True:
                path = parent_path(path) if path != "/" else "/"
                if path in self.groups:
                    self.groups[path]["version"] = version
                if path == "/":
                    break
        if changes or touched or not self.root_history:
            self.root_history[version] = {
                "apps": {k: (a.definition, a.version) for k, a in self.visible_apps().items()},
                "groups": {g: {"dependencies": list(v["dependencies"]), "version": v["version"]}
                           for g, v in self.groups.items()}}
            while len(self.root_history) > MAX_VERSIONS:
                del self.root_history[next(iter(self.root_history))]
        return changes

    def group_versions(self, gid: str) -> list[str]:
        """The kept versions of group ``gid``, newest first (``GET /v2/groups/{id}/versions``)."""
        seen = {snap["groups"][gid]["version"] for snap in self.root_history.values() if gid in snap["groups"]}
        if gid in self.groups:
            seen.add(self.groups[gid]["version"])
        return sorted(seen, reverse=True)

    def group_at(self, gid: str, version: str) -> tuple[dict[str, dict], dict[str, list]] | None:
        """Apps and groups under ``gid`` when it had ``version`` (a target fragment); None if not kept."""
        for snap in reversed(list(self.root_history.values())):
            group = snap["groups"].get(gid)
            if group is not None and group["version"] == version:
                def under(path: str) -> bool:
                    return gid == "/" or path == gid or path.startswith(gid.rstrip("/") + "/")

                return ({k: copy.deepcopy(d) for k, (d, _) in snap["apps"].items() if under(k)},
                        {g: list(v["dependencies"]) for g, v in snap["groups"].items() if under(g)})
        return None

    def group_version_json(self, gid: str, version: str) -> dict | None:
        """GroupInfo of ``gid`` as it was at ``version`` (apps as definitions)."""
        for snap in reversed(list(self.root_history.values())):
            group = snap["groups"].get(gid)
            if group is not None and group["version"] == version:
                return self._snapshot_group(snap, gid)
        return None

    def _snapshot_group(self, snap: dict, gid: str) -> dict:
        apps = [{"id": k, **copy.deepcopy(d), "version": v} for k, (d, v) in sorted(snap["apps"].items())
                if parent_path(k) == gid]
        groups = [self._snapshot_group(snap, g) for g in sorted(snap["groups"]) if g != "/" and parent_path(g) == gid]
        return {"id": gid, "dependencies": list(snap["groups"][gid]["dependencies"]),
                "version": snap["groups"][gid]["version"], "apps": apps, "groups": groups, "pods": []}

    # -- views ---------------------------------------------------------------------------
    def version_json(self, app: AppState, version: str) -> dict | None:
        """The app as it was at ``version`` (``GET /v2/apps/{id}/versions/{version}``); None if not kept."""
        kept = app.history.get(version)
        if kept is None:
            return None
        out = {"id": app.id, **copy.deepcopy(kept["definition"])}
        for pd, port in zip(out.get("portDefinitions") or [], kept["service_ports"]):
            pd["port"] = port
        return {**out, "version": version, "versionInfo": dict(kept["versionInfo"])}

    def app_json(self, app: AppState, deployments: list[dict], embed: Iterable[str] = ()) -> dict:
        """The 1.8 app JSON; ``embed`` may hold ``tasks``, ``lastTaskFailure``, ``counts``, ``deployments``.
        It shares the definition's values (definitions are replaced, never edited in place): read it,
        encode it, do not change it."""
        embed = set(embed)
        out = {"id": app.id, **app.definition}
        ports = app.service_ports
        out["portDefinitions"] = [{**pd, "port": ports[i]} if i < len(ports) else pd
                                  for i, pd in enumerate(out.get("portDefinitions") or [])]
        out["version"] = app.version
        out["versionInfo"] = {"lastScalingAt": app.last_scaling_at,
                              "lastConfigChangeAt": app.last_config_change_at}
        out.update(app.counts())
        out["deployments"] = [{"id": d["id"]} for d in deployments]
        if "tasks" in embed:
            out["tasks"] = [t.to_json(app.service_ports) for t in app.active_tasks()]
        if "lastTaskFailure" in embed and app.last_task_failure:
            out["lastTaskFailure"] = dict(app.last_task_failure)
        if "taskStats" in embed:
            out["taskStats"] = self.task_stats(app)
        if "readiness" in embed:
            out["readinessCheckResults"] = []  # while a deployment runs: its results (api.py, readiness.py)
        return out

    def task_stats(self, app: AppState, at: float | None = None) -> dict:
        """Marathon's ``TaskStatsByVersion``: counts and lifetimes of the active tasks, grouped by the
        app version they run (a group without tasks is left out, as Marathon does)."""
        now = time.time() if at is None else at
        n_checks = len(app.definition.get("healthChecks") or [])
        active = app.active_tasks()

        def stats(tasks: list[Task]) -> dict | None:
            if not tasks:
                return None
            running = [t for t in tasks if t.state == "TASK_RUNNING"]
            out: dict[str, Any] = {"counts": {
                "staged": sum(1 for t in tasks if t.state in ("TASK_STAGING", "TASK_STARTING")),
                "running": len(running),
                "healthy": sum(1 for t in running if t.healthy(n_checks) is True),
                "unhealthy": sum(1 for t in running if t.healthy(n_checks) is False)}}
            lives = sorted(max(0.0, now - _parse_ts(t.started_at)) for t in tasks if t.started_at)
            if lives:
                mid = len(lives) // 2
                median = lives[mid] if len(lives) % 2 else (lives[mid - 1] + lives[mid]) / 2
                out["lifeTime"] = {"averageSeconds": sum(lives) / len(lives), "medianSeconds": median}
            return {"stats": out}

        groups = {"startedAfterLastScaling": [t for t in active if t.version >= app.last_scaling_at],
                  "withLatestConfig": [t for t in active if t.version >= app.last_config_change_at],
                  "withOutdatedConfig": [t for t in active if t.version < app.last_config_change_at],
                  "totalSummary": active}
        return {name: s for name, tasks in groups.items() if (s := stats(tasks)) is not None}

    def group_json(self, gid: str, app_view, embed: set[str]) -> dict:
        """GroupInfo of ``gid``. ``embed`` holds the resolved group-level embeds
        (``group.groups``, ``group.apps``, ``group.pods``); ``app_view(app)`` renders an app."""
        out: dict[str, Any] = {"id": gid, "dependencies": list(self.groups[gid]["dependencies"]),
                               "version": self.groups[gid]["version"]}
        if "group.apps" in embed:
            out["apps"] = [app_view(a) for k, a in sorted(self.visible_apps().items()) if parent_path(k) == gid]
        if "group.groups" in embed:
            out["groups"] = [self.group_json(g, app_view, embed) for g in sorted(self.groups)
                             if g != "/" and parent_path(g) == gid]
        if "group.pods" in embed:
            out["pods"] = []
        return out


def ceil_scale(instances: int, factor: float) -> int:
    """``scaleBy`` rounding: multiply and round up."""
    return int(math.ceil(instances * factor))
