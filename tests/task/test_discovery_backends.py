"""Discovery backends with a fake DNS client, a fake Marathon session and a real HTTP server."""

import base64
import random

import pytest
import requests
from task_helpers import FakeMarathon

from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.task.discovery import (
    DnspythonClient,
    MarathonBackend,
    MesosDnsBackend,
    MesosDnsHttpBackend,
    SrvRecord,
    make_backend,
    marathon_headers,
)
from marathon_tf.task.rendezvous import DirectRendezvous

PEERS = [("ps", 0), ("worker", 0), ("worker", 1)]


# --- Mesos-DNS SRV ---------------------------------------------------------------------------------

def test_srv_name_of_a_nested_job(fake_dns):
    backend = MesosDnsBackend(fake_dns, job="ml/mnist")
    assert backend.srv_name(("worker", 0)) == "_tf._worker-0-mnist-ml._tcp.marathon.mesos."
    other = MesosDnsBackend(fake_dns, job="a/b/c", framework="mfw", domain="dc1")
    assert other.srv_name(("ps", 2)) == "_tf._ps-2-c-b-a._tcp.mfw.dc1."


def test_srv_answers_with_the_additional_a_record(fake_dns):
    fake_dns.add_task("worker", 1, "10.0.0.7", 31005)
    obs = MesosDnsBackend(fake_dns, job="ml/mnist").lookup([("worker", 1)])[("worker", 1)]
    assert obs.address == "10.0.0.7:31005"
    assert not any(q.startswith("A ") for q in fake_dns.queries)


def test_srv_without_additional_section_queries_the_target_a_record(fake_dns):
    fake_dns.add_task("ps", 0, "10.0.0.9", 31001, in_additional=False)
    obs = MesosDnsBackend(fake_dns, job="ml/mnist").lookup([("ps", 0)])[("ps", 0)]
    assert obs.address == "10.0.0.9:31001"
    assert "A ps-0-mnist-ml.marathon.mesos." in fake_dns.queries


def test_nxdomain_is_reported_with_the_name(fake_dns):
    obs = MesosDnsBackend(fake_dns, job="ml/mnist").lookup([("worker", 3)])[("worker", 3)]
    assert obs.address is None
    assert obs.detail == "NXDOMAIN (_tf._worker-3-mnist-ml._tcp.marathon.mesos.)"


def test_two_live_records_for_one_task_are_not_guessed(fake_dns):
    name = "_tf._worker-0-mnist-ml._tcp.marathon.mesos."
    fake_dns.answers[name] = [SrvRecord("a.", 1, ("10.0.0.1",)), SrvRecord("b.", 2, ("10.0.0.2",))]
    obs = MesosDnsBackend(fake_dns, job="ml/mnist").lookup([("worker", 0)])[("worker", 0)]
    assert obs.address is None and "2 records" in obs.detail


def test_dnspython_client_against_a_real_server(mesos_dns):
    mesos_dns.set_task("worker", 2, 40123, ip="127.0.0.5")
    backend = MesosDnsBackend(DnspythonClient(mesos_dns.address, timeout=2), job="ml/mnist")
    result = backend.lookup([("worker", 2), ("ps", 0)])
    assert result[("worker", 2)].address == "127.0.0.5:40123"
    assert result[("ps", 0)].address is None and result[("ps", 0)].detail.startswith("NXDOMAIN")


# --- Mesos-DNS HTTP API --------------------------------------------------------------------------

def test_http_api_found_and_not_found(httpserver):
    found = "/v1/services/_tf._worker-0-mnist-ml._tcp.marathon.mesos"
    httpserver.expect_request(found).respond_with_json(
        [{"service": found.rsplit("/", 1)[1], "host": "worker-0-mnist-ml-abcde-s1.marathon.mesos.",
          "ip": "10.1.1.1", "port": "31777"}])
    httpserver.expect_request("/v1/services/_tf._ps-0-mnist-ml._tcp.marathon.mesos").respond_with_json(
        [{"service": "", "host": "", "ip": "", "port": ""}])
    backend = MesosDnsHttpBackend(requests.Session(), httpserver.url_for("/"), job="ml/mnist")
    result = backend.lookup([("worker", 0), ("ps", 0)])
    assert result[("worker", 0)].address == "10.1.1.1:31777"
    assert result[("ps", 0)].address is None and result[("ps", 0)].detail.startswith("not in Mesos-DNS")


# --- Marathon tasks API ----------------------------------------------------------------------------

def backend_for(marathon, **kw):
    return MarathonBackend(marathon, kw.pop("urls", "http://m1:8080"), job="ml/mnist", **kw)


def test_marathon_one_request_with_all_three_embeds(marathon):
    for i, (role, index) in enumerate(PEERS):
        marathon.add_running(role, index, f"agent{i}", 31000 + 10 * i)
    result = backend_for(marathon).lookup(PEERS)
    assert {p: o.address for p, o in result.items()} == {
        ("ps", 0): "agent0:31000", ("worker", 0): "agent1:31010", ("worker", 1): "agent2:31020"}
    assert len(marathon.requests) == 1
    req = marathon.requests[0]
    assert req["url"] == "http://m1:8080/v2/groups/ml/mnist" and req["timeout"]
    assert sorted(v for k, v in req["params"] if k == "embed") == [
        "group.apps", "group.apps.tasks", "group.groups"]


def test_marathon_uses_the_port_named_tf(marathon):
    marathon.add_running("worker", 0, "h", 31000)
    group = marathon.group()
    group["apps"][0]["portDefinitions"] = [{"port": 0, "name": "status"}, {"port": 0, "name": "tf"}]
    marathon.group = lambda: group
    assert backend_for(marathon).lookup([("worker", 0)])[("worker", 0)].address == "h:31001"


def test_marathon_never_uses_a_task_that_is_not_running(marathon):
    marathon.add_running("worker", 0, "old", 31000, state="TASK_KILLED")
    marathon.add_running("worker", 1, "new", 31002, state="TASK_STAGING")
    result = backend_for(marathon).lookup([("worker", 0), ("worker", 1), ("ps", 0)])
    assert result[("worker", 0)] .address is None and result[("worker", 0)].detail == "task not running: TASK_KILLED"
    assert result[("worker", 1)].detail == "task not running: TASK_STAGING"
    assert result[("ps", 0)].detail == "no app /ml/mnist/ps-0"


def test_marathon_app_without_tasks(marathon):
    marathon.apps[("ps", 0)] = []
    assert backend_for(marathon).lookup([("ps", 0)])[("ps", 0)].detail == "no task"


def test_marathon_prefers_the_newest_running_task(marathon):
    marathon.add_running("worker", 0, "dying", 31000, started="2024-01-01T10:00:00.000Z")
    marathon.add_running("worker", 0, "fresh", 32000, started="2024-01-01T11:00:00.000Z")
    marathon.add_running("worker", 0, "dead", 33000, state="TASK_FAILED")
    assert backend_for(marathon).lookup([("worker", 0)])[("worker", 0)].address == "fresh:32000"


def test_marathon_does_not_give_a_task_its_app_is_replacing(marathon):
    """A ``scale`` (or re-deploy) changes the apps' configuration: Marathon kills each old task and launches
    a new one (``upgradeStrategy`` 0/0); meanwhile the old task still runs (its kill grace, a save round
    first). A new worker that took its address would start beside peers about to move (the Keras
    MultiWorkerMirrored scale test, seen in a loaded CI). Marathon's task ``version`` is the app version it
    was launched with; ``versionInfo.lastConfigChangeAt`` the last change of configuration (a scale alone
    does not change it): ``M@1.11:src/main/scala/mesosphere/marathon/raml/AppConversion.scala`` (versionInfo),
    ``.../raml/TaskConversion.scala`` (a task's ``version``: its run spec version)."""
    marathon.add_running("worker", 0, "old", 31000)
    marathon.add_running("worker", 1, "old", 31010)
    group = marathon.group()
    for app in group["apps"]:
        app["versionInfo"] = {"lastConfigChangeAt": "2024-01-01T10:00:00.000Z",
                              "lastScalingAt": "2024-01-01T10:00:00.000Z"}
        for task in app["tasks"]:
            task["version"] = "2024-01-01T09:00:00.000Z"
    group["apps"][0]["deployments"] = [{"id": "d1"}]  # worker-0 is being restarted
    group["apps"][1]["deployments"] = []  # a forced update cancelled worker-1's deployment: it stays
    marathon.group = lambda: group
    result = backend_for(marathon).lookup([("worker", 0), ("worker", 1)])
    assert result[("worker", 0)].address is None and "being replaced" in result[("worker", 0)].detail
    assert result[("worker", 1)].address == "old:31010"
    group["apps"][0]["tasks"][0]["version"] = "2024-01-01T10:00:00.000Z"  # launched with the new configuration
    assert backend_for(marathon).lookup([("worker", 0)])[("worker", 0)].address == "old:31000"


def test_marathon_fails_over_on_connection_error_and_503(marathon):
    marathon.add_running("ps", 0, "h", 31000)
    marathon.script = {"http://m1:8080": [requests.ConnectionError("down")], "http://m2:8080": [503]}
    backend = backend_for(marathon, urls="http://m1:8080, http://m2:8080,http://m3:8080")
    assert backend.lookup([("ps", 0)])[("ps", 0)].address == "h:31000"
    assert [r["url"].split("/v2")[0] for r in marathon.requests] == ["http://m1:8080", "http://m2:8080",
                                                                      "http://m3:8080"]
    backend.lookup([("ps", 0)])  # sticks to the one that answered
    assert marathon.requests[-1]["url"].startswith("http://m3:8080")


def test_marathon_all_unreachable_says_so(marathon):
    marathon.script = {"http://m1:8080": [requests.ConnectionError("x")]}
    obs = backend_for(marathon).lookup([("ps", 0)])[("ps", 0)]
    assert obs.address is None and obs.detail == "Marathon unreachable (ConnectionError)"


def test_marathon_missing_group(marathon):
    marathon.job = "other"
    obs = backend_for(marathon).lookup([("ps", 0)])[("ps", 0)]
    assert obs.detail == "no Marathon group /ml/mnist"


def test_marathon_credentials():
    assert marathon_headers({"MARATHON_TOKEN": "t0k"}) == {"Authorization": "token=t0k"}
    basic = marathon_headers({"MARATHON_USER": "u", "MARATHON_PASSWORD": "p:w"})["Authorization"]
    assert base64.b64decode(basic.split()[1]) == b"u:p:w"
    assert marathon_headers({}) == {}


def test_token_file_and_where_credentials_go(tmp_path):
    """A local runner's task finds its token in the file MARATHON_TOKEN_FILE names (relative: in the
    sandbox); Marathon's credentials go to Mesos-DNS's HTTP API only when it is the runner's own (behind
    the runner's auth): a cluster's Mesos-DNS has no auth and is not handed Marathon's secrets."""
    (tmp_path / ".secrets").mkdir()
    (tmp_path / ".secrets" / "t").write_text("tok-file\n")
    env = {"MARATHON_TOKEN_FILE": ".secrets/t", "MESOS_SANDBOX": str(tmp_path)}
    assert marathon_headers(env) == {"Authorization": "token=tok-file"}
    assert marathon_headers({**env, "MARATHON_TOKEN": "t0k"}) == {"Authorization": "token=t0k"}
    assert marathon_headers({"MARATHON_TOKEN_FILE": str(tmp_path / "missing")}) == {}
    ctx = TaskContext(job="j", role="worker", index=0, cluster={"worker": 1}, discovery="mesos-dns-http",
                      mesos_dns_http="http://127.0.0.1:8123")
    own = make_backend(ctx, {**env, "MTF_RUNNER_MESOS_DNS_HTTP": "http://127.0.0.1:8123"}, session=object())
    assert own.headers == {"Authorization": "token=tok-file"}
    assert make_backend(ctx, env, session=object()).headers == {}


def test_marathon_backend_sends_the_token(marathon):
    ctx = TaskContext(job="ml/mnist", role="worker", index=0, cluster={"worker": 2}, discovery="marathon",
                      marathon_url="http://m1:8080")
    marathon.add_running("worker", 1, "h", 31000)
    backend = make_backend(ctx, {"MARATHON_TOKEN": "secret"}, session=marathon)
    backend.lookup([("worker", 1)])
    assert marathon.requests[0]["headers"] == {"Authorization": "token=secret"}


def test_1000_task_job_makes_one_marathon_request_per_poll(clock):
    marathon = FakeMarathon()
    peers = [("worker", i) for i in range(1000)]
    for role, i in peers[:990]:
        marathon.add_running(role, i, f"h{i}", 31000)
    rdv = DirectRendezvous(backend_for(marathon), clock=clock, sleep=clock.sleep, rng=random.Random(1))

    def progress(found, missing):
        if rdv.polls == 3:  # the last ten appear before the fourth poll
            for role, i in peers[990:]:
                marathon.add_running(role, i, f"h{i}", 31000)

    found = rdv.wait(peers, 600, on_progress=progress)
    assert len(found) == 1000 and found[("worker", 999)] == "h999:31000"
    assert rdv.polls == 4 and len(marathon.requests) == 4


def test_make_backend_rejects_unknown_discovery():
    ctx = TaskContext(job="j", role="worker", index=0, cluster={"worker": 1}, discovery="zookeeper")
    with pytest.raises(ValueError, match="MTF_DISCOVERY"):
        make_backend(ctx, {}, session=object())


def test_make_backend_needs_the_http_url():
    ctx = TaskContext(job="j", role="worker", index=0, cluster={"worker": 1}, discovery="mesos-dns-http")
    with pytest.raises(ValueError, match="MTF_MESOS_DNS_HTTP"):
        make_backend(ctx, {}, session=object())



def test_dns_lookups_run_with_bounded_concurrency():
    import threading
    import time

    class SlowDns:
        def __init__(self):
            self.in_flight = self.peak = self.calls = 0
            self.lock = threading.Lock()

        def srv(self, name):
            with self.lock:
                self.in_flight += 1
                self.calls += 1
                self.peak = max(self.peak, self.in_flight)
            time.sleep(0.01)
            with self.lock:
                self.in_flight -= 1
            return [SrvRecord("t.", 1, ("10.0.0.1",))]

        def a(self, name):
            raise AssertionError("not needed")

    dns = SlowDns()
    result = MesosDnsBackend(dns, job="ml/mnist", concurrency=4).lookup([("worker", i) for i in range(40)])
    assert len(result) == 40 and dns.calls == 40
    assert 1 < dns.peak <= 4
