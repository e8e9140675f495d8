"""Health checks: deployments wait for health; unhealthy tasks are killed after max failures."""

from __future__ import annotations

import sys

HTTP_SERVER = (f"{sys.executable} -c \"import http.server, os; "
               "http.server.HTTPServer(('127.0.0.1', int(os.environ['PORT_STATUS'])), "
               "http.server.SimpleHTTPRequestHandler).serve_forever()\"")


def test_mesos_http_health_gates_deployment(api, make_app, cluster, wait):
    spec = make_app("h", cmd="sleep 1; touch health; " + HTTP_SERVER,
                    portDefinitions=[{"port": 0, "name": "tf"}, {"port": 0, "name": "status"}],
                    healthChecks=[{"protocol": "MESOS_HTTP", "portIndex": 1, "path": "/health",
                                   "gracePeriodSeconds": 30, "intervalSeconds": 0.2, "timeoutSeconds": 1,
                                   "maxConsecutiveFailures": 3, "delaySeconds": 0}])
    api.put("/v2/groups/job", json={"apps": [spec]})
    wait(lambda: api.running("/job/h"), what="running")
    assert api.deployments() != []  # running but not yet healthy
    assert api.get("/v2/apps/job/h").json()["app"]["tasksHealthy"] == 0
    api.wait_deployed()
    app = api.get("/v2/apps/job/h").json()["app"]
    assert app["tasksHealthy"] == 1 and app["tasksUnhealthy"] == 0
    result = app["tasks"][0]["healthCheckResults"][0]
    assert result["alive"] is True and result["consecutiveFailures"] == 0
    assert result["instanceId"] == app["tasks"][0]["id"].rsplit("._app.", 1)[0]
    changes = cluster.events("health_status_changed_event")
    assert changes[-1]["alive"] is True and changes[-1]["appId"] == "/job/h"


def test_unhealthy_task_is_killed_after_max_failures(api, make_app, cluster, wait):
    spec = make_app("u", cmd="sleep 600", backoffSeconds=30,
                    healthChecks=[{"protocol": "COMMAND", "command": {"value": "test -f ok"},
                                   "gracePeriodSeconds": 0, "intervalSeconds": 0.1, "timeoutSeconds": 1,
                                   "maxConsecutiveFailures": 2, "delaySeconds": 0}])
    api.put("/v2/apps/u", json=spec)
    first = wait(lambda: api.running("/u"), what="running")[0]["id"]
    kill = wait(lambda: cluster.events("unhealthy_instance_kill_event"), what="unhealthy kill")[0]
    assert kill["taskId"] == first
    wait(lambda: any(e["taskId"] == first and e["taskStatus"] == "TASK_KILLED"
                     for e in cluster.events("status_update_event")), what="killed")
    wait(lambda: [t for t in api.running("/u") if t["id"] != first], what="replacement despite backoff 30s")


def test_grace_period_ignores_failures(api, make_app, cluster, wait):
    spec = make_app("g", cmd="sleep 600", portDefinitions=[{"port": 0}],
                    healthChecks=[{"protocol": "MESOS_TCP", "portIndex": 0, "gracePeriodSeconds": 60,
                                   "intervalSeconds": 0.1, "timeoutSeconds": 1, "maxConsecutiveFailures": 1,
                                   "delaySeconds": 0}])
    api.put("/v2/apps/g", json=spec)
    task = wait(lambda: api.running("/g"), what="running")[0]
    import time
    time.sleep(1.0)
    again = api.running("/g")
    assert [t["id"] for t in again] == [task["id"]]
    assert again[0]["healthCheckResults"] == []
    assert cluster.events("unhealthy_instance_kill_event") == []
