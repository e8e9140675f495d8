"""Marathon faults injected into the local Marathon: `deploy --detach` still ends with exactly one
group and one deployment; past the retry budget it exits 1 naming Marathon's answer, with a hint.
A PUT is sent again only after a fault that proves it was not applied (503 / 502 "no leader", 409
locked); after one that does not (a proxy's 502/504, a reset, a read timeout) it is sent once and
Marathon's state is looked at (the adoption itself: tests/marathon/test_client_hostile.py)."""

from __future__ import annotations

import re
import time

import pytest
import requests
from reliability_helpers import job, puts, run_cli, run_subprocess, write_job

from marathon_tf.marathon import client as marathon

GROUP = "/v2/groups/rel"
DEPLOYED = re.compile(r"deployed /rel on (?P<url>\S+): deployment (?P<id>\S+)")


def _deployment_ids(cluster):
    """Deployments that start or change apps (the fixture's cleanup only stops them)."""
    ids = set()
    for e in cluster.events("deployment_info"):
        plan = e.get("plan") or {}
        actions = [a.get("action") for st in plan.get("steps") or [] for a in st.get("actions") or []]
        if any(a != "StopApplication" for a in actions):
            ids.add(plan.get("id"))
    return ids


def _deploy(cluster, tmp_path, *extra):
    cluster.before = _deployment_ids(cluster)
    path = write_job(tmp_path / "job.json", job(command="sleep 60"))
    start = time.monotonic()
    result = run_cli(["deploy", str(path), "--marathon", cluster.marathon_url, "--detach", *extra])
    return result, time.monotonic() - start


def _assert_one_group_one_deployment(cluster, result):
    assert result.exit_code == 0, (result.stdout, result.stderr)
    m = DEPLOYED.search(result.stderr)
    assert m, result.stderr
    assert m["url"] == cluster.marathon_url
    ok = [e for e in puts(cluster.request_log(), GROUP) if e["status"] == 200]
    assert len(ok) == 1, cluster.request_log()
    r = requests.get(cluster.marathon_url + GROUP, timeout=10)
    assert r.status_code == 200
    group = r.json()
    assert [a["id"] for a in group["apps"]] == ["/rel/worker-0"]
    deployments = requests.get(cluster.marathon_url + "/v2/deployments", timeout=10).json()
    assert [d["id"] for d in deployments] in ([], [m["id"]]), (deployments, m["id"])
    # Marathon started exactly one deployment: one deployment_info event for our id, no other one.
    started = _deployment_ids(cluster) - cluster.before
    assert started == {m["id"]}, started
    return m["id"]


@pytest.mark.parametrize("fault", [
    pytest.param(dict(status=503, times=3), id="503-no-leader-burst"),
    pytest.param(dict(status=502, times=2, body={"message": "Could not determine the current leader"}),
                 id="502-no-leader-burst"),
    pytest.param(dict(kind="lock", times=3, deploymentId="older-deployment"), id="409-locked"),
])
def test_transient_faults_on_put_are_retried_to_one_deployment(cluster, tmp_path, fast_retries, fault):
    cluster.faults.add(path=GROUP, method="PUT", **fault)
    result, _ = _deploy(cluster, tmp_path)
    dep = _assert_one_group_one_deployment(cluster, result)
    assert dep != "older-deployment"
    tries = puts(cluster.request_log(), GROUP)
    assert len(tries) == fault["times"] + 1, tries
    assert [e["fault"] for e in tries[:-1]] == [fault.get("kind", "status")] * fault["times"]


def test_mixed_fault_burst(cluster, tmp_path, fast_retries):
    """503 no leader, then a lock, then success."""
    cluster.faults.add(path=GROUP, method="PUT", status=503, times=1)
    result_rules = cluster.faults.rules()
    assert len(result_rules) == 1
    cluster.faults.add(path=GROUP, method="PUT", kind="lock", times=1)
    result, _ = _deploy(cluster, tmp_path)
    _assert_one_group_one_deployment(cluster, result)
    assert [e["fault"] for e in puts(cluster.request_log(), GROUP)] == ["status", "lock", None]


@pytest.mark.parametrize("fault", [
    pytest.param(dict(status=502, body={"message": "Bad Gateway"}), id="502-proxy"),
    pytest.param(dict(status=504, body={"message": "Gateway Timeout"}), id="504-proxy"),
    pytest.param(dict(kind="reset"), id="connection-reset"),
])
def test_a_put_that_may_have_been_applied_is_sent_once_then_looked_for(cluster, tmp_path, fast_retries, fault):
    """The fault answers without applying the PUT, which the client cannot know: it sends nothing again,
    finds no sign of it on Marathon within the settle time, and says so; run again, the deploy goes
    through with one more PUT."""
    cluster.faults.add(path=GROUP, method="PUT", times=1, **fault)
    result, took = _deploy(cluster, tmp_path)
    assert result.exit_code == 1, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert "it was sent once and not again" in lines[0] and "shows no sign of it" in lines[0], lines
    assert len(lines) == 2 and lines[1].startswith("hint: "), lines
    assert len(puts(cluster.request_log(), GROUP)) == 1
    assert requests.get(cluster.marathon_url + GROUP, timeout=10).status_code == 404
    assert took < 15, took
    result, _ = _deploy(cluster, tmp_path)
    _assert_one_group_one_deployment(cluster, result)


def test_ten_second_stall_is_waited_out_not_retried(cluster, tmp_path, fast_retries):
    cluster.faults.add(path=GROUP, method="PUT", kind="delay", seconds=10, times=1)
    result, took = _deploy(cluster, tmp_path)
    _assert_one_group_one_deployment(cluster, result)
    assert 10 <= took < 25, took
    assert len(puts(cluster.request_log(), GROUP)) == 1  # waited: no second PUT


@pytest.fixture
def short_read_timeout(monkeypatch):
    """Clients built by the CLI time out reading after 1 s (the default is 30 s)."""
    monkeypatch.setitem(marathon.Client.__init__.__kwdefaults__, "timeout", (5.0, 1.0))
    monkeypatch.setattr(marathon, "CLI_TIMEOUT", (2.5, 1.0))


def test_read_timeout_on_put_is_not_sent_again_and_the_abandoned_request_is_logged(cluster, tmp_path, fast_retries,
                                                                                   short_read_timeout):
    """A PUT whose answer does not come within the read timeout may still be applied: it is not sent
    again. The local Marathon drops the abandoned request (the client hung up; a real one would apply
    it and be adopted), so the deploy says it was sent once, and no deployment results."""
    cluster.faults.add(path=GROUP, method="PUT", kind="delay", seconds=3, times=1)
    result, took = _deploy(cluster, tmp_path)
    assert result.exit_code == 1, result.stderr
    assert "timed out" in result.stderr and "it was sent once and not again" in result.stderr
    assert took >= 1.0, took
    deadline = time.monotonic() + 10
    while not puts(cluster.request_log(), GROUP) and time.monotonic() < deadline:
        time.sleep(0.1)  # the abandoned request is logged once its stall notices the hang-up
    assert [e["fault"] for e in puts(cluster.request_log(), GROUP)] == ["delay"]
    assert _deployment_ids(cluster) - cluster.before == set()


@pytest.mark.parametrize("fault,expect", [
    pytest.param(dict(status=503), "503 Error 503 Could not determine the current leader", id="503-forever"),
    pytest.param(dict(kind="lock"), "409", id="locked-forever"),
])
def test_past_the_retry_budget_exit_1_with_marathons_answer(cluster, tmp_path, fast_retries, fault, expect):
    cluster.faults.add(path=GROUP, method="PUT", **fault)
    result, took = _deploy(cluster, tmp_path)
    assert result.exit_code == 1, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"error: PUT {cluster.marathon_url}{GROUP}"), lines
    assert expect in lines[0], lines
    assert f"(gave up after {fast_retries().attempts} tries)" in lines[0]
    assert len(lines) == 2 and lines[1].startswith("hint: "), lines
    assert len(puts(cluster.request_log(), GROUP)) == fast_retries().attempts
    assert requests.get(cluster.marathon_url + GROUP, timeout=10).status_code == 404
    assert took < 15


def test_401_is_not_retried(cluster, tmp_path, fast_retries):
    cluster.faults.add(path=GROUP, method="PUT", status=401, body={"message": "invalid credentials"})
    result, _ = _deploy(cluster, tmp_path)
    assert result.exit_code == 1
    assert "401 invalid credentials" in result.stderr and "hint: " in result.stderr
    assert len(puts(cluster.request_log(), GROUP)) == 1


def test_subprocess_with_real_retry_defaults_rides_out_a_short_burst(cluster, tmp_path):
    cluster.faults.add(path=GROUP, method="PUT", status=503, times=2)
    path = write_job(tmp_path / "job.json", job(command="sleep 60"))
    start = time.monotonic()
    p = run_subprocess(["deploy", str(path), "--detach"], env={"MARATHON_URL": cluster.marathon_url}, timeout=60)
    took = time.monotonic() - start
    assert p.returncode == 0, p.stderr.decode()
    assert DEPLOYED.search(p.stderr.decode())
    tries = puts(cluster.request_log(), GROUP)
    assert [e["status"] for e in tries] == [503, 503, 200]
    # defaults: 0.5·2ⁿ + up to 1 s jitter per wait; two waits
    assert 0.5 <= took < 20, took
