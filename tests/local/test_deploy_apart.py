"""Marathon 1.4 - 1.7 lock the apps of a running deployment (issue 41): a job's group PUT leaves out the new
apps that may wait (an elastic role's standbys, tasks its placement holds) and PUTs each by itself, so the
group's deployment ends once the tasks that must start have, and a ps lost afterwards is relaunched while a
standby still waits. Played on the local cluster (``marathon_version``), with the job deployed through
``jobs.deploy`` (no TensorFlow: the program is ``sleep``).

Marathon's source (mesosphere/marathon, paths under ``src/main/scala/mesosphere/marathon/``):
- the lock: a failed task's ``ScaleRunSpec`` is dropped while a deployment holds its app (v1.4.3
  ``MarathonSchedulerActor.scala:169``; v1.7.236 ``MarathonSchedulerActor.scala:146-159``, "Did not try to
  scale run spec; it is locked");
- a lock covers the apps of the plan only: ``DeploymentPlan.isAffectedBy`` compares ``affectedRunSpecIds``
  (v1.4.3 ``upgrade/DeploymentPlan.scala:107-109``; v1.7.236 ``core/deployment/DeploymentPlan.scala:129-131``),
  so an app PUT by itself is a deployment that holds that app alone.
"""

from __future__ import annotations

import time

import pytest

from marathon_tf.marathon.client import Client, RetryPolicy
from marathon_tf.marathon.versions import Capabilities, parse_version
from marathon_tf.user import apart, jobs
from marathon_tf.user.spec import load_dict
from polling import wait_for

#: Agent 1 holds the ps (and the chief), agents 2 and 3 one worker each: worker-2, the standby, never fits.
BIG = "cpus:2;mem:4096;disk:1000;ports:[31000-31100]"
SMALL = "cpus:1;mem:1024;disk:1000;ports:[31000-31100]"


def _job() -> dict:
    return {"name": "ela", "style": "tf1", "command": ["sh", "-c", "exec sleep 100000", "sh"],
            "roles": {"ps": {"count": 1, "cpus": 0.5, "mem": 256, "constraints": [["hostname", "LIKE", "127.0.0.1"]]},
                      "worker": {"count": {"min": 2, "max": 3}, "cpus": 1, "mem": 256,
                                 "constraints": [["hostname", "UNLIKE", "127.0.0.1"]]}}}


def _running(api, app: str) -> list[dict]:
    return api.running(app)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("version", ["1.7.236", "1.4.3", None])
def test_a_standby_waiting_keeps_no_deployment_open_and_a_killed_ps_is_relaunched(cluster_with, version):
    options = {"agents": 3, "agent_resources": (f"{BIG}|{SMALL}|{SMALL}",)}
    cluster, api = cluster_with(**options, **({} if version is None else {"marathon_version": version}))
    client = Client(cluster.marathon_url, retry=RetryPolicy(attempts=3, budget=10, initial=0.2, max_wait=1))
    spec = load_dict(_job(), source="ela.json")
    jobs.deploy(client, spec)
    first = wait_for(lambda: _running(api, "/ela/ps-0"), 30, what="ps-0 running")[0]
    wait_for(lambda: _running(api, "/ela/worker-0") and _running(api, "/ela/worker-1"), 30, what="the two workers")
    queued = {i["app"]["id"] for i in api.get("/v2/queue").json()["queue"]}
    assert "/ela/worker-2" in queued  # the standby waits (no agent has room)
    # what stays open holds the standby alone (the default: the group's deployment may hold everything)
    if version is not None:
        wait_for(lambda: all(d["affectedApps"] == ["/ela/worker-2"] for d in api.deployments()), 15,
                 what="only the standby's deployment open")
    time.sleep(0.5)
    assert cluster.kill_task("/ela/ps-0") == [first["id"]]
    relaunched = wait_for(lambda: [t for t in _running(api, "/ela/ps-0") if t["id"] != first["id"]], 20,
                          what="ps-0 relaunched while the standby waits")
    assert relaunched and "/ela/worker-2" in {i["app"]["id"] for i in api.get("/v2/queue").json()["queue"]}


def _app(app_id: str, **labels: str) -> dict:
    return {"id": app_id, "instances": 1, "labels": dict(labels), "constraints": []}


@pytest.mark.parametrize("version, apart_ids", [
    ("1.7.236", ["/j/worker-2", "/j/worker-3", "/j/ps-1"]), ("1.4.3", ["/j/worker-2", "/j/worker-3", "/j/ps-1"]),
    ("1.8.180", []), (None, [])])
def test_split_leaves_out_the_new_apps_that_may_wait_on_1_4_to_1_7(version, apart_ids):
    elastic = {"marathon-tf/elastic": "2..4"}
    held = _app("/j/ps-1")
    held["constraints"] = [["hostname", "UNLIKE", ".*"]]  # held by the job's placement (contract/spread.py HOLD)
    group = {"id": "/j", "apps": [_app("/j/ps-0"), held] + [
        _app(f"/j/worker-{i}", **elastic, **{"marathon-tf/index": str(i)}) for i in range(4)]}
    sent, later = apart.split(group, None, Capabilities(parse_version(version)))
    assert [a["id"] for a in later] == sorted(apart_ids, key=[a["id"] for a in group["apps"]].index)
    assert [a["id"] for a in sent["apps"]] == [a["id"] for a in group["apps"] if a["id"] not in apart_ids]
    # an app Marathon has already is in the group's PUT (left out, it would be stopped)
    sent, later = apart.split(group, {"apps": [{"id": "/j/worker-2"}]}, Capabilities(parse_version("1.7.236")))
    assert "/j/worker-2" in [a["id"] for a in sent["apps"]] and "/j/worker-2" not in [a["id"] for a in later]


def test_the_versions_whose_deployments_lock_their_apps():
    # 1.8 reschedules whatever locks the app (releases/1.8 core/instance/Instance.scala:46)
    said = {v: Capabilities(parse_version(v)).deployment_locks_relaunch for v in ("1.4.0", "1.7.236", "1.8.180")}
    assert said == {"1.4.0": True, "1.7.236": True, "1.8.180": False}
    assert Capabilities().deployment_locks_relaunch is False  # unknown: the newest
    assert Capabilities(parse_version("1.5.15")).purges_queue_on_cancel is True
