"""The local runner's state on this machine: where a local job's volumes and logdir are, which
runs have ended, and cleaning them up (``local clean``, ``delete --purge``, ``deploy --fresh``).

::

    <state home>/                      user.config.state_home(): $MARATHON_TF_STATE_DIR, $XDG_STATE_HOME/marathon-tf…
    ├── <job>-<YYYYmmdd-HHMMSS>/       one `deploy --local` run
    │   ├── .marathon-tf/lock          the runner's lock (host, pid, heartbeat): the run is alive while it is held
    │   ├── sandboxes/<task id>/       each task's stdout, stderr
    │   ├── volumes/<job>/<host_path>  the job's relative volumes (the examples' checkpoints)
    │   └── prewarm/                   the shared pre-warmed interpreters' logs
    ├── serve/                         `local serve` (the same layout; --state-dir chooses another)
    └── ui/                            the web UI build (`local ui-install`; never cleaned)

A run is *running* while its runner holds the lock, or while any logdir lock in its volumes has a
live holder; while the process that took one of those locks still exists (the same pid and start
time), stopped or not — a SIGSTOPped runner, a suspended laptop, a debugger: its heartbeat is late, yet
it has not ended; and while any live process works in the folder or has a file in it open (a task
whose runner died). A folder no runner ever locked (made before there was a lock: no ``.marathon-tf/``)
also counts as running while a task wrote output within
:data:`~marathon_tf.contract.joblock.STALE_AFTER` seconds. A folder a runner locked and let go of
has ended, however recent its output.

A ``local serve``'s state folder (it holds :data:`SERVE_STATE_FILE`, or it is the default
``serve/``) is not a run: it is what the serve remembers (its jobs, their volumes and checkpoints),
to be picked up by the next ``local serve`` on it. Stopped, it is *stopped*, never *ended*:
``local clean`` keeps it unless it is named (``serve=``, the CLI's ``--serve-state NAME``).
Everything else that is not running is an ended run, which ``local clean`` removes.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from marathon_tf.contract import joblock
from marathon_tf.contract.errors import UsageError
from marathon_tf.user import inuse

__all__ = ["hold", "work_dir", "volumes_dir", "logdir_host_path", "deployed_logdir", "Run", "runs", "clean",
           "purge_volumes", "UI_DIR", "SERVE_DIR", "SERVE_STATE_FILE"]

#: The web UI build's folder in the state home.
UI_DIR = "ui"
#: ``local serve``'s default state folder in the state home.
SERVE_DIR = "serve"
#: The file a ``local serve`` remembers its Marathon in (``marathon_tf.local.extras.persist.STATE_FILE``;
#: named here too: the user's side reads no module of the local cluster for it).
SERVE_STATE_FILE = "marathon-state.json"


def hold(state_dir: Path, what: str) -> joblock.Lock:
    """Take the runner's lock on ``state_dir`` (``what``: ``local serve``, or the job of a ``deploy
    --local``), kept alive until released; a state directory another live runner holds is refused."""
    state_dir.mkdir(parents=True, exist_ok=True)
    try:
        lock = joblock.acquire(str(state_dir), what)
    except joblock.LogdirLocked as e:
        raise UsageError(f"the state directory {state_dir} is in use by {joblock.describe(e.holder)}",
                         hint="stop that runner first, or choose another state directory") from None
    return lock.keep_alive()


def work_dir(client: Any) -> Path | None:
    """The local runner's state directory, from its Mesos agent ``/state`` (``flags.work_dir``, as a
    Mesos agent names its own); None for a real Marathon, or when it cannot be read. Asked once per client."""
    if not client.is_local():
        return None
    if getattr(client, "_mtf_work_dir", None) is None:
        try:
            r = client.session.get(f"{client.url}/state", timeout=5)
            flags = (r.json().get("flags") or {}) if r.status_code == 200 else {}
        except Exception:  # noqa: BLE001 - the path is a convenience: status works without it
            return None
        if not isinstance(flags, dict) or not isinstance(flags.get("work_dir"), str):
            return None  # (a wrong shape: no local runner's folder to offer)
        client._mtf_work_dir = Path(flags["work_dir"])
    return client._mtf_work_dir


def volumes_dir(state_dir: Path, job: str) -> Path:
    """Where the local runner keeps a job's relative volumes (``<state>/volumes/<job>``; see
    :func:`marathon_tf.local.launcher.host_volume_path`)."""
    return Path(state_dir) / "volumes" / job.strip("/")


def logdir_host_path(logdir: str, mounts: Iterable[tuple[str, str]]) -> str | None:
    """Where a logdir is on the machine that runs the tasks: an absolute logdir itself, a relative one
    inside the volume ``(container_path, host directory)`` that holds it; None when it is inside each
    sandbox (or a URL)."""
    if not logdir or "://" in logdir:
        return None
    if os.path.isabs(logdir):
        return logdir
    norm = os.path.normpath(logdir)
    for container_path, host_path in mounts:
        mount = os.path.normpath(container_path)
        if norm == mount or norm.startswith(mount + os.sep):
            return os.path.normpath(os.path.join(host_path, os.path.relpath(norm, mount)))
    return None


def deployed_logdir(spec: dict[str, Any], work: Path | None, job: str) -> str | None:
    """Where a deployed job's logdir is (``spec``: the job file as deployed): for the local runner
    (its state directory ``work``) on this machine; else an absolute volume path or logdir, on the
    agents; None when it is inside each sandbox."""
    mounts = []
    for v in spec.get("volumes") or []:
        host = str(v.get("host_path", ""))
        if work is not None and not host.startswith("/"):
            host = str(volumes_dir(work, job) / host)
        mounts.append((str(v.get("container_path", "")), host))
    return logdir_host_path(str(spec.get("logdir") or ""), mounts)


@dataclass
class Run:
    """One runner's folder in the state home: a ``deploy --local`` run, or a ``local serve``'s state
    (``serve``: then ``jobs`` are the jobs it remembers)."""

    path: Path
    last_active: float
    running: str | None = None  # why it counts as running (None: it ended, or the serve stopped)
    jobs: list[str] = field(default_factory=list)
    serve: bool = False

    @property
    def state(self) -> str:
        """``running``, ``stopped`` (a ``local serve`` that does not run: it keeps its state) or ``ended``."""
        return "running" if self.running else "stopped" if self.serve else "ended"

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "kind": "serve" if self.serve else "run", "state": self.state,
                "jobs": self.jobs, "running": self.running is not None, "why": self.running,
                "lastActive": round(self.last_active, 3)}


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _locks(run: Path) -> Iterable[Path]:
    yield run
    volumes = run / "volumes"
    if volumes.is_dir():
        for lock in volumes.glob(f"**/{joblock.LOCK_FILE}"):
            yield lock.parent.parent


def is_serve(path: Path) -> bool:
    """Whether a folder is a ``local serve``'s state (what it remembers), not one run."""
    return (path / SERVE_STATE_FILE).is_file() or path.name == SERVE_DIR


def _remembered(path: Path) -> list[str]:
    """The jobs a ``local serve``'s state file holds (its top-level groups)."""
    import json

    try:
        groups = json.loads((path / SERVE_STATE_FILE).read_text()).get("groups") or {}
    except (OSError, ValueError, AttributeError):
        return []
    return [g.strip("/") for g in groups if isinstance(g, str) and g.strip("/") and g.count("/") == 1]


def _examine(run: Path, now: float) -> Run:
    outputs = [p for box in (run / "sandboxes").glob("*") for p in (box / "stdout", box / "stderr")]
    last = max([_mtime(run), _mtime(run / joblock.LOCK_FILE)] + [_mtime(p) for p in outputs])
    volumes = run / "volumes"
    jobs = sorted(p.name for p in volumes.iterdir() if p.is_dir()) if volumes.is_dir() else []
    serve = is_serve(run)
    out = Run(run, last, jobs=sorted(set(jobs) | set(_remembered(run))) if serve else jobs, serve=serve)
    for where in _locks(run):
        holder = joblock.holder(str(where))
        if holder:
            out.running = f"held by {joblock.describe(holder)}"
            return out
        written = joblock.lock_record(str(where))
        if written and joblock.holder_process_lives(written):
            beat = written.get("heartbeat")
            late = f", no heartbeat for {now - beat:.0f} s" if isinstance(beat, (int, float)) else ""
            out.running = f"held by {joblock.describe(written)}, whose process still exists (stopped?{late})"
            return out
    for user in inuse.users(run):
        out.running = f"a live process uses it: pid {user.pid} ({user.name}) {user.what}"
        return out
    # A runner that ever locked the folder left .marathon-tf/ behind: it ended when it let go. Only a
    # folder of a marathon-tf without the lock is judged by its output.
    if not serve and not (run / os.path.dirname(joblock.LOCK_FILE)).is_dir() and now - last < joblock.STALE_AFTER:
        out.running = f"a task wrote output {now - last:.0f} s ago"
    return out


def runs(home: Path, now: float | None = None) -> list[Run]:
    """Every runner's folder in ``home`` (those with sandboxes or volumes, and every ``local serve``'s
    state), oldest first."""
    now = time.time() if now is None else now
    if not home.is_dir():
        return []
    found = [_examine(p, now) for p in home.iterdir()
             if p.is_dir() and p.name != UI_DIR and ((p / "sandboxes").is_dir() or (p / "volumes").is_dir()
                                                     or (p / SERVE_STATE_FILE).is_file())]
    return sorted(found, key=lambda r: r.last_active)


def _named_serves(home: Path, names: Iterable[str], found: list[Run], now: float) -> dict[Path, Run]:
    """The ``local serve`` state folders ``names`` asks for (a folder name in ``home``, or a path)."""
    by_path = {r.path.resolve(): r for r in found}
    out: dict[Path, Run] = {}
    for name in names:
        path = (Path(name) if os.sep in name or name in (".", "..") else home / name).resolve()
        run = by_path.get(path) or (_examine(path, now) if path.is_dir() else None)
        if run is None or not run.serve:
            serves = ", ".join(r.path.name for r in found if r.serve) or "none"
            raise UsageError(f"--serve-state {name}: {path} is not a local serve's state folder "
                             f"(those in {home}: {serves})", hint="name the folder `local serve --state-dir` used")
        out[path] = run
    return out


def clean(home: Path, *, older_than: float | None = None, dry_run: bool = False,
          now: float | None = None, serve: Iterable[str] = ()) -> tuple[list[Run], list[Run]]:
    """Remove the ended runs (idle for at least ``older_than`` seconds); ``(removed, kept)``, where
    ``kept`` are the running ones, every ``local serve``'s state and, with ``older_than``, the
    recent ended ones. A ``local serve``'s state folder (its remembered jobs, their volumes and
    checkpoints) is removed only when ``serve`` names it (its folder name in ``home``, or its path)
    and that serve is stopped; ``older_than`` does not apply to a named one."""
    now = time.time() if now is None else now
    found = runs(home, now)
    named = _named_serves(home, serve, found, now)
    for path, run in named.items():
        if path not in {r.path.resolve() for r in found}:
            found.append(run)  # a serve's state outside the state home, named by its path
    removed, kept = [], []
    for run in found:
        asked = run.path.resolve() in named
        if run.running or (run.serve and not asked) or (
                not asked and older_than is not None and now - run.last_active < older_than):
            kept.append(run)
            continue
        if not dry_run:
            shutil.rmtree(run.path)
        removed.append(run)
    return removed, kept


def purge_volumes(state_dir: Path, job: str) -> Path | None:
    """Remove a local job's volumes (``<state>/volumes/<job>``); the folder removed, or None."""
    path = volumes_dir(state_dir, job)
    if not path.is_dir():
        return None
    holder = next((joblock.holder(str(p.parent.parent)) for p in path.glob(f"**/{joblock.LOCK_FILE}")
                   if joblock.holder(str(p.parent.parent))), None)
    if holder:
        raise UsageError(f"{path} is still in use by {joblock.describe(holder)}: not removed")
    shutil.rmtree(path)
    return path
