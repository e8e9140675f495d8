"""The progress watchdog end to end: a hung program failed through `deploy --local`."""

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

MARATHON_TF = str(Path(sys.executable).parent / "marathon-tf")


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
    assert "Failed" in summary and ("the job's programs failed 2 times in 600 s, more than restart.max_failures (1); "
                                    "last: worker-0 was killed by SIGTERM (exit 143): ") in summary, summary
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
        assert "Failed" in summary and ("the job's programs failed 1 times in 600 s, more than restart.max_failures "
                                        "(0); last: worker-1 ") in summary, summary
        assert "no progress for 10 s since step " in summary, summary
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        kill_referring_to(tmp_path / "state")


@pytest.mark.tf
@pytest.mark.timeout(420)
def test_a_frozen_ps_is_restarted_with_the_group_and_the_job_succeeds_with_one_failure(tmp_path, local_job):
    """Issue 44 item 4: ``kill -STOP`` of ps-0's program (TF1). The workers hang on it; the watchdog's verdict
    names it (``waiting for ps-0 (its TF server does not answer)``), yet it used to restart the worker, which
    hung on the frozen ps again, until the job Failed (3 failures). Now the hang is counted once and the
    job's group restarts, ps-0 with it: the job trains on to its target and Succeeds with 1 failure."""
    import time

    from e2e_helpers import trainer_pid

    from marathon_tf.contract import labels as L

    bootstrap = f"{sys.executable} -m marathon_tf.bootstrap --watch-interval 2 --grace 5"
    command = ["python3", "train.py", "--train_steps", "2500", "--checkpoint_dir", "ckpt", "--log_every", "20",
               "--save_checkpoint_steps", "200"]
    job = local_job(str(jobfiles.example_job(
        "linear-regression-tf1", tmp_path, command=command, bootstrap=bootstrap, progress={"target_step": 2500},
        restart={"max_failures": 2, "window_seconds": 600, "progress_timeout_seconds": 10,
                 "first_step_timeout_seconds": 200})))
    job.wait(lambda: job.max_step() > 600, 240, "step > 600", 0.1)
    pid = job.wait(lambda: trainer_pid(job.cluster.state_dir, "ps-0"), 10, "ps-0's program")
    os.kill(pid, signal.SIGSTOP)
    frozen = time.monotonic()
    try:
        job.wait(lambda: trainer_pid(job.cluster.state_dir, "ps-0") not in (None, pid), 120,
                 "ps-0's program restarted", 0.5)
    finally:
        try:
            os.kill(pid, signal.SIGCONT)  # (already killed by its restart; else not left behind stopped)
        except ProcessLookupError:
            pass
    assert any("waiting for ps-0 (its TF server does not answer)" in x and "no progress for" in x
               for t, n, s, x in list(job.lines) if t > frozen), job.text()[-4000:]
    status = job.wait_state(300)
    assert status["state"] == L.SUCCEEDED and status["failures"] == 1, (
        status.get("reason"), status.get("failures"), job.text()[-6000:])
    assert "ps-0 does not answer (worker-" in job.text(), job.text()[-4000:]  # the group round's cause
