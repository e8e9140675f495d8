"""Each test's wall and CPU seconds, for finding where the suite's time goes (issue 42): the suite is
CPU-bound on two cores, so a test's cost is its CPU, not its wall time.

``MTF_TEST_CPU=FILE pytest …`` appends one JSON line per test to ``FILE`` (each xdist worker its own lines):
``{"test", "wall", "cpu"}``, ``cpu`` what the pytest process and its descendants used meanwhile: its own
CPU and its reaped children's (``getrusage`` SELF + CHILDREN, which holds their reaped descendants too) plus the
change in the CPU of its live descendants (``/proc``: the local runner's tasks, the pre-warm servers and the
programs they fork). A process that leaves the tree (a double fork) is not seen; the other xdist worker's
tests are not counted in this one's.
``python tests/cputime.py FILE [N]`` prints the N (25) costliest tests and the totals by folder.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from polling import descendants

#: Where the lines go (unset: nothing is measured).
TARGET = os.environ.get("MTF_TEST_CPU")


_TICK = os.sysconf("SC_CLK_TCK")


def _live_descendants() -> float:
    """CPU seconds of this process's live descendants (zombies included: reaped, they move to CHILDREN)."""
    total = 0.0
    for pid in descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
            total += (int(fields[11]) + int(fields[12])) / _TICK
        except (OSError, IndexError, ValueError):  # gone meanwhile: counted in CHILDREN once reaped
            continue
    return total


def cpu_seconds() -> float:
    """What this process and its descendants have used so far, in CPU seconds (see the module)."""
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime + _live_descendants()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Iterator[None]:
    wall, cpu = time.monotonic(), cpu_seconds()
    yield
    line = {"test": item.nodeid, "wall": round(time.monotonic() - wall, 2), "cpu": round(cpu_seconds() - cpu, 2)}
    with open(str(TARGET), "a", encoding="utf-8") as f:  # (imported by tests/conftest.py only when it is set)
        f.write(json.dumps(line) + "\n")


def report(path: str, top: int = 25) -> str:
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(x) for x in f if x.strip()]
    rows.sort(key=lambda r: -r["cpu"])
    out = [f"{len(rows)} tests: {sum(r['cpu'] for r in rows):.0f} s CPU, {sum(r['wall'] for r in rows):.0f} s wall"]
    out += [f"{r['cpu']:8.1f} s CPU {r['wall']:8.1f} s wall  {r['test']}" for r in rows[:top]]
    folders: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for r in rows:
        parts = r["test"].split("::")[0].split("/")
        key = "/".join(parts[:3] if parts[1:2] == ["system"] else parts[:2])
        folders[key][0] += r["cpu"]
        folders[key][1] += r["wall"]
    out += [f"{c:8.0f} s CPU {w:8.0f} s wall  {k}" for k, (c, w) in sorted(folders.items(), key=lambda kv: -kv[1][0])]
    return "\n".join(out)


if __name__ == "__main__":
    print(report(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25))
