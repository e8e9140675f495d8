"""Every stall explained, end to end with real TensorFlow (issue 22; issue 24's frozen worker).

The TF1 between-graph example on an in-process LocalCluster (``local_job``), read through the user's
side (``status.job_status``, the CLI against the cluster's Marathon): ``/metrics`` parsed by
prometheus_client's parser; ``status --timeline -o json`` and ``events`` after a kill; a stopped
(SIGSTOP) ps named by the workers' ``status``; a slowed worker flagged a straggler; and, through
``deploy --local`` with the job file's defaults, a frozen worker that ends the job by itself."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from e2e_helpers import trainer_pid
from prometheus_client.parser import text_string_to_metric_families

from marathon_tf.contract import labels as L

pytestmark = [pytest.mark.tf]

MARATHON_TF = str(Path(sys.executable).parent / "marathon-tf")
BOOTSTRAP = f"{sys.executable} -m marathon_tf.bootstrap --watch-interval 2 --grace 5"


def tf1_job(tmp_path, steps: int, *extra: str, log_every: int = 20, **changes) -> str:
    from jobfiles import example_job

    command = ["python3", "train.py", "--train_steps", str(steps), "--checkpoint_dir", "ckpt",
               "--log_every", str(log_every), *extra]
    return example_job("linear-regression-tf1", tmp_path, command=command, bootstrap=BOOTSTRAP,
                       progress={"target_step": steps}, **changes)


def cli(marathon_url: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARATHON")}
    env.update(MARATHON_URL=marathon_url, MARATHON_TF_CONFIG="/nonexistent")
    return subprocess.run([MARATHON_TF, *args], capture_output=True, text=True, env=env, timeout=timeout)


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def row(status: dict, task: str) -> dict:
    return next(r for r in status["tasks"] if r["task"] == task)


@pytest.mark.timeout(420)
def test_metrics_match_the_program_and_the_timeline_and_events_tell_a_kill_and_its_recovery(tmp_path, local_job):
    job = local_job(tf1_job(tmp_path, 8000))
    job.wait(lambda: len(job.steps(task="worker-1")) >= 3, 180, "worker-1 training")
    # /metrics: parsed by Prometheus' own parser; its step is one the program printed. worker-1 training says
    # nothing of worker-0's output: its first `step=` line (every 20 steps) may not have reached the runner's
    # view of its sandbox yet (issue 32: max() of no step), so wait for it too.
    url = job.wait(lambda: row(job.status(), "worker-0").get("metricsUrl"), 30, "worker-0's metrics URL")
    job.wait(lambda: job.steps(task="worker-0"), 60, "worker-0's first step line")
    before = max(s for _, _, s in job.steps(task="worker-0"))
    samples = scrape(url)
    labels = (("index", "0"), ("job", "linear-regression"), ("role", "worker"))
    step = samples[("marathon_tf_step", labels)]
    time.sleep(2)  # the runner's view of the sandbox catches up with the program
    printed = [s for _, _, s in job.steps(task="worker-0")]
    assert step >= before and step in printed, (step, before, printed[-5:])
    assert samples[("marathon_tf_target_step", labels)] == 8000
    assert samples[("marathon_tf_phase", tuple(sorted(labels + (("phase", "training"),))))] == 1
    assert samples[("marathon_tf_job_tasks_running", (("job", "linear-regression"), ("role", "worker")))] == 2
    # a kill: worker-1's program restarts in place and trains again
    pid = trainer_pid(job.cluster.state_dir, "worker-1")
    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    job.wait(lambda: any(t > killed_at for t, _, _ in job.steps(task="worker-1")), 180,
             "worker-1 training again after the kill")
    status = job.wait_state(300)
    assert status["state"] == L.SUCCEEDED, status
    # the timeline, from the job's record (every task has stopped)
    r = cli(job.cluster.marathon_url, "status", job.name, "--timeline", "-o", "json")
    assert r.returncode == 0, r.stderr
    timeline = json.loads(r.stdout)["timeline"]
    phases = [p["phase"] for p in timeline["start"]]
    assert sorted(phases) == sorted(["submitted", "deployment done", "every task running", "cluster spec complete",
                                     "every TF server up", "first step"]), timeline["start"]
    assert all(p["seconds"] >= 0 for p in timeline["start"]) and phases[0] == "submitted"
    kills = [rec for rec in timeline["recoveries"] if rec["task"] == "worker-1" and rec.get("code") == 137]
    assert len(kills) == 1, timeline["recoveries"]
    assert kills[0]["cause"].startswith("training program was killed by SIGKILL (exit 137)")
    assert kills[0]["how"] == "in place"
    assert kills[0]["secondsToRestart"] >= 0 and kills[0]["secondsToTraining"] >= 0
    text = cli(job.cluster.marathon_url, "status", job.name, "--timeline").stdout
    assert "every TF server up" in text and "→ training again after" in text
    # events: the kill (its whole message), the restart, training again, in time order
    r = cli(job.cluster.marathon_url, "events", job.name)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if " worker-1 " in ln]
    kinds = [ln.split()[2] for ln in lines]
    exited = kinds.index("ProgramExited")
    after = kinds[exited + 1:]
    assert after[0] == "ProgramStarted" and "FirstStep" in after, lines  # (its TF server up in between)
    message = lines[exited].split("ProgramExited", 1)[1].strip()
    assert message.startswith("training program was killed by SIGKILL (exit 137) (failure 1 of at most 5 in 600 s, "
                              "job-wide); restarting it in place"), message
    assert message == next(e["message"] for e in json.loads(cli(job.cluster.marathon_url, "events", job.name, "-o",
                                                                "json").stdout)["events"]
                           if e["reason"] == "ProgramExited" and e["task"] == "worker-1")  # whole, not cut
    assert r.stdout.splitlines()[1].split()[2] == "Submitted"


def serving_ps(job) -> int | None:
    """ps-0's training program once its TF server answers at the address it said it serves on, the program's pid
    the same before and after that look (None: not yet). A program stopped before it listens (one its bootstrap
    has just restarted) is refused, not silent: a CI run stopped such a one."""
    from marathon_tf.task.peers import ANSWERS, probe

    pid = trainer_pid(job.cluster.state_dir, "ps-0")
    served = re.findall(r"serving on (\S+)", job.text("ps-0"))
    if pid is None or not served or probe(served[-1]) != ANSWERS:
        return None
    return pid if trainer_pid(job.cluster.state_dir, "ps-0") == pid else None


@pytest.mark.timeout(300)
def test_a_stopped_ps_is_named_by_the_waiting_workers_status_within_60_s(tmp_path, local_job):
    job = local_job(tf1_job(tmp_path, 10_000_000))
    job.wait(lambda: len(job.steps(task="worker-1")) >= 3, 180, "worker-1 training")
    pid = job.wait(lambda: serving_ps(job), 30, "ps-0's program serving")
    os.kill(pid, signal.SIGSTOP)
    try:
        stopped = time.monotonic()
        status = job.wait(lambda: (lambda s: s if any("for ps-0" in w for w in s.get("waits") or []) else None)(
            job.status()), 60, "status naming ps-0")
        assert time.monotonic() - stopped <= 60
        waits = status["waits"]
        assert any(re.fullmatch(r"worker-[01] waiting \d+s for ps-0 \(ps-0: running on 127\.0\.0\.1; its TF server "
                                r"does not answer\)", w) for w in waits), (waits, pid, job.text("ps-0")[-3000:])
        text = cli(job.cluster.marathon_url, "status", job.name).stdout
        assert re.search(r"waiting +worker-[01] waiting \d+s for ps-0", text), text
    finally:
        os.kill(pid, signal.SIGCONT)


@pytest.mark.timeout(300)
def test_a_slowed_worker_is_flagged_a_straggler_in_status_and_metrics(tmp_path, local_job):
    job = local_job(tf1_job(tmp_path, 10_000_000, "--step_sleep", "0.1", "--step_sleep_task_index", "1",
                            log_every=5))
    job.wait(lambda: len(job.steps(task="worker-1")) >= 3, 180, "worker-1 training")
    status = job.wait(lambda: (lambda s: s if s.get("stragglers") else None)(job.status()), 120,
                      "a straggler in status")
    assert row(status, "worker-1").get("straggler") is True and not row(status, "worker-0").get("straggler")
    assert status["stragglers"][0].startswith("worker-1 (")
    samples = scrape(row(status, "worker-0")["metricsUrl"])  # the deciding task's view
    flags = {dict(k[1])["index"]: v for k, v in samples.items() if k[0] == "marathon_tf_straggler"}
    assert flags == {"0": 0, "1": 1}
    assert "straggler" in cli(job.cluster.marathon_url, "status", job.name).stdout


@pytest.mark.timeout(540)
def test_a_frozen_worker_ends_the_job_with_the_default_job_file(tmp_path):
    """(issue 24) ``kill -STOP`` of worker-1's program under ``deploy --local``: the job file sets no
    watchdog, yet the job ends by itself (worker-1 restarted, or Failed naming it) within the default
    bounds: no new step for 2 minutes (the adaptive floor) stops and restarts it."""
    from jobfiles import example_job
    from leaks import kill_referring_to

    from marathon_tf.task.watchdog import PROGRESS_FLOOR

    # 8,000 steps: worker-0 ends them alone within about 40 s of the freeze (worker-1 is frozen near its first
    # steps); the job then waits, idle, for the watchdog to restart worker-1, which finds the job done. (20,000
    # kept worker-0 training through most of the 2 minutes: 223 s of CPU for the test, against 2 cores.)
    job = example_job("linear-regression-tf1", tmp_path, command=["python3", "train.py", "--train_steps", "8000",
                                                                  "--checkpoint_dir", "ckpt", "--log_every", "20"])
    assert "progress_timeout_seconds" not in json.loads(job.read_text()).get("restart", {})
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARATHON")}
    env.update(MARATHON_TF_STATE_DIR=str(tmp_path / "state"), MARATHON_TF_CONFIG="/nonexistent")
    out = tmp_path / "out.txt"
    with open(out, "w") as o:
        proc = subprocess.Popen([MARATHON_TF, "deploy", str(job), "--local", "--timeout", "500"], stdout=o,
                                stderr=subprocess.STDOUT, env=env, cwd=tmp_path, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while "[worker-1] step=" not in out.read_text() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        pid = trainer_pid(tmp_path / "state", "worker-1")
        assert pid, out.read_text()[-3000:]
        os.kill(pid, signal.SIGSTOP)
        frozen = time.monotonic()
        code = proc.wait(timeout=PROGRESS_FLOOR + 240)
        took = time.monotonic() - frozen
        text = out.read_text()
        summary = [ln for ln in text.splitlines() if ln.startswith("job linear-regression: ")][-1]
        assert re.search(r"\[worker-1\] marathon-tf bootstrap: no progress for 1[23]\d s since step \d+", text), \
            text[-4000:]
        if code == 0:  # worker-1 restarted, found the job done (or finished it), and the job Succeeded
            assert "Succeeded" in summary and "restarting the training program in place" in text, summary
        else:
            assert code == 1 and "worker-1" in summary, summary
        assert took <= PROGRESS_FLOOR + 240, took
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        kill_referring_to(tmp_path / "state")
