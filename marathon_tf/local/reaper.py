"""Nothing outlives the local runner: a per-runner token in every task's environment and a guardian.

Every task the :class:`~marathon_tf.local.launcher.Launcher` starts gets ``MARATHON_TF_RUNNER=<token>``
in its environment; every process it starts inherits it (any fork chain, any process group or
session, daemons included, unless a program wipes its environment on purpose). :func:`sweep`
SIGKILLs every process that carries the token (scanning ``/proc/<pid>/environ``).

The :class:`Guardian` is a small process the runner starts (its own session, so a signal to the
runner's process group does not reach it; SIGINT/SIGTERM/SIGHUP ignored). It holds the read end
of a pipe whose only write end is the runner's; when the runner goes away, however it dies
(SIGKILL included), the kernel closes the write end, the guardian reads EOF, sweeps the token
and exits. A runner that stops normally sweeps itself and closes the pipe the same way.

Linux only (``/proc``); elsewhere the sweep finds nothing and only process groups are signalled.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time

__all__ = ["TOKEN_VAR", "new_token", "carriers", "sweep", "Guardian", "main"]

#: The environment variable that marks a process as started by one local runner.
TOKEN_VAR = "MARATHON_TF_RUNNER"


def new_token() -> str:
    return f"{os.getpid()}-{secrets.token_hex(8)}"


def carriers(token: str, exclude: tuple[int, ...] = (), only: tuple[int, ...] | None = None) -> list[int]:
    """Pids of live processes whose environment holds ``MARATHON_TF_RUNNER=<token>`` (of ``only``, when given)."""
    needle = f"{TOKEN_VAR}={token}".encode()
    found = []
    try:
        pids = list(only) if only is not None else [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    skip = set(exclude) | {os.getpid()}
    for pid in pids:
        if pid in skip:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            found.append(pid)
    return found


def sweep(token: str, rounds: int = 20, pause: float = 0.05) -> int:
    """SIGKILL every process carrying ``token`` until none is left (a process forking meanwhile is
    caught by the next round); returns how many were signalled."""
    killed: set[int] = set()
    for _ in range(rounds):
        pids = carriers(token)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(pause)
    return len(killed)


class Guardian:
    """The runner's side: start the guardian process, and stop it (sweeping) at the end."""

    def __init__(self, token: str) -> None:
        self.token = token
        self._write_fd: int | None = None
        self._proc: subprocess.Popen | None = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        if self.running or not sys.platform.startswith("linux"):
            return
        read_fd, write_fd = os.pipe()  # both non-inheritable; only read_fd is passed on
        try:
            env = {k: v for k, v in os.environ.items() if k != TOKEN_VAR}
            self._proc = subprocess.Popen(
                [sys.executable, "-I", os.path.abspath(__file__), self.token, str(read_fd)],  # stdlib only
                pass_fds=(read_fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                start_new_session=True, env=env, cwd="/")
        finally:
            os.close(read_fd)
        self._write_fd = write_fd

    def stop(self, timeout: float = 5.0) -> None:
        """Close the lifeline: the guardian sweeps and exits (waited for, killed past ``timeout``)."""
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None


def main(argv: list[str] | None = None) -> int:
    """``python reaper.py TOKEN FD`` (run as a file: no package import): wait for EOF on FD, then
    sweep TOKEN."""
    token, fd_arg = (argv if argv is not None else sys.argv[1:])[:2]
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    fd = int(fd_arg)
    while True:
        try:
            if not os.read(fd, 4096):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    sweep(token)
    return 0


if __name__ == "__main__":
    sys.exit(main())
