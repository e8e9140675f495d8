"""One run of a job per logdir, end to end: `deploy --local` refusing a second run and taking over a
killed one's lock, and the deciding task's lock under `local serve` (a second job on the same logdir
fails naming the holder). The lock itself: tests/contract/test_joblock.py."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from leaks import kill_referring_to, wait_none_referring_to
from polling import wait_for

MARATHON_TF = str(Path(sys.executable).parent / "marathon-tf")


def _env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARATHON")}
    env.update(MARATHON_TF_STATE_DIR=str(tmp_path / "state"), MARATHON_TF_CONFIG="/nonexistent", **extra)
    return env


def _job(tmp_path: Path, name: str, seconds: float) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({
        "name": name, "logdir": "ckpt", "volumes": [{"host_path": str(tmp_path / "shared"), "container_path": "ckpt"}],
        "command": ["python3", "-c", f"import time\nfor i in range({int(seconds * 10)}): print('step=%d' % i, "
                                     "flush=True); time.sleep(0.1)"],
        "roles": {"worker": {"count": 1, "cpus": 0.1, "mem": 64}}}))
    return path


def test_deploy_local_refuses_a_second_run_and_takes_over_a_killed_ones_lock(tmp_path):
    first = subprocess.Popen([MARATHON_TF, "deploy", str(_job(tmp_path, "one", 600)), "--local"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env(tmp_path),
                             cwd=tmp_path, start_new_session=True)
    try:
        lock = tmp_path / "shared/.marathon-tf/lock"
        wait_for(lambda: lock.exists() and "http://" in lock.read_text(), timeout=60, what="the runner's lock")
        holder = json.loads(lock.read_text())
        assert holder["pid"] == first.pid and holder["job"] == "one"
        second = subprocess.run([MARATHON_TF, "deploy", str(_job(tmp_path, "two", 1)), "--local"],
                                capture_output=True, text=True, env=_env(tmp_path), cwd=tmp_path, timeout=60)
        assert second.returncode == 1
        error = second.stderr.splitlines()[0]
        assert error == (f"error: logdir {tmp_path / 'shared'} is in use by job one (host {socket.gethostname()}, "
                         f"pid {first.pid}, since {holder['started']})"), second.stderr
        assert not list((tmp_path / "state").glob("two-*")), "the refused run started something"
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        assert wait_none_referring_to(tmp_path / "state") == []
        third = subprocess.run([MARATHON_TF, "deploy", str(_job(tmp_path, "two", 1)), "--local"],
                               capture_output=True, text=True, env=_env(tmp_path), cwd=tmp_path, timeout=120)
        assert third.returncode == 0, third.stderr[-3000:]
        assert "job two: Succeeded" in third.stderr
        assert not lock.exists()  # released at the end
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
        kill_referring_to(tmp_path / "state")


def test_under_local_serve_a_second_job_on_the_same_logdir_fails_naming_the_holder(tmp_path):
    from marathon_tf.user.localrun import local_cluster as LocalCluster  # as deploy --local runs it

    with LocalCluster(state_dir=tmp_path / "state", dns_refresh=0, shutdown_grace=0.5) as c:
        env = _env(tmp_path, MARATHON_URL=c.marathon_url)

        def deploy(name, seconds):
            spec = json.loads(_job(tmp_path, name, seconds).read_text())
            spec["discovery"] = {"mode": "mesos-dns", "nameserver": c.mesos_dns, "marathon_url": c.marathon_url}
            path = tmp_path / f"{name}-serve.json"
            path.write_text(json.dumps(spec))
            r = subprocess.run([MARATHON_TF, "deploy", str(path), "--detach"], capture_output=True, text=True,
                               env=env, timeout=60)
            assert r.returncode == 0, r.stderr

        def status(name):
            from marathon_tf.marathon.client import Client
            from marathon_tf.user.status import job_status

            return job_status(Client(c.marathon_url), name).to_dict()

        deploy("alpha", 600)
        lock = tmp_path / "shared/.marathon-tf/lock"
        wait_for(lambda: lock.exists() and json.loads(lock.read_text())["job"] == "alpha", timeout=60,
                 what="alpha's worker-0 holding the lock")
        deploy("beta", 1)
        failed = wait_for(lambda: (s := status("beta")).get("state") == "Failed" and s, timeout=60,
                          what="beta failed")
        holder = json.loads(lock.read_text())
        assert failed["reason"] == (f"worker-0: logdir {tmp_path / 'shared'} is in use by job alpha (host "
                                    f"{holder['host']}, pid {holder['pid']}, since {holder['started']})")
        assert status("alpha")["state"] == "Running"
