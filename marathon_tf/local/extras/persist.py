"""``local serve`` remembers: the local Marathon's state on disk, reloaded when it starts again.

Real Marathon keeps its root group, app versions, deployment plans and the framework id in ZooKeeper
(``mesosphere/marathon`` ``storage/repository``, ``--zk``); a restarted or failed-over Marathon reads them
back, resumes the deployments it finds and reconciles its tasks with Mesos
(``MarathonSchedulerService``/``TaskReconciliation``). This runner keeps the same in one JSON file,
``<state dir>/`` :data:`STATE_FILE`, written atomically (a temporary file in the same folder, fsync,
``os.replace``, then fsync of the folder) whenever the state changed (checked every :data:`INTERVAL`
seconds, after every write request, and at a clean stop).

What it keeps: the groups (with their dependencies and versions), every app's definition, version
history, service ports, the run spec it launches and its target, its last task failure (the job's
record and the rest of marathon-tf's labels live in the definitions), the root group's history and the
deployments in flight. What it does not: tasks. Every task process dies with the runner (nothing outlives
it), so on reload an app has none, and the scheduler launches its target again, as Marathon replaces
tasks Mesos reports lost; a training program then resumes from the checkpoints in its job's volume.
Deployments in flight resume at the step they were at.

A file written by a newer format, or unreadable, stops the start with one line (move it away to start
empty).
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..state import AppState

if TYPE_CHECKING:
    from ..deployments import DeploymentManager
    from ..state import State

__all__ = ["Store", "STATE_FILE", "FORMAT", "INTERVAL", "write_atomic"]

STATE_FILE = "marathon-state.json"
FORMAT = 1
#: How often (seconds) the saver looks for a change.
INTERVAL = 0.25

_APP_FIELDS = ("definition", "version", "last_scaling_at", "last_config_change_at", "service_ports", "run_def",
               "run_config_version", "target", "last_task_failure", "history")


def write_atomic(path: Path, data: bytes) -> None:
    """``path`` holds ``data`` or what it held before, never a part of it (even if the machine dies)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def snapshot(state: "State", deployments: "DeploymentManager") -> dict[str, Any]:
    """What is kept of the state (JSON-ready)."""
    apps = {app_id: {k: getattr(app, k) for k in _APP_FIELDS}
            for app_id, app in state.apps.items() if not app.removed}
    return {
        "format": FORMAT,
        "groups": state.groups,
        "apps": apps,
        "rootHistory": {v: {"apps": {k: list(d) for k, d in snap["apps"].items()}, "groups": snap["groups"]}
                        for v, snap in state.root_history.items()},
        "nextServicePort": state._next_service_port,
        "deployments": [{"id": d.id, "version": d.version, "steps": d.steps, "original": d.original,
                         "currentStep": d.current_step, "affected": d.affected}
                        for d in deployments.running.values()],
    }


def restore(data: dict[str, Any], state: "State", deployments: "DeploymentManager") -> None:
    """Put a :func:`snapshot` back (on the event loop that runs ``deployments``)."""
    state.groups = data["groups"]
    for app_id, fields in data["apps"].items():
        state.apps[app_id] = AppState(app_id, **{k: fields[k] for k in _APP_FIELDS})
    state.root_history = {v: {"apps": {k: tuple(d) for k, d in snap["apps"].items()}, "groups": snap["groups"]}
                          for v, snap in data["rootHistory"].items()}
    state._next_service_port = data["nextServicePort"]
    for dep in data["deployments"]:
        # an app removed by it is gone from the kept apps (removed apps are not kept): nothing to stop
        deployments.resume(dep["id"], dep["version"], dep["steps"], dep["original"], dep["affected"],
                           max(1, dep["currentStep"]))
    state.touch()


class Store:
    """The state file of one runner: :meth:`load` at start, :meth:`run` (saves on change), :meth:`save`."""

    def __init__(self, state_dir: Path, state: "State", deployments: "DeploymentManager") -> None:
        self.path = Path(state_dir) / STATE_FILE
        self.state, self.deployments = state, deployments
        self._saved = -1

    def load(self) -> bool:
        """Reload the kept state, if any; ValueError (one line) if the file cannot be used."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return False
        except OSError as e:
            raise ValueError(f"cannot read the local Marathon's state {self.path}: {e.strerror}") from None
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format') if isinstance(data, dict) else None!r}, "
                                 f"this version reads {FORMAT}")
            restore(data, self.state, self.deployments)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"the local Marathon's state {self.path} is unusable ({type(e).__name__}: {e}); "
                             f"move it away to start empty") from None
        self._saved = self.state.generation
        return True

    def save(self) -> None:
        """Write the state now if it changed since the last save."""
        generation = self.state.generation
        if generation == self._saved:
            return
        data = json.dumps(snapshot(self.state, self.deployments), separators=(",", ":")).encode()
        write_atomic(self.path, data)
        self._saved = generation

    async def run(self, interval: float = INTERVAL) -> None:
        """Save whenever the state changed, until cancelled."""
        while True:
            await asyncio.sleep(interval)
            self.save()
