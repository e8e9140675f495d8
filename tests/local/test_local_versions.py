"""App version history and rollback, ``embed=app.taskStats`` / ``app.readiness``, and the Mesos endpoints the
web UI reads (``mesos_leader_ui_url``, master and agent state, file browse/read/download as JSONP)."""

from __future__ import annotations

import json
import re
from urllib.parse import urlsplit


def _versions(api, app_id: str) -> list[str]:
    return api.get(f"/v2/apps{app_id}/versions").json()["versions"]


def test_every_change_keeps_a_version_and_rollback_restores_it(api, make_app, wait):
    api.put("/v2/apps/v", json=make_app("/v", env={"A": "1"})).raise_for_status()
    api.wait_deployed()
    first = api.get("/v2/apps/v").json()["app"]["version"]
    api.put("/v2/apps/v", json={"env": {"A": "2"}}).raise_for_status()
    api.wait_deployed()
    api.put("/v2/apps/v", json={"instances": 2}).raise_for_status()  # a scale is a version too
    api.wait_deployed()
    app = api.get("/v2/apps/v").json()["app"]
    versions = _versions(api, "/v")
    assert len(versions) == 3 and versions[0] == app["version"] and versions[-1] == first
    assert versions == sorted(versions, reverse=True)
    old = api.get(f"/v2/apps/v/versions/{first}").json()
    assert old["env"] == {"A": "1"} and old["instances"] == 1 and old["version"] == first
    assert old["versionInfo"] == {"lastScalingAt": first, "lastConfigChangeAt": first}
    current = api.get(f"/v2/apps//v/versions/{app['version']}").json()  # the UI's double slash
    assert current["env"] == {"A": "2"} and current["instances"] == 2
    missing = api.get("/v2/apps/v/versions/2001-01-01T00:00:00.000Z")
    assert missing.status_code == 404 and "does not exist in version" in missing.json()["message"]

    r = api.put("/v2/apps/v", json={"version": first})
    assert r.status_code == 200 and r.json()["deploymentId"]
    api.wait_deployed()
    back = api.get("/v2/apps/v").json()["app"]
    assert back["env"] == {"A": "1"} and back["instances"] == 1 and back["version"] > app["version"]
    wait(lambda: len(api.running("/v")) == 1, 15, what="rolled back to one task")
    assert len(_versions(api, "/v")) == 4  # the rollback is a new version of the old definition
    assert api.put("/v2/apps/v", json={"version": "2001-01-01T00:00:00.000Z"}).status_code == 404
    assert api.put("/v2/apps/nope", json={"version": first}).status_code == 404


def test_task_stats_and_readiness_embeds(api, make_app, wait):
    api.put("/v2/apps/s", json=make_app("/s", instances=2)).raise_for_status()
    api.wait_deployed()
    wait(lambda: len(api.running("/s")) == 2, 15, what="two tasks")
    plain = api.get("/v2/apps/s").json()["app"]
    assert "taskStats" not in plain and "readinessCheckResults" not in plain
    app = api.get("/v2/apps//s", params=[("embed", "app.taskStats"), ("embed", "app.readiness")]).json()["app"]
    assert app["readinessCheckResults"] == [] and len(app["tasks"]) == 2
    stats = app["taskStats"]
    assert set(stats) == {"startedAfterLastScaling", "withLatestConfig", "totalSummary"}  # none outdated
    total = stats["totalSummary"]["stats"]
    assert total["counts"] == {"staged": 0, "running": 2, "healthy": 0, "unhealthy": 0}
    assert total["lifeTime"]["averageSeconds"] >= 0 and total["lifeTime"]["medianSeconds"] >= 0
    # a config change: while old tasks are replaced, some run an outdated config; then none again
    api.put("/v2/apps/s", json={"env": {"X": "1"}}).raise_for_status()
    api.wait_deployed()
    stats = api.get("/v2/apps/s", params={"embed": "app.taskStats"}).json()["app"]["taskStats"]
    assert "withOutdatedConfig" not in stats and stats["withLatestConfig"]["stats"]["counts"]["running"] == 2
    listed = api.get("/v2/apps", params={"embed": "apps.taskStats"}).json()["apps"][0]
    assert listed["taskStats"]["totalSummary"]["stats"]["counts"]["running"] == 2


def test_mesos_endpoints_lead_the_ui_to_the_sandbox(api, make_app, wait, cluster):
    api.put("/v2/apps/m", json=make_app("/m", cmd="echo hello-sandbox; exec sleep 600")).raise_for_status()
    task = wait(lambda: api.running("/m"), 15, what="the task")[0]
    info = api.get("/v2/info").json()
    url = info["marathon_config"]["mesos_leader_ui_url"]
    host = urlsplit(cluster.marathon_url).netloc
    assert url == f"http://{host}/mesos"

    def jsonp(endpoint: str, **params) -> object:
        # as the Mesos UI's <script> loads are sent from the server's own page (JSONP is for them only)
        r = api.get(urlsplit(endpoint).path, params={**params, "jsonp": "cb_1"},
                    headers={"Sec-Fetch-Site": "same-origin", "Referer": cluster.marathon_url + "/mesos"})
        assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/javascript"), (endpoint, r.text)
        match = re.fullmatch(r"cb_1\((.*)\);", r.text, re.S)
        return json.loads(match.group(1))

    assert jsonp(url + "/version")["version"] >= "0.26"
    master = jsonp(url + "/master/state")
    agent = next(s for s in master["slaves"] if s["id"] == task["slaveId"])
    # the UI builds the agent's address as //hostname:<port of pid>: this same server
    assert f"{agent['hostname']}:{agent['pid'].rsplit(':', 1)[1]}" == host
    assert any(t["id"] == task["id"] for f in master["frameworks"] for t in f["tasks"])
    state = jsonp("/state")
    framework = next(f for f in state["frameworks"] if f["id"] == info["frameworkId"])
    directory = next(e["directory"] for e in framework["executors"] if e["id"] == task["id"])
    files = jsonp("/files/browse", path=directory)
    names = {f["path"].rsplit("/", 1)[1]: f for f in files}
    assert {"stdout", "stderr"} <= set(names) and names["stdout"]["mode"].startswith("-")
    wait(lambda: b"hello-sandbox" in api.get("/files/download", params={"path": directory + "/stdout"}).content,
         10, what="stdout")
    assert jsonp("/files/read", path=directory + "/stdout", offset=0)["data"].startswith("hello-sandbox")
    for path in ("/etc", str(cluster.state_dir)):
        assert api.get("/files/browse", params={"path": path}).status_code == 404
    assert api.get("/files/download", params={"path": "/etc/passwd"}).status_code == 404
    assert api.get("/state", params={"jsonp": "alert(1)//"},
                   headers={"Sec-Fetch-Site": "same-origin"}).status_code == 400


def test_readiness_checks_hold_the_deployment_and_show_their_results(api, make_app, wait, tmp_path):
    """Marathon's ``ReadinessBehavior`` (mesosphere/marathon releases/1.11
    ``src/main/scala/mesosphere/marathon/core/readiness/ReadinessCheckExecutor.scala``)."""
    server = tmp_path / "ready_server.py"
    server.write_text(
        "import http.server, os\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        ok = os.path.exists(os.environ['FLAG'])\n"
        "        body = b'{\"status\": \"%s\"}' % (b'Ready' if ok else b'Waiting')\n"
        "        self.send_response(200 if ok else 503)\n"
        "        self.send_header('Content-Type', 'application/json')\n"
        "        self.send_header('Content-Length', str(len(body)))\n"
        "        self.end_headers()\n"
        "        self.wfile.write(body)\n"
        "    def log_message(self, *a):\n"
        "        pass\n"
        "http.server.HTTPServer(('127.0.0.1', int(os.environ['PORT_READY'])), H).serve_forever()\n")
    flag = tmp_path / "flag"
    api.put("/v2/apps/r", json=make_app(
        "/r", cmd=f"exec python3 {server}", env={"FLAG": str(flag)},
        portDefinitions=[{"port": 0, "name": "ready"}],
        readinessChecks=[{"name": "warm", "portName": "ready", "path": "/ready", "intervalSeconds": 1,
                          "timeoutSeconds": 1, "preserveLastResponse": True}])).raise_for_status()

    def waiting():
        deps = api.deployments()
        results = deps[0]["currentActions"][0]["readinessCheckResults"] if deps else []
        return results if results and "lastResponse" in results[0] else None

    results = wait(waiting, 20, what="a readiness result")
    task = api.running("/r")[0]
    assert results == [{"name": "warm", "taskId": task["id"], "ready": False, "lastResponse": {
        "status": 503, "contentType": "application/json", "body": '{"status": "Waiting"}'}}]
    app = api.get("/v2/apps/r", params={"embed": "app.readiness"}).json()["app"]
    assert app["readinessCheckResults"][0]["ready"] is False and app["deployments"]
    flag.write_text("go")
    api.wait_deployed(20)
    app = api.get("/v2/apps/r", params={"embed": "app.readiness"}).json()["app"]
    assert app["readinessCheckResults"] == [] and app["deployments"] == []
    # a scale-up waits for the new task only; the one already running stays ready
    api.put("/v2/apps/r", json={"instances": 2}).raise_for_status()
    api.wait_deployed(20)
    assert len(api.running("/r")) == 2


def test_group_versions_and_group_rollback(api, make_app, wait):
    api.put("/v2/groups/g", json={"apps": [make_app("a", cmd="sleep 601")]}).raise_for_status()
    api.wait_deployed()
    v1 = api.get("/v2/groups/g").json()["version"]
    api.put("/v2/groups/g", json={"apps": [make_app("a", cmd="sleep 602"), make_app("b")]}).raise_for_status()
    api.wait_deployed()
    v2 = api.get("/v2/groups/g").json()["version"]
    assert api.get("/v2/groups/g/versions").json() == [v2, v1]
    assert v2 in api.get("/v2/groups/versions").json()  # the root group changed too
    old = api.get(f"/v2/groups/g/versions/{v1}").json()
    assert old["id"] == "/g" and old["version"] == v1
    assert [(a["id"], a["cmd"]) for a in old["apps"]] == [("/g/a", "sleep 601")]
    assert api.get("/v2/groups/g/versions/2001-01-01T00:00:00.000Z").status_code == 404
    assert api.put("/v2/groups/g", json={"version": v1, "apps": []}).status_code == 422
    assert api.put("/v2/groups/g", json={"version": "2001-01-01T00:00:00.000Z"}).status_code == 404

    r = api.put("/v2/groups/g", json={"version": v1})
    assert r.status_code == 200 and r.json()["deploymentId"]
    api.wait_deployed()
    now = api.get("/v2/groups/g").json()
    assert [(a["id"], a["cmd"]) for a in now["apps"]] == [("/g/a", "sleep 601")] and now["version"] > v2
    wait(lambda: len(api.running("/g/a")) == 1 and not api.tasks("/g/b"), 15, what="b stopped, a back")
