"""Fixtures for the local Marathon tests: a fresh cluster per test, HTTP helpers, polling."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from polling import wait_for

from marathon_tf.local import LocalCluster


class Api:
    """requests against one cluster's Marathon URL."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.session = requests.Session()

    def __call__(self, method: str, path: str, **kw: Any) -> requests.Response:
        kw.setdefault("timeout", 10)
        return self.session.request(method, self.base + path, **kw)

    def get(self, path: str, **kw: Any) -> requests.Response:
        return self("GET", path, **kw)

    def put(self, path: str, **kw: Any) -> requests.Response:
        return self("PUT", path, **kw)

    def post(self, path: str, **kw: Any) -> requests.Response:
        return self("POST", path, **kw)

    def delete(self, path: str, **kw: Any) -> requests.Response:
        return self("DELETE", path, **kw)

    def deployments(self) -> list[dict]:
        return self.get("/v2/deployments").json()

    def tasks(self, app_id: str) -> list[dict]:
        r = self.get(f"/v2/apps{app_id}/tasks")
        return r.json()["tasks"] if r.status_code == 200 else []

    def running(self, app_id: str) -> list[dict]:
        return [t for t in self.tasks(app_id) if t["state"] == "TASK_RUNNING"]

    def wait_deployed(self, timeout: float = 15.0) -> None:
        wait_for(lambda: self.deployments() == [], timeout, what="deployments to finish")


@pytest.fixture
def cluster(tmp_path):
    """A running LocalCluster with fast settings (live DNS, 0.5 s heartbeat, 1 s kill grace)."""
    with LocalCluster(state_dir=tmp_path / "state", dns_refresh=0, heartbeat=0.5, kill_grace=1.0,
                      shutdown_grace=1.0) as c:
        yield c


@pytest.fixture
def api(cluster) -> Api:
    return Api(cluster.marathon_url)


def app(app_id: str, cmd: str = "sleep 600", **fields: Any) -> dict:
    """A small app definition for tests."""
    return {"id": app_id, "cmd": cmd, "cpus": 0.1, "mem": 32, "instances": 1, **fields}


@pytest.fixture
def wait():
    """``wait(predicate, timeout=10, what="")``: poll until truthy or fail."""
    return wait_for


@pytest.fixture
def make_app():
    """``make_app(id, cmd="sleep 600", **fields)``: a small app definition."""
    return app


@pytest.fixture
def cluster_with(tmp_path):
    """``cluster_with(**options) -> (cluster, api)``: a LocalCluster with the fast settings of
    ``cluster`` and these options (agents, resources, features …); stopped at teardown."""
    started = []

    def start(**options: Any):
        c = LocalCluster(state_dir=tmp_path / f"state-{len(started)}", dns_refresh=0, heartbeat=0.5, kill_grace=1.0,
                         shutdown_grace=1.0, **options).start()
        started.append(c)
        return c, Api(c.marathon_url)

    yield start
    for c in started:
        c.stop()
