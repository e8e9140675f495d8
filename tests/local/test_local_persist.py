"""``local serve`` remembers (local/extras/persist.py): a cluster started again on the same state dir brings back
its apps, groups, versions and deployments in flight, and launches the tasks that should run.

Real Marathon keeps its root group, app versions and deployment plans in ZooKeeper and resumes them after
a restart or failover (mesosphere/marathon ``storage/repository/GroupRepository``,
``DeploymentRepository``; ``MarathonSchedulerActor`` reloads the stored deployment plans on election;
``MarathonSchedulerService`` / ``TaskReconciliation`` reconcile the tasks with Mesos)."""

from __future__ import annotations

import json

import pytest
import requests
from polling import wait_for

from marathon_tf.local import LocalCluster
from marathon_tf.local.extras.persist import STATE_FILE

FAST = dict(dns_refresh=0, heartbeat=0.5, kill_grace=1.0, shutdown_grace=1.0)


def _running(url: str, app_id: str) -> list[dict]:
    r = requests.get(f"{url}/v2/apps{app_id}/tasks", timeout=10)
    return [t for t in r.json()["tasks"] if t["state"] == "TASK_RUNNING"] if r.status_code == 200 else []


def test_state_comes_back_after_a_restart(tmp_path):
    state = tmp_path / "state"
    app = {"id": "/job/a", "cmd": "sleep 600", "cpus": 0.1, "mem": 16, "labels": {"marathon-tf/state": "x"},
           "portDefinitions": [{"port": 0, "name": "tf"}]}
    # its deployment never ends: no agent is that host (a task that exited at once was not enough: under load
    # the deployment saw it running before it exited, and ended: a CI run)
    crash = {"id": "/stuck/c", "cmd": "sleep 600", "cpus": 0.1, "mem": 16,
             "constraints": [["hostname", "LIKE", "no-such-agent"]]}
    with LocalCluster(state_dir=state, persist=True, **FAST) as c:
        url = c.marathon_url
        assert requests.put(url + "/v2/groups/job", json={"apps": [app]}, timeout=10).status_code == 200
        wait_for(lambda: requests.get(url + "/v2/deployments", timeout=10).json() == [], 20, what="deployed")
        r = requests.put(url + "/v2/apps/job/a", json={**app, "instances": 2}, timeout=10)  # a second version
        assert r.status_code == 200, r.text
        wait_for(lambda: len(_running(url, "/job/a")) == 2, 20, what="two tasks")
        wait_for(lambda: requests.get(url + "/v2/deployments", timeout=10).json() == [], 20, what="scaled")
        dep = requests.put(url + "/v2/groups/stuck", json={"apps": [crash]}, timeout=10).json()["deploymentId"]
        # the write is on disk when it is answered
        assert "/stuck/c" in json.loads((state / STATE_FILE).read_text())["apps"]
        before = requests.get(url + "/v2/apps/job/a", timeout=10).json()["app"]
        versions = requests.get(url + "/v2/apps/job/a/versions", timeout=10).json()["versions"]
        old_tasks = {t["id"] for t in _running(url, "/job/a")}
    with LocalCluster(state_dir=state, persist=True, **FAST) as c:
        url = c.marathon_url
        after = requests.get(url + "/v2/apps/job/a", timeout=10).json()["app"]
        for key in ("version", "versionInfo", "labels", "portDefinitions", "instances", "cmd"):
            assert after[key] == before[key], key
        assert requests.get(url + "/v2/apps/job/a/versions", timeout=10).json()["versions"] == versions
        assert requests.get(url + "/v2/groups/job", timeout=10).status_code == 200
        # the tasks that should run are launched again (the old ones died with the runner)
        new = wait_for(lambda: (lambda ts: ts if len(ts) == 2 else None)(_running(url, "/job/a")), 20,
                       what="the app's tasks relaunched")
        assert not {t["id"] for t in new} & old_tasks
        # the deployment in flight is still there, and goes on (a forced fix replaces it)
        assert [d["id"] for d in requests.get(url + "/v2/deployments", timeout=10).json()] == [dep]
        fix = requests.put(url + "/v2/apps/stuck/c?force=true", json={**crash, "constraints": []}, timeout=10)
        assert fix.status_code == 200
        wait_for(lambda: requests.get(url + "/v2/deployments", timeout=10).json() == [], 20, what="deployments")
        requests.delete(url + "/v2/groups/job", timeout=10)
        wait_for(lambda: requests.get(url + "/v2/groups/job", timeout=10).status_code == 404, 20, what="removal")
    with LocalCluster(state_dir=state, persist=True, **FAST) as c:  # a deletion is remembered too
        assert requests.get(c.marathon_url + "/v2/groups/job", timeout=10).status_code == 404
        assert [a["id"] for a in requests.get(c.marathon_url + "/v2/apps", timeout=10).json()["apps"]] == ["/stuck/c"]


def test_an_unusable_state_file_stops_the_start_with_one_line(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / STATE_FILE).write_text('{"format": 1, "groups": ')
    with pytest.raises(ValueError, match=f"{STATE_FILE} is unusable .*move it away"):
        LocalCluster(state_dir=state, persist=True, **FAST).start()
    (state / STATE_FILE).write_text('{"format": 99}')
    with pytest.raises(ValueError, match="format 99, this version reads 1"):
        LocalCluster(state_dir=state, persist=True, **FAST).start()
    with LocalCluster(state_dir=state, **FAST) as c:  # without persist (run, the Python API): no state kept
        assert requests.get(c.marathon_url + "/v2/apps", timeout=10).json()["apps"] == []
