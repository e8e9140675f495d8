"""The README's `local serve` workflow with every example, unchanged: `local serve`, then
`deploy --detach`, `status`, `logs` as separate commands, to Succeeded (real TensorFlow)."""

from __future__ import annotations

import json
import re

import pytest
from e2e_helpers import ROOT, Serve, wait_no_processes

pytestmark = [pytest.mark.tf, pytest.mark.timeout(420)]

EXAMPLES = {"linear-regression-tf1": "linear-regression", "mnist-ps-strategy": "mnist-ps-strategy",
            "keras-multiworker": "keras-multiworker"}


@pytest.fixture
def serve(tmp_path):
    s = Serve(tmp_path)
    yield s
    s.stop()
    assert wait_no_processes(s.state) == []


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_every_example_runs_unchanged_through_local_serve(serve, example):
    job = EXAMPLES[example]
    job_file = ROOT / "examples" / example / "job.json"
    r = serve.cli("deploy", str(job_file), "--detach")
    assert r.returncode == 0, r.stderr
    st = serve.wait_state(job)
    assert st["state"] == "Succeeded", json.dumps(st, indent=1)
    assert "resumedFrom" not in st  # a fresh serve: nothing to resume from
    r = serve.cli("status", job)
    assert r.returncode == 0 and "Succeeded" in r.stdout, r.stdout + r.stderr
    r = serve.cli("logs", job)
    assert r.returncode == 0, r.stderr
    assert "step=" in r.stdout or "loss" in r.stdout, r.stdout[-3000:]
    # the checkpoint is in the serve's state, per job: not in a directory shared by every clone
    assert list((serve.state / "volumes" / job / "ckpt").iterdir())


def test_a_second_run_says_it_resumed_from_the_checkpoint(serve):
    job_file = ROOT / "examples" / "linear-regression-tf1" / "job.json"
    assert serve.cli("deploy", str(job_file), "--detach").returncode == 0
    assert serve.wait_state("linear-regression")["state"] == "Succeeded"
    checkpoints = serve.state / "volumes" / "linear-regression" / "ckpt"
    r = serve.cli("deploy", str(job_file), "--detach")  # again, on the same serve: asked, not guessed
    assert r.returncode == 2 and r.stderr.startswith(
        "error: job linear-regression has ended (Succeeded at "), r.stderr
    assert f"deploying it again resumes from its checkpoints in {checkpoints}" in r.stderr
    assert "--resume" in r.stderr and "--fresh" in r.stderr
    r = serve.cli("deploy", str(job_file), "--detach", "--resume")  # same volume: it resumes, and says so
    assert r.returncode == 0, r.stderr
    assert f"warning: job linear-regression had ended (Succeeded): it resumes from its checkpoints in {checkpoints}" \
        in r.stderr
    st = serve.wait_state("linear-regression")
    assert st["state"] == "Succeeded", st
    r = serve.cli("logs", "linear-regression", "worker-0")
    assert r.returncode == 0, r.stderr
    assert "resumed from checkpoint at step 30" in r.stdout, r.stdout[-3000:]
    serve.stop()  # where to scrape: Prometheus' marathon_sd on this serve, and each task's URL once
    assert f"marathon_sd_configs servers [{serve.url}]" in serve.log, serve.log
    assert re.search(r"job linear-regression: metrics at ps-0 http://127\.0\.0\.1:\d+/metrics, worker-0 http://",
                     serve.log), serve.log
