"""Marathon's apps and tasks as typed values, parsed once from the JSON Marathon answers.

The rest of marathon-tf reads these attributes, never Marathon's fields: ``app.tasks`` (not
``app["tasks"]``), ``task.host``, ``task.started_at``, ``app.last_failure.state``,
``app.config_version`` (``versionInfo.lastConfigChangeAt``, else the version), ``app.deployments`` (their
ids), ``app.instances`` (1 when absent, as Marathon defaults it), ``app.newest_task()``; a deployment
``GET /v2/deployments`` lists is a :class:`Deployment`, what ``/v2/info`` says of the Mesos master and
Marathon's framework an :class:`Info`. A group's apps: :func:`job_apps` (marathon-tf's, by task name),
:func:`apps_by_id` (every app, subgroups too). ``tests/test_layout.py`` holds the rest of the package to
that; an event of ``/v2/events`` is an :class:`Event`.

:class:`App` and :class:`Task` are also the JSON objects they were read from (``dict`` subclasses):
what is written back to Marathon (a placement write, a scale, a re-deploy's comparison) is the app as
Marathon gave it, byte for byte, and the readers in this package that take plain dicts (``jobstate``,
``waiting``, ``tasks``) take these alike. Their attributes are read when they are made: one changed
afterwards (``app["instances"] = 0``) is not seen by them — make a new one (:meth:`App.parse`).

The fields may be absent or ``null`` (Marathon 1.4 writes ``null`` for unset options, a group
``GET`` without ``embed`` has no tasks): each attribute says its default. Answers are checked for
shape before they are read (:mod:`marathon_tf.marathon.shapes`), and a field of the wrong type here
reads as absent rather than raising. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from marathon_tf.contract import labels as L
from marathon_tf.contract import naming

__all__ = ["Task", "Failure", "HealthResult", "App", "Deployment", "Info", "Event", "job_apps", "apps_by_id",
           "parse_apps", "newest_task", "oldest_first", "wall"]


def _str(value: Any) -> str | None:
    return str(value) if value not in (None, "") and not isinstance(value, (dict, list)) else None


def _map(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _objects(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _count(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _ints(value: Any) -> tuple[int, ...]:
    out = []
    for v in value if isinstance(value, list) else []:
        try:
            out.append(int(v))
        except (TypeError, ValueError):
            out.append(0)
    return tuple(out)


def wall(timestamp: Any) -> float | None:
    """A Marathon timestamp (``2026-11-24T06:37:55.582Z``) as Unix seconds; None when missing or bad.
    One without a zone is read as UTC (Marathon always writes ``Z``)."""
    if not timestamp or not isinstance(timestamp, str):
        return None
    try:
        then = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if then.tzinfo is None:
        then = then.replace(tzinfo=timezone.utc)
    return then.timestamp()


@dataclass(frozen=True)
class HealthResult:
    """One health check's result on a task (``healthCheckResults[]``)."""

    alive: bool
    #: When the check first passed (a Marathon timestamp), or None.
    first_success: str | None = None


@dataclass(frozen=True)
class Failure:
    """An app's ``lastTaskFailure``: the last task of it that ended other than by finishing."""

    task_id: str | None
    state: str | None
    message: str = ""
    host: str | None = None
    #: The app version the task was launched with.
    version: str | None = None
    timestamp: str | None = None

    @classmethod
    def parse(cls, raw: Any) -> Failure | None:
        if not isinstance(raw, Mapping) or not raw:
            return None
        return cls(_str(raw.get("taskId")), _str(raw.get("state")), str(raw.get("message") or ""),
                   _str(raw.get("host")), _str(raw.get("version")), _str(raw.get("timestamp")))

    @property
    def text(self) -> str:
        """In one line: ``TASK_FAILED: Command exited with status 1``."""
        return f"{self.state or ''}: {self.message or ''}".strip(": ")


@dataclass(frozen=True)
class Deployment:
    """One deployment as ``GET /v2/deployments`` lists it: its id and the ids of the apps its plan changes."""

    id: str | None
    affected_apps: tuple[str, ...] = ()

    @classmethod
    def parse(cls, raw: Any) -> Deployment:
        raw = raw if isinstance(raw, Mapping) else {}
        apps = raw.get("affectedApps")
        return cls(_str(raw.get("id")), tuple(str(a) for a in apps) if isinstance(apps, list) else ())


@dataclass(frozen=True)
class Info:
    """What ``GET /v2/info`` says that marathon-tf reads beyond the version (:mod:`~marathon_tf.marathon.versions`
    reads that): the leading Mesos master's URL, Marathon's framework (id, name) and role."""

    #: The leading master's URL (``marathon_config.mesos_leader_ui_url``), or None.
    mesos_url: str | None = None
    #: Marathon's framework id (``frameworkId``), or None before it registered.
    framework_id: str | None = None
    #: Its framework name (``marathon_config.framework_name``, else ``name``), or None.
    framework_name: str | None = None
    #: The Mesos role it registers with (``marathon_config.mesos_role``), or None.
    mesos_role: str | None = None

    @classmethod
    def parse(cls, raw: Any) -> Info:
        raw = raw if isinstance(raw, Mapping) else {}
        config = _map(raw.get("marathon_config"))
        url = _str(config.get("mesos_leader_ui_url"))
        return cls(url.rstrip("/") if url else None, _str(raw.get("frameworkId")),
                   _str(config.get("framework_name")) or _str(raw.get("name")), _str(config.get("mesos_role")))


class Task(dict[str, Any]):
    """One Marathon task (``/v2/apps/<id>/tasks``, ``group.apps.tasks``, an app's ``tasks``)."""

    id: str | None
    app_id: str | None
    host: str | None
    #: ``TASK_STAGING`` … ``TASK_RUNNING`` …; None when absent.
    state: str | None
    #: The host ports, in the order of the app's port definitions (or mappings).
    ports: tuple[int, ...]
    started_at: str | None
    staged_at: str | None
    #: The app version the task was launched with.
    version: str | None
    health_results: tuple[HealthResult, ...]
    ip_addresses: tuple[str, ...]

    def __init__(self, raw: Mapping[str, Any] | None = None, **fields: Any):
        super().__init__(raw or {}, **fields)
        self.id = _str(self.get("id"))
        self.app_id = _str(self.get("appId"))
        self.host = _str(self.get("host"))
        self.state = _str(self.get("state"))
        self.ports = _ints(self.get("ports"))
        self.started_at = _str(self.get("startedAt"))
        self.staged_at = _str(self.get("stagedAt"))
        self.version = _str(self.get("version"))
        self.health_results = tuple(HealthResult(bool(r.get("alive")), _str(r.get("firstSuccess")))
                                    for r in _objects(self.get("healthCheckResults")))
        self.ip_addresses = tuple(str(a["ipAddress"]) for a in _objects(self.get("ipAddresses"))
                                  if a.get("ipAddress"))

    @classmethod
    def parse(cls, raw: Any) -> Task:
        return raw if isinstance(raw, Task) else cls(raw if isinstance(raw, Mapping) else {})

    @property
    def since(self) -> str | None:
        """When it started (``startedAt``), else when it was staged."""
        return self.started_at or self.staged_at

    @property
    def health(self) -> str:
        """``healthy`` (every health check result alive), ``unhealthy``, or ``unknown`` (no result yet)."""
        if not self.health_results:
            return "unknown"
        return "healthy" if all(r.alive for r in self.health_results) else "unhealthy"


def _since(task: Task) -> float:
    return wall(task.started_at) or wall(task.staged_at) or 0.0


def _tasks(tasks: Iterable[Any] | None) -> list[Task]:
    return [Task.parse(t) for t in tasks or [] if isinstance(t, Mapping)]


def newest_task(tasks: Iterable[Any] | None, states: Iterable[str] | None = None) -> Task | None:
    """The newest task (latest ``startedAt``, else ``stagedAt``: a relaunch can overlap the task it replaces)
    among those in ``states`` (None: any task with a state); None when there is none. Entries that are not
    objects are skipped."""
    wanted = None if states is None else set(states)
    candidates = [t for t in _tasks(tasks) if t.state and (wanted is None or t.state in wanted)]
    return max(candidates, key=_since, default=None)


def oldest_first(tasks: Iterable[Any] | None) -> list[Task]:
    """The tasks (objects only) from the oldest to the newest, by the same time as :func:`newest_task`."""
    return sorted(_tasks(tasks), key=_since)


class App(dict[str, Any]):
    """One Marathon app as read (``/v2/apps``, a group's ``apps``), with what marathon-tf reads of it."""

    id: str | None
    #: ``instances`` (Marathon's default 1 when absent).
    instances: int
    labels: dict[str, str]
    env: dict[str, Any]
    version: str | None
    #: The app's current configuration: ``versionInfo.lastConfigChangeAt``, else its version ("" when
    #: neither): a task launched before it runs an older one (a scaling alone does not change it).
    config_version: str
    #: Its tasks (with ``embed=...tasks``); () when not asked for.
    tasks: tuple[Task, ...]
    #: Its counts of running and staged tasks (``tasksRunning``, ``tasksStaged``: ``GET /v2/apps`` lists them
    #: without embedding the tasks); 0 when absent.
    tasks_running: int
    tasks_staged: int
    last_failure: Failure | None
    #: The ids of the deployments that name it.
    deployments: tuple[str, ...]
    #: Its placement constraints (``[field, operator, value?]``).
    constraints: tuple[tuple[str, ...], ...]

    def __init__(self, raw: Mapping[str, Any] | None = None, **fields: Any):
        super().__init__(raw or {}, **fields)
        self.id = _str(self.get("id"))
        instances = self.get("instances", 1)
        self.instances = int(instances) if isinstance(instances, (int, float)) and not isinstance(instances, bool) \
            else 1 if instances is None else 0
        self.labels = {str(k): str(v) for k, v in _map(self.get("labels")).items()}
        self.env = _map(self.get("env"))
        self.version = _str(self.get("version"))
        self.config_version = str(_map(self.get("versionInfo")).get("lastConfigChangeAt") or self.version or "")
        self.tasks = tuple(Task.parse(t) for t in _objects(self.get("tasks")))
        self.tasks_running, self.tasks_staged = _count(self.get("tasksRunning")), _count(self.get("tasksStaged"))
        self.last_failure = Failure.parse(self.get("lastTaskFailure"))
        self.deployments = tuple(str(d["id"]) for d in _objects(self.get("deployments")) if d.get("id"))
        constraints = self.get("constraints")
        self.constraints = tuple(tuple(str(x) for x in c)
                                 for c in (constraints if isinstance(constraints, list) else []) if isinstance(c, list))

    @classmethod
    def parse(cls, raw: Any) -> App:
        return raw if isinstance(raw, App) else cls(raw if isinstance(raw, Mapping) else {})

    def newest_task(self, states: Iterable[str] | None = None) -> Task | None:
        """Its newest task in ``states`` (None: in any state): :func:`newest_task`."""
        return newest_task(self.tasks, states)

    @property
    def task_name(self) -> str | None:
        """The marathon-tf task it runs (``worker-3``, from its role and index labels), or None."""
        role, index = self.labels.get(L.ROLE), self.labels.get(L.INDEX)
        try:
            return naming.task_name(role, int(index)) if role is not None and index is not None else None
        except ValueError:
            return None


class Event(dict[str, Any]):
    """One event of the stream (its ``data``, with its ``eventType``), with what marathon-tf reads of it.

    A ``status_update_event`` (a task's new state) fills ``app_id`` … ``message``; a deployment's events
    (``deployment_success``, ``deployment_failed`` …) ``id`` and ``reason``. A field that is absent (or
    of the wrong type) reads as None (``ports``: (), ``message``: ""). Attributes are read when it is
    made: one changed afterwards is not seen by them."""

    #: ``status_update_event``, ``deployment_success`` …; None when absent.
    event_type: str | None
    #: A deployment's id (``deployment_*`` events).
    id: str | None
    #: Why a deployment failed (``deployment_failed``).
    reason: str | None
    app_id: str | None
    task_id: str | None
    #: The task's new state (``TASK_RUNNING`` …).
    task_status: str | None
    #: The agent the task runs on.
    host: str | None
    #: The task's host ports, in the order of its app's port definitions.
    ports: tuple[int, ...]
    #: The app version the task was launched with.
    version: str | None
    #: When it happened (a Marathon timestamp).
    timestamp: str | None
    message: str

    def __init__(self, raw: Mapping[str, Any] | None = None, **fields: Any):
        super().__init__(raw or {}, **fields)
        self.event_type = _str(self.get("eventType"))
        self.id = _str(self.get("id"))
        self.reason = _str(self.get("reason"))
        self.app_id = _str(self.get("appId"))
        self.task_id = _str(self.get("taskId"))
        self.task_status = _str(self.get("taskStatus"))
        self.host = _str(self.get("host"))
        self.ports = _ints(self.get("ports"))
        self.version = _str(self.get("version"))
        self.timestamp = _str(self.get("timestamp"))
        self.message = str(self.get("message") or "")

    @classmethod
    def parse(cls, raw: Any) -> Event:
        """``raw`` when it is an :class:`Event` already, else one made of it (of nothing when it is no object)."""
        return raw if isinstance(raw, Event) else cls(raw if isinstance(raw, Mapping) else {})


def parse_apps(apps: Iterable[Any]) -> list[App]:
    """Marathon's app objects as :class:`App` (those that are not objects are left out)."""
    return [App.parse(a) for a in apps if isinstance(a, Mapping)]


def _walk(group: Mapping[str, Any]) -> Iterable[Any]:
    yield from group.get("apps") or []
    for sub in group.get("groups") or []:
        if isinstance(sub, Mapping):
            yield from _walk(sub)


def apps_by_id(group: Mapping[str, Any]) -> dict[str, App]:
    """Every app of a group and its subgroups, by id."""
    return {app.id: app for app in parse_apps(_walk(group)) if app.id}


def job_apps(group: Mapping[str, Any]) -> dict[str, App]:
    """A group's apps rendered by marathon-tf, by task name (``worker-3``)."""
    out = {}
    for app in parse_apps(group.get("apps") or []):
        name = app.task_name
        if name is not None:
            out[name] = app
    return out
