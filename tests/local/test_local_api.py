"""Marathon API shapes of the local runner: status codes, headers, bodies, embeds, errors.

Error bodies as mesosphere/marathon v1.4.3 and releases/1.11 write them
(``src/main/scala/mesosphere/marathon/api/MarathonExceptionMapper.scala``, ``api/v2/Validation.scala``)."""

from __future__ import annotations

import re

TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def test_put_group_creates_and_runs_apps(api, make_app, wait):
    """GroupUpdate semantics of mesosphere/marathon v1.4.3 (replacement rules, relative ids, ``mkdir -p``,
    ``scaleBy``): ``src/main/scala/mesosphere/marathon/api/v2/json/GroupUpdate.scala`` and
    ``api/v2/GroupsResource.scala``."""
    r = api.put("/v2/groups/job", json={"apps": [make_app("worker-0"), make_app("ps-0")]})
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"version", "deploymentId"}
    assert r.headers["Marathon-Deployment-Id"] == body["deploymentId"]
    assert TS.match(body["version"])
    assert r.headers["X-Marathon-Leader"] == api.base
    api.wait_deployed()
    group = api.get("/v2/groups/job").json()
    assert group["id"] == "/job"
    assert sorted(a["id"] for a in group["apps"]) == ["/job/ps-0", "/job/worker-0"]
    assert group["groups"] == [] and group["pods"] == []
    tasks = api.tasks("/job/worker-0")
    assert len(tasks) == 1 and tasks[0]["state"] == "TASK_RUNNING"
    assert re.match(r"^job_worker-0\.instance-[0-9a-f-]{36}\._app\.1$", tasks[0]["id"])
    assert TS.match(tasks[0]["stagedAt"]) and TS.match(tasks[0]["startedAt"])
    assert tasks[0]["ipAddresses"] == [{"ipAddress": "127.0.0.1", "protocol": "IPv4"}]


def test_embed_gotcha_drops_defaults(api, make_app):
    api.put("/v2/groups/job", json={"apps": [make_app("worker-0")]})
    only_tasks = api.get("/v2/groups/job", params={"embed": "group.apps.tasks"}).json()
    assert "apps" not in only_tasks and "groups" not in only_tasks
    full = api.get("/v2/groups/job", params=[("embed", "group.groups"), ("embed", "group.apps"),
                                            ("embed", "group.apps.tasks")]).json()
    assert "tasks" in full["apps"][0] and "groups" in full and "pods" not in full
    default = api.get("/v2/groups").json()
    assert [g["id"] for g in default["groups"]] == ["/job"] and "tasks" not in default["groups"][0]["apps"][0]


def test_post_group_201_and_409(api, make_app):
    r = api.post("/v2/groups", json={"id": "/made", "apps": [make_app("a", instances=0)]})
    assert r.status_code == 201
    assert r.headers["Location"] == "/made"
    assert r.headers["Marathon-Deployment-Id"] == r.json()["deploymentId"]
    again = api.post("/v2/groups", json={"id": "/made"})
    assert again.status_code == 409
    assert again.json() == {"message": "Group /made is already created. Use PUT to change this group."}
    assert api.post("/v2/groups", json={}).status_code == 409


def test_404_messages(api):
    assert api.get("/v2/groups/x").json() == {"message": "Group '/x' does not exist"}
    r = api.get("/v2/apps/x/y")
    assert r.status_code == 404 and r.json() == {"message": "App '/x/y' does not exist"}
    assert api.delete("/v2/groups/x").status_code == 404
    assert api.delete("/v2/apps/x").json() == {"message": "App '/x' does not exist"}
    assert api.get("/v2/groups").status_code == 200


def test_invalid_json_400(api):
    r = api.put("/v2/groups/job", data="{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert r.json()["message"] == "Invalid JSON" and isinstance(r.json()["details"], str)
    r = api.put("/v2/apps/a", json={"cmd": "x", "instances": "two"})
    assert r.status_code == 400 and r.json()["details"] == [{"path": "/instances",
                                                              "errors": ["error.expected.jsnumber"]}]


def test_422_validation(api, make_app):
    r = api.put("/v2/groups/job", json={"apps": [make_app("Bad_Id")]})
    assert r.status_code == 422
    body = r.json()
    assert body["message"] == "Object is not valid"
    assert body["details"][0]["path"] == "/apps(0)/id"
    assert "must fully match regular expression" in body["details"][0]["errors"][0]
    gpu = make_app("g", gpus=1, container={"type": "DOCKER", "docker": {"image": "x"}})
    r = api.put("/v2/groups/job", json={"apps": [gpu]})
    assert r.status_code == 422
    assert "GPU resources only work with the Mesos containerizer" in str(r.json()["details"])
    ucr = make_app("g", gpus=1, container={"type": "MESOS", "docker": {"image": "x"}})
    assert api.put("/v2/groups/ok", json={"apps": [ucr]}, params={"dryRun": "true"}).status_code == 200
    r = api.put("/v2/apps/nocmd", json={"cpus": 0.1})
    assert r.status_code == 422
    assert r.json()["details"] == [{"path": "/", "errors": [
        "AppDefinition must either contain one of 'cmd' or 'args', and/or a 'container'."]}]
    dup = make_app("d", portDefinitions=[{"port": 0, "name": "a"}, {"port": 0, "name": "a"}])
    assert "Port names must be unique." in str(api.put("/v2/apps/d", json=dup).json())
    hc = make_app("h", portDefinitions=[{"port": 0}], healthChecks=[{"protocol": "MESOS_TCP", "portIndex": 1}])
    r = api.put("/v2/apps/h", json=hc)
    assert r.status_code == 422 and r.json()["details"][0]["path"] == "/healthChecks(0)"
    assert api.get("/v2/apps").json() == {"apps": []}


def test_dry_run_plan_and_deploys_nothing(api, make_app):
    r = api.put("/v2/groups/job", params={"dryRun": "true"}, json={"apps": [make_app("w")]})
    assert r.status_code == 200
    assert r.json() == {"steps": [{"actions": [{"action": "StartApplication", "app": "/job/w"}]},
                                  {"actions": [{"action": "ScaleApplication", "app": "/job/w"}]}]}
    assert api.get("/v2/groups/job").status_code == 404
    assert api.deployments() == []


def test_plan_structure_stop_start_scale_restart(api, make_app):
    api.put("/v2/groups/job", json={"apps": [make_app("a", instances=0), make_app("b", instances=0),
                                             make_app("c", instances=0)]})
    api.wait_deployed()
    plan = api.put("/v2/groups/job", params={"dryRun": "true"}, json={"apps": [
        make_app("a", instances=0), make_app("b", instances=1), make_app("c", instances=0, cmd="sleep 1"),
        make_app("d", instances=0)]}).json()
    assert plan == {"steps": [
        {"actions": [{"action": "StartApplication", "app": "/job/d"}]},
        {"actions": [{"action": "ScaleApplication", "app": "/job/b"},
                     {"action": "RestartApplication", "app": "/job/c"},
                     {"action": "ScaleApplication", "app": "/job/d"}]}]}
    plan = api.put("/v2/groups/job", params={"dryRun": "true"}, json={"apps": [make_app("a", instances=0)]}).json()
    assert plan == {"steps": [{"actions": [{"action": "StopApplication", "app": "/job/b"},
                                           {"action": "StopApplication", "app": "/job/c"}]}]}


def test_dependencies_order_steps(api, make_app):
    plan = api.put("/v2/groups/job", params={"dryRun": "true"}, json={"apps": [
        make_app("worker", dependencies=["ps"]), make_app("ps")]}).json()
    assert [s["actions"] for s in plan["steps"]][1:] == [[{"action": "ScaleApplication", "app": "/job/ps"}],
                                                         [{"action": "ScaleApplication", "app": "/job/worker"}]]
    r = api.put("/v2/groups/job", json={"apps": [make_app("a", dependencies=["b"]), make_app("b", dependencies=["a"])]})
    assert r.status_code == 422 and "cyclic" in r.text


def test_double_slash_ids(api, make_app):
    api.put("/v2/groups/job", json={"apps": [make_app("worker-0", instances=0)]})
    assert api.get("/v2/apps//job/worker-0").json()["app"]["id"] == "/job/worker-0"
    assert api.get("/v2/groups//job").json()["id"] == "/job"
    assert api.get("/v2/apps//job/worker-0/tasks").json() == {"tasks": []}


def test_misc_endpoints(api):
    assert api.get("/ping").text == "pong"
    info = api.get("/v2/info").json()
    assert info["version"] == "1.11.0" and info["name"] == "marathon"  # the newest, by default
    assert api.get("/v2/leader").json() == {"leader": api.base.split("://")[1]}
    assert api.get("/v2/plugins").json() == {"plugins": []}
    assert api.get("/v2/queue").json() == {"queue": []}


def test_apps_list_filters(api, make_app):
    api.put("/v2/groups/job", json={"apps": [
        make_app("alpha", instances=0, labels={"role": "ps"}),
        make_app("beta", instances=0, labels={"role": "worker", "gpu": "yes"}),
        make_app("gamma", instances=0)]})
    def ids(**q):
        return [a["id"] for a in api.get("/v2/apps", params=q).json()["apps"]]
    assert ids(id="ALP") == ["/job/alpha"]
    assert ids(label="role") == ["/job/alpha", "/job/beta"]
    assert ids(label="role==worker") == ["/job/beta"]
    assert ids(label="role!=worker") == ["/job/alpha", "/job/gamma"]
    assert ids(label="role,gpu") == ["/job/beta"]
    apps = api.get("/v2/apps", params={"embed": "apps.tasks"}).json()["apps"]
    assert all("tasks" in a and "deployments" in a for a in apps)


def test_app_put_create_201_partial_update_and_patch(api, make_app, wait):
    r = api.put("/v2/apps/solo", json=make_app("solo", instances=0))
    assert r.status_code == 201 and r.headers["Location"] == "/solo"
    api.wait_deployed()
    r = api.put("/v2/apps/solo", json={"labels": {"x": "1"}})
    assert r.status_code == 200 and set(r.json()) == {"version", "deploymentId"}
    app = api.get("/v2/apps/solo").json()["app"]
    assert app["labels"] == {"x": "1"} and app["cmd"] == "sleep 600"
    assert api("PATCH", "/v2/apps/nothere", json={"instances": 1}).status_code == 404
    r = api("PATCH", "/v2/apps/solo", json={"env": {"A": "b"}})
    assert r.status_code == 200
    assert api.get("/v2/apps/solo").json()["app"]["env"] == {"A": "b"}
    r = api.post("/v2/apps", json=make_app("/solo"))
    assert r.status_code == 409 and r.json() == {"message": "An app with id [/solo] already exists."}
    r = api.post("/v2/apps", json=make_app("/other", instances=0))
    assert r.status_code == 201 and r.json()["id"] == "/other" and r.json()["deployments"]


def test_bulk_put(api, make_app):
    api.put("/v2/groups/job", json={"apps": [make_app("a", instances=0), make_app("b", instances=0)]})
    api.wait_deployed()
    r = api.put("/v2/apps", json=[{"id": "/job/a", "instances": 2}, {"id": "/job/c", "cmd": "sleep 5", "instances": 0}])
    assert r.status_code == 200
    assert api.get("/v2/apps/job/a").json()["app"]["instances"] == 2
    assert api.get("/v2/apps/job/c").json()["app"]["cmd"] == "sleep 5"


def test_an_ipv6_loopback_runner_has_bracketed_urls(tmp_path):
    import socket

    import pytest
    import requests

    from marathon_tf.local import LocalCluster

    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        socket.socket(socket.AF_INET6).bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    with LocalCluster(state_dir=tmp_path / "s", host="::1", dns_refresh=0) as c:
        assert c.marathon_url.startswith("http://[::1]:") and c.mesos_dns_http.startswith("http://[::1]:")
        assert requests.get(c.marathon_url + "/v2/info", timeout=5).json()["version"]
