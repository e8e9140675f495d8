"""Runs app instances as local processes, the way a Mesos agent would run the command.

Each task gets a sandbox ``<state>/sandboxes/<task id>/`` (``stdout``/``stderr`` files, fetched
URIs, volume links) as its working directory, Marathon 1.11's task environment, its own process
group, and on Linux a parent-death signal so it dies with the runner. Killing sends SIGTERM to the
task's process tree and SIGKILL after the grace period, as Mesos's command executor does
(:mod:`.proctree`).

Nothing outlives the runner, whatever kills it: a simple ``cmd`` is exec'd by its
``/bin/sh -c`` wrapper (``exec cmd``: the command itself is the runner's child and
carries the parent-death signal), and every task carries the runner's token in its
environment, which the guardian process (:mod:`marathon_tf.local.reaper`) sweeps when
the runner goes away (SIGKILL included) and :meth:`Launcher.kill_all_now` sweeps on a
normal stop.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import re
import shutil
import signal
import stat
import sys
import tarfile
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlparse

from marathon_tf.contract.shellexec import exec_form
from marathon_tf.contract.taskenv import FORKED_PID_FILE, PREWARM_SOCKET_VAR

from . import proctree, reaper
from .ports import PortAllocator

__all__ = ["PortAllocator", "FetchError", "Launcher", "task_env", "wants_gpus", "passed_env", "PASSED_VARS",
           "exec_form", "volume_problem", "last_line"]

#: What a task gets of the runner's own environment: what an operator passes to every task with the Mesos
#: agent's ``--executor_environment_variables`` (none by default). Nothing else: a Mesos agent builds the
#: executor's environment from that flag's variables, ``LIBPROCESS_*`` and ``MESOS_*``, the containerizer
#: adds ``MESOS_SANDBOX`` and the task's own (the task's first, then the isolators', then the agent's),
#: ``PATH`` defaults to ``/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin``, and the command
#: executor hands the task its own environment plus the task's. The runner's credentials, cloud keys and
#: the rest of a developer's shell never reach a task.
PASSED_VARS = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "LD_LIBRARY_PATH",
               "PYTHONPATH")
PASSED_PREFIXES = ("LC_",)
#: The PATH a Mesos task gets when none is passed (Mesos's host default path).
HOST_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def passed_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The part of the runner's environment every task gets (:data:`PASSED_VARS`, ``LC_*``), with the
    runner's interpreter's directory first on ``PATH`` (its ``python3`` and ``marathon-tf``)."""
    env = {k: v for k, v in environ.items() if k in PASSED_VARS or k.startswith(PASSED_PREFIXES)}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", HOST_DEFAULT_PATH)
    return env


class FetchError(Exception):
    """A fetch URI could not be provided; the task fails with this message."""


def _fmt_double(value: float) -> str:
    """Scala ``Double.toString`` for the values Marathon puts in env (``1.0``, ``0.5``)."""
    return repr(float(value))


def wants_gpus(app: Mapping) -> bool:
    """Whether an app's tasks ask for GPUs."""
    return float(app.get("gpus") or 0) > 0


def task_env(app: dict, task_id: str, version: str, ports: list[int], sandbox: str, host: str,
             base: Mapping[str, str] | None = None, agent_id: str = "", framework_id: str = "") -> dict[str, str]:
    """The environment of a task: what the runner passes of its own (:func:`passed_env` of ``base``,
    default ``os.environ``), Marathon's and Mesos's variables, ``CUDA_VISIBLE_DEVICES=""`` for an app
    without GPUs (CUDA sees none: no CUDA errors on CPU machines), then the app's own ``env`` (which
    overrides). The scheduler sets a GPU task's indices on an agent with GPUs."""
    env = passed_env(os.environ if base is None else base)
    env["MTF_STATUS_BIND"] = host if host.startswith("127.") else "127.0.0.1"  # the agent's own address
    definitions = app.get("portDefinitions") or []
    for i, port in enumerate(ports):
        env[f"PORT{i}"] = str(port)
        requested = definitions[i].get("port") if i < len(definitions) else 0
        env[f"PORT_{requested or port}"] = str(port)
        name = definitions[i].get("name") if i < len(definitions) else None
        if name:
            env[f"PORT_{name.upper()}"] = str(port)
    if ports:
        env["PORT"] = str(ports[0])
        env["PORTS"] = ",".join(str(p) for p in ports)
    env.update({
        "HOST": host, "MESOS_TASK_ID": task_id, "MESOS_SANDBOX": sandbox, "MESOS_DIRECTORY": sandbox,
        "MARATHON_APP_ID": app["id"], "MARATHON_APP_VERSION": version,
        "MARATHON_APP_RESOURCE_CPUS": _fmt_double(app.get("cpus", 1)),
        "MARATHON_APP_RESOURCE_MEM": _fmt_double(app.get("mem", 128)),
        "MARATHON_APP_RESOURCE_DISK": _fmt_double(app.get("disk", 0)),
        "MARATHON_APP_RESOURCE_GPUS": str(int(app.get("gpus", 0) or 0)),
    })
    # the command executor's own, as the Mesos agent sets them (checkpoint: Marathon's framework asks for it)
    mesos = {"MESOS_FRAMEWORK_ID": framework_id, "MESOS_EXECUTOR_ID": task_id, "MESOS_SLAVE_ID": agent_id,
             "MESOS_CHECKPOINT": "1" if agent_id else ""}
    env.update({k: v for k, v in mesos.items() if v})
    image = ((app.get("container") or {}).get("docker") or {}).get("image")
    if image and (app.get("container") or {}).get("type", "DOCKER") == "DOCKER":
        env["MARATHON_APP_DOCKER_IMAGE"] = image
    labels = {k: v for k, v in (app.get("labels") or {}).items() if len(k) < 493 and len(str(v)) < 512}
    env["MARATHON_APP_LABELS"] = " ".join(labels)
    for key, value in labels.items():
        env["MARATHON_APP_LABEL_" + re.sub(r"[^a-zA-Z0-9_]+", "_", key).upper()] = str(value)
    if not wants_gpus(app):  # what a GPU isolator leaves a task without GPUs (docs/local-mode.md)
        env["CUDA_VISIBLE_DEVICES"] = ""  # the app's env may set it
    for key, value in (app.get("env") or {}).items():
        if isinstance(value, str):
            env[key] = value
    return env


def _pdeathsig() -> None:  # pragma: no cover - runs in the child
    """Child preexec: die with SIGKILL when the runner's thread goes away (Linux)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def volume_problem(host_path: str) -> str | None:
    """Why ``host_path`` cannot back a volume (one line), or None; a missing directory is created."""
    path = Path(host_path)
    if path.exists() and not path.is_dir():
        return f"hostPath {host_path} is not a directory"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return f"hostPath {host_path} cannot be created: {e.strerror or e}"
    return None


def host_volume_path(state_dir: Path, group: str, host_path: str) -> Path:
    """A volume's host directory on this machine: an absolute ``hostPath`` as it is; a relative one
    in the runner's state, per job: ``<state>/volumes/<group>/<hostPath>``."""
    if host_path.startswith("/"):
        return Path(host_path)
    return Path(state_dir) / "volumes" / group.strip("/") / host_path


def last_line(path: Path, limit: int = 65536) -> str:
    """The last non-empty line of a file (read from its last ``limit`` bytes), at most 500 chars."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - limit))
            lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:500] if lines else ""


class WarmPool(Protocol):
    """Pre-warmed interpreters shared by the tasks (marathon-tf's :class:`marathon_tf.task.warmpool.WarmPool`,
    handed in by whoever starts the cluster for marathon-tf; the runner itself knows nothing of it)."""

    def socket_for(self, app: Mapping, env: Mapping[str, str]) -> str | None:
        """The socket a task of ``app`` (whose environment is ``env``) is to use, or None."""

    def close(self) -> None:
        """Stop every interpreter (and what it started)."""


#: ``factory(directory, before_start=..., keep=...)``: a :class:`WarmPool` keeping its state in
#: ``directory``, calling ``before_start()`` before it starts a process, giving its processes the
#: runner's variables named in ``keep`` (the token the runner's sweep looks for).
WarmPoolFactory = Callable[..., WarmPool]


class Launcher:
    """Sandboxes, fetching, volumes, spawning and killing of task processes."""

    def __init__(self, state_dir: Path, host: str = "127.0.0.1", kill_grace_cap: float = 30.0,
                 warm_pool: WarmPoolFactory | None = None) -> None:
        self.state_dir = Path(state_dir)
        self.host = host
        self.kill_grace_cap = kill_grace_cap
        self.ports = PortAllocator(host)
        self.live_groups: set[int] = set()
        self.boxes: dict[int, Path] = {}  # a task's command (pid) -> its sandbox
        self.token = reaper.new_token()
        self.guardian = reaper.Guardian(self.token)
        #: Variables every task gets on top of its app's environment: the runner's own addresses
        #: (``MTF_RUNNER_*``, which the bootstrap prefers over the rendered cluster defaults).
        self.runner_env: dict[str, str] = {}
        #: Shared pre-warmed interpreters, when the cluster was given a factory for them.
        self.warm: WarmPool | None = None if warm_pool is None else warm_pool(
            self.state_dir / "prewarm", before_start=self.guardian.start, keep=(reaper.TOKEN_VAR,))

    def sandbox(self, task_id: str, root: Path | None = None) -> Path:
        """A task's sandbox in ``root`` (its agent's sandboxes; default the first agent's)."""
        return (self.state_dir / "sandboxes" if root is None else Path(root)) / task_id

    # -- preparing a sandbox ------------------------------------------------------------
    def prepare(self, app: dict, task_id: str, root: Path | None = None) -> Path:
        """Create the sandbox, fetch URIs and link volumes; raise FetchError on a bad URI."""
        box = self.sandbox(task_id, root)
        box.mkdir(parents=True, exist_ok=True)
        (box / "stdout").touch()
        (box / "stderr").touch()
        fetches = list(app.get("fetch") or []) + [{"uri": u, "extract": True} for u in app.get("uris") or []]
        for item in fetches:
            self._fetch(item, box)
        for volume in (app.get("container") or {}).get("volumes") or []:
            self._volume(volume, box, app.get("id", ""))
        return box

    def _fetch(self, item: dict, box: Path) -> None:
        uri = item.get("uri", "")
        parsed = urlparse(uri)
        if parsed.scheme == "file":
            source = Path(unquote(parsed.path))
        elif not parsed.scheme and uri.startswith("/"):
            source = Path(uri)
        else:
            raise FetchError(f"Failed to fetch all URIs for container: the local runner fetches only "
                             f"file:// URIs and absolute paths, not {uri!r}")
        if not source.exists():
            raise FetchError(f"Failed to fetch all URIs for container: {source} does not exist")
        dest = box / (item.get("destPath") or source.name)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, dest, dirs_exist_ok=True)
        else:
            shutil.copy2(source, dest)
        name = source.name.lower()
        if item.get("extract", True):
            if name.endswith((".tar.gz", ".tgz", ".tar", ".tar.bz2", ".txz", ".tar.xz")):
                with tarfile.open(dest) as tar:
                    tar.extractall(box, filter="data")
            elif name.endswith(".zip"):
                with zipfile.ZipFile(dest) as archive:
                    archive.extractall(box)
        if item.get("executable"):
            dest.chmod(dest.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    def _volume(self, volume: dict, box: Path, app_id: str = "") -> None:
        host_path, container_path = volume.get("hostPath"), volume.get("containerPath", "")
        if not host_path:
            return
        if container_path.startswith("/"):
            with open(box / "stderr", "a") as err:
                err.write(f"WARNING: local mode cannot mount {host_path} at the absolute path "
                          f"{container_path}; use a relative containerPath (inside the sandbox)\n")
            return
        host_path = self.host_volume(app_id, host_path)
        problem = volume_problem(str(host_path))
        if problem:
            raise FetchError(f"volume {container_path}: {problem}")
        link = box / container_path
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists() and not link.is_symlink():
            link.symlink_to(host_path)

    def host_volume(self, app_id: str, host_path: str) -> Path:
        """A volume's host directory: an absolute ``hostPath`` as it is; a relative one inside the
        runner's state, per job (``<state>/volumes/<group>/<hostPath>``), so that every task of the
        job shares it and every run (state dir) has its own."""
        return host_volume_path(self.state_dir, app_id.strip("/").rpartition("/")[0], host_path)  # → ml/mnist

    # -- processes ----------------------------------------------------------------------
    async def spawn(self, app: dict, env: dict[str, str], box: Path) -> asyncio.subprocess.Process:
        """Start the command (``/bin/sh -c cmd`` or the ``args`` argv) in its own process group."""
        argv = ["/bin/sh", "-c", exec_form(app["cmd"])] if app.get("cmd") is not None else list(app.get("args") or [])
        if not argv:
            raise FetchError("local mode runs commands on the host: the app needs 'cmd' or 'args'")
        self.guardian.start()
        env = {**env, **self.runner_env, reaper.TOKEN_VAR: self.token}
        warm = self.warm.socket_for(app, env) if self.warm is not None else None
        if warm:
            env[PREWARM_SOCKET_VAR] = warm
        with open(box / "stdout", "ab") as out, open(box / "stderr", "ab") as err:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv, cwd=str(box), env=env, stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=err,
                    start_new_session=True, preexec_fn=_pdeathsig if sys.platform.startswith("linux") else None)
            except (FileNotFoundError, PermissionError) as e:  # 'args' naming no executable: as a shell says it
                code = 127 if isinstance(e, FileNotFoundError) else 126
                raise FetchError(f"Command exited with status {code}: cannot execute {argv[0]!r}: "
                                 f"{e.strerror or e}") from None
        self.live_groups.add(proc.pid)
        self.boxes[proc.pid] = box
        return proc

    def forked_program(self, root: int) -> list[int]:
        """The program the pre-warmed interpreter forked for the task whose command is ``root`` (its pid,
        from the sandbox; only while it lives, carries this runner's token and works in that sandbox: a pid
        the file names may have been reused by another task's program since): an extra root of the task's
        tree (:mod:`marathon_tf.local.proctree`)."""
        box = self.boxes.get(root)
        if box is None:
            return []
        try:
            pid = int((box / FORKED_PID_FILE).read_text().strip())
            here = os.path.realpath(f"/proc/{pid}/cwd") == os.path.realpath(box)
        except (OSError, ValueError):
            return []
        return [pid] if here and pid in reaper.carriers(self.token, only=(pid,)) else []

    def signal_task(self, root: int, sig: int) -> None:
        """``sig`` to a task's whole process tree, as Mesos's command executor sends it (:mod:`.proctree`)."""
        proctree.killtree(root, sig, self.forked_program(root))

    def signal_group(self, pgid: int, sig: int) -> None:
        """Send ``sig`` to a task's process group (ignoring a group that is gone)."""
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def reap_group(self, pgid: int) -> None:
        """After the task's main process ended: SIGKILL what is left of its group."""
        self.signal_group(pgid, signal.SIGKILL)
        self.live_groups.discard(pgid)

    @staticmethod
    def group_alive(pgid: int) -> bool:
        """Whether a live (not zombie) process is left in process group ``pgid``."""
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
                return True
        return False

    async def terminate(self, proc: asyncio.subprocess.Process, grace: float) -> None:
        """SIGTERM the task's process tree, SIGKILL it after ``grace`` (capped) seconds, as Mesos's command
        executor does (:mod:`.proctree`: the training program gets the SIGTERM with its bootstrap); returns
        when it exited. The whole group gets the grace period, not only its first process: a ``sh -c``
        that dies of SIGTERM at once must not cut short the bootstrap it forked, which is stopping its
        training program."""
        grace = max(0.0, min(grace, self.kill_grace_cap))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        await loop.run_in_executor(None, self.signal_task, proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), grace)
        except asyncio.TimeoutError:
            await loop.run_in_executor(None, self.signal_task, proc.pid, signal.SIGKILL)
            await proc.wait()
        while loop.time() < deadline and self.group_alive(proc.pid):
            await asyncio.sleep(0.1)
        self.reap_group(proc.pid)
        self.boxes.pop(proc.pid, None)

    def prewarm(self, app: dict) -> str | None:
        """Start the shared pre-warmed interpreter ``app``'s tasks will use (if any) ahead of them."""
        env = {**task_env(app, "", "", [], "", self.host), **self.runner_env, reaper.TOKEN_VAR: self.token}
        return self.warm.socket_for(app, env) if self.warm is not None else None

    def kill_tasks_now(self) -> None:
        """SIGKILL every task's process group and every process carrying this runner's token, now
        (from any thread, a signal handler included: the loop sees its processes exit); from now on
        a task stopped gets no grace."""
        self.kill_grace_cap = 0.0
        for pgid in list(self.live_groups):
            self.signal_group(pgid, signal.SIGKILL)
        reaper.sweep(self.token)

    def kill_all_now(self) -> None:
        """Last resort (stop, atexit): SIGKILL every process group still alive and every process
        carrying this runner's token (whatever group or session it moved to); stop the guardian."""
        if self.warm is not None:
            self.warm.close()
        for pgid in list(self.live_groups):
            self.signal_group(pgid, signal.SIGKILL)
        self.live_groups.clear()
        reaper.sweep(self.token)
        self.guardian.stop()
        self.ports.close()
