"""Marathon 1.4 - 1.7 lock the apps of a running deployment (issue 41): a job's group PUT leaves out the new
apps that may wait (an elastic role's standbys, tasks its placement holds) and PUTs each by itself, so the
group's deployment ends once the tasks that must start have, and a ps lost afterwards is relaunched while a
standby still waits. Played on the local cluster (``marathon_version``), with the job deployed through
``pipeline.deploy``, what ``marathon-tf deploy`` runs (no TensorFlow: the program is ``sleep``).

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
from polling import wait_for

from marathon_tf.marathon.client import Client, RetryPolicy
from marathon_tf.marathon.versions import Capabilities, parse_version
from marathon_tf.user import apart, jobs, pipeline
from marathon_tf.user.spec import load_dict

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
    pipeline.deploy(client, spec)
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


class _Bulk:
    """The client calls apart.update makes: bulk partial updates, each its own deployment."""

    def __init__(self, version):
        self.caps, self.calls = Capabilities(parse_version(version)), []

    def capabilities(self):
        return self.caps

    def update_apps(self, items, force=False):
        self.calls.append([i["id"] for i in items])
        return {"deploymentId": f"d{len(self.calls)}"}


@pytest.mark.parametrize("version, calls", [
    ("1.7.236", [["/j/ps-0", "/j/worker-1"], ["/j/worker-2"], ["/j/worker-3"]]),
    (None, [["/j/ps-0", "/j/worker-1", "/j/worker-2", "/j/worker-3"]])])
def test_a_bulk_start_sends_what_may_wait_one_by_one_on_1_4_to_1_7(version, calls):
    # a released job submitted again (user/release.py resubmit) and an elastic job's scale (jobs.scale) start
    # apps that are there already: one bulk PUT /v2/apps is one deployment holding them all (v1.7.236
    # core/deployment/DeploymentPlan.scala:129-131), which a standby that never fits would keep open
    elastic = {"marathon-tf/elastic": "2..4"}
    apps = {a["id"]: a for a in [_app("/j/ps-0")] + [
        _app(f"/j/worker-{i}", **elastic, **{"marathon-tf/index": str(i)}) for i in (1, 2, 3)]}
    client = _Bulk(version)
    first = apart.update(client, [{"id": i, "instances": 1} for i in apps], apps, client.caps)
    assert client.calls == calls and first == "d1"


def test_an_elastic_scale_on_1_7_starts_each_new_standby_by_itself():
    elastic = {"marathon-tf/elastic": "2..4"}
    current = {"id": "/j", "apps": [
        {**_app(f"/j/worker-{i}", **elastic, **{"marathon-tf/index": str(i), "marathon-tf/role": "worker"}),
         "instances": 1 if i < 2 else 0} for i in range(4)]}
    client = _Bulk("1.7.236")
    plan, result = jobs._scale_target(client, "j", {"worker": 4}, current, dry_run=False)
    assert plan.start == ["worker-2", "worker-3"] and client.calls == [["/j/worker-2"], ["/j/worker-3"]]
    assert result is not None and result.deployment_id == "d1"


def test_a_released_elastic_job_submitted_again_on_1_7_starts_its_standbys_apart(httpserver):
    from fake_marathon import FakeMarathon

    from marathon_tf.contract import labels as L
    from marathon_tf.user import release

    fake = FakeMarathon(httpserver, version="1.7.236")
    for i in range(3):
        app = fake.add_app("worker", i, labels={L.ELASTIC: "2..3", L.STATE: L.NOT_PLACED, L.ATTEMPT: "1",
                                                L.ATTEMPTS: "3"})
        app["instances"] = 0
    assert release.resubmit(fake.client(), fake.job) == "d-1"
    bulk = [[i["id"] for i in body] for method, path, _, body in fake.calls if (method, path) == ("PUT", "/v2/apps")]
    assert bulk == [["/ml/mnist/worker-0", "/ml/mnist/worker-1"], ["/ml/mnist/worker-2"]]
