"""Deployment semantics: idempotent PUT, scale vs restart, locks and force, cancel, crash loops.

Modelled on mesosphere/marathon v1.4.3 ``src/main/scala/mesosphere/marathon/upgrade/DeploymentPlan.scala``,
``upgrade/DeploymentManager.scala`` and ``upgrade/DeploymentActor.scala``."""

from __future__ import annotations


def test_same_put_twice_restarts_nothing(api, make_app, cluster):
    group = {"apps": [make_app("w", portDefinitions=[{"port": 0, "name": "tf"}])]}
    api.put("/v2/groups/job", json=group)
    api.wait_deployed()
    before = api.running("/job/w")
    r = api.put("/v2/groups/job", json=group)
    assert r.status_code == 200 and r.json()["deploymentId"]
    api.wait_deployed()
    assert api.running("/job/w") == before
    dep_id = r.json()["deploymentId"]
    assert any(e["id"] == dep_id for e in cluster.events("deployment_success"))


def test_scale_is_scale_only_and_keeps_tasks(api, make_app, wait):
    api.put("/v2/groups/job", json={"apps": [make_app("w")]})
    api.wait_deployed()
    first = api.running("/job/w")[0]["id"]
    plan = api.put("/v2/groups/job", params={"dryRun": "true"}, json={"apps": [make_app("w", instances=2)]}).json()
    assert plan == {"steps": [{"actions": [{"action": "ScaleApplication", "app": "/job/w"}]}]}
    api.put("/v2/apps/job/w", json={"instances": 2})
    api.wait_deployed()
    ids = [t["id"] for t in api.running("/job/w")]
    assert len(ids) == 2 and first in ids
    app = api.get("/v2/apps/job/w").json()["app"]
    assert app["tasksRunning"] == 2
    assert app["versionInfo"]["lastConfigChangeAt"] != app["versionInfo"]["lastScalingAt"]


def test_config_change_restarts(api, make_app):
    api.put("/v2/groups/job", json={"apps": [make_app("w", upgradeStrategy={
        "minimumHealthCapacity": 0, "maximumOverCapacity": 0})]})
    api.wait_deployed()
    old = api.running("/job/w")[0]["id"]
    api.put("/v2/groups/job", json={"apps": [make_app("w", env={"X": "1"}, upgradeStrategy={
        "minimumHealthCapacity": 0, "maximumOverCapacity": 0})]})
    api.wait_deployed()
    new = api.running("/job/w")
    assert len(new) == 1 and new[0]["id"] != old


def test_left_out_apps_are_stopped(api, make_app, cluster, wait):
    api.put("/v2/groups/job", json={"apps": [make_app("a"), make_app("b")]})
    api.wait_deployed()
    api.put("/v2/groups/job", json={"apps": [make_app("a")]})
    api.wait_deployed()
    assert api.get("/v2/apps/job/b").status_code == 404
    assert [a["id"] for a in api.get("/v2/groups/job").json()["apps"]] == ["/job/a"]
    assert {"appId": "/job/b"}.items() <= cluster.events("app_terminated_event")[-1].items()


def test_locked_app_409_and_force(api, make_app, cluster):
    # a crash-looping app keeps its deployment open (no deployment_failed)
    r1 = api.put("/v2/groups/job", json={"apps": [make_app("w", cmd="exit 1", backoffSeconds=5)]})
    dep1 = r1.json()["deploymentId"]
    deps = api.deployments()
    assert [d["id"] for d in deps] == [dep1]
    d = deps[0]
    assert d["affectedApps"] == ["/job/w"] and d["affectedPods"] == [] and d["totalSteps"] == 2
    assert d["currentStep"] in (1, 2) and d["currentActions"][0]["app"] == "/job/w"
    r2 = api.put("/v2/groups/job", json={"apps": [make_app("w", cmd="sleep 600")]})
    assert r2.status_code == 409
    body = r2.json()
    assert body["deployments"] == [{"id": dep1}]
    assert body["message"].startswith(
        "App is locked by one or more deployments. Override with the option '?force=true'.")
    r3 = api.put("/v2/groups/job", params={"force": "true"}, json={"apps": [make_app("w", cmd="sleep 600")]})
    assert r3.status_code == 200
    api.wait_deployed()
    failed = cluster.events("deployment_failed")
    assert [e["id"] for e in failed] == [dep1]
    assert len(api.running("/job/w")) == 1


def test_delete_deployment_force_and_rollback(api, make_app, cluster, wait):
    r = api.put("/v2/groups/job", json={"apps": [make_app("w", cmd="exit 2", backoffSeconds=5)]})
    dep = r.json()["deploymentId"]
    assert api.delete("/v2/deployments/nope").json() == {"message": "DeploymentPlan nope does not exist"}
    r = api.delete(f"/v2/deployments/{dep}", params={"force": "true"})
    assert r.status_code == 202 and r.text == ""
    assert api.deployments() == []
    r = api.put("/v2/groups/job", json={"apps": [make_app("w", cmd="exit 3", backoffSeconds=5)]})
    dep2 = r.json()["deploymentId"]
    r = api.delete(f"/v2/deployments/{dep2}")
    assert r.status_code == 200 and r.json()["deploymentId"] != dep2
    assert api.get("/v2/apps/job/w").json()["app"]["cmd"] == "exit 2"


def test_delete_task_with_scale_and_app_delete(api, make_app, wait):
    api.put("/v2/groups/job", json={"apps": [make_app("w", instances=2)]})
    api.wait_deployed()
    victim = api.running("/job/w")[0]["id"]
    r = api.delete(f"/v2/apps/job/w/tasks/{victim}", params={"scale": "true"})
    assert r.status_code == 200 and "deploymentId" in r.json()
    api.wait_deployed()
    left = api.running("/job/w")
    assert len(left) == 1 and left[0]["id"] != victim
    assert api.get("/v2/apps/job/w").json()["app"]["instances"] == 1
    # without scale the task is replaced
    gone = left[0]["id"]
    assert api.delete(f"/v2/apps/job/w/tasks/{gone}").json()["task"]["id"] == gone
    wait(lambda: [t for t in api.running("/job/w") if t["id"] != gone], what="replacement task")
    r = api.delete("/v2/apps/job/w")
    assert r.status_code == 200 and r.headers["Marathon-Deployment-Id"] == r.json()["deploymentId"]
    api.wait_deployed()
    assert api.get("/v2/apps/job/w").status_code == 404


def test_tasks_endpoints_and_restart(api, make_app, wait):
    api.put("/v2/groups/job", json={"apps": [make_app("a"), make_app("b")]})
    api.wait_deployed()
    all_tasks = api.get("/v2/tasks", params={"status": "running"}).json()["tasks"]
    assert sorted(t["appId"] for t in all_tasks) == ["/job/a", "/job/b"]
    assert api.get("/v2/tasks", params={"status": "staging"}).json()["tasks"] == []
    group_tasks = api.get("/v2/apps/job/*/tasks").json()["tasks"]
    assert len(group_tasks) == 2
    assert len(api.get("/v2/apps/job/*").json()["*"]) == 2
    old = api.running("/job/a")[0]["id"]
    r = api.post("/v2/apps/job/a/restart")
    assert r.status_code == 200 and "deploymentId" in r.json()
    api.wait_deployed()
    assert api.running("/job/a")[0]["id"] != old
    r = api.post("/v2/tasks/delete", json={"ids": ["bogus"]})
    assert r.status_code == 400 and r.json() == {"message": "Invalid task id bogus"}
    b = api.running("/job/b")[0]["id"]
    r = api.post("/v2/tasks/delete", params={"scale": "true"}, json={"ids": [b]})
    assert "deploymentId" in r.json()
    api.wait_deployed()
    assert api.get("/v2/apps/job/b").json()["app"]["instances"] == 0


def test_delete_group(api, make_app):
    api.put("/v2/groups/job", json={"apps": [make_app("a")], "groups": [{"id": "sub", "apps": [make_app("x")]}]})
    api.wait_deployed()
    assert api.get("/v2/groups/job/sub").json()["apps"][0]["id"] == "/job/sub/x"
    r = api.delete("/v2/groups/job")
    assert r.status_code == 200 and r.json()["deploymentId"]
    api.wait_deployed()
    assert api.get("/v2/groups/job").status_code == 404
    assert api.get("/v2/tasks").json() == {"tasks": []}
