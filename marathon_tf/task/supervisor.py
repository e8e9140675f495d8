"""Run the training program as a child process; the bootstrap's own stop signals.

* :class:`Trainer` starts the program in its own process group, passes its
  stdout/stderr through line by line (one reader thread per stream; a line longer than
  :data:`LINE_LIMIT` is read and passed on in pieces, so memory is bounded), remembers the
  last ``step=<int>`` and the last :data:`STDERR_TAIL_LINES` lines of stderr (for the
  job's failure reason), and stops it: signal -> grace period -> SIGKILL of the group. Its exit
  status is a shell's (:func:`marathon_tf.contract.shellexec.exit_status`: killed by signal N is
  128 + N).
* :func:`relay_stop_signals`, :func:`die_with_parent`: how SIGTERM/SIGINT reach the bootstrap, and
  how it dies with its parent.

What an exit *means* is decided elsewhere: :mod:`marathon_tf.task.policy`.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import BinaryIO, cast

from marathon_tf.contract.shellexec import exit_status

__all__ = ["STEP_RE", "STDERR_TAIL_LINES", "LINE_LIMIT", "Trainer", "die_with_parent", "ignore_sigterm",
           "ignores_sigterm", "popen", "relay_stop_signals",
           "STOP_SIGNALS"]

STEP_RE = re.compile(r"\bstep[=: ]\s*(\d+)")
STDERR_TAIL_LINES = 20
#: Output is read in pieces of at most this many bytes (a longer line is several pieces).
LINE_LIMIT = 64 * 1024
#: A stderr line kept for the failure reason is cut to this many characters.
TAIL_LINE_CHARS = 2000


def _die_with_parent(sig: int = signal.SIGKILL) -> None:  # pragma: no cover - runs in the child
    """Linux: the program gets ``sig`` (SIGKILL) if the bootstrap dies (e.g. SIGKILLed by the agent),
    so a trainer can never outlive its task. Elsewhere a no-op."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, sig)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def start_ignoring_sigterm() -> None:  # pragma: no cover - runs in the child
    """``preexec_fn`` of a process the bootstrap ends itself (a program of a job with save rounds, the
    pre-warmed interpreter):
    it dies with the bootstrap (SIGKILL), and ignores SIGTERM (:func:`ignore_sigterm`)."""
    _die_with_parent()
    ignore_sigterm()


def ignore_sigterm() -> None:
    """In a program of a job with save rounds, before it runs: SIGTERM ignored, a disposition the program keeps
    across ``exec`` unless it installs a handler of its own. A Mesos agent's command executor sends a killed
    task's SIGTERM to its whole process tree (:mod:`marathon_tf.local.proctree`), the program included, at
    the moment its bootstrap gets it; a TensorFlow server dies of it at once, and with it what the round
    needs (the variables a ps serves, the steps a worker has in flight). Ignoring it, the program goes on
    until its bootstrap has seen the round through, then is ended (:meth:`Trainer.stop`). A program with a
    SIGTERM handler of its own still gets the agent's SIGTERM at once, and handles it."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def ignores_sigterm(pgid: int) -> bool:
    """Whether every live process of process group ``pgid`` ignores SIGTERM (``SigIgn`` in
    ``/proc/<pid>/status``; False where that cannot be read: SIGTERM is then sent as ever)."""
    bit = 1 << (signal.SIGTERM - 1)
    found = False
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return False
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
            if int(fields[2]) != pgid or fields[0] == b"Z":
                continue
            with open(f"/proc/{pid}/status", "rb") as f:
                ignored = next(int(line.split()[1], 16) for line in f if line.startswith(b"SigIgn:"))
        except (OSError, IndexError, ValueError, StopIteration):
            continue
        if not ignored & bit:
            return False
        found = True
    return found


def die_with_parent() -> None:
    """Linux: this process (the bootstrap) gets SIGTERM when its parent dies, so a chain of parents
    each carrying the parent-death signal (runner -> ``sh -c`` -> bootstrap -> program) ends with
    its root. SIGTERM, not SIGKILL: when a ``sh -c`` parent dies of the SIGTERM that stops the task,
    the bootstrap still stops its program with the grace period (the program has SIGKILL relative
    to the bootstrap). A parent that died before the signal was set (re-parented) stops us now."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    _die_with_parent(signal.SIGTERM)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)


#: The signals that stop the bootstrap (its task is killed; Ctrl-C when run by hand).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def relay_stop_signals(stop: Callable[[int], None]) -> Callable[[], None]:
    """SIGTERM and SIGINT call ``stop(signum)`` from a thread of their own; returns what undoes it.

    A Python signal handler runs in the main thread between two bytecodes: maybe while that thread
    holds the lock of the very Event the handler sets, or inside another handler doing so. A task's
    stop sends SIGTERM to its process group and, as its ``sh -c`` dies, the parent-death SIGTERM:
    two at once, the second handler nested in the first's ``Event.set`` — a self-deadlock that left
    the program without its grace period (SIGKILLed at its end). Here the handlers do nothing; the
    signal's number reaches a relay thread through ``signal.set_wakeup_fd``."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    old_fd = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    previous = {sig: signal.signal(sig, lambda signum, frame: None) for sig in STOP_SIGNALS}

    def relay() -> None:
        try:
            while True:
                data = os.read(read, 64)
                if not data:
                    return
                for signum in data:
                    if signum in STOP_SIGNALS:
                        stop(signum)
        except OSError:
            return
        finally:
            os.close(read)

    threading.Thread(target=relay, name="stop-signals", daemon=True).start()

    def restore() -> None:
        signal.set_wakeup_fd(old_fd)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        os.close(write)  # the relay reads the end and leaves

    return restore


def popen(argv: Sequence[str], env: Mapping[str, str], cwd: str | None, ignore_term: bool = False) -> subprocess.Popen:
    """Start the program the ordinary way: its own process group, stdin /dev/null, stdout/stderr
    on pipes, dies with the bootstrap; ``ignore_term``: SIGTERM ignored (:func:`ignore_sigterm`).
    (:class:`marathon_tf.task.prewarm.Prewarmer` has a faster ``spawn`` with the same guarantees.)"""
    linux = sys.platform.startswith("linux")
    return subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=(start_ignoring_sigterm if linux else ignore_sigterm) if ignore_term else
                            (_die_with_parent if linux else None))


class Trainer:
    """One run of the training program (``start`` it again for a restart). ``spawn`` starts the
    process (default :func:`popen`; the bootstrap passes :meth:`marathon_tf.task.prewarm.Prewarmer.spawn`);
    ``ignore_term``: with SIGTERM ignored (:func:`ignore_sigterm`: in a job with save rounds)."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], *, cwd: str | None = None,
                 on_step: Callable[[int], None] = lambda step: None,
                 on_text: Callable[[str], None] | None = None,
                 stdout: BinaryIO | None = None, stderr: BinaryIO | None = None,
                 spawn: Callable[..., subprocess.Popen] = popen, ignore_term: bool = False):
        import sys

        self.argv, self.env, self.cwd, self.on_step, self.on_text = list(argv), dict(env), cwd, on_step, on_text
        self.spawn = spawn
        #: start the program with SIGTERM ignored (:func:`ignore_sigterm`: in a job with save rounds)
        self.ignore_term = ignore_term
        self.stdout = stdout or sys.stdout.buffer
        self.stderr = stderr or sys.stderr.buffer
        self.proc: subprocess.Popen | None = None
        self._readers: list[threading.Thread] = []
        self._tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._tail_lock = threading.Lock()
        self._spawn_error: int | None = None
        #: the signal that ended the program (None: it exited, or runs)
        self.killed_by: int | None = None
        #: the program is held for a save round (:mod:`marathon_tf.task.saving`): ``"self"`` (it holds after
        #: it saved, at a step boundary), ``"outside"`` (for another task's round: at its step boundary, or frozen
        #: where it was), None (it runs)
        self.held: str | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        """Start the program. A program that cannot be executed (not found, not executable) does
        not raise: it "exits" at once with the shell's code (127 not found, 126 otherwise) and the
        reason as its stderr tail, so the exit policy sees it like any other failure."""
        with self._tail_lock:
            self._tail.clear()
        self._spawn_error = None
        self.killed_by = self.held = None
        try:
            self.proc = self.spawn(self.argv, self.env, self.cwd, **({"ignore_term": True} if self.ignore_term else {}))
        except OSError as e:
            self.proc = None
            code = 127 if isinstance(e, FileNotFoundError) else 126
            message = f"cannot execute {self.argv[0]!r}: {e.strerror or e}"
            if isinstance(e, FileNotFoundError) and self.cwd and not os.path.isdir(self.cwd):
                message = f"cannot start the program in {self.cwd!r}: {e.strerror or e}"
            self._spawn_error = code
            with self._tail_lock:
                self._tail.append(message)
            try:
                self.stderr.write(f"{message}\n".encode())
                self.stderr.flush()
            except (OSError, ValueError):
                pass
            self._readers = []
            return
        self._readers = [threading.Thread(target=self._pump, args=(pipe, out, tail), daemon=True, name=name)
                         for pipe, out, tail, name in ((self.proc.stdout, self.stdout, False, "trainer-stdout"),
                                                       (self.proc.stderr, self.stderr, True, "trainer-stderr"))]
        for t in self._readers:
            t.start()

    def stderr_tail(self) -> str:
        """The last :data:`STDERR_TAIL_LINES` lines the program wrote to stderr (this run)."""
        with self._tail_lock:
            return "\n".join(self._tail)

    def _pump(self, pipe: BinaryIO, out: BinaryIO, keep_tail: bool) -> None:
        """Pass the program's bytes through unchanged, reading at most :data:`LINE_LIMIT` bytes at
        a time (memory stays bounded whatever the line length). Steps are read from each piece;
        the stderr tail keeps the first :data:`TAIL_LINE_CHARS` characters of a line."""
        continuing = False  # the previous piece ended inside a line
        for piece in iter(lambda: pipe.readline(LINE_LIMIT), b""):
            try:
                out.write(piece)
                out.flush()
            except (OSError, ValueError):
                pass
            text = piece.decode("utf-8", "replace")
            if keep_tail and not continuing and text.strip():
                kept = text.rstrip("\r\n")
                if len(kept) > TAIL_LINE_CHARS or not piece.endswith(b"\n"):
                    kept = kept[:TAIL_LINE_CHARS] + " [line cut]"
                with self._tail_lock:
                    self._tail.append(kept)
            continuing = not piece.endswith(b"\n")
            if self.on_text is not None:
                self.on_text(text)  # e.g. TensorFlow naming a peer it waits for (marathon_tf.task.tflog)
            steps = STEP_RE.findall(text)
            if steps:
                self.on_step(int(steps[-1]))
        pipe.close()

    def wait(self, timeout: float | None = None) -> int | None:
        """The program's exit status (128+N when killed by signal N), or None if still running."""
        if self._spawn_error is not None:
            return self._spawn_error
        assert self.proc is not None, "not started"
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._reap_group()
        for t in self._readers:
            t.join(timeout=2)
        self.killed_by = -code if code < 0 else None
        return exit_status(code)

    def infrastructure(self) -> str | None:
        """Why the program died with the machinery that ran it (its pre-warmed interpreter went away,
        :class:`marathon_tf.task.prewarm.ForkedProcess`), or None: it ended by itself."""
        return getattr(self.proc, "lost", None)

    def _signal_group(self, sig: int) -> None:
        signal_group = getattr(self.proc, "signal_group", None)  # a forked program (marathon_tf.task.prewarm)
        if signal_group is not None:
            signal_group(sig)
            return
        assert self.proc is not None, "not started"
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _reap_group(self) -> None:
        """Kill what the program left behind in its process group."""
        self._signal_group(signal.SIGKILL)

    def send(self, sig: int) -> None:
        """``sig`` to the program's process group, if it runs (a save round's SIGUSR1, SIGSTOP, SIGCONT)."""
        if self.proc is not None and self._spawn_error is None and self.proc.poll() is None:
            self._signal_group(sig)

    def paused(self) -> bool | None:
        """Whether the program is stopped (SIGSTOP: ``T`` in ``/proc/<pid>/stat``); None where that cannot be read."""
        pid = self.pid
        if pid is None:
            return None
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                return f.read().rpartition(b")")[2].split()[0] in (b"T", b"t")
        except (OSError, IndexError):
            return None

    def hold(self, how: str, *, pause: bool = True) -> None:
        """The program is held for a save round; ``how``: ``"self"`` or ``"outside"`` (see ``held``). ``pause``:
        pause it here (SIGSTOP); else it holds already (it paused itself, or waits by the save hook)."""
        if pause:
            self.send(signal.SIGSTOP)
        self.held = how

    def resume(self) -> None:
        """Let a held program go on (SIGCONT)."""
        if self.held is not None:
            self.held = None
            self.send(signal.SIGCONT)

    def stop(self, grace: float, sig: int = signal.SIGTERM) -> int:
        """Send ``sig`` to the program's group, SIGKILL it after ``grace`` seconds; its exit status. A program
        started with SIGTERM ignored that still ignores it (:func:`ignore_sigterm`: no handler of its own) is killed at
        once, and its status is the one SIGTERM's default action would have left (143). A
        program held for a save round (``held``) is killed at once: the round saved the job's checkpoint at
        the step it is held at, and continued it would train (or save) past the checkpoint to be restored."""
        if self._spawn_error is not None:
            return self._spawn_error
        assert self.proc is not None, "not started"
        if self.held is not None and self.proc.poll() is None:
            self._signal_group(signal.SIGKILL)
        elif self.proc.poll() is None and sig == signal.SIGTERM and self.ignore_term and ignores_sigterm(self.proc.pid):
            # started so (ignore_sigterm) and no handler since: SIGTERM's default action, which it stands for
            self._signal_group(signal.SIGKILL)
            code = self.wait()
            return 128 + signal.SIGTERM if code == 128 + signal.SIGKILL else cast(int, code)
        elif self.proc.poll() is None:
            self._signal_group(sig)
            self._signal_group(signal.SIGCONT)  # a stopped (SIGSTOP, hung) program must see it
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
        code = self.wait()
        assert code is not None  # no timeout: it waited for the exit
        return code
