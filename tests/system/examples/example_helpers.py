"""Fixtures for the example tests: hand-launch an example's tasks and always stop them."""

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"

_spec = importlib.util.spec_from_file_location("handlaunch", EXAMPLES / "handlaunch.py")
handlaunch = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("handlaunch", handlaunch)
_spec.loader.exec_module(handlaunch)

STEP_RE = re.compile(r"^step=(\d+) loss=(\S+)", re.M)
DONE_RE = re.compile(r"^done final_step=(\d+) loss=(\S+)", re.M)
FIRST_RE = re.compile(r"^first_step_time=(\S+)", re.M)


@dataclass
class TaskOutput:
    name: str
    returncode: int | None
    stdout: str
    stderr: str
    started_at: float
    peak_rss_kib: int | None

    @property
    def steps(self) -> list[tuple]:
        return [(int(s), float(loss)) for s, loss in STEP_RE.findall(self.stdout)]

    @property
    def final_step(self) -> int | None:
        m = DONE_RE.search(self.stdout)
        return int(m.group(1)) if m else None

    @property
    def first_step_time(self) -> float | None:
        m = FIRST_RE.search(self.stdout)
        return float(m.group(1)) if m else None

    def describe(self) -> str:
        return (f"--- {self.name} rc={self.returncode}\n{self.stdout[-2000:]}\n"
                f"--- {self.name} stderr (tail)\n{self.stderr[-3000:]}")


@dataclass
class RunResult:
    codes: dict[str, int]
    tasks: dict[str, TaskOutput] = field(default_factory=dict)

    def describe(self) -> str:
        return "\n".join(t.describe() for t in self.tasks.values())


def collect(procs, codes) -> RunResult:
    result = RunResult(codes=codes)
    for p in procs:
        result.tasks[p.name] = TaskOutput(
            p.name, p.returncode, Path(p.stdout_path).read_text(errors="replace"),
            Path(p.stderr_path).read_text(errors="replace"), p.started_at, p.peak_rss_kib)
    return result


@pytest.fixture
def launched():
    """A list to put every started Popen in: teardown stops them all and checks none is left."""
    procs: list[subprocess.Popen] = []
    yield procs
    handlaunch.stop(procs)
    for p in procs:
        assert p.poll() is not None, f"{p.name} (pid {p.pid}) still running"
        with pytest.raises(ProcessLookupError):
            os.killpg(p.pid, 0)  # nothing left in the task's process group either


@pytest.fixture
def run_example(tmp_path, launched):
    """``run_example(name, ps=, workers=, chief=, args=[...], timeout=, delays=)`` -> RunResult.

    Launches by hand through examples/handlaunch.py, waits for the deciding tasks (job.json's
    completion), then stops every task; teardown stops anything still alive and checks that no
    process is left behind.
    """
    runs = iter(range(1000))

    def run(name, ps=1, workers=2, chief=0, args=(), timeout=120.0, delays=None, env=None):
        example = EXAMPLES / name
        logdir = tmp_path / f"logs-{next(runs)}"
        procs = handlaunch.launch(example, ps=ps, workers=workers, chief=chief, extra_args=list(args),
                                  logdir=logdir, delays=delays, env=env)
        launched.extend(procs)
        try:
            codes = handlaunch.wait(procs, completion=handlaunch.completion_of(example), timeout=timeout)
        finally:
            handlaunch.stop(procs)
        return collect(procs, codes)

    return run


@pytest.fixture
def ckpt_dir(tmp_path):
    d = tmp_path / "ckpt"
    d.mkdir()
    return d
