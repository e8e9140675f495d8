"""Fixtures for the reliability tests: one local Marathon per module, a clean slate per test,
and short retry waits for in-process CLI runs."""

from __future__ import annotations

import dataclasses
import time

import pytest
import requests

from marathon_tf.marathon import client as marathon
from marathon_tf.user.localrun import local_cluster as LocalCluster  # as deploy --local runs it


@pytest.fixture(scope="module")
def module_cluster(tmp_path_factory):
    state = tmp_path_factory.mktemp("rel-cluster") / "state"
    with LocalCluster(state_dir=state, dns_refresh=0, heartbeat=0.5, kill_grace=1.0, shutdown_grace=1.0) as c:
        yield c


@pytest.fixture
def cluster(module_cluster):
    """The module's LocalCluster with no fault rules, an empty request log and no groups left."""
    c = module_cluster
    c.faults.clear()
    c.faults.clear_requests()
    yield c
    c.faults.clear()
    r = requests.get(c.marathon_url + "/v2/groups", timeout=10).json()
    for g in r.get("groups") or []:
        requests.delete(c.marathon_url + "/v2/groups" + g["id"], params={"force": "true"}, timeout=10)
    for a in r.get("apps") or []:
        requests.delete(c.marathon_url + "/v2/apps" + a["id"], params={"force": "true"}, timeout=10)
    deadline = time.monotonic() + 15
    while requests.get(c.marathon_url + "/v2/deployments", timeout=10).json() and time.monotonic() < deadline:
        time.sleep(0.1)


FAST = dict(attempts=6, budget=8.0, initial=0.05, max_wait=0.2, jitter=0.05, settle=1.0)


@pytest.fixture
def fast_retries(monkeypatch):
    """In-process clients retry with short waits (same attempt count semantics, tiny sleeps)."""
    original = marathon.RetryPolicy

    @dataclasses.dataclass
    class FastRetryPolicy(original):  # type: ignore[misc, valid-type]
        attempts: int = FAST["attempts"]
        budget: float = FAST["budget"]
        initial: float = FAST["initial"]
        max_wait: float = FAST["max_wait"]
        jitter: float = FAST["jitter"]
        settle: float = FAST["settle"]

    monkeypatch.setattr(marathon, "RetryPolicy", FastRetryPolicy)
    return FastRetryPolicy
