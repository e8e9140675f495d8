"""The whole path on one machine: render, post, schedule, discover, write the spec, train (real TensorFlow)."""

import pytest

from e2e_helpers import deploy_local, local_job, losses, wait_no_processes

pytestmark = [pytest.mark.tf, pytest.mark.timeout(300)]


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
    assert last[1] < first[1], f"loss did not go down: {first} -> {last}"
    # the cluster spec reached the program as the classic flags
    assert wait_no_processes(tmp_path) == []
