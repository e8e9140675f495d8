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
from typing import BinaryIO, Callable, Mapping, Sequence

from marathon_tf.contract.shellexec import exit_status

__all__ = ["STEP_RE", "STDERR_TAIL_LINES", "LINE_LIMIT", "Trainer", "die_with_parent", "popen", "relay_stop_signals",
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


def popen(argv: Sequence[str], env: Mapping[str, str], cwd: str | None) -> subprocess.Popen:
    """Start the program the ordinary way: its own process group, stdin /dev/null, stdout/stderr
    on pipes, dies with the bootstrap. (:class:`marathon_tf.task.prewarm.Prewarmer` has a faster
    ``spawn`` with the same guarantees.)"""
    return subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)


class Trainer:
    """One run of the training program (``start`` it again for a restart). ``spawn`` starts the
    process (default :func:`popen`; the bootstrap passes :meth:`marathon_tf.task.prewarm.Prewarmer.spawn`)."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], *, cwd: str | None = None,
                 on_step: Callable[[int], None] = lambda step: None,
                 on_text: Callable[[str], None] | None = None,
                 stdout: BinaryIO | None = None, stderr: BinaryIO | None = None,
                 spawn: Callable[[Sequence[str], Mapping[str, str], str | None], subprocess.Popen] = popen):
        import sys

        self.argv, self.env, self.cwd, self.on_step, self.on_text = list(argv), dict(env), cwd, on_step, on_text
        self.spawn = spawn
        self.stdout = stdout or sys.stdout.buffer
        self.stderr = stderr or sys.stderr.buffer
        self.proc: subprocess.Popen | None = None
        self._readers: list[threading.Thread] = []
        self._tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._tail_lock = threading.Lock()
        self._spawn_error: int | None = None
        #: the signal that ended the program (None: it exited, or runs)
        self.killed_by: int | None = None

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
        self.killed_by = None
        try:
            self.proc = self.spawn(self.argv, self.env, self.cwd)
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

    def stop(self, grace: float, sig: int = signal.SIGTERM) -> int:
        """Send ``sig`` to the program's group, SIGKILL it after ``grace`` seconds; its exit status."""
        if self._spawn_error is not None:
            return self._spawn_error
        assert self.proc is not None, "not started"
        if self.proc.poll() is None:
            self._signal_group(sig)
            self._signal_group(signal.SIGCONT)  # a stopped (SIGSTOP, hung) program must see it
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
        code = self.wait()
        assert code is not None  # no timeout: it waited for the exit
        return code
