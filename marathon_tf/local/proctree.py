"""A task's processes signalled as a Mesos agent's command executor signals them.

Killing a task, Mesos's command executor (the one that runs a Marathon app's ``cmd`` under the Mesos
containerizer) sends SIGTERM to the task's whole *process tree* — every descendant of the command,
and every process in a process group or session it meets on the way, however deep a program moved
into a session of its own — and, after the grace period, SIGKILL to the tree the same way (the walk is
stout's ``killtree``, following groups and sessions: each process is stopped (SIGSTOP) before its
children are listed, so none escapes by forking, then all get the signal, then SIGCONT; the group
and session of the root's *parent* are never followed; tests/local/test_proctree.py cites the code).

So on a real agent a training program gets its task's SIGTERM at the same moment as its bootstrap,
not when the bootstrap passes it on. :func:`killtree` does the same for the local runner's tasks.
:func:`tree` is the walk itself (pure, over a process table); :func:`processes` reads the table from
``/proc``.

One thing the local runner adds: a program forked by its pre-warmed interpreter
(:mod:`marathon_tf.task.prewarm`) is that interpreter's child, not its bootstrap's; on a real agent it
would be the bootstrap's child. Such a program's pid is passed as an extra root (``extra``), so the
signal reaches it as it would there.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable, Mapping
from typing import NamedTuple

__all__ = ["Proc", "processes", "tree", "killtree"]


class Proc(NamedTuple):
    pid: int
    ppid: int
    pgid: int
    sid: int
    zombie: bool = False


def processes() -> dict[int, Proc]:
    """The machine's processes (``/proc/<pid>/stat``), by pid."""
    table: dict[int, Proc] = {}
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return table
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
            table[pid] = Proc(pid, int(fields[1]), int(fields[2]), int(fields[3]), fields[0] == b"Z")
        except (OSError, IndexError, ValueError):
            continue
    return table


def tree(root: int, table: Mapping[int, Proc], extra: Iterable[int] = ()) -> list[int]:
    """The pids stout's ``killtree(root, sig, groups=true, sessions=true)`` reaches, in visiting order:
    ``root`` and its descendants, and every process sharing a process group or session with one of
    them, except the group and session of ``root``'s parent. A ``root`` that is gone: the processes of
    the group and session it led. ``extra``: more roots (their parents' groups and sessions are not
    followed either)."""
    children: dict[int, list[int]] = {}
    for p in table.values():
        children.setdefault(p.ppid, []).append(p.pid)
    seen_groups: set[int] = set()
    seen_sessions: set[int] = set()
    queue: list[int] = []
    for r in (root, *extra):
        proc = table.get(r)
        if proc is None:
            if r == root:
                queue.extend(p.pid for p in table.values() if p.pgid == r or p.sid == r)
            continue
        queue.append(r)
        parent = table.get(proc.ppid)
        if parent is not None:
            seen_groups.add(parent.pgid)
            seen_sessions.add(parent.sid)
    visited: list[int] = []
    seen: set[int] = set()
    while queue:
        pid = queue.pop(0)
        if pid in seen or pid not in table:
            continue
        seen.add(pid)
        visited.append(pid)
        proc = table[pid]
        queue.extend(sorted(children.get(pid, ())))
        if proc.pgid not in seen_groups:
            seen_groups.add(proc.pgid)
            queue.extend(sorted(p.pid for p in table.values() if p.pgid == proc.pgid))
        if proc.sid not in seen_sessions:
            seen_sessions.add(proc.sid)
            queue.extend(sorted(p.pid for p in table.values() if p.sid == proc.sid))
    return visited


def killtree(root: int, sig: int, extra: Iterable[int] = ()) -> list[int]:
    """Send ``sig`` to :func:`tree` of ``root`` as stout does: stop each process found (SIGSTOP: it
    cannot fork while the walk goes on), walk again until nothing new is found, signal them all, then
    SIGCONT them (a stopped process must see a SIGTERM). The pids signalled. Never this process."""
    me = os.getpid()
    stopped: list[int] = []
    while True:
        found = [p for p in tree(root, processes(), extra) if p != me and p not in stopped]
        if not found:
            break
        for pid in found:
            _kill(pid, signal.SIGSTOP)
            stopped.append(pid)
    for pid in stopped:
        _kill(pid, sig)
    for pid in stopped:
        _kill(pid, signal.SIGCONT)
    return stopped


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
