"""Waiting in tests: poll until something holds, and whether a process is still alive."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, *, interval: float = 0.05, what: str = "") -> Any:
    """Poll ``predicate`` until it returns something truthy (and return that); fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate} (last value {last!r})")


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie answers kill(0) but counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
