"""Reading Marathon's tasks: which one of an app's tasks is *the* task, where it answers, and when.

Every reader of ``/v2/apps`` or ``/v2/groups?embed=group.apps.tasks`` (the user's ``status`` and
``logs``, the tasks' discovery, the deciding task's view and its wait for the workers) goes through
these few functions, so that "the newest task", "its port named ``status``" and "a Marathon
timestamp" each mean one thing.

* **Newest** (:func:`newest`): an app of ours has one instance, but a relaunch can overlap the task it
  replaces (Marathon starts the new one while the old is killed, or an unreachable one is replaced):
  the task with the latest ``startedAt`` wins; one not started yet counts by its ``stagedAt``
  (``startedAt`` is absent until ``TASK_RUNNING``: Marathon 1.4–1.11 ``raml/Task``
  ``docs/docs/rest-api/public/api/v2/types/task.raml``), so a running task beats an older staged
  one and a newer staged one beats an older running one only when asked for every state.
* **Ports** (:func:`port_index`, :func:`task_port`): a port is found by its name in the app's
  ``portDefinitions`` (host networking) or ``container.portMappings`` (container and bridge
  networks); the task's ``ports`` are the host ports in that order. On a container network without
  host ports the task has no ``ports``: the container port and the task's ``ipAddresses`` are used.
* **Timestamps** (:func:`wall`, :func:`age`): ISO 8601 with a ``Z`` (``2026-11-24T06:37:55.582Z``).

Pure: plain dicts in, values out (``.get()`` only: Marathon adds fields between versions).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

__all__ = ["RUNNING", "ACTIVE", "wall", "age", "started_at", "newest", "newest_running", "oldest_first", "health",
           "last_failure", "port_index", "task_port", "task_host", "task_address", "task_url"]

RUNNING = "TASK_RUNNING"
#: Task states of a task that is (about to be) alive.
ACTIVE = ("TASK_STAGING", "TASK_STARTING", "TASK_RUNNING")

Task = Mapping[str, Any]


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


def age(timestamp: Any, *, now: Callable[[], float] = time.time) -> float | None:
    """Seconds since a Marathon timestamp, to 0.1 s (never negative); None when missing or bad."""
    then = wall(timestamp)
    return None if then is None else round(max(0.0, now() - then), 1)


def started_at(task: Task) -> str | None:
    """When the task started (``startedAt``), else when it was staged (``stagedAt``), as Marathon wrote it."""
    return task.get("startedAt") or task.get("stagedAt") or None


def _since(task: Task) -> float:
    return wall(task.get("startedAt")) or wall(task.get("stagedAt")) or 0.0


def newest(tasks: Iterable[Any] | None, states: Iterable[str] | None = None) -> Task | None:
    """The newest task (latest ``startedAt``, else ``stagedAt``) among those in ``states`` (None:
    any task with a state); None when there is none. Entries that are not objects are skipped."""
    wanted = None if states is None else set(states)
    candidates = [t for t in tasks or [] if isinstance(t, Mapping) and t.get("state")
                  and (wanted is None or t.get("state") in wanted)]
    return max(candidates, key=_since, default=None)


def oldest_first(tasks: Iterable[Any] | None) -> list[Task]:
    """The tasks (objects only) from the oldest to the newest, by the same time as :func:`newest`."""
    return sorted((t for t in tasks or [] if isinstance(t, Mapping)), key=_since)


def newest_running(app: Mapping[str, Any] | None) -> Task | None:
    """The app's newest ``TASK_RUNNING`` task, or None."""
    return newest((app or {}).get("tasks"), (RUNNING,))


def health(task: Task) -> str:
    """``healthy`` (every health check result alive), ``unhealthy``, or ``unknown`` (no result yet)."""
    results = [r for r in task.get("healthCheckResults") or [] if isinstance(r, Mapping)]
    if not results:
        return "unknown"
    return "healthy" if all(r.get("alive") for r in results) else "unhealthy"


def last_failure(app: Mapping[str, Any]) -> str | None:
    """The app's ``lastTaskFailure`` in one line (``TASK_FAILED: Command exited with status 1``), or None."""
    failure = app.get("lastTaskFailure") or {}
    if not isinstance(failure, Mapping) or not failure:
        return None
    return f"{failure.get('state', '')}: {failure.get('message', '')}".strip(": ")


def _port_list(app: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    for source in (app.get("portDefinitions"), (app.get("container") or {}).get("portMappings")):
        ports = [p for p in source or [] if isinstance(p, Mapping)]
        if ports:
            return ports
    return []


def port_index(app: Mapping[str, Any], name: str) -> int | None:
    """The index of the app's port named ``name`` (``portDefinitions``, else ``container.portMappings``)."""
    for i, port in enumerate(_port_list(app)):
        if port.get("name") == name:
            return i
    return None


def task_port(app: Mapping[str, Any], task: Task, name: str) -> int | None:
    """The host port of the task's port named ``name``; on a container network without host ports,
    the mapping's ``containerPort``. None when the app has no such port or the task none yet."""
    index = port_index(app, name)
    if index is None:
        return None
    ports = task.get("ports") or []
    if index < len(ports) and ports[index]:
        return int(ports[index])
    mappings = (app.get("container") or {}).get("portMappings") or []
    if not ports and index < len(mappings) and isinstance(mappings[index], Mapping):
        port = mappings[index].get("containerPort")
        return int(port) if port else None
    return None


def task_host(task: Task, *, container_network: bool = False) -> str | None:
    """The task's agent hostname; its first ``ipAddresses`` entry on a container network."""
    if container_network:
        ips = [a.get("ipAddress") for a in task.get("ipAddresses") or [] if isinstance(a, Mapping)]
        ip = next((ip for ip in ips if ip), None)
        if ip:
            return str(ip)
    host = task.get("host")
    return str(host) if host else None


def task_address(app: Mapping[str, Any], task: Task, name: str, *, container_network: bool = False
                 ) -> str | None:
    """``host:port`` of the task's port named ``name``, or None."""
    host, port = task_host(task, container_network=container_network), task_port(app, task, name)
    return f"{host}:{port}" if host and port else None


def task_url(app: Mapping[str, Any], task: Task, name: str, path: str = "") -> str | None:
    """``http://host:port<path>`` of the task's port named ``name`` (its status server), or None."""
    address = task_address(app, task, name)
    return f"http://{address}{path}" if address else None
