"""The whole path on one machine: render, post, schedule, discover, write the spec, train (real TensorFlow)."""

import json
import re

import pytest
from e2e_helpers import deploy_local, local_job, losses, wait_no_processes

pytestmark = [pytest.mark.tf, pytest.mark.timeout(300)]

#: the TF1 example's last line (examples/linear-regression-tf1/train.py): its data is y = 2x + 1 + noise
LEARNED = re.compile(r"^\[(?P<task>worker-\d+)\] .*\bdone final_step=\d+ loss=\S+ w=(?P<w>[-0-9.]+) b=(?P<b>[-0-9.]+)",
                     re.MULTILINE)


def test_tf1_between_graph_job_trains_to_completion_with_flags(tmp_path):
    job = local_job("linear-regression-tf1", tmp_path)
    r = deploy_local(job, tmp_path)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "job linear-regression: Succeeded" in r.stderr
    by_task = losses(r.stdout)
    assert set(by_task) >= {"worker-0", "worker-1"}, r.stdout[-2000:]
    steps = sorted(s for task in by_task.values() for s in task)
    first, last = steps[0], steps[-1]
    assert last[0] >= 300
    # trained for real: the job learned y = 2x + 1. Its per-batch loss reaches the noise floor (0.01) within tens of
    # steps, so the first logged loss against the last is noise against noise (a CI run: 0.0113 at step 38 and
    # 0.0128 at 301); the weights each worker ends with say it
    learned = {m["task"]: (float(m["w"]), float(m["b"])) for m in LEARNED.finditer(r.stdout)}
    assert set(learned) >= {"worker-0", "worker-1"}, r.stdout[-2000:]
    assert all(abs(w - 2.0) < 0.1 and abs(b - 1.0) < 0.1 for w, b in learned.values()), (learned, first, last)
    specs = _spec_files(tmp_path)
    assert set(specs) == {"ps-0", "worker-0", "worker-1"}
    for task, spec in specs.items():
        argv = spec["argv"]
        role, index = task.rsplit("-", 1)
        assert f"--job_name={role}" in argv and f"--task_index={index}" in argv
        assert f"--ps_hosts={spec['cluster']['ps'][0]}" in argv
        assert f"--worker_hosts={','.join(spec['cluster']['worker'])}" in argv
        assert "tf_config" not in spec or not spec["tf_config"]  # flags style: no TF_CONFIG
    # the cluster spec reached the program as the classic flags
    assert _prewarmed(tmp_path) == {"ps-0": True, "worker-0": True, "worker-1": True}
    assert wait_no_processes(tmp_path) == []


def test_tf1_job_with_prewarm_off_starts_the_program_the_ordinary_way(tmp_path):
    job = local_job("linear-regression-tf1", tmp_path, prewarm=False)
    r = deploy_local(job, tmp_path)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "job linear-regression: Succeeded" in r.stderr
    assert max(s for task in losses(r.stdout).values() for s, _ in task) >= 300
    assert _prewarmed(tmp_path) == {"ps-0": False, "worker-0": False, "worker-1": False}
    assert wait_no_processes(tmp_path) == []


def _prewarmed(tmp_path):
    """Per task: did its program run in a pre-warmed interpreter (the bootstrap's log says so)?
    Without pre-warming the bootstrap never mentions it."""
    out = {}
    for box in (tmp_path / "state").glob("*/sandboxes/*"):
        log = (box / "stderr").read_text(errors="replace")
        task = box.name.split(".")[0].rsplit("_", 1)[-1]
        out[task] = "runs in the pre-warmed interpreter" in log
        assert ("pre-warm" in log) == out[task], log[-3000:]
    return out


def _assert_tf_config(tmp_path, shape):
    specs = _spec_files(tmp_path)
    assert set(specs) == {f"{r}-{i}" for r, n in shape.items() for i in range(n)}
    for task, spec in specs.items():
        assert {r: len(v) for r, v in spec["tf_config"]["cluster"].items()} == shape
        assert spec["tf_config"]["task"] == {"type": task.rsplit("-", 1)[0], "index": int(task.rsplit("-", 1)[1])}
        assert not any(a.startswith("--ps_hosts") for a in spec["argv"])  # TF_CONFIG only
    clusters = {json.dumps(s["tf_config"]["cluster"], sort_keys=True) for s in specs.values()}
    assert len(clusters) == 1, "every task must get the same cluster"


def _spec_files(tmp_path):
    import json

    return {p.parent.name.split(".")[0].rsplit("_", 1)[-1]: json.loads(p.read_text())
            for p in (tmp_path / "state").glob("*/sandboxes/*/cluster_spec.json")}


def test_parameter_server_strategy_job_trains_with_tf_config(tmp_path):
    job = local_job("mnist-ps-strategy", tmp_path)
    r = deploy_local(job, tmp_path)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "job mnist-ps-strategy: Succeeded" in r.stderr
    chief = losses(r.stdout).get("chief-0")
    assert chief and chief[-1][0] >= 200 and chief[-1][1] < chief[0][1], chief
    _assert_tf_config(tmp_path, {"chief": 1, "ps": 1, "worker": 2})
    assert _prewarmed(tmp_path) == {"chief-0": True, "ps-0": True, "worker-0": True, "worker-1": True}
    assert wait_no_processes(tmp_path) == []


def test_keras_multiworker_mirrored_job_trains_with_tf_config(tmp_path):
    job = local_job("keras-multiworker", tmp_path)
    r = deploy_local(job, tmp_path)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "job keras-multiworker: Succeeded" in r.stderr
    by_task = losses(r.stdout)
    assert set(by_task) == {"worker-0", "worker-1"}, by_task.keys()
    w0 = by_task["worker-0"]
    assert w0[-1][1] < w0[0][1], w0
    _assert_tf_config(tmp_path, {"worker": 2})
    assert _prewarmed(tmp_path) == {"worker-0": True, "worker-1": True}
    assert wait_no_processes(tmp_path) == []
