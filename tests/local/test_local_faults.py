"""Fault injection and the request log, through Python and through the /_local admin API."""

from __future__ import annotations

import pytest
import requests


def test_status_fault_times_and_request_log(api, cluster, make_app):
    cluster.faults.add(path="/v2/groups", method="PUT", status=503, times=2)
    for _ in range(2):
        r = api.put("/v2/groups/job", json={"apps": [make_app("w", instances=0)]})
        assert r.status_code == 503 and "Could not determine the current leader" in r.text
        assert "X-Marathon-Leader" not in r.headers
    assert api.get("/v2/groups").status_code == 200  # GET not matched
    assert api.put("/v2/groups/job", json={"apps": [make_app("w", instances=0)]}).status_code == 200
    log = cluster.request_log()
    assert [(e["method"], e["path"], e["status"], e["fault"]) for e in log] == [
        ("PUT", "/v2/groups/job", 503, "status"), ("PUT", "/v2/groups/job", 503, "status"),
        ("GET", "/v2/groups", 200, None), ("PUT", "/v2/groups/job", 200, None)]
    assert cluster.faults.rules() == []


def test_admin_http_api_from_another_process(api, make_app):
    base = api.base
    r = requests.post(base + "/_local/faults", json={"path": "/v2/apps", "status": 500,
                                                      "body": {"message": "boom"}})
    assert r.status_code == 201 and r.json()["id"]
    assert api.get("/v2/apps").json() == {"message": "boom"}
    assert requests.get(base + "/_local/faults").json()[0]["hits"] == 1
    assert requests.delete(base + "/_local/faults").status_code == 200
    assert api.get("/v2/apps").status_code == 200
    requests.delete(base + "/_local/requests")
    assert requests.get(base + "/_local/requests").json() == []  # admin calls are not logged
    assert requests.post(base + "/_local/faults", json={"kind": "nonsense"}).status_code == 422


def test_reset_delay_and_lock(api, cluster, make_app):
    cluster.faults.add(kind="reset", path="/v2/info", times=1)
    with pytest.raises(requests.ConnectionError):
        api.get("/v2/info")
    assert api.get("/v2/info").status_code == 200
    cluster.faults.add(kind="delay", seconds=0.5, path="/ping", times=1)
    r = api.get("/ping")
    assert r.text == "pong" and r.elapsed.total_seconds() >= 0.45
    cluster.faults.add(kind="lock", path="/v2/groups", method="PUT", times=1)
    r = api.put("/v2/groups/job", json={"apps": []})
    assert r.status_code == 409 and r.json()["deployments"][0]["id"]


def test_kill_endpoint(api, make_app, cluster, wait):
    api.put("/v2/apps/k", json=make_app("k", backoffSeconds=0.1))
    api.wait_deployed()
    task = api.running("/k")[0]["id"]
    r = requests.post(api.base + "/_local/kill", json={"appId": "/k", "signal": "KILL"})
    assert r.json() == {"killed": [task]}
    wait(lambda: api.get("/v2/apps/k").json()["app"].get("lastTaskFailure", {}).get("taskId") == task,
         what="crash recorded")
    assert requests.post(api.base + "/_local/kill", json={"appId": "/none"}).status_code == 404
