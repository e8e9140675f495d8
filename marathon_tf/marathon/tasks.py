"""Reading Marathon's tasks: which one of an app's tasks is *the* task, where it answers, and when.

Every reader of ``/v2/apps`` or ``/v2/groups?embed=group.apps.tasks`` (the user's ``status`` and
``logs``, the tasks' discovery, the deciding task's view and its wait for the workers) goes through
these few functions, so that "the newest task", "its port named ``status``" and "a Marathon
timestamp" each mean one thing.

* **Newest** (:meth:`~marathon_tf.marathon.model.App.newest_task`, :func:`newest_running`): an app of ours has one
  instance, but a relaunch can overlap the task it replaces (Marathon starts the new one while the old is killed, or
  an unreachable one is replaced): the task with the latest ``startedAt`` wins; one not started yet counts by its
  ``stagedAt`` (``startedAt`` is absent until ``TASK_RUNNING`` in Marathon 1.4–1.11's task JSON), so a running task
  beats an older staged one and a newer staged one beats an older running one only when asked for every state.
* **Ports** (:func:`port_index`, :func:`task_port`): a port is found by its name in the app's
  ``portDefinitions`` (host networking) or ``container.portMappings`` (container and bridge
  networks); the task's ``ports`` are the host ports in that order. On a container network without
  host ports the task has no ``ports``: the container port and the task's ``ipAddresses`` are used.
* **Timestamps** (:func:`wall`, :func:`age`): ISO 8601 with a ``Z`` (``2026-11-24T06:37:55.582Z``).

Pure: Marathon's objects in (plain dicts or the typed :class:`~marathon_tf.marathon.model.App` and
:class:`~marathon_tf.marathon.model.Task`, read through the latter), values out: :func:`newest_running` and
:func:`oldest_first` give :class:`~marathon_tf.marathon.model.Task`, :func:`newest` the entry it was given.
:func:`wall` and :func:`oldest_first` are :mod:`~marathon_tf.marathon.model`'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from marathon_tf.marathon.model import App, Task, oldest_first, wall

__all__ = ["RUNNING", "ACTIVE", "wall", "age", "newest_running", "oldest_first", "port_index", "task_port",
           "task_host", "task_address", "task_url"]

RUNNING = "TASK_RUNNING"
#: Task states of a task that is (about to be) alive.
ACTIVE = ("TASK_STAGING", "TASK_STARTING", "TASK_RUNNING")


def age(timestamp: Any, *, now: Callable[[], float] = time.time) -> float | None:
    """Seconds since a Marathon timestamp, to 0.1 s (never negative); None when missing or bad."""
    then = wall(timestamp)
    return None if then is None else round(max(0.0, now() - then), 1)


def newest_running(app: Mapping[str, Any] | None) -> Task | None:
    """The app's newest ``TASK_RUNNING`` task, or None."""
    return App.parse(app).newest_task((RUNNING,))


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


def task_port(app: Mapping[str, Any], task: Mapping[str, Any], name: str) -> int | None:
    """The host port of the task's port named ``name``; on a container network without host ports,
    the mapping's ``containerPort``. None when the app has no such port or the task none yet."""
    index = port_index(app, name)
    if index is None:
        return None
    ports = Task.parse(task).ports
    if index < len(ports) and ports[index]:
        return ports[index]
    mappings = (app.get("container") or {}).get("portMappings") or []
    if not ports and index < len(mappings) and isinstance(mappings[index], Mapping):
        port = mappings[index].get("containerPort")
        return int(port) if port else None
    return None


def task_host(task: Mapping[str, Any], *, container_network: bool = False) -> str | None:
    """The task's agent hostname; its first ``ipAddresses`` entry on a container network."""
    task = Task.parse(task)
    if container_network and task.ip_addresses:
        return task.ip_addresses[0]
    return task.host


def task_address(app: Mapping[str, Any], task: Mapping[str, Any], name: str, *, container_network: bool = False
                 ) -> str | None:
    """``host:port`` of the task's port named ``name``, or None."""
    host, port = task_host(task, container_network=container_network), task_port(app, task, name)
    return f"{host}:{port}" if host and port else None


def task_url(app: Mapping[str, Any], task: Mapping[str, Any], name: str, path: str = "") -> str | None:
    """``http://host:port<path>`` of the task's port named ``name`` (its status server), or None."""
    address = task_address(app, task, name)
    return f"http://{address}{path}" if address else None
