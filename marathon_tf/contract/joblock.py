"""One run of a job per logdir: ``<logdir>/.marathon-tf/lock``.

Two runs training in one checkpoint directory corrupt each other's checkpoints and report work
they did not do, so the logdir is locked by whoever runs the job:

* ``deploy --local`` takes it before anything starts, on the host path of the volume that holds
  the logdir (or the logdir itself when it is an absolute path); a second run refuses at once.
* On a cluster (and under ``local serve``) the job's deciding task (``chief-0`` / ``worker-0``)
  takes it in its bootstrap, on the shared storage the logdir is on; a second job on the same
  logdir fails with the holder in its reason. The deciding task of the *same* run (same job on
  the same Marathon; e.g. relaunched on another host, or started by the ``deploy --local`` that
  holds the lock) takes over instead of refusing.

The lock file is JSON: ``{"job", "run", "host", "pid", "pid_start", "started", "heartbeat"}``
(``pid_start``: the holder process's start time, as ``/proc/<pid>/stat`` gives it, so that a pid
used again by another process is not taken for the holder). Its holder rewrites ``heartbeat`` every
:data:`HEARTBEAT` seconds; a lock is stale, and is taken over, when its holder's process is gone
(same host) or its heartbeat is older than :data:`STALE_AFTER` seconds (any host: shared storage).
The check-and-write happens under ``flock`` on a guard file. A stale lock whose holder process still
exists (:func:`holder_process_lives`: a stopped runner, a suspended laptop) is not a dead run:
``local clean`` never removes what such a process holds.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
import time
from datetime import datetime, timezone
from typing import Any

from marathon_tf.contract.errors import MarathonTFError

__all__ = ["LOCK_FILE", "HEARTBEAT", "STALE_AFTER", "LogdirLocked", "Lock", "acquire", "describe", "run_id", "holder",
           "lock_record", "holder_process_lives", "process_start"]

LOCK_FILE = os.path.join(".marathon-tf", "lock")
HEARTBEAT = 10.0
STALE_AFTER = 60.0


class LogdirLocked(MarathonTFError):
    """The logdir is in use by another run."""

    def __init__(self, logdir: str, holder: dict[str, Any]):
        self.logdir, self.holder = logdir, holder
        super().__init__(f"logdir {logdir} is in use by {describe(holder)}",
                         hint=f"stop that run first; if it is dead, remove {os.path.join(logdir, LOCK_FILE)}")


def run_id(marathon_url: str, job: str) -> str:
    """The identity of one run of a job: its Marathon and its name (Marathon runs a job once)."""
    return f"{marathon_url.rstrip('/')} {job}"


def describe(holder: dict[str, Any]) -> str:
    """``job ml/mnist (host h1, pid 42, since 2026-01-01T00:00:00Z)``."""
    return (f"job {holder.get('job', '?')} (host {holder.get('host', '?')}, pid {holder.get('pid', '?')}, "
            f"since {holder.get('started', '?')})")


def _pid_alive(pid: Any) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError, TypeError):
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{int(pid)}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def process_start(pid: Any) -> str | None:
    """A process's start time (clock ticks since boot, ``/proc/<pid>/stat`` field 22): with its pid, the
    process's identity; None when it cannot be read (no such process, no ``/proc``)."""
    try:
        with open(f"/proc/{int(pid)}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[19]
    except (OSError, ValueError, TypeError, IndexError):
        return None


def holder_process_lives(holder: dict[str, Any]) -> bool:
    """Does the process that wrote ``holder`` still exist on this host, running or stopped (the same pid
    and, when the lock recorded it, the same start time), whatever its heartbeat says?"""
    if holder.get("host") != socket.gethostname() or not _pid_alive(holder.get("pid")):
        return False
    start = holder.get("pid_start")
    return start is None or process_start(holder.get("pid")) == start


def _stale(holder: dict[str, Any], host: str, now: float) -> bool:
    if holder.get("host") == host and not _pid_alive(holder.get("pid")):
        return True
    beat = holder.get("heartbeat")
    return not isinstance(beat, (int, float)) or now - beat > STALE_AFTER


def _read(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}  # unreadable / torn: treated as stale (no heartbeat)
    return data if isinstance(data, dict) else {}


def lock_record(logdir: str) -> dict[str, Any] | None:
    """``<logdir>/.marathon-tf/lock`` as written, live or stale (None: no lock; ``{}``: unreadable)."""
    return _read(os.path.join(logdir, LOCK_FILE))


def holder(logdir: str) -> dict[str, Any] | None:
    """The live holder of ``<logdir>/.marathon-tf/lock``; None when nobody (alive) holds it."""
    current = _read(os.path.join(logdir, LOCK_FILE))
    if not current or _stale(current, socket.gethostname(), time.time()):
        return None
    return current


class Lock:
    """A held lock: ``refresh`` (heartbeat), ``update`` (e.g. the run identity), ``release``."""

    def __init__(self, logdir: str, record: dict[str, Any], owned: bool = True):
        self.logdir, self.record, self.owned = logdir, record, owned
        self.path = os.path.join(logdir, LOCK_FILE)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _write(self) -> None:
        self.record["heartbeat"] = time.time()
        tmp = f"{self.path}.tmp.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.record, f, sort_keys=True)
            f.write("\n")
        os.replace(tmp, self.path)

    def _mine(self) -> bool:
        current = _read(self.path) or {}
        return all(current.get(k) == self.record.get(k) for k in ("host", "pid", "started"))

    def refresh(self) -> None:
        if self.owned and self._mine():
            self._write()

    def update(self, **fields: Any) -> None:
        self.record.update(fields)
        if self.owned:
            self._write()

    def keep_alive(self) -> Lock:
        """Refresh in a daemon thread every :data:`HEARTBEAT` seconds until :meth:`release`."""
        if self.owned and self._thread is None:
            def beat() -> None:
                while not self._stop.wait(HEARTBEAT):
                    try:
                        self.refresh()
                    except OSError:
                        pass
            self._thread = threading.Thread(target=beat, name="logdir-lock", daemon=True)
            self._thread.start()
        return self

    def release(self) -> None:
        self._stop.set()
        if self.owned:
            try:
                if self._mine():
                    os.unlink(self.path)
            except OSError:
                pass
            self.owned = False


def acquire(logdir: str, job: str, run: str = "", *, pid: int | None = None) -> Lock:
    """Take ``<logdir>/.marathon-tf/lock`` for ``job`` (``run``: the run's identity, e.g. its Marathon
    URL and job). Returns the held lock (``owned`` False when a live holder of the same run keeps
    it); raises :class:`LogdirLocked` naming the live holder of another run; ``OSError`` when the
    logdir cannot be written."""
    os.makedirs(os.path.join(logdir, os.path.dirname(LOCK_FILE)), exist_ok=True)
    path = os.path.join(logdir, LOCK_FILE)
    host = socket.gethostname()
    with open(path + ".guard", "a") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        try:
            holder = _read(path)
            now = time.time()
            if holder and not _stale(holder, host, now):
                if run and holder.get("run") == run:
                    same_live_process = holder.get("host") == host and _pid_alive(holder.get("pid"))
                    if same_live_process:
                        return Lock(logdir, holder, owned=False)
                else:
                    raise LogdirLocked(os.path.realpath(logdir), holder)  # a volume link: its host path
            owner = pid or os.getpid()
            fields = {"job": job, "run": run, "host": host, "pid": owner, "pid_start": process_start(owner),
                      "started": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
            lock = Lock(logdir, fields)
            lock._write()
            return lock
        finally:
            fcntl.flock(guard, fcntl.LOCK_UN)
