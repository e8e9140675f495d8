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


def wait_no_processes(path, seconds: float = 10) -> list[str]:
    """Wait up to ``seconds`` for every process under ``path`` to be gone; what is left."""
    deadline = time.monotonic() + seconds
    while True:
        left = processes_under(path)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)
