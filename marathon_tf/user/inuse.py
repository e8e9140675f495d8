"""Which live processes use a folder: those whose working directory, or one of whose open files, is
inside it (a local task's bootstrap and program work in its sandbox and write its ``stdout``/``stderr``
there; a program writes its checkpoints in the run's volumes). Read from ``/proc``; a process of
another user, whose links cannot be read, is not seen. ``local clean`` removes no folder a live
process uses, stopped (state ``T``) or not.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

__all__ = ["User", "users"]


class User(NamedTuple):
    pid: int
    name: str  # the process's command name (``/proc/<pid>/comm``)
    what: str  # what it uses: "works in <path>" or "has <path> open"


def _links(pid: str) -> Iterator[tuple[str, str]]:
    try:
        yield "works in", os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return
    for fd in fds:
        try:
            yield "has open", os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue


def _name(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def _zombie(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def users(folder: Path, *, limit: int = 1) -> list[User]:
    """Up to ``limit`` live processes (not this one) that use ``folder`` (its real path) or anything in it."""
    root = os.path.realpath(folder)
    prefix = root.rstrip(os.sep) + os.sep
    found: list[User] = []
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    except OSError:
        return found
    for pid in pids:
        use: str | None = None
        for verb, target in _links(pid):
            if target == root or target.startswith(prefix):
                use = f"{verb} {target}"
                break
        if use and not _zombie(pid):
            found.append(User(int(pid), _name(pid), use))
            if len(found) >= limit:
                break
    return found
