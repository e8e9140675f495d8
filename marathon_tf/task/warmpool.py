"""The local runner's shared pre-warmed interpreters: one import of TensorFlow per machine, not per task.

On a cluster every task has its own machine (or container) and its bootstrap pre-warms its own
interpreter (:mod:`marathon_tf.task.prewarm`). On one machine the tasks of a job share the CPU, and
three tasks importing TensorFlow at once take longer than one import. So the local runner starts
one *fork server* (:mod:`marathon_tf.task.prewarm_child`) per interpreter, options, modules and
environment (the tasks' environment without its per-task variables,
:func:`marathon_tf.task.prewarm_child.shared_env`), listening on ``<state>/prewarm/<n>.sock``, and
gives each task that runs a Python program through the bootstrap (``marathon-tf bootstrap`` or
``python -m marathon_tf.bootstrap``) its address in
``MTF_PREWARM_SOCKET``. ``deploy --local`` starts them before anything else (``LocalCluster.prewarm``),
so the import overlaps the runner's own start-up; ``local serve`` starts one when the first task
that needs it is launched, and a server with no task for :data:`LINGER` seconds exits.

The local cluster knows nothing of marathon-tf (as a Mesos agent does not): whoever starts it for
marathon-tf (``deploy --local``, ``local serve``: :func:`marathon_tf.user.localrun.local_cluster`)
hands it this class as its ``warm_pool``, and its launcher calls :meth:`WarmPool.socket_for` for every
task it starts, setting :data:`~marathon_tf.contract.taskenv.PREWARM_SOCKET_VAR` to the answer.

A server is the runner's child: it keeps the runner's own variables (``keep``: the token its sweep
looks for, :mod:`marathon_tf.local.reaper`) and a parent-death signal, and every program it forks
has a parent-death signal relative to it and is killed when its task's bootstrap goes away. The
server decides for every program whether it can run in place (same interpreter, options, modules,
and environment but for per-task variables),
else it starts the program the ordinary way.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from marathon_tf.task.prewarm import SOCKET_VAR, python_command, resolve_interpreter, server_argv
from marathon_tf.task.prewarm_child import shared_env
from marathon_tf.task.supervisor import _die_with_parent

__all__ = ["WarmPool", "LINGER", "BOOTSTRAP_MODULE", "bootstrap_command"]

#: Seconds a shared server with no connected task and no program stays up (``local serve``).
LINGER = 300.0


#: The bootstrap's module, as ``python -m`` names it (the README's other form of ``marathon-tf bootstrap``).
BOOTSTRAP_MODULE = "marathon_tf.bootstrap"


def _bootstrap_args(argv: Sequence[str]) -> Sequence[str] | None:
    """The bootstrap's own arguments in ``marathon-tf bootstrap ARGS`` or ``python [options] -m
    marathon_tf.bootstrap ARGS``; None for any other command."""
    if len(argv) >= 2 and os.path.basename(argv[0]) == "marathon-tf" and argv[1] == "bootstrap":
        return argv[2:]
    pc = python_command(argv)
    if pc is None:
        return None
    at = 1 + len(pc.options)  # where ``-m`` is: each option python_command kept is one word of argv
    if list(argv[at:at + 2]) == ["-m", BOOTSTRAP_MODULE]:
        return argv[at + 2:]
    return argv[at + 1:] if argv[at] == "-m" + BOOTSTRAP_MODULE else None


def bootstrap_command(app: Mapping) -> list[str] | None:
    """The training command of an app that runs ``marathon-tf bootstrap [options] -- cmd...`` (or
    ``python -m marathon_tf.bootstrap [options] -- cmd...``; ``cmd`` or ``args``); None for anything
    else, and for a shell-string command."""
    from marathon_tf.contract.errors import UsageError
    from marathon_tf.task.invocation import parse_args, shell_command

    if app.get("cmd") is not None:
        try:
            argv = shlex.split(str(app["cmd"]))
        except ValueError:
            return None
    else:
        argv = [str(a) for a in app.get("args") or []]
    args = _bootstrap_args(argv)
    if not args:
        return None
    try:
        _, command = parse_args(list(args))
    except UsageError:
        return None
    return None if shell_command(command) else command


@dataclass
class _Server:
    proc: subprocess.Popen
    path: Path


class WarmPool:
    """Fork servers shared by the tasks of one local runner (see the module's doc)."""

    def __init__(self, directory: Path, *, before_start: Callable[[], None] = lambda: None,
                 keep: Sequence[str] = (), linger: float = LINGER) -> None:
        self.dir = Path(directory)
        self.before_start = before_start  # e.g. start the runner's guardian first
        self.keep = tuple(keep)  # the runner's variables a server keeps from its first task's environment
        self.linger = linger
        self._servers: dict[tuple, _Server] = {}
        self._lock = threading.Lock()
        self._count = 0
        self._closed = False

    def socket_for(self, app: Mapping, env: Mapping[str, str]) -> str | None:
        """The socket of the server for this task (started now if there is none); None when the task
        does not run a pre-warmable program through the bootstrap. ``env``: the task's environment."""
        from marathon_tf.contract.taskenv import prewarm_modules

        command = bootstrap_command(app)
        pc = python_command(command) if command else None
        if pc is None or env.get("MTF_ROLE") == "tensorboard":
            return None
        modules = list(prewarm_modules(env.get("MTF_PREWARM")))
        server_env = shared_env({k: v for k, v in env.items() if k != SOCKET_VAR})
        for name in self.keep:  # per-task variables to the program, but e.g. what the runner's sweep looks for
            if name in env:
                server_env[name] = env[name]
        server_env.setdefault("PYTHONUNBUFFERED", "1")  # as the bootstrap starts every program
        if not modules or (os.sep in pc.interpreter and not os.path.isabs(pc.interpreter)):
            return None  # nothing to import, or an interpreter inside each sandbox
        interpreter = resolve_interpreter(pc.interpreter, server_env, None)
        if interpreter is None:
            return None
        key = (interpreter, pc.options, tuple(modules), tuple(sorted(server_env.items())))
        with self._lock:
            if self._closed:
                return None
            server = self._servers.get(key)
            if server is None or server.proc.poll() is not None:
                server = self._start(interpreter, pc.options, modules, server_env)
                if server is None:
                    return None
                self._servers[key] = server
            return str(server.path)

    def _start(self, interpreter: str, options, modules: list[str], env: dict[str, str]) -> _Server | None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._count += 1
        path = self.dir / f"{self._count}.sock"
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            listener.bind(str(path))
            os.chmod(path, 0o600)  # this user's tasks only
            listener.listen(1024)
            self.before_start()
            with open(self.dir / f"{self._count}.log", "ab") as log:
                proc = subprocess.Popen(server_argv(interpreter, options, modules, listen=listener.fileno(),
                                                    linger=self.linger),
                                        env=env, cwd=str(self.dir), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                        start_new_session=True, pass_fds=(listener.fileno(),),
                                        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        except OSError:
            return None
        finally:
            listener.close()  # the server holds it now
        return _Server(proc, path)

    def close(self) -> None:
        """Stop every server (the programs they forked go with them: parent-death signal)."""
        with self._lock:
            self._closed = True
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            try:
                os.killpg(server.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            server.proc.wait()
            try:
                server.path.unlink()
            except OSError:
                pass

