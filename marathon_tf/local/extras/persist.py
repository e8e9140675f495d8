"""``local serve`` remembers: the local Marathon's state on disk, reloaded when it starts again.

Real Marathon keeps its root group, app versions, deployment plans and the framework id in ZooKeeper
(``--zk``); a restarted or failed-over Marathon reads them back, resumes the deployments it finds and
reconciles its tasks with Mesos. This runner keeps the same in one JSON file,
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

A write request is answered only once its change is on disk (the server's middleware calls
:meth:`Store.save` before it answers). When that save fails (a full disk, a read-only or failing file
system), the request's change is undone in memory (:meth:`Store.capture` before it, :meth:`Store.rollback`
after) and the request is refused with 507 Insufficient Storage and Marathon's error body
``{"message": ...}`` naming the file and the reason (:func:`refusal`). The background saver survives a failed save:
it says so in one line on the runner's log (once, and once more when it saves again) and retries every
:data:`INTERVAL`.

A file written by a newer format, or unreadable, stops the start with one line (move it away to start
empty).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..state import AppState

if TYPE_CHECKING:
    from ..deployments import DeploymentManager
    from ..state import State

__all__ = ["Store", "STATE_FILE", "FORMAT", "INTERVAL", "write_atomic", "refusal", "Mark"]

log = logging.getLogger("marathon_tf.local.persist")  # the runner's log: one line per failure, no traceback

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


def snapshot(state: State, deployments: DeploymentManager) -> dict[str, Any]:
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


def restore(data: dict[str, Any], state: State, deployments: DeploymentManager) -> None:
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


def refusal(exc: OSError, path: Path) -> tuple[int, dict[str, Any]]:
    """(status, Marathon's error body) for a write whose change could not be kept in ``path``: 507
    Insufficient Storage (RFC 4918 §11.5: the server "is unable to store the representation needed to
    successfully complete the request"), whatever the reason (a full disk or quota, a read-only or
    failing file system): nothing was applied, so a client may send it again once the cause is gone."""
    why = exc.strerror or type(exc).__name__
    return 507, {"message": f"The change was not applied: the local Marathon could not store it in {path} ({why})"}


@dataclass(frozen=True)
class Mark:
    """What :meth:`Store.rollback` puts back: the kept fields of every app (and whether it was removed),
    the groups, the root history, the next service port and the deployments then in flight."""

    apps: dict[str, tuple[dict[str, Any], bool]]
    groups: dict[str, dict]
    root_history: dict[str, dict]
    next_service_port: int
    deployments: dict[str, Any]


class Store:
    """The state file of one runner: :meth:`load` at start, :meth:`run` (saves on change), :meth:`save`."""

    def __init__(self, state_dir: Path, state: State, deployments: DeploymentManager) -> None:
        self.path = Path(state_dir) / STATE_FILE
        self.state, self.deployments = state, deployments
        self._saved = -1
        #: the last save's failure (one line), None while saves succeed
        self.failure: str | None = None

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
        """Write the state now if it changed since the last save; OSError if it could not be written
        (the file then holds the state of the last save that succeeded)."""
        generation = self.state.generation
        if generation == self._saved:
            return
        data = json.dumps(snapshot(self.state, self.deployments), separators=(",", ":")).encode()
        try:
            write_atomic(self.path, data)
        except OSError as exc:
            line = f"cannot save the local Marathon's state {self.path}: {exc.strerror or exc} (retrying)"
            if line != self.failure:
                log.warning("%s", line)
            self.failure = line
            raise
        if self.failure is not None:
            log.warning("the local Marathon's state is saved again in %s", self.path)
            self.failure = None
        self._saved = generation

    def capture(self) -> Mark:
        """What a write request may change, before it does (for :meth:`rollback`)."""
        apps = {app_id: ({k: copy.copy(getattr(app, k)) for k in _APP_FIELDS}, app.removed)
                for app_id, app in self.state.apps.items()}
        return Mark(apps, copy.deepcopy(self.state.groups), dict(self.state.root_history),
                    self.state._next_service_port, dict(self.deployments.running))

    def rollback(self, mark: Mark, reason: str) -> None:
        """Undo what happened in memory since ``mark`` (a write request whose change could not be kept):
        the deployments it started are cancelled (``deployment_failed`` with ``reason``), those it
        cancelled (``?force``) go on, apps it added are dropped, the others get their kept fields back.
        Tasks are not part of a change: a task it killed stays killed (the scheduler replaces it)."""
        state, deployments = self.state, self.deployments
        for dep_id, dep in list(deployments.running.items()):
            if dep_id not in mark.deployments:
                deployments.cancel(dep, reason)
        for dep_id, dep in mark.deployments.items():
            if dep_id not in deployments.running:
                deployments.resume(dep.id, dep.version, dep.steps, dep.original, dep.affected,
                                   max(1, dep.current_step))
        for app_id in [a for a in state.apps if a not in mark.apps]:
            if not state.apps[app_id].active_tasks():
                del state.apps[app_id]
            else:  # (never: a request launches nothing before it is answered) stopped, as a removed app
                state.apps[app_id].removed = True
                state.apps[app_id].target = 0
        for app_id, (fields, removed) in mark.apps.items():
            app = state.apps.get(app_id)
            if app is None:
                state.apps[app_id] = app = AppState(app_id, **fields)
            else:
                for k, v in fields.items():
                    setattr(app, k, v)
            app.removed = removed
        state.groups, state.root_history = mark.groups, mark.root_history
        state._next_service_port = mark.next_service_port
        state.touch()

    def refuse(self, mark: Mark, exc: OSError) -> tuple[int, dict[str, Any]]:
        """A write request whose change :meth:`save` could not keep: undo it (:meth:`rollback` to
        ``mark``) and return what to answer (:func:`refusal`)."""
        status, body = refusal(exc, self.path)
        self.rollback(mark, body["message"])
        return status, body

    async def run(self, interval: float = INTERVAL) -> None:
        """Save whenever the state changed, until cancelled; a failed save is tried again (and said
        once on the log, by :meth:`save`)."""
        while True:
            await asyncio.sleep(interval)
            try:
                self.save()
            except OSError:
                pass
