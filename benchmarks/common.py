"""Shared helpers: medians, subprocess timing, the machine's description, waits sized to the machine, and a
task's training program (:func:`trainer_pid`).

A benchmark waits for what it measures (a step, a recovery) with :func:`until`: its limit is the
benchmark's own figure for an idle 2-core machine times :func:`slowdown`, a factor measured once per run
(how long ``import tensorflow`` takes here now, against :data:`IDLE_IMPORT_S`), so a loaded machine gets
longer waits instead of a timeout; when a wait still runs out, its error says what it waited for and what
it saw (``seen``). :func:`repeat` runs a case ``n`` times and keeps every repetition that completed when
another fails."""

from __future__ import annotations

import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The folder this benchmark code is in (``python -m benchmarks.…`` runs from it).
HARNESS = Path(__file__).resolve().parents[1]
#: The source tree whose examples the benchmarks deploy: this checkout, or the version ``--compare`` runs
#: (``MTF_BENCH_ROOT``; its package is the one this interpreter imports).
ROOT = Path(os.environ.get("MTF_BENCH_ROOT") or HARNESS)
PYTHON = sys.executable
BIN = Path(PYTHON).parent


@dataclass
class Row:
    name: str
    value: float | str
    unit: str = ""
    note: str = ""


def median(xs):
    return statistics.median(xs)


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def run_seconds(cmd: list[str], repeat: int, **kw) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
        out.append(time.perf_counter() - t)
    return out


def machine() -> str:
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB RAM"
    except OSError:
        pass
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores ({cpu or 'unknown CPU'}){mem}, "
            f"Python {platform.python_version()}")


#: ``import tensorflow`` in a fresh interpreter on this project's 2-core machine, nearly idle (seconds;
#: 2026-12-06, 3.34, 3.32, 2.98 at load average 1.4): the unit :func:`slowdown` measures the machine in.
IDLE_IMPORT_S = 3.0
_slowdown: float | None = None


def slowdown() -> float:
    """How much slower than idle this machine is now (≥ 1): ``import tensorflow`` timed once per run
    against :data:`IDLE_IMPORT_S` (what every task of a benchmark does first); 1 without TensorFlow.
    ``MTF_BENCH_SLOWDOWN`` sets it."""
    global _slowdown
    if _slowdown is None:
        if os.environ.get("MTF_BENCH_SLOWDOWN"):
            _slowdown = max(1.0, float(os.environ["MTF_BENCH_SLOWDOWN"]))
        else:
            t = time.perf_counter()
            done = subprocess.run([PYTHON, "-c", "import tensorflow"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
            seconds = time.perf_counter() - t
            _slowdown = max(1.0, seconds / IDLE_IMPORT_S) if done.returncode == 0 else 1.0
    return _slowdown


class WaitedTooLong(TimeoutError):
    """A benchmark's wait ran out; its text says what it waited for, how long, and what it saw."""


def until(predicate: Callable[[], bool], idle_seconds: float, what: str,
          seen: Callable[[], str] | None = None, gone: Callable[[], str | None] | None = None) -> None:
    """Wait for ``predicate`` up to ``idle_seconds`` × :func:`slowdown`; else :class:`WaitedTooLong`
    naming ``what`` and, with ``seen``, what was seen by then. ``gone() -> why or None``, asked every 2 s:
    what the wait waits on cannot come any more (the job ended): raised at once, with why."""
    limit = idle_seconds * slowdown()
    deadline = time.monotonic() + limit
    next_look = time.monotonic() + 2.0
    while not predicate():
        if gone is not None and time.monotonic() >= next_look:
            next_look = time.monotonic() + 2.0
            why = gone()
            if why:
                raise WaitedTooLong(f"gave up waiting for {what}: {why}")
        if time.monotonic() > deadline:
            said = ""
            if seen is not None:
                try:
                    said = f"; saw: {seen()}"
                except Exception as e:  # noqa: BLE001 - a description must never hide the timeout
                    said = f"; (what was seen could not be described: {type(e).__name__})"
            raise WaitedTooLong(f"waited {limit:.0f} s ({idle_seconds:g} s × {slowdown():.1f} for this machine's "
                                f"load) for {what}{said}")
        time.sleep(0.05)


@dataclass
class Repeated:
    """What :func:`repeat` got: each completed repetition's result, and each failed one's reason."""
    results: list
    failures: list[str]

    def note(self) -> str:
        """``"; 1 of 3 failed: …"`` (empty when none failed)."""
        if not self.failures:
            return ""
        return (f"; {len(self.failures)} of {len(self.results) + len(self.failures)} failed: "
                + " | ".join(self.failures))


def repeat(name: str, n: int, once: Callable[[], Any], said: Callable[[Any], str] = lambda r: "") -> Repeated:
    """``once()`` ``n`` times, each result printed as it comes; a repetition that raises is recorded and
    the others still run."""
    out = Repeated([], [])
    for i in range(n):
        try:
            result = once()
        except Exception as e:  # noqa: BLE001 - the row says what went wrong; the other repetitions go on
            out.failures.append(f"run {i + 1}: {type(e).__name__}: {e}")
            print(f"    {name}: run {i + 1} failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            continue
        out.results.append(result)
        first = result[0] if isinstance(result, tuple) else result
        shown = f"{first:.2f} s" if isinstance(first, (int, float)) else str(first)
        print(f"    {name}: {shown}{said(result)}", file=sys.stderr, flush=True)
    return out


def descendants(pid: int | None = None) -> list[tuple[int, str]]:
    """``(pid, command line)`` of every live process below ``pid`` (default: this one), from /proc."""
    root = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            if stat[stat.rindex(")") + 2:].split()[0] == "Z":
                continue
            names[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace").strip()[:120]
        except (OSError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], list(children.get(root, []))
    while todo:
        p = todo.pop()
        if "multiprocessing.resource_tracker" not in names.get(p, ""):  # it ends with its parent, by design
            out.append((p, names.get(p, "?")))
        todo += children.get(p, [])
    return out


def trainer_pid(cluster, task: str) -> tuple[Path, int]:
    """(sandbox, pid) of ``task``'s current training program, from its bootstrap's log."""
    boxes = sorted((Path(cluster.state_dir) / "sandboxes").glob(f"*{task}*"), key=lambda p: p.stat().st_mtime)
    box = boxes[-1]
    pids = re.findall(r"started training program \(pid (\d+)\)", (box / "stderr").read_text(errors="replace"))
    return box, int(pids[-1])


def server_script(handler: str, queue: int = 1024) -> str:
    """A Python script that serves ``handler`` (the source of a ``BaseHTTPRequestHandler`` subclass named ``H``)
    on 127.0.0.1 and prints its port first: a fake peer in a process of its own, so that answering does not take
    the GIL of the code measured."""
    return f"""
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
{handler.strip()}
class S(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = {queue}
s = S(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""
