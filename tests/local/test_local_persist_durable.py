"""``local serve`` acknowledges only what it has kept (local/extras/persist.py, the server's middleware):
a write whose change cannot be saved is refused (507 for a full disk, 503 for another failure to write,
Marathon's ``{"message": ...}`` body) and undone in memory; the background saver survives a failed save and
retries; the runner's log says it in one line, never a traceback; every acknowledged write survives a SIGKILL.

Marathon itself answers a write only after its repositories stored it in ZooKeeper: mesosphere/marathon
v1.8.222 ``src/main/scala/mesosphere/marathon/core/group/impl/GroupManagerImpl.scala`` (``updateRoot``:
``groupRepository.storeRootVersion`` and ``storeRoot`` complete before the deployment is started and the
request is answered)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner
from polling import wait_for

from marathon_tf.local import LocalCluster
from marathon_tf.local.extras.persist import STATE_FILE
from marathon_tf.user.cli import cli

FAST = dict(dns_refresh=0, heartbeat=0.5, kill_grace=1.0, shutdown_grace=1.0)
APP = {"cmd": "sleep 600", "cpus": 0.1, "mem": 16}


def _kept(state: Path) -> dict:
    return json.loads((state / STATE_FILE).read_text())["apps"]


def test_a_change_that_cannot_be_written_is_refused_and_undone(tmp_path, caplog):
    """The state file cannot be replaced (a folder stands in its place: EISDIR, as any failure to write
    that is not a full disk): the write is refused with 507 and the reason, nothing of it stays in memory,
    the saver goes on and saves once it can; one line on the log, no traceback; the CLI says it in one
    line, exit 1."""
    caplog.set_level(logging.WARNING)
    state = tmp_path / "state"
    with LocalCluster(state_dir=state, persist=True, **FAST) as c:
        url = c.marathon_url
        assert requests.put(url + "/v2/groups/job-a", json={"apps": [{**APP, "id": "/job-a/w"}]},
                            timeout=10).status_code == 200
        wait_for(lambda: requests.get(url + "/v2/deployments", timeout=10).json() == [], 20, what="deployed")
        (state / STATE_FILE).unlink()
        (state / STATE_FILE).mkdir()  # os.replace onto it fails
        r = requests.put(url + "/v2/groups/job-b", json={"apps": [{**APP, "id": "/job-b/w"}]}, timeout=10)
        assert r.status_code == 507, r.text
        assert r.json() == {"message": "The change was not applied: the local Marathon could not store it in "
                                       f"{state / STATE_FILE} (Is a directory)"}
        scale = requests.put(url + "/v2/apps/job-a/w", json={**APP, "instances": 2}, timeout=10)
        assert scale.status_code == 507, scale.text
        job = tmp_path / "job.json"
        job.write_text(json.dumps({"name": "job-d", "style": "tf1", "command": ["python3", "train.py"],
                                   "roles": {"ps": {"count": 1}, "worker": {"count": 1}}}))
        said = CliRunner().invoke(cli, ["deploy", str(job), "--marathon", url, "--detach"])
        assert said.exit_code == 1, said.output  # refused at once: not sent again (it exited 3 at the time limit)
        assert said.stderr.splitlines()[0] == (f"error: PUT {url}/v2/groups/job-d: 507 The change was not applied: "
                                               f"the local Marathon could not store it in {state / STATE_FILE} "
                                               "(Is a directory)"), said.stderr
        assert [ln.split(":")[0] for ln in said.stderr.splitlines()[1:]] == ["hint"], said.stderr
        # nothing half-applied: no job B, no deployment, job A as it was
        assert requests.get(url + "/v2/groups/job-b", timeout=10).status_code == 404
        assert requests.get(url + "/v2/deployments", timeout=10).json() == []
        assert requests.get(url + "/v2/apps/job-a/w", timeout=10).json()["app"]["instances"] == 1
        assert [a["id"] for a in requests.get(url + "/v2/apps", timeout=10).json()["apps"]] == ["/job-a/w"]
        (state / STATE_FILE).rmdir()
        # the saver survived and saves the state again by itself
        wait_for(lambda: (state / STATE_FILE).is_file(), 10, what="the saver's next save")
        assert list(_kept(state)) == ["/job-a/w"]
        r = requests.put(url + "/v2/groups/job-b", json={"apps": [{**APP, "id": "/job-b/w"}]}, timeout=10)
        assert r.status_code == 200, r.text
        assert sorted(_kept(state)) == ["/job-a/w", "/job-b/w"]
    said = [r for r in caplog.records if r.name.startswith("marathon_tf")]
    assert [r.getMessage().split(":")[0] for r in said] == [
        f"cannot save the local Marathon's state {state / STATE_FILE}", "the local Marathon's state is saved again in "
        f"{state / STATE_FILE}"], [r.getMessage() for r in said]
    assert not [r for r in caplog.records if r.exc_info], "a traceback on the runner's log"


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs of its own (we mount it: the test runs as root); skipped where mount is refused."""
    where = tmp_path / "disk"
    where.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(where)],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"cannot mount a small file system here: {e}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small file system here: {done.stderr.strip() or done.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


def _fill(disk: Path) -> Path:
    """Take every free byte of ``disk``; the file to remove to give them back."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        for size in (65536, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError:
                pass
    return filler


def _serve(state: Path, log: Path) -> tuple[subprocess.Popen, str]:
    code = (f"from marathon_tf.local import serve; serve(port=0, state_dir={str(state)!r}, shutdown_grace=0.5, "
            f"persist=True)")
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=open(log, "ab"), start_new_session=True)
    url = wait_for(lambda: next((ln.split()[1] for ln in log.read_text().splitlines()
                                 if ln.startswith("marathon: http://127.0.0.1:")), None) if proc.poll() is None
                   else pytest.fail(log.read_text()), 30, what="the serve's address")
    log.write_text("")  # from here on: what the runner says while it runs
    return proc, url


def _kill(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)  # the runner and every task it started (its own session)
    proc.wait(10)


def test_a_full_disk_refuses_writes_and_every_acknowledged_one_survives_a_sigkill(small_disk, tmp_path):
    """The issue's scenario on a real full file system: ``deploy`` of job B is refused in one line (exit 1;
    it printed ``deployed /job-b``, exit 0), job A's scale too; once space is back the saver has saved the
    state by itself, and after a SIGKILL the serve brings back every write it acknowledged, and only those."""
    state, log = small_disk / "state", tmp_path / "serve.log"
    proc, url = _serve(state, log)
    try:
        assert requests.put(url + "/v2/groups/job-a", json={"apps": [{**APP, "id": "/job-a/w"}]},
                            timeout=10).status_code == 200
        wait_for(lambda: requests.get(url + "/v2/deployments", timeout=10).json() == [], 20, what="deployed")
        filler = _fill(small_disk)
        job = {"name": "job-b", "style": "tf1", "command": ["python3", "train.py"],
               "roles": {"ps": {"count": 1}, "worker": {"count": 1}}}
        (tmp_path / "job.json").write_text(json.dumps(job))
        r = CliRunner().invoke(cli, ["deploy", str(tmp_path / "job.json"), "--marathon", url, "--detach"])
        assert r.exit_code == 1, r.output
        lines = r.stderr.strip().splitlines()
        assert lines[0] == (f"error: PUT {url}/v2/groups/job-b: 507 The change was not applied: the local Marathon "
                            f"could not store it in {state / STATE_FILE} (No space left on device)"), r.stderr
        assert [ln.split(":")[0] for ln in lines[1:]] == ["hint"], r.stderr
        assert "Traceback" not in r.stderr and "deployed" not in r.output
        scale = requests.put(url + "/v2/apps/job-a/w", json={**APP, "instances": 2}, timeout=10)
        assert scale.status_code == 507, scale.text
        assert requests.get(url + "/v2/groups/job-b", timeout=10).status_code == 404
        filler.unlink()
        acked = requests.put(url + "/v2/groups/job-c", json={"apps": [{**APP, "id": "/job-c/w"}]}, timeout=10)
        assert acked.status_code == 200, acked.text
        gone = requests.delete(url + "/v2/groups/job-a", timeout=10)
        assert gone.status_code == 200, gone.text
        _kill(proc)  # at once after the last acknowledgement
        said = log.read_text()
        assert "Traceback" not in said, said
        assert said.count("cannot save the local Marathon's state") == 1, said
        proc, url = _serve(state, log)
        apps = {a["id"]: a for a in requests.get(url + "/v2/apps", timeout=10).json()["apps"]}
        assert sorted(apps) == ["/job-c/w"], sorted(apps)
        assert requests.get(url + "/v2/groups/job-b", timeout=10).status_code == 404
    finally:
        if proc.poll() is None:
            _kill(proc)


def test_every_acknowledged_write_survives_a_sigkill(tmp_path):
    """Writes in a row, the serve SIGKILLed right after the last answer: all of them come back."""
    state, log = tmp_path / "state", tmp_path / "serve.log"
    proc, url = _serve(state, log)
    try:
        ids = [f"/j{uuid.uuid4().hex[:6]}/w" for _ in range(4)]
        for app_id in ids:
            r = requests.put(url + "/v2/groups" + app_id.rsplit("/", 1)[0], json={"apps": [{**APP, "id": app_id}]},
                             timeout=10)
            assert r.status_code == 200, r.text
        r = requests.put(url + "/v2/apps" + ids[0] + "?force=true", json={**APP, "instances": 0}, timeout=10)
        assert r.status_code == 200, r.text
        _kill(proc)
        proc, url = _serve(state, log)
        apps = {a["id"]: a for a in requests.get(url + "/v2/apps", timeout=10).json()["apps"]}
        assert sorted(apps) == sorted(ids)
        assert apps[ids[0]]["instances"] == 0
    finally:
        if proc.poll() is None:
            _kill(proc)
