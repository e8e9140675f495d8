"""HA Marathon on one machine: `local serve --marathon-instances 3`, a real TF example training, and its
Marathon leader killed. The CLI, given all three URLs, keeps working through the election (`status`,
`logs -f`, `scale`), the tasks run on untouched, and the job ends Succeeded."""

from __future__ import annotations

import json
import re
import subprocess

import jobfiles
import pytest
import requests
from e2e_helpers import MARATHON_TF, Serve, wait_no_processes
from polling import wait_for

pytestmark = [pytest.mark.tf, pytest.mark.timeout(420)]

JOB = "linear-regression"
STEPS = 5000
STEP = re.compile(r"^\[worker-0\] step=(\d+) ")


def steps(text: str) -> list[int]:
    return [int(m.group(1)) for m in map(STEP.match, text.splitlines()) if m]


@pytest.fixture
def serve(tmp_path):
    s = Serve(tmp_path, "--marathon-instances", "3")  # the stock 10 s ZooKeeper session (--zk-session-timeout)
    yield s
    s.stop()
    assert wait_no_processes(s.state) == []


def test_the_leader_killed_during_a_running_example(serve, tmp_path):
    urls = serve.url.split(",")
    assert len(urls) == 3
    # Each worker sleeps 20 ms a step: the job cannot reach its target in less than 50 s after its first step,
    # while the leader's kill, the stock election and the `scale` below took 13 s in a run measured, and over
    # 20 s in a fresh-clone CI run: unslowed (about 250 steps/s), that run trained all 5,000 steps in 20 s,
    # before the scale, which then refused to restart a job already done.
    job = jobfiles.example_job("linear-regression-tf1", tmp_path, progress={"target_step": STEPS}, command=[
        "python3", "train.py", "--train_steps", str(STEPS), "--checkpoint_dir", "ckpt", "--log_every", "50",
        "--step_sleep", "0.02"])
    r = serve.cli("deploy", str(job), "--detach")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "logs-f.txt"
    with open(out, "wb") as o, open(tmp_path / "logs-f.err", "wb") as e:
        follow = subprocess.Popen([MARATHON_TF, "logs", JOB, "worker-0", "-f", "--stream", "stdout"], stdout=o,
                                  stderr=e, env=serve.env, cwd=tmp_path)
    try:
        assert wait_for(lambda: steps(out.read_text()), 240, what="worker-0 training (logs -f)")
        before = json.loads(serve.cli("status", JOB, "-o", "json").stdout)
        step_at_kill = max(steps(out.read_text()))
        assert before["state"] == "Running" and step_at_kill < STEPS, before
        killed = requests.post(urls[1] + "/_local/instances/kill", json={}, timeout=10).json()["killed"]
        assert killed == urls[0]

        r = serve.cli("status", JOB, "-o", "json")  # through the election: 502s, then the new leader
        assert r.returncode == 0, r.stderr
        during = json.loads(r.stdout)
        assert during["state"] == "Running", during
        def tasks(st):
            return {t["task"]: t.get("taskId") for t in st["tasks"] if t["role"] in ("ps", "worker")}
        assert tasks(during) == tasks(before)  # the same tasks, running on
        r = serve.cli("scale", JOB, "tensorboard=1")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "tensorboard-0" in r.stdout

        final = serve.wait_state(JOB)
        assert final["state"] == "Succeeded", json.dumps(final, indent=1)
        assert tasks(final).keys() == tasks(before).keys()
        follow.wait(timeout=60)  # logs -f ends by itself when the job does
        assert follow.returncode == 0, (tmp_path / "logs-f.err").read_text()
        seen = steps(out.read_text())
        assert max(seen) > step_at_kill and "done final_step=" in out.read_text()
        instances = requests.get(urls[2] + "/_local/instances", timeout=10).json()
        assert instances["leader"] in urls[1:] and instances["instances"][0]["state"] == "dead"
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
