"""examples/python-api/submit.py, the notebook-style use of the Python API, runs as it is: it deploys
linear-regression-tf1 (real TensorFlow) to a local cluster, follows it to Succeeded, reads its logs
and deletes it with its checkpoints, leaving no process behind."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from leaks import wait_no_processes

pytestmark = [pytest.mark.tf, pytest.mark.timeout(480)]

SCRIPT = Path(__file__).resolve().parents[3] / "examples" / "python-api" / "submit.py"


def test_the_python_api_example_runs_a_job_to_succeeded_on_a_local_cluster(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARATHON_")}
    env.update(MARATHON_TF_STATE_DIR=str(tmp_path / "state"), PATH=f"{Path(sys.executable).parent}:{env['PATH']}")
    r = subprocess.run([sys.executable, str(SCRIPT), "60"], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=420)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines[0].startswith("Job('python-api-demo', style='tf1'") and lines[0].endswith("warnings: []")
    assert "job python-api-demo Succeeded at step" in r.stdout, r.stdout
    final_step = int(r.stdout.split("Succeeded at step ")[1].split()[0])
    assert final_step >= 60
    # LocalCluster's own run folder (beside it, .keys: the owner key the job's key comes from)
    [state] = [p for p in (tmp_path / "state").iterdir() if not p.name.startswith(".")]
    assert f"checkpoints in {state}/volumes/python-api-demo/ckpt" in r.stdout
    assert any(line.startswith("[worker-0] done final_step=") for line in lines), r.stdout  # its last lines
    assert not (state / "volumes" / "python-api-demo").exists()  # delete(purge=True)
    assert wait_no_processes(tmp_path) == []
