"""Pre-warmed trainers: the bootstrap's side (the interpreter's side is :mod:`marathon_tf.task.prewarm_child`).

When the training command is a Python program (``python[3[.N]] [options] script.py ...`` or
``python -m module ...``), the bootstrap starts that interpreter at once, while discovery
runs, as a *fork server* that imports the job's ``prewarm`` modules (default ``tensorflow``)
once. Once the cluster spec is known, :meth:`Prewarmer.spawn` sends it the command (argv with
the spec's flags, the environment with TF_CONFIG, the working directory) and the program's
stdout/stderr pipes; it forks, and the new process runs the program exactly as a fresh
``python script.py`` would, without paying for the import. Every later start (an in-place
restart) is another fork: instant, with no second import competing with the running program
for CPU.

On one machine the local runner starts one shared server per interpreter, modules and
environment before it deploys (:mod:`marathon_tf.task.warmpool`) and tells each task where it
is (``MTF_PREWARM_SOCKET``): the tasks of a job then import once, not once each.

A forked program has the guarantees of :func:`marathon_tf.task.supervisor.popen`: its own session
and process group, stdout/stderr on pipes (the Trainer pumps them), and it never outlives the
bootstrap: the server kills the programs of a bootstrap whose connection closes (however the
bootstrap ended), and every program has PR_SET_PDEATHSIG relative to the server, which has it
relative to the bootstrap (or the local runner). The bootstrap's server is started from one
long-lived thread (:class:`Prewarmer`'s spawner): the parent-death signal fires when the
*thread* that forked the child ends. Anything unusual (an unknown interpreter option, a
server that died) falls back to the ordinary start. This module never imports TensorFlow.
"""

from __future__ import annotations

import array
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from marathon_tf.contract.taskenv import FORKED_PID_FILE, PREWARM_SOCKET_VAR
from marathon_tf.task.supervisor import _die_with_parent, ignore_sigterm, popen, start_ignoring_sigterm

__all__ = ["PythonCommand", "python_command", "Prewarmer", "ForkServer", "ForkedProcess", "CHILD", "SOCKET_VAR",
           "MEMORY_LOOK_AFTER", "MEMORY_HEADROOM", "server_argv", "resolve_interpreter"]

CHILD = str(Path(__file__).resolve().with_name("prewarm_child.py"))
SOCKET_VAR = PREWARM_SOCKET_VAR  # a shared fork server's socket (set by the local runner)
MEMORY_LOOK_AFTER = 60.0      # seconds after a start with no step= line: look at the memory anyway
MEMORY_HEADROOM = 0.9    # program + server should fit in this share of the task's mem
_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")
_FLAGS = frozenset({"-u", "-O", "-OO", "-B", "-s", "-E", "-b", "-bb", "-q"})  # same meaning at start or later
_WITH_ARG = frozenset({"-W", "-X"})


@dataclass(frozen=True)
class PythonCommand:
    """The interpreter part of a Python command: what a pre-warmed interpreter is started with."""

    interpreter: str
    options: tuple[str, ...]


def python_command(argv: Sequence[str]) -> PythonCommand | None:
    """``python[3] [options] script.py ...`` / ``python -m module ...`` -> its interpreter part;
    None for anything else (``-c``, ``-``, ``-I``, unknown options, not Python)."""
    if not argv or not _PYTHON.match(os.path.basename(argv[0])):
        return None
    options: list[str] = []
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg in _FLAGS:
            options.append(arg)
        elif arg in _WITH_ARG and i + 1 < len(argv):
            options += [arg, argv[i + 1]]
            i += 1
        elif arg[:2] in _WITH_ARG and len(arg) > 2:
            options.append(arg)
        elif arg == "-m":
            return PythonCommand(argv[0], tuple(options)) if i + 1 < len(argv) else None
        elif arg.startswith("-m") and len(arg) > 2 and not arg.startswith("--"):
            return PythonCommand(argv[0], tuple(options))
        elif arg.startswith("-"):
            return None
        else:
            return PythonCommand(argv[0], tuple(options))
        i += 1
    return None


def resolve_interpreter(interpreter: str, env: Mapping[str, str], cwd: str | None) -> str | None:
    """The interpreter's path as exec would find it (the program's PATH); None if not found."""
    if os.sep in interpreter:
        path = os.path.join(cwd or os.getcwd(), interpreter)
        return path if os.access(path, os.X_OK) else None
    return shutil.which(interpreter, path=env.get("PATH", os.defpath))


def server_argv(interpreter: str, options: Sequence[str], modules: Sequence[str], *, fd: int | None = None,
                listen: int | None = None, linger: float | None = None) -> list[str]:
    """The command line of a fork server on a connected socket (``fd``, one client) or a
    listening one (``listen``, shared; it exits after ``linger`` seconds without clients)."""
    argv = [interpreter, *options, CHILD]
    argv += ["--fd", str(fd)] if listen is None else ["--listen", str(listen)]
    if linger is not None:
        argv += ["--linger", f"{linger:g}"]
    return argv + ["--interpreter", interpreter, "--options", json.dumps(list(options)), *modules]


def _usage_kib(pid: int, field: str = "VmRSS") -> int | None:
    """``VmRSS`` from /proc/<pid>/status, or a ``Private_*`` sum from smaps_rollup (field="private")."""
    try:
        if field == "private":
            with open(f"/proc/{pid}/smaps_rollup") as f:
                return sum(int(line.split()[1]) for line in f if line.startswith(("Private_Clean:", "Private_Dirty:")))
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


class ForkedProcess:
    """A program a fork server started, as :class:`~marathon_tf.task.supervisor.Trainer` uses it (the
    parts of :class:`subprocess.Popen` it needs). ``pid`` is None until the server has forked
    (it may still be importing); a signal sent meanwhile is delivered once it has, and SIGKILL
    gives up on the start altogether (``cancel``)."""

    def __init__(self, args: Sequence[str], stdout, stderr, cancel: Callable[[], None],
                 writers: tuple[int, ...] = (), ignore_term: bool = False):
        self.args, self.stdout, self.stderr, self.stdin = list(args), stdout, stderr, None
        self.ignore_term = ignore_term  # started with SIGTERM ignored (supervisor.ignore_sigterm)
        self.pid: int | None = None
        self.returncode: int | None = None
        self.started: dict | None = None  # {"started": "in_place"|"ordinary", "reason": ...}
        self.forked = threading.Event()
        self.cancelled = False
        #: why it died with its server (the server went away under it), else None
        self.lost: str | None = None
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._pending: list[int] = []
        self._cancel = cancel
        self._writers = list(writers)  # our copies of the program's stdout/stderr, until it has started

    def _close_writers(self) -> None:
        writers, self._writers = self._writers, []
        for fd in writers:
            os.close(fd)

    def _forked(self, pid: int, started: dict) -> None:
        self._close_writers()
        with self._lock:
            self.pid, self.started = pid, started
            pending, self._pending = self._pending, []
        self.forked.set()
        for sig in pending:
            self.signal_group(sig)

    def _start_ordinary(self, env: Mapping[str, str], cwd: str | None, log: Callable[[str], None]) -> None:
        """The server went away before it forked (it died while importing, or it was leaving): start
        the program the ordinary way on the same pipes. Runs on the Prewarmer's spawner thread
        (the parent-death signal is bound to the thread that forks)."""
        try:
            linux = sys.platform.startswith("linux")
            proc = subprocess.Popen(self.args, env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL,
                                    stdout=self._writers[0], stderr=self._writers[1], start_new_session=True,
                                    preexec_fn=(start_ignoring_sigterm if linux else ignore_sigterm) if self.ignore_term
                                    else (_die_with_parent if linux else None))
        except OSError as e:
            os.write(self._writers[1], f"cannot execute {self.args[0]!r}: {e.strerror or e}\n".encode())
            self._close_writers()
            self._exited(127 if isinstance(e, FileNotFoundError) else 126)
            return
        log(f"started training program (pid {proc.pid}) the ordinary way (the pre-warmed interpreter went away "
            f"before it started the program)")
        self._forked(proc.pid, {"started": "ordinary", "reason": "the pre-warmed interpreter went away"})
        threading.Thread(target=lambda: self._exited(proc.wait()), daemon=True, name="trainer-wait").start()

    def _exited(self, code: int) -> None:
        self._close_writers()
        with self._lock:
            if self.returncode is None:
                self.returncode = code
        self.forked.set()
        self._done.set()

    def _lost(self, why: str | None = None) -> None:
        """The server went away without a word: the program dies with it (its parent-death signal,
        or the server's SIGKILL for a closed connection); wait for that, then say so (``why``: what
        died, unless the bootstrap itself closed the connection)."""
        deadline = time.monotonic() + 5
        while self.pid is not None and not _gone(self.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        self.lost = why
        self._exited(-signal.SIGKILL)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            assert timeout is not None  # without a timeout the wait ends only once done
            raise subprocess.TimeoutExpired(self.args, timeout)
        assert self.returncode is not None  # _exited sets it before it sets _done
        return self.returncode

    def signal_group(self, sig: int) -> None:
        """``sig`` to the program's process group (its own session, like any program the bootstrap
        starts; after its exit, to what it left behind in its group)."""
        with self._lock:
            pid, cancel = self.pid, False
            if pid is None and self.returncode is None:
                if sig != signal.SIGKILL:
                    self._pending.append(sig)
                    return
                cancel = True
        if cancel:  # not even forked yet: give up on it (the server kills what it forks for a closed client)
            self.cancelled = True
            self._cancel()
            return
        if pid is not None:
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


class ForkServer:
    """One connection to a fork server: the bootstrap's own (``proc`` is its process) or the local
    runner's shared one. A reader thread follows the server's messages."""

    def __init__(self, sock: socket.socket, label: str, log: Callable[[str], None],
                 proc: subprocess.Popen | None = None, submit: Callable | None = None):
        self.sock, self.label, self.log, self.proc = sock, label, log, proc
        self.submit = submit  # runs a function on the Prewarmer's spawner thread (ordinary starts)
        self._closing = False
        self.hello: dict | None = None
        self.ready = threading.Event()  # the hello arrived, or the server is gone
        self.dead = False
        self._lock = threading.Lock()
        self._pending: deque[tuple[ForkedProcess, dict[str, str], str | None]] = deque()  # (child, env, cwd)
        self._running: dict[int, ForkedProcess] = {}
        threading.Thread(target=self._read, daemon=True, name="prewarm-server").start()

    @classmethod
    def start(cls, interpreter: str, options: Sequence[str], modules: Sequence[str], env: Mapping[str, str],
              cwd: str | None, label: str, log: Callable[[str], None],
              submit: Callable | None = None) -> ForkServer | None:
        """Start a server of our own (its output goes where the bootstrap's goes). ``submit``: as the class's."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            # SIGTERM ignored: a real agent's kill signals the task's whole tree (marathon_tf.local.proctree), and
            # the server's death would SIGKILL every program it forked (their parent-death signal) before the
            # bootstrap's save round; it ends with the bootstrap (close, or its own parent-death signal)
            proc = subprocess.Popen(server_argv(interpreter, options, modules, fd=theirs.fileno()), env=dict(env),
                                    cwd=cwd, stdin=subprocess.DEVNULL, start_new_session=True,
                                    pass_fds=(theirs.fileno(),),
                                    preexec_fn=start_ignoring_sigterm if sys.platform.startswith("linux") else
                                    ignore_sigterm)
        except OSError as e:
            ours.close()
            log(f"cannot pre-warm {interpreter}: {e}")
            return None
        finally:
            theirs.close()
        return cls(ours, label, log, proc, submit)

    @classmethod
    def connect(cls, path: str, label: str, log: Callable[[str], None],
                submit: Callable | None = None) -> ForkServer | None:
        """Connect to the local runner's shared server (None if it is not there). ``submit``: as the class's."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            sock.connect(path)
        except OSError as e:
            sock.close()
            log(f"the local runner's pre-warmed interpreter is not reachable ({e.strerror or e}): pre-warming here")
            return None
        return cls(sock, label, log, submit=submit)

    # Over ruff's complexity limit (C901), as one piece: the fork server's protocol, message by message.
    def _read(self) -> None:  # noqa: C901
        while True:
            try:
                data = self.sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                break
            try:
                message = json.loads(data)
            except ValueError:
                continue
            if "hello" in message:
                self.hello = message["hello"]
                self._log_hello()
                self.ready.set()
            elif "forked" in message or "error" in message:
                with self._lock:
                    child = self._pending.popleft()[0] if self._pending else None
                if child is None:
                    continue
                if "error" in message:
                    self.log(f"the pre-warmed interpreter could not start the program: {message['error']}")
                    child._exited(126)
                    continue
                self._running[message["forked"]] = child
                started = {"started": message.get("started"), "reason": message.get("reason")}
                pid = message["forked"]
                self.log(f"started training program (pid {pid}): it runs in the pre-warmed interpreter"
                         if started["started"] == "in_place" else
                         f"started training program (pid {pid}) the ordinary way ({started['reason']})")
                child._forked(message["forked"], started)
            elif "exited" in message:
                child = self._running.pop(message["exited"], None)
                if child is not None:
                    child._exited(int(message.get("code", -signal.SIGKILL)))
        self.dead = True
        self.ready.set()
        with self._lock:
            unstarted, running = list(self._pending), list(self._running.values())
            self._pending.clear()
            self._running.clear()
        for child, env, cwd in unstarted:
            if child.cancelled or self._closing or self.submit is None:
                child._exited(-signal.SIGKILL)
            else:  # it never started: start it the ordinary way rather than report a death
                try:
                    self.submit(child._start_ordinary, env, cwd, self.log)
                except RuntimeError:  # the Prewarmer is closing
                    child._exited(-signal.SIGKILL)
        why = None if self._closing else self._death()
        for child in running:
            child._lost(why)
        try:
            self.sock.close()
        except OSError:
            pass

    def _death(self) -> str:
        """What went away: ``the pre-warmed interpreter that forked it (pid 123, shared by this
        machine's tasks) died: its program got SIGKILL``."""
        pid = self.proc.pid if self.proc else (self.hello or {}).get("pid")
        whose = "" if self.proc else ", shared by this machine's tasks"
        how = ""
        if self.proc is not None:
            try:  # its connection closes a moment before it can be reaped
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
            code = self.proc.returncode
            if code is not None and code < 0 and -code in signal.Signals._value2member_map_:
                how = f" of {signal.Signals(-code).name}"
        return (f"the pre-warmed interpreter that forked it (pid {pid}{whose}) died{how}: the program got SIGKILL "
                f"with it")

    def _log_hello(self) -> None:
        hello = self.hello or {}  # just set (_read)
        rss = hello.get("rss_kib")
        self.log(f"pre-warmed {self.label} in {hello.get('seconds', 0):.1f} s"
                 + (f" ({rss / 1024:.0f} MiB)" if rss else "")
                 + ("" if self.proc else " (shared by this machine's tasks)"))
        for module, error in (hello.get("failed") or {}).items():
            self.log(f"could not pre-import {module} ({error}): the program starts the ordinary way")

    def fork(self, argv: Sequence[str], env: Mapping[str, str], cwd: str | None, *, interpreter: str,
             options: Sequence[str], modules: Sequence[str], ignore_term: bool = False) -> ForkedProcess | None:
        """Ask for ``argv`` to be started; None if the server cannot take the order (then start it
        the ordinary way). Returns at once, also while the server is still importing."""
        fork: dict[str, object] = {"argv": list(argv), "env": dict(env), "cwd": cwd, "interpreter": interpreter,
                                   "options": list(options), "modules": list(modules)}
        if ignore_term:
            fork["ignore_term"] = True
        if env.get("MESOS_SANDBOX"):  # where the local runner's kill finds it (FORKED_PID_FILE)
            fork["pidfile"] = os.path.join(env["MESOS_SANDBOX"], FORKED_PID_FILE)
        order = {"fork": fork}
        data = json.dumps(order).encode()
        with self._lock:
            if self.dead:
                return None
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            try:
                self.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [out_w, err_w]))])
            except OSError as e:
                for fd in (out_r, err_r, out_w, err_w):
                    os.close(fd)
                self.log(f"cannot hand the program to the pre-warmed interpreter ({e.strerror or e}): "
                         f"it starts the ordinary way")
                return None
            child = ForkedProcess(argv, os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb"), cancel=self.close,
                                  writers=(out_w, err_w), ignore_term=ignore_term)
            self._pending.append((child, dict(env), cwd))
        return child

    def private_kib(self) -> int | None:
        """The server's own memory (pages it does not share with the programs it forked)."""
        pid = self.proc.pid if self.proc else (self.hello or {}).get("pid")
        return _usage_kib(pid, "private") if pid else None

    def close(self) -> None:
        """Disconnect (the server kills any program it still runs for us); stop our own server."""
        self._closing = True
        self.dead = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if self.proc is not None:
            try:
                self.proc.wait(2)  # it exits once its programs are reaped
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                self.proc.wait()


class Prewarmer:
    """Keeps a fork server for the starts of ``command``.

    ``start()`` starts (or, locally, connects to) the server; :meth:`spawn` is the Trainer's spawn
    hook (falls back to :func:`~marathon_tf.task.supervisor.popen`); :meth:`note_step` tells it the
    program reached a step (time to look at the memory); ``close()`` stops it.
    """

    def __init__(self, command: Sequence[str], modules: Sequence[str], environ: Mapping[str, str], *,
                 cwd: str | None = None, log: Callable[[str], None] = lambda m: None,
                 memory_look_after: float = MEMORY_LOOK_AFTER, mem_limit_mib: float | None = None):
        python = python_command(command)
        if python is None:
            raise ValueError(f"not a Python program: {list(command)!r}")
        self.command: PythonCommand = python
        self.modules, self.cwd, self.log = list(modules), cwd, log
        self.env = dict(environ)
        self.env.pop("TF_CONFIG", None)  # the one variable that differs at the program's start
        self.env.pop(SOCKET_VAR, None)
        self.env.setdefault("PYTHONUNBUFFERED", "1")
        self.socket_path = environ.get(SOCKET_VAR) or None
        self.memory_look_after, self.mem_limit_mib = memory_look_after, mem_limit_mib
        self.interpreter: str | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prewarm-spawner")
        self._lock = threading.Lock()
        self._server: ForkServer | None = None
        self._stepped = threading.Event()
        self._generation = 0
        self._closed = False
        self._opened = threading.Event()  # _open has run: the server is there (or there is none to wait for)
        self.last: ForkedProcess | None = None  # the forked program of the last start, if any

    @classmethod
    def for_command(cls, command: Sequence[str], modules: Sequence[str], environ: Mapping[str, str],
                    **kw) -> Prewarmer | None:
        """A Prewarmer when ``command`` is a Python program and there is something to import."""
        if not modules or python_command(command) is None:
            return None
        mem = environ.get("MARATHON_APP_RESOURCE_MEM")
        try:
            kw.setdefault("mem_limit_mib", float(mem) if mem else None)
        except ValueError:
            pass
        return cls(command, modules, environ, **kw)

    @property
    def label(self) -> str:
        return f"{self.command.interpreter} with {', '.join(self.modules)}"

    # -- the spawner thread does every fork ---------------------------------------------------
    def _in_spawner(self, fn, *args):
        return self._pool.submit(fn, *args).result()

    def _open(self) -> None:
        try:
            self._open_server()
        finally:
            self._opened.set()

    def _open_server(self) -> None:
        self.interpreter = resolve_interpreter(self.command.interpreter, self.env, self.cwd)
        if self.interpreter is None:
            self.log(f"cannot pre-warm: {self.command.interpreter} not found on PATH")
            return
        submit = self._pool.submit
        server = ForkServer.connect(self.socket_path, self.label, self.log, submit) if self.socket_path else None
        if server is None:
            server = ForkServer.start(self.interpreter, self.command.options, self.modules, self.env, self.cwd,
                                      self.label, self.log, submit)
        with self._lock:
            if not self._closed:
                self._server, server = server, None
        if server is not None:
            server.close()

    # -- the bootstrap's interface ------------------------------------------------------------
    def start(self) -> Prewarmer:
        self.log(f"pre-warming {self.label}" + (" (the local runner's shared interpreter)" if self.socket_path else ""))
        self._pool.submit(self._open)
        return self

    def warm(self) -> bool:
        """Whether a start now would not wait for the imports: the server said hello (or there is none)."""
        server = self.server
        return self._opened.is_set() and (server is None or server.ready.is_set())

    @property
    def server(self) -> ForkServer | None:
        with self._lock:
            return self._server

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], cwd: str | None, ignore_term: bool = False):
        """The Trainer's spawn hook: the fork server runs ``argv``, or an ordinary start."""
        with self._lock:
            closed = self._closed
        if closed:  # nothing pre-warmed any more: the ordinary start
            return popen(argv, env, cwd, ignore_term)
        return self._in_spawner(self._spawn, list(argv), dict(env), cwd, ignore_term)

    def _spawn(self, argv: list[str], env: dict[str, str], cwd: str | None, ignore_term: bool = False):
        with self._lock:
            server = self._server
            self._generation += 1
            generation = self._generation
            self._stepped.clear()
        child = None
        if server is not None and python_command(argv) == self.command:
            # a server is kept only once _open has resolved the interpreter
            child = server.fork(argv, env, cwd, interpreter=cast(str, self.interpreter), options=self.command.options,
                                modules=self.modules, ignore_term=ignore_term)
        self.last = child
        if child is None:
            return popen(argv, env, cwd, ignore_term)
        if server is not None and server.proc is not None and self.mem_limit_mib:  # (a child: a server)
            threading.Thread(target=self._look_at_memory, args=(generation, server, child), daemon=True,
                             name="prewarm-memory").start()
        return child

    def note_step(self) -> None:
        """The program printed a step: it is past its start."""
        self._stepped.set()

    def _look_at_memory(self, generation: int, server: ForkServer, child: ForkedProcess) -> None:
        """Once past its start: warn when the program and the server's own memory come close to the
        task's ``mem`` (the server shares most of its pages with the program it forked)."""
        self._stepped.wait(self.memory_look_after)
        with self._lock:
            if self._closed or generation != self._generation or child.pid is None:
                return
        limit = self.mem_limit_mib
        assert limit is not None  # looked at only with a limit (_spawn)
        program, own = _usage_kib(child.pid) or 0, server.private_kib() or 0
        if (program + own) / 1024 > MEMORY_HEADROOM * limit:
            self.log(f"warning: the program ({program / 1024:.0f} MiB) and its pre-warmed interpreter's own memory "
                     f"({own / 1024:.0f} MiB) come close to the task's {limit:g} MiB; raise mem or set "
                     f'"prewarm": false')

    @property
    def waiting(self) -> subprocess.Popen | None:
        """The bootstrap's own fork server process, once it is ready (for tests and status)."""
        server = self.server
        return server.proc if server is not None and server.ready.is_set() and not server.dead else None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            server, self._server = self._server, None
            self._stepped.set()
        if server is not None:
            server.close()
        self._pool.shutdown(wait=True)
