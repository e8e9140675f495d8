"""Pre-warmed trainers: the bootstrap's side (the interpreter's side is :mod:`marathon_tf.prewarm_child`).

When the training command is a Python program (``python[3[.N]] [options] script.py ...`` or
``python -m module ...``), the bootstrap starts that interpreter at once, while discovery
runs, and has it import the job's ``prewarm`` modules (default ``tensorflow``). Once the
cluster spec is known, :meth:`Prewarmer.spawn` hands the waiting interpreter the command
(argv with the spec's flags, the environment with TF_CONFIG, the working directory) and it
runs the program in place, exactly as a fresh ``python script.py`` would; the program then
starts without paying for the import. After the program reached its first ``step=`` line
(or after :data:`STANDBY_AFTER` seconds), a fresh interpreter is pre-warmed as a standby for
the next in-place restart, if the task's memory (``MARATHON_APP_RESOURCE_MEM``) has room for
it; it imports at SCHED_IDLE CPU priority (when it may return to normal priority afterwards:
CAP_SYS_NICE or RLIMIT_NICE), so it takes no CPU time the running program wants.

Every interpreter is started like :func:`marathon_tf.supervisor.popen` starts a program: its
own process group, stdout/stderr on pipes (the Trainer pumps them when it becomes the
program), PR_SET_PDEATHSIG so it never outlives the bootstrap. The processes are forked from
one long-lived thread (:class:`Prewarmer`'s spawner): the parent-death signal fires when the
*thread* that forked the child ends. Anything unusual (an unknown interpreter option, a
standby that died) falls back to the ordinary start. This module never imports TensorFlow.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from marathon_tf.supervisor import _die_with_parent, popen

__all__ = ["PythonCommand", "python_command", "Prewarmer", "CHILD", "STANDBY_AFTER", "STANDBY_HEADROOM"]

CHILD = str(Path(__file__).resolve().with_name("prewarm_child.py"))
STANDBY_AFTER = 60.0      # seconds after a start with no step= line: start the standby anyway
STANDBY_HEADROOM = 0.9    # program + standby must fit in this share of the task's mem
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


def _resolve(interpreter: str, env: Mapping[str, str], cwd: str | None) -> str | None:
    """The interpreter's path as exec would find it (the program's PATH); None if not found."""
    if os.sep in interpreter:
        path = os.path.join(cwd or os.getcwd(), interpreter)
        return path if os.access(path, os.X_OK) else None
    return shutil.which(interpreter, path=env.get("PATH", os.defpath))


def _json_line(line: bytes) -> dict | None:
    try:
        value = json.loads(line) if line.strip() else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _normal_priority(pid: int) -> None:
    """Every thread of ``pid`` back to this process's own scheduling policy (a standby that is
    still importing at SCHED_IDLE when the program must start; it may: it checked before going
    idle that it can come back, and it has this process's credentials and limits)."""
    try:
        policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                os.sched_setscheduler(int(tid), policy, param)
            except (ProcessLookupError, PermissionError):
                pass
    except (OSError, AttributeError):
        pass


def _rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


class _Warm:
    """One pre-warmed interpreter waiting for its order."""

    def __init__(self, proc: subprocess.Popen, status_fd: int, log: Callable[[str], None], label: str,
                 idle: bool = False):
        self.proc, self.log, self.label, self.idle = proc, log, label, idle
        self.report: dict | None = None   # after the imports: seconds, rss_kib, failed
        self.started: dict | None = None  # after the order: {"started": "in_place"|"ordinary", "reason"}
        self.done = threading.Event()
        threading.Thread(target=self._read_status, args=(status_fd,), daemon=True, name="prewarm-status").start()

    def _read_status(self, fd: int) -> None:
        with os.fdopen(fd, "rb") as f:
            self.report = _json_line(f.readline())
            if self.report is not None:
                self._log_report()
                self.started = _json_line(f.readline())
        if self.started:
            how = self.started.get("started")
            self.log("the program runs in the pre-warmed interpreter" if how == "in_place" else
                     f"the program starts the ordinary way ({self.started.get('reason')})")
        self.done.set()

    def _log_report(self) -> None:
        if not self.report.get("ready"):
            self.log(f"pre-warmed interpreter unusable: {self.report.get('error')}")
            return
        rss = self.report.get("rss_kib")
        self.log(f"pre-warmed {self.label} in {self.report.get('seconds', 0):.1f} s"
                 + (f" ({rss / 1024:.0f} MiB)" if rss else "")
                 + (" at idle CPU priority" if self.report.get("idle") else ""))
        for module, error in (self.report.get("failed") or {}).items():
            self.log(f"could not pre-import {module} ({error}): the program starts the ordinary way")

    def order(self, argv: Sequence[str], env: Mapping[str, str], cwd: str | None) -> None:
        """Send the command (from a thread: a large order must not block the caller while the
        interpreter is still importing)."""
        data = (json.dumps({"argv": list(argv), "env": dict(env), "cwd": cwd}) + "\n").encode()

        def write() -> None:
            try:
                self.proc.stdin.write(data)
                self.proc.stdin.close()
            except (OSError, ValueError):
                pass  # it died: the Trainer sees its exit

        threading.Thread(target=write, daemon=True, name="prewarm-order").start()

    def discard(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except (ProcessLookupError, PermissionError):
                pass
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                pipe.close()
            except (OSError, ValueError):
                pass


class Prewarmer:
    """Keeps one pre-warmed interpreter for the next start of ``command``.

    ``start()`` pre-warms the first one; :meth:`spawn` is the Trainer's spawn hook (falls back
    to :func:`~marathon_tf.supervisor.popen`); :meth:`note_step` tells it the program reached a
    step (time for the standby); ``close()`` stops the standby and the spawner thread.
    """

    def __init__(self, command: Sequence[str], modules: Sequence[str], environ: Mapping[str, str], *,
                 cwd: str | None = None, log: Callable[[str], None] = lambda m: None,
                 standby_after: float = STANDBY_AFTER, mem_limit_mib: float | None = None):
        self.command = python_command(command)
        if self.command is None:
            raise ValueError(f"not a Python program: {list(command)!r}")
        self.modules, self.cwd, self.log = list(modules), cwd, log
        self.env = dict(environ)
        self.env.pop("TF_CONFIG", None)  # the one variable that differs at the program's start
        self.env.setdefault("PYTHONUNBUFFERED", "1")
        self.standby_after, self.mem_limit_mib = standby_after, mem_limit_mib
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prewarm-spawner")
        self._lock = threading.Lock()
        self._warm: _Warm | None = None
        self._stepped = threading.Event()
        self._generation = 0
        self._closed = False
        self._estimate_kib: int | None = None
        self.last: _Warm | None = None  # the pre-warmed interpreter that ran the last start, if any

    @classmethod
    def for_command(cls, command: Sequence[str], modules: Sequence[str], environ: Mapping[str, str],
                    **kw) -> "Prewarmer | None":
        """A Prewarmer when ``command`` is a Python program and there is something to import."""
        if not modules or python_command(command) is None:
            return None
        mem = environ.get("MARATHON_APP_RESOURCE_MEM")
        try:
            kw.setdefault("mem_limit_mib", float(mem) if mem else None)
        except ValueError:
            pass
        return cls(command, modules, environ, **kw)

    # -- the spawner thread does every fork ---------------------------------------------------
    def _in_spawner(self, fn, *args):
        return self._pool.submit(fn, *args).result()

    def _start_one(self, idle: bool = False) -> _Warm | None:
        interpreter = _resolve(self.command.interpreter, self.env, self.cwd)
        if interpreter is None:
            self.log(f"cannot pre-warm: {self.command.interpreter} not found on PATH")
            return None
        read_fd, write_fd = os.pipe()
        try:
            proc = subprocess.Popen([interpreter, *self.command.options, CHILD, *(["--idle"] if idle else []),
                                     str(write_fd), *self.modules],
                                    env=self.env, cwd=self.cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True, pass_fds=(write_fd,),
                                    preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        except OSError as e:
            os.close(read_fd)
            self.log(f"cannot pre-warm {interpreter}: {e}")
            return None
        finally:
            os.close(write_fd)
        return _Warm(proc, read_fd, self.log, f"{self.command.interpreter} with {', '.join(self.modules)}", idle)

    def _replenish(self, idle: bool = False) -> None:
        with self._lock:
            if self._closed or self._warm is not None:
                return
        warm = self._start_one(idle)
        with self._lock:
            if self._closed or self._warm is not None:
                if warm:
                    warm.discard()
                return
            self._warm = warm

    # -- the bootstrap's interface ------------------------------------------------------------
    def start(self) -> "Prewarmer":
        self.log(f"pre-warming {self.command.interpreter} with {', '.join(self.modules)}")
        self._pool.submit(self._replenish)
        return self

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], cwd: str | None) -> subprocess.Popen:
        """The Trainer's spawn hook: the pre-warmed interpreter runs ``argv``, or an ordinary start."""
        with self._lock:
            closed = self._closed
        if closed:  # nothing pre-warmed any more: the ordinary start
            return popen(argv, env, cwd)
        return self._in_spawner(self._spawn, list(argv), dict(env), cwd)

    def _spawn(self, argv: list[str], env: dict[str, str], cwd: str | None) -> subprocess.Popen:
        with self._lock:
            warm, self._warm = self._warm, None
            self._generation += 1
            generation = self._generation
            self._stepped.clear()
        if warm is not None and (python_command(argv) != self.command or warm.proc.poll() is not None
                                 or cwd != self.cwd):
            warm.discard()
            warm = None
        self.last = warm
        if warm is None:
            proc = popen(argv, env, cwd)
        else:
            if warm.idle and warm.report is None:
                _normal_priority(warm.proc.pid)  # still importing at idle priority: it is needed now
            warm.order(argv, env, cwd)
            proc = warm.proc
        threading.Thread(target=self._standby_later, args=(generation, proc), daemon=True,
                         name="prewarm-standby").start()
        return proc

    def note_step(self) -> None:
        """The program printed a step: it is past its start, a standby may be pre-warmed now."""
        self._stepped.set()

    def _standby_later(self, generation: int, proc: subprocess.Popen) -> None:
        self._stepped.wait(self.standby_after)
        with self._lock:  # a program that already ended (a crash right after its first step) is the
            if self._closed or generation != self._generation:  # case a standby is for: keep going
                return
        if not self._room_for_standby(proc.pid):
            return
        try:
            self._pool.submit(self._replenish, True)  # at idle CPU priority: the program runs meanwhile
        except RuntimeError:  # closed meanwhile
            pass

    def _room_for_standby(self, pid: int) -> bool:
        if not self.mem_limit_mib:
            return True
        last = self.last.report if self.last is not None else None
        if last and last.get("rss_kib"):
            self._estimate_kib = last["rss_kib"]  # measured just after its imports
        program = _rss_kib(pid) or 0
        estimate = self._estimate_kib or program  # unknown: the program, which imported the same, is an upper bound
        need = (program + estimate) / 1024
        if need <= STANDBY_HEADROOM * self.mem_limit_mib:
            return True
        self.log(f"no standby interpreter: the program ({program / 1024:.0f} MiB) and a pre-warmed one "
                 f"({estimate / 1024:.0f} MiB) would not fit in {STANDBY_HEADROOM:.0%} of the "
                 f"task's {self.mem_limit_mib:g} MiB; a restart imports again")
        return False

    @property
    def waiting(self) -> subprocess.Popen | None:
        """The pre-warmed interpreter waiting for the next start, if any (for tests and status)."""
        with self._lock:
            return self._warm.proc if self._warm else None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            warm, self._warm = self._warm, None
            self._stepped.set()
        if warm is not None:
            warm.discard()
        self._pool.shutdown(wait=True)
