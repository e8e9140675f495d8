"""Hopeless faults fail the job fast with one line that says why (`deploy --local`, the real CLI).

A command that cannot be executed, a volume host path that is a file, a tensorboard whose binary
is missing, an unusable or vanished logdir: each ends the job Failed (or is refused before launch)
with a one-line reason, instead of relaunching for ever. How fast is measured in benchmarks
(no wall-clock assertions here); the timeouts only keep a regression from hanging the suite.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import jobfiles
import pytest
from leaks import kill_referring_to, wait_none_referring_to
from polling import wait_for

MARATHON_TF = str(Path(sys.executable).parent / "marathon-tf")


def _deploy_local(tmp_path: Path, job: dict | Path, timeout: float = 120) -> subprocess.CompletedProcess:
    path = job if isinstance(job, Path) else tmp_path / "job.json"
    if not isinstance(job, Path):
        path.write_text(json.dumps(job))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARATHON")}
    env.update(MARATHON_TF_STATE_DIR=str(tmp_path / "state"), MARATHON_TF_CONFIG="/nonexistent")
    try:
        return subprocess.run([MARATHON_TF, "deploy", str(path), "--local", "--timeout", str(timeout - 20)],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=timeout)
    finally:
        kill_referring_to(tmp_path / "state")


def _deploy_to(cluster, tmp_path: Path, job: dict, *args: str, timeout: float) -> subprocess.CompletedProcess:
    """`marathon-tf deploy job.json ARGS…` against ``cluster``'s Marathon API (not --local)."""
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARATHON")}
    env.update(MARATHON_URL=cluster.marathon_url, MARATHON_TF_CONFIG="/nonexistent")
    return subprocess.run([MARATHON_TF, "deploy", str(path), *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def _summary(r: subprocess.CompletedProcess, job: str) -> str:
    """The `job NAME: Failed in … (reason)` line."""
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith(f"job {job}: ")]
    assert lines, r.stderr[-3000:]
    return lines[-1]


def _job(tmp_path: Path, **changes) -> dict:
    job = {"name": "hopeless", "command": ["python3", "-c", "print('step=1')"], "logdir": "ckpt",
           "volumes": [{"host_path": str(tmp_path / "ckpt"), "container_path": "ckpt"}],
           "roles": {"worker": {"count": 2, "cpus": 0.1, "mem": 64}}}
    job.update(changes)
    return job


def test_a_command_that_does_not_exist_fails_the_job_and_is_counted(tmp_path):
    r = _deploy_local(tmp_path, _job(tmp_path, command=["pythn3", "train.py"]))
    assert r.returncode == 1, r.stderr[-3000:]
    line = _summary(r, "hopeless")
    assert "Failed" in line and "could not run its program (exit 127, permanent): " \
                                 "cannot execute 'pythn3': No such file or directory" in line
    records = [json.loads(x) for x in (tmp_path / "ckpt/.marathon-tf/failures.jsonl").read_text().splitlines()]
    assert records and all(rec["code"] == 127 for rec in records)
    relaunches = r.stderr.count("discovering 1 peer(s)")
    assert relaunches <= 2, f"the bootstraps were relaunched {relaunches} times"


def test_a_shell_command_that_is_not_executable_fails_the_job(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\necho hi\n")  # not chmod +x
    r = _deploy_local(tmp_path, _job(tmp_path, command=f"{script} --x 1 && echo done"))
    assert r.returncode == 1, r.stderr[-3000:]
    line = _summary(r, "hopeless")
    assert "could not run its program (exit 126, permanent): " in line and "Permission denied" in line


def test_a_file_as_volume_host_path_is_refused_before_launch(tmp_path):
    blocker = tmp_path / "ckpt"
    blocker.write_text("not a directory")
    r = _deploy_local(tmp_path, _job(tmp_path))
    assert r.returncode == 2
    assert r.stderr.strip() == (f"error: volumes[0].host_path: {blocker} is not a directory; nothing was started")
    assert not (tmp_path / "state").exists()


def test_the_local_runner_reports_a_file_as_host_path_as_the_task_failure():
    """On Marathon (here the local runner's API) the task fails with that reason, not `[Errno 17]`."""
    import tempfile

    import requests

    from marathon_tf.user.localrun import local_cluster as LocalCluster  # as deploy --local runs it

    with tempfile.TemporaryDirectory() as d, LocalCluster(state_dir=Path(d) / "s", dns_refresh=0) as c:
        blocker = Path(d) / "file"
        blocker.write_text("")
        app = {"id": "/v", "cmd": "sleep 60", "cpus": 0.1, "mem": 32, "container": {
            "type": "MESOS", "volumes": [{"hostPath": str(blocker), "containerPath": "data", "mode": "RW"}]}}
        requests.post(c.marathon_url + "/v2/apps", json=app, timeout=10).raise_for_status()

        def failure():
            return (requests.get(c.marathon_url + "/v2/apps/v", timeout=5).json()["app"].get("lastTaskFailure")
                    or {}).get("message")
        assert wait_for(failure, timeout=20) == f"volume data: hostPath {blocker} is not a directory"


def test_a_logdir_that_cannot_be_created_is_refused_before_launch(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = _deploy_local(tmp_path, _job(tmp_path, logdir=str(blocker / "ckpt"), volumes=[]))
    assert r.returncode == 2, r.stderr[-3000:]
    assert r.stderr.strip() == f"error: logdir: {blocker}/ckpt cannot be used: Not a directory; nothing was started"


def test_a_task_whose_logdir_cannot_be_created_fails_the_job_at_once(tmp_path):
    """The bootstrap's own check (what a cluster run gets): here through the local Marathon API."""
    from marathon_tf.marathon.client import Client
    from marathon_tf.user.localrun import local_cluster as LocalCluster  # as deploy --local runs it
    from marathon_tf.user.status import job_status

    blocker = tmp_path / "file"
    blocker.write_text("")
    with LocalCluster(state_dir=tmp_path / "state", dns_refresh=0, shutdown_grace=0.5) as c:
        job = _job(tmp_path, logdir=str(blocker / "ckpt"), volumes=[],
                   discovery={"mode": "mesos-dns", "nameserver": c.mesos_dns, "marathon_url": c.marathon_url})
        r = _deploy_to(c, tmp_path, job, "--detach", timeout=60)
        assert r.returncode == 0, r.stderr
        status = wait_for(lambda: (s := job_status(Client(c.marathon_url), "hopeless").to_dict())["state"] == "Failed"
                          and s, timeout=60, what="the job failed")
        assert status["reason"] in (f"worker-{i}: logdir {blocker}/ckpt cannot be created: Not a directory"
                                    for i in (0, 1))


@pytest.mark.tf
@pytest.mark.timeout(300)
def test_a_missing_tensorboard_binary_fails_the_job_instead_of_deploying_for_ever(tmp_path):
    job = jobfiles.example_job("linear-regression-tf1", tmp_path, command=jobfiles.ENDLESS_TF1)
    spec = json.loads(job.read_text())
    spec["roles"]["tensorboard"] = {"count": 1, "command": ["no-such-tensorboard", "--logdir", "ckpt"]}
    job.write_text(json.dumps(spec))
    r = _deploy_local(tmp_path, job, timeout=200)
    assert r.returncode == 1, r.stderr[-3000:]
    assert ("(tensorboard-0 cannot run: Command exited with status 127: /bin/sh: 1: exec: no-such-tensorboard: "
            "not found)") in _summary(r, "linear-regression")
    assert wait_none_referring_to(tmp_path / "state") == []


@pytest.mark.tf
@pytest.mark.timeout(300)
def test_a_checkpoint_directory_that_vanishes_mid_run_fails_the_job_with_one_line(tmp_path):
    job = jobfiles.example_job("linear-regression-tf1", tmp_path, command=[
        *jobfiles.ENDLESS_TF1, "--save_checkpoint_steps", "200"])
    shared = tmp_path / "shared" / "ckpt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARATHON")}
    env.update(MARATHON_TF_STATE_DIR=str(tmp_path / "state"), MARATHON_TF_CONFIG="/nonexistent")
    out = tmp_path / "out.txt"
    with open(out, "w") as o:
        proc = subprocess.Popen([MARATHON_TF, "deploy", str(job), "--local", "--timeout", "200"],
                                stdout=o, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path,
                                start_new_session=True)
    try:
        wait_for(lambda: "[worker-0] step=" in out.read_text() or proc.poll() is not None, timeout=180,
                 what="worker-0 training")
        shared.rename(shared.with_name("ckpt-moved-away"))  # gone from its path at once (rmtree races TF)
        assert proc.wait(timeout=120) == 1
        text = out.read_text()
        summary = [ln for ln in text.splitlines() if ln.startswith("job linear-regression: ")][-1]
        assert "Failed" in summary and f"logdir ckpt ({shared}) is gone" in summary, text[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        kill_referring_to(tmp_path / "state")


def test_on_marathon_the_deciding_task_fails_a_job_whose_tensorboard_cannot_start(tmp_path):
    """Nobody watching (`deploy --detach` to the local Marathon API): worker-0's bootstrap sees the
    tensorboard app's hopeless lastTaskFailure and records the job as Failed with it."""
    from marathon_tf.marathon.client import Client
    from marathon_tf.user.localrun import local_cluster as LocalCluster  # as deploy --local runs it
    from marathon_tf.user.status import job_status

    with LocalCluster(state_dir=tmp_path / "state", dns_refresh=0, shutdown_grace=0.5) as c:
        job = _job(tmp_path, command=["python3", "-c", "import time\nfor i in range(600): print('step=%d' % i, "
                                                         "flush=True); time.sleep(0.5)"],
                   discovery={"mode": "mesos-dns", "nameserver": c.mesos_dns, "marathon_url": c.marathon_url})
        job["roles"]["tensorboard"] = {"count": 1, "command": ["no-such-tensorboard", "--logdir", "ckpt"]}
        r = _deploy_to(c, tmp_path, job, "--detach", timeout=60)
        assert r.returncode == 0, r.stderr
        status = wait_for(lambda: (s := job_status(Client(c.marathon_url), "hopeless").to_dict())["state"] == "Failed"
                          and s, timeout=90, what="the job failed")
        assert status["reason"] == ("tensorboard-0 cannot run: Command exited with status 127: "
                                    "/bin/sh: 1: exec: no-such-tensorboard: not found")
    assert wait_none_referring_to(tmp_path / "state") == []


def test_an_args_app_whose_executable_is_missing_fails_with_a_shell_like_message(tmp_path):
    import requests

    from marathon_tf.user.localrun import local_cluster as LocalCluster  # as deploy --local runs it

    with LocalCluster(state_dir=tmp_path / "s", dns_refresh=0) as c:
        app = {"id": "/a", "args": ["no-such-program-x", "1"], "cpus": 0.1, "mem": 32}
        requests.post(c.marathon_url + "/v2/apps", json=app, timeout=10).raise_for_status()

        def failure():
            return (requests.get(c.marathon_url + "/v2/apps/a", timeout=5).json()["app"].get("lastTaskFailure")
                    or {}).get("message")
        message = wait_for(failure, timeout=20)
    assert message == ("Command exited with status 127: cannot execute 'no-such-program-x': "
                       "No such file or directory")
    from marathon_tf.marathon.record import hopeless_task_failure
    assert hopeless_task_failure(message)


def test_a_waiting_deploy_fails_a_job_whose_deciding_task_cannot_start(tmp_path):
    """No task can decide (the bootstrap itself cannot be executed, so every task exits 127 and
    Marathon relaunches them for ever): the waiting `deploy` on Marathon's API fails the job with
    the reason, instead of following a deployment that never ends. `status --watch` only reads."""
    from marathon_tf.marathon.client import Client
    from marathon_tf.user.localrun import local_cluster as LocalCluster  # as deploy --local runs it
    from marathon_tf.user.status import job_status

    with LocalCluster(state_dir=tmp_path / "state", dns_refresh=0, shutdown_grace=0.5) as c:
        job = _job(tmp_path, bootstrap="no-such-bootstrap",
                   discovery={"mode": "mesos-dns", "nameserver": c.mesos_dns, "marathon_url": c.marathon_url})
        r = _deploy_to(c, tmp_path, job, "--timeout", "100", timeout=120)
        assert r.returncode == 1, r.stderr[-3000:]
        line = _summary(r, "hopeless")
        assert "Failed" in line and "cannot run: Command exited with status 127" in line \
               and "no-such-bootstrap: not found" in line, line
        assert job_status(Client(c.marathon_url), "hopeless").to_dict()["state"] == "Failed"
    assert wait_none_referring_to(tmp_path / "state") == []
