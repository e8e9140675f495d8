"""Finding processes a test left behind: anything whose working directory is under a folder
(task sandboxes live under a runner's state dir, so a leaked task shows up here)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def processes_under(path) -> list[str]:
    """Live processes (``"<pid> <command line>"``) whose working directory is inside ``path``."""
    root = str(Path(path).resolve())
    left = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cwd == root or cwd.startswith(root + "/"):
            left.append(f"{pid} {cmd}")
    return left


def _wait_until_none(find, path, seconds: float) -> list[str]:
    deadline = time.monotonic() + seconds
    while True:
        left = find(path)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def wait_no_processes(path, seconds: float = 10) -> list[str]:
    """Wait up to ``seconds`` for every process under ``path`` to be gone; what is left."""
    return _wait_until_none(processes_under, path, seconds)


def processes_referring_to(path) -> list[str]:
    """Live processes (``"<pid> <command line>"``) whose working directory, command line or
    environment mentions ``path`` (a runner's state dir: every task, and anything it started,
    has its sandbox as cwd or ``MESOS_SANDBOX`` in its environment)."""
    root = str(Path(path).resolve())
    needle = root.encode()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if cwd == root or cwd.startswith(root + "/") or needle in cmd or needle in env:
            shown = cmd.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{pid} {shown}")
    return found


def wait_none_referring_to(path, seconds: float = 15) -> list[str]:
    """Wait up to ``seconds`` until no process refers to ``path``; what is left."""
    return _wait_until_none(processes_referring_to, path, seconds)


def kill_referring_to(path) -> None:
    """Clean-up for a failed test: SIGKILL whatever still refers to ``path``."""
    import signal

    for line in processes_referring_to(path):
        try:
            os.kill(int(line.split()[0]), signal.SIGKILL)
        except OSError:
            pass
