"""The progress watchdog: pure rules, the job.json fields, and a hung program failed through `deploy --local`."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import jobfiles
import pytest
from leaks import kill_referring_to
from polling import wait_for

from marathon_tf import spec as spec_mod
from marathon_tf.render import render_group
from marathon_tf.taskenv import TaskContext
from marathon_tf.watchdog import ProgressWatchdog

MARATHON_TF = str(Path(sys.executable).parent / "marathon-tf")


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_progress_and_first_step_limits():
    clock = Clock()
    w = ProgressWatchdog(30, 120, clock=clock)
    w.started()
    clock.t += 119
    assert w.overdue() is None
    clock.t += 1
    assert w.overdue() == "no progress for 120 s since the program started (no first step yet)"
    w.step(10)
    clock.t += 29
    assert w.overdue() is None
    w.step(10)  # the same step again is not progress
    clock.t += 1
    assert w.overdue() == "no progress for 30 s since step 10"
    w.step(11)
    assert w.overdue() is None
    w.started()  # a restart waits for the first step again
    clock.t += 60
    assert w.overdue() is None


def test_progress_alone_also_bounds_the_first_step_and_off_is_off():
    clock = Clock()
    w = ProgressWatchdog(30, None, clock=clock)
    clock.t += 30
    assert w.overdue().startswith("no progress for 30 s")
    off = ProgressWatchdog(None, None, clock=clock)
    clock.t += 10_000
    assert not off.enabled and off.overdue() is None
    assert not ProgressWatchdog.for_role("ps", (30, 60)).enabled
    assert ProgressWatchdog.for_role("worker", (30, 60)).enabled


def test_job_fields_reach_the_task_environment_and_schema():
    job = {"name": "w", "command": ["python3", "t.py"], "roles": {"worker": {"count": 1}},
           "restart": {"progress_timeout_seconds": 120, "first_step_timeout_seconds": 600}}
    spec = spec_mod.load_dict(job)
    group = render_group(spec)
    app = (group.get("apps") or [a for sg in group["groups"] for a in sg["apps"]])[0]
    assert app["env"]["MTF_PROGRESS_TIMEOUT"] == "120/600"
    ctx = TaskContext.from_env(app["env"])
    assert ctx.progress_timeouts == (120.0, 600.0)
    assert spec_mod.load_dict(spec.to_dict()).restart.progress_timeout_seconds == 120
    plain = spec_mod.load_dict({**job, "restart": {}})
    assert "MTF_PROGRESS_TIMEOUT" not in json.dumps(render_group(plain))
    assert "progress_timeout_seconds" not in json.dumps(plain.to_dict())
    with pytest.raises(Exception, match="progress_timeout_seconds"):
        spec_mod.load_dict({**job, "restart": {"progress_timeout_seconds": 0}})
    restart = spec_mod.json_schema()["properties"]["restart"]["properties"]
    assert restart["progress_timeout_seconds"]["minimum"] == 1 and "first_step_timeout_seconds" in restart


def _env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARATHON")}
    env.update(MARATHON_TF_STATE_DIR=str(tmp_path / "state"), MARATHON_TF_CONFIG="/nonexistent")
    return env


def test_a_program_that_hangs_before_its_first_step_is_failed_by_the_watchdog(tmp_path):
    job = {"name": "hang", "command": ["python3", "-c", "import time; time.sleep(600)"],
           "roles": {"worker": {"count": 1, "cpus": 0.1, "mem": 64}},
           "restart": {"max_failures": 1, "first_step_timeout_seconds": 3}}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job))
    try:
        r = subprocess.run([MARATHON_TF, "deploy", str(path), "--local", "--timeout", "120"], capture_output=True,
                           text=True, env=_env(tmp_path), cwd=tmp_path, timeout=150)
    finally:
        kill_referring_to(tmp_path / "state")
    assert r.returncode == 1, r.stderr[-3000:]
    summary = [ln for ln in r.stderr.splitlines() if ln.startswith("job hang: ")][-1]
    assert "Failed" in summary and "worker-0 failed 2 times in 600 s; last exit 143: " in summary, summary
    assert summary.endswith("no progress for 3 s since the program started (no first step yet)); task sandboxes in "
                            + summary.rsplit(" ", 1)[-1]), summary
    assert r.stderr.count("restarting the training program in place") == 1


def _trainer_pid(state: Path, task_index: int) -> int | None:
    """worker-N's training program, as its bootstrap logged it: ``started training program (pid P)``
    (also when the local runner's shared pre-warmed interpreter forked it)."""
    for stderr in state.glob(f"*/sandboxes/*_worker-{task_index}.*/stderr"):
        found = re.findall(r"started training program \(pid (\d+)\)", stderr.read_text(errors="replace"))
        if found:
            return int(found[-1])
    return None


@pytest.mark.tf
@pytest.mark.timeout(300)
def test_a_frozen_worker_is_failed_by_the_watchdog(tmp_path):
    job = jobfiles.example_job("linear-regression-tf1", tmp_path, command=jobfiles.ENDLESS_TF1)
    spec = json.loads(job.read_text())
    spec["restart"] = {"max_failures": 0, "window_seconds": 600, "progress_timeout_seconds": 10,
                       "first_step_timeout_seconds": 200}
    job.write_text(json.dumps(spec))
    out = tmp_path / "out.txt"
    with open(out, "w") as o:
        proc = subprocess.Popen([MARATHON_TF, "deploy", str(job), "--local", "--timeout", "240"], stdout=o,
                                stderr=subprocess.STDOUT, env=_env(tmp_path), cwd=tmp_path, start_new_session=True)
    try:
        wait_for(lambda: "[worker-1] step=" in out.read_text() or proc.poll() is not None, timeout=180,
                 what="worker-1 training")
        pid = wait_for(lambda: _trainer_pid(tmp_path / "state", 1), timeout=10, what="worker-1's program")
        os.kill(pid, signal.SIGSTOP)
        assert proc.wait(timeout=120) == 1
        text = out.read_text()
        summary = [ln for ln in text.splitlines() if ln.startswith("job linear-regression: ")][-1]
        assert "Failed" in summary and "worker-1 failed 1 times in 600 s" in summary, summary
        assert "no progress for 10 s since step " in summary, summary
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        kill_referring_to(tmp_path / "state")
