"""``LocalCluster(marathon_version=...)`` / ``--marathon-version``: the local Marathon plays 1.4 – 1.11.

Each test cites the code of mesosphere/marathon it models: ``vX.Y.Z:`` a tag, ``releases/1.x:`` a branch,
paths under ``src/main/scala/mesosphere/marathon/``.
"""

from __future__ import annotations

import time

import pytest
import requests
from polling import wait_for

from marathon_tf.local import LocalCluster
from marathon_tf.marathon.versions import from_info, parse_version

#: One agent with room for the small app only: the big one waits in the queue, so the group's
#: deployment stays open.
SMALL_AGENT = "cpus:1;mem:1024;disk:1000;ports:[31000-31100]"


def _group(make_app) -> dict:
    return {"id": "/g", "apps": [make_app("/g/a"), make_app("/g/big", cpus=4)]}


def _queued(api) -> set[str]:
    return {item["app"]["id"] for item in api.get("/v2/queue").json()["queue"]}


@pytest.mark.parametrize("version, said", [(None, "1.11.0"), ("1.7.236", "1.7.236"), ("1.4.3", "1.4.3")])
def test_v2_info_names_the_version_played_and_the_client_reads_it(cluster_with, version, said):
    # The client's Capabilities come from /v2/info's "version" (marathon/versions.py from_info;
    # v1.4.3 api/v2/InfoResource.scala: "version" -> BuildInfo.version).
    cluster, api = cluster_with(**({} if version is None else {"marathon_version": version}))
    info = api.get("/v2/info").json()
    assert info["version"] == said
    assert from_info(info).version == parse_version(said)
    assert info["marathon_config"]["scale_apps_interval"] == 300000  # MarathonConf.scala's default, in ms


@pytest.mark.parametrize("version", ["1.3.9", "2.0.0", "one.eleven"])
def test_a_version_not_played_is_refused(tmp_path, version):
    with pytest.raises(ValueError, match="the local cluster plays 1.4.0 to 1.11.x"):
        LocalCluster(state_dir=tmp_path, marathon_version=version)


@pytest.mark.parametrize("version, relaunched_while_open", [("1.7.236", False), ("1.4.3", False), (None, True)])
def test_a_dead_task_of_an_app_an_open_deployment_holds(cluster_with, make_app, version, relaunched_while_open):
    # Marathon 1.4 - 1.7: a task that dies sends ScaleRunSpec (v1.4.3 core/task/update/impl/steps/
    # ScaleAppUpdateStepImpl.scala:44), which the scheduler drops while a deployment locks the app
    # (v1.4.3 MarathonSchedulerActor.scala:169 withLockFor; v1.7.236 MarathonSchedulerActor.scala:146-159
    # "Did not try to scale run spec; it is locked"); the periodic ScaleRunSpecs goes through the same lock
    # (v1.7.236 MarathonSchedulerActor.scala:209-212). The step's actor of /g/a stopped once /g/a had
    # started; /g/big, which no agent has room for, keeps the group's deployment open. Once it ends, the
    # next periodic check (--scale_apps_interval, here 1 s) queues /g/a again.
    # 1.8+: a failed instance is rescheduled whatever locks it (releases/1.8 core/instance/Instance.scala:46
    # isScheduled; core/launchqueue/impl/LaunchQueueActor.scala:128-133).
    options = {"agent_resources": (SMALL_AGENT,), "scale_apps_interval": 1.0}
    cluster, api = cluster_with(**options, **({} if version is None else {"marathon_version": version}))
    assert api.put("/v2/groups/g", json=_group(make_app)).status_code in (200, 201)
    first = wait_for(lambda: api.running("/g/a"), 15, what="/g/a to run")[0]
    time.sleep(0.5)  # /g/a's action is over (it settled): only /g/big keeps the deployment open
    assert len(api.deployments()) == 1 and "/g/big" in _queued(api)
    assert cluster.kill_task("/g/a") == [first["id"]]
    if relaunched_while_open:
        wait_for(lambda: [t for t in api.running("/g/a") if t["id"] != first["id"]], 10, what="/g/a relaunched")
        assert len(api.deployments()) == 1  # still open
        return
    wait_for(lambda: not api.tasks("/g/a"), 10, what="the dead task gone")
    time.sleep(3.5)  # three scale checks and more than /g/a's backoff: none relaunches it
    assert api.tasks("/g/a") == [] and "/g/a" not in _queued(api) and len(api.deployments()) == 1
    cluster.add_agent("cpus:8;mem:8192;disk:1000;ports:[32000-32100]")  # /g/big starts: the deployment ends
    api.wait_deployed(20)
    assert wait_for(lambda: api.running("/g/a"), 10, what="/g/a relaunched by the scale check")


@pytest.mark.parametrize("version, purged", [("1.7.236", True), ("1.5.15", True), (None, False)])
def test_a_forced_cancel_purges_the_queue_of_the_cancelled_plans_apps(cluster_with, make_app, version, purged):
    # deploymentFailed purges the launch queue of every app of the cancelled plan: v1.4.3
    # MarathonSchedulerActor.scala:281-283 (launchQueue.purge), v1.5.15:288-291 and v1.7.236:283-287
    # (asyncPurge / purge in a Future); releases/1.8's deploymentFailed purges nothing, nor does a stopped step
    # (M@1.11:src/main/scala/mesosphere/marathon/core/deployment/impl/TaskStartActor.scala). A cancel with
    # ?force=true is such a failure (v1.7.236 api/v2/DeploymentsResource.scala: cancelDeployment). What was
    # purged waits for the next periodic scale check (--scale_apps_interval, 300 s here: not within the test).
    options = {"agent_resources": (SMALL_AGENT,)}
    cluster, api = cluster_with(**options, **({} if version is None else {"marathon_version": version}))
    assert api.put("/v2/groups/g", json=_group(make_app)).status_code in (200, 201)
    wait_for(lambda: api.running("/g/a") and "/g/big" in _queued(api), 15, what="/g/a running, /g/big queued")
    dep = api.deployments()[0]
    assert api.delete(f"/v2/deployments/{dep['id']}", params={"force": "true"}).status_code == 202
    assert api.deployments() == []
    cluster.add_agent("cpus:8;mem:8192;disk:1000;ports:[32000-32100]")  # room for /g/big now
    if not purged:
        assert wait_for(lambda: api.running("/g/big"), 10, what="/g/big launched")
        return
    time.sleep(3)
    assert "/g/big" not in _queued(api) and api.tasks("/g/big") == []
    assert len(api.running("/g/a")) == 1  # what runs is not touched


def test_the_scale_check_queues_what_a_purge_dropped(cluster_with, make_app):
    # The same purge (v1.7.236 MarathonSchedulerActor.scala:283-287); the periodic ScaleRunSpecs
    # (v1.7.236 MarathonSchedulerActor.scala:144, 209-212; every --scale_apps_interval, MarathonConf.scala
    # :202-206, 300 000 ms as at v1.4.3:224-228) sends ScaleRunSpec for every app, which queues what /g/big
    # lacks: it starts.
    cluster, api = cluster_with(agent_resources=(SMALL_AGENT,), marathon_version="1.7.236", scale_apps_interval=2.0)
    assert api.put("/v2/groups/g", json=_group(make_app)).status_code in (200, 201)
    wait_for(lambda: api.running("/g/a") and "/g/big" in _queued(api), 15, what="/g/a running, /g/big queued")
    dep = api.deployments()[0]
    assert api.delete(f"/v2/deployments/{dep['id']}", params={"force": "true"}).status_code == 202
    assert "/g/big" not in _queued(api)
    cluster.add_agent("cpus:8;mem:8192;disk:1000;ports:[32000-32100]")
    assert wait_for(lambda: api.running("/g/big"), 10, what="/g/big launched after the scale check")


def _standby_after_a_crash(cluster: LocalCluster) -> str:
    leader, standby = cluster.marathon_urls
    cluster.kill_leader()
    return standby


@pytest.mark.parametrize("version, read, write", [
    ("1.4.3", (502, "Failed to successfully establish a connection to the leader."),
     (502, "Connection to leader refused.")),
    ("1.4.8", (502, "Failed to successfully establish a connection to the leader."),
     (503, "Connection to leader refused.")),
    ("1.6.392", (502, "Failed to successfully establish a connection to the leader."),
     (502, "Connection to leader refused.")),
    (None, (502, "Connection to leader refused."), (502, "Connection to leader refused.")),
])
def test_a_standby_whose_leader_refuses_answers_as_its_version(tmp_path, version, read, write):
    # Up to 1.6.392 the standby forwards with HttpURLConnection (JavaUrlConnectionRequestForwarder): a PUT
    # or POST connects while it writes its body and a ConnectException gives "Connection to leader
    # refused." (v1.4.3 api/LeaderProxyFilter.scala:286-287, 502; v1.4.8 :287, 503); a GET or DELETE first
    # connects while the status is read, inside a Try, which gives 502 ERROR_STATUS_BAD_CONNECTION
    # (v1.4.3 api/LeaderProxyFilter.scala:320, 325-332; v1.6.392 :339). 1.6.486+ (akka-http,
    # releases/1.11 api/forwarder/AsyncUrlConnectionRequestForwarder.scala:171-178): 502 "Connection to
    # leader refused." for every method.
    options = {} if version is None else {"marathon_version": version}
    with LocalCluster(state_dir=tmp_path / "s", dns_refresh=0, marathon_instances=2, zk_session_timeout=30,
                      **options) as c:
        standby = _standby_after_a_crash(c)
        for method in ("GET", "DELETE"):
            r = requests.request(method, standby + "/v2/apps/x", timeout=10)
            assert (r.status_code, f"<title>Error {read[0]} {read[1]}</title>" in r.text) == (read[0], True), r.text
        r = requests.put(standby + "/v2/apps/x", json={"cmd": "sleep 1"}, timeout=10)
        assert (r.status_code, f"<title>Error {write[0]} {write[1]}</title>" in r.text) == (write[0], True), r.text


BAD = "Failed to successfully establish a connection to the leader."
TIMED_OUT = "Connection to leader timed out."


@pytest.mark.parametrize("version, read, write", [
    ("1.4.3", (502, BAD), (500, "Server Error")),
    ("1.4.8", (502, BAD), (504, TIMED_OUT)),
    ("1.5.0", (502, BAD), (500, "Server Error")),
    ("1.5.1", (504, TIMED_OUT), (504, TIMED_OUT)),
    ("1.6.392", (504, TIMED_OUT), (504, TIMED_OUT)),
    (None, (502, "Connection to leader refused."), (502, "Connection to leader refused.")),
])
def test_a_standby_whose_leader_host_drops_packets_answers_as_its_version(tmp_path, version, read, write):
    # A leader whose host is gone from the network: the standby's connect times out
    # (--leader_proxy_connection_timeout, 5 s; --leader_proxy_read_timeout 10 s:
    # src/main/scala/mesosphere/marathon/LeaderProxyConf.scala) instead of being refused. Read in mesosphere/marathon,
    # src/main/scala/mesosphere/marathon/api/LeaderProxyFilter.scala: a PUT/POST connects in getOutputStream
    # (copyRequestBodyToConnection, v1.4.3:215-227), a GET/DELETE in getResponseCode inside the Try of
    # cloneResponseStatusAndHeader (v1.4.3:237), whose every failure is 502 ERROR_STATUS_BAD_CONNECTION up to
    # 1.5.0 (v1.4.3:325-332, v1.5.0:325-332). The write's SocketTimeoutException: only ConnectException is caught
    # at v1.4.3:286-287 and v1.5.0:287, so it escapes to the filter's NonFatal (v1.4.3:115-116, rethrown:
    # Jetty's 500 page); v1.4.8:288-289 answers 504 ERROR_STATUS_GATEWAY_TIMEOUT; v1.5.1:285-287 and
    # v1.6.392:282-284 too, and their copyConnectionResponse 504s the GET's (v1.5.1:341-343, v1.6.392:333-335).
    # The akka-http forwarder cannot tell a timeout from a refusal (releases/1.11
    # api/forwarder/AsyncUrlConnectionRequestForwarder.scala:171-178): 502 "Connection to leader refused.".
    options = {} if version is None else {"marathon_version": version}
    with LocalCluster(state_dir=tmp_path / "s", dns_refresh=0, marathon_instances=2, zk_session_timeout=30,
                      **options) as c:
        leader, standby = c.marathon_urls
        assert c.kill_instance(None, unreachable=True, connect_timeout=0.4) == leader
        for method, (status, text) in (("GET", read), ("DELETE", read), ("PUT", write), ("POST", write)):
            began = time.monotonic()
            r = requests.request(method, standby + "/v2/apps" + ("" if method == "POST" else "/x"),
                                 json={"id": "/x", "cmd": "sleep 1"} if method in ("PUT", "POST") else None,
                                 timeout=10)
            took = time.monotonic() - began
            assert (r.status_code, f"<title>Error {status} {text}</title>" in r.text) == (status, True), (
                method, r.status_code, r.text)
            assert took >= 0.4, (method, took)  # the connect timeout, not a refusal at once
        c.start_instance(leader)  # back within its ZooKeeper session: still the leader, reached again
        assert requests.get(standby + "/v2/apps", timeout=10).json() == {"apps": []}  # nothing was applied


@pytest.mark.parametrize("version, lands", [("1.4.3", False), ("1.4.8", True), ("1.6.392", True), (None, True)])
def test_a_write_through_a_standby_whose_leader_host_drops_packets_lands_once_after_the_election(tmp_path, version,
                                                                                                 lands):
    """The client's side of the answers above (marathon/client.py): the 504 of 1.4.8 is sent again at once,
    1.6.392's looked for through a leader first, 1.11's "refused" is not applied; the standby is elected once the
    dead leader's ZooKeeper session expires, and the group lands once. 1.4.3's 500 page says nothing of a leader:
    one line, "maybe applied", sent once — not "does not answer like Marathon", which the standby's own 502 to
    the client's look at ``/v2/info`` had made of it, nor "Marathon shows no sign of it" while no leader could
    be asked."""
    from marathon_tf.contract.errors import MarathonError
    from marathon_tf.marathon.client import Client, RetryPolicy

    options = {} if version is None else {"marathon_version": version}
    with LocalCluster(state_dir=tmp_path / "s", dns_refresh=0, marathon_instances=2, zk_session_timeout=2,
                      **options) as c:
        leader, standby = c.marathon_urls
        client = Client(standby, retry=RetryPolicy(attempts=3, budget=60, initial=0.05, max_wait=0.2, settle=0.0))
        client.capabilities()
        c.kill_instance(None, unreachable=True, connect_timeout=0.3)
        group = {"id": "/gone", "apps": [{"id": "/gone/a", "cmd": "sleep 600", "cpus": 0.01, "mem": 16,
                                          "instances": 0}]}
        if not lands:
            with pytest.raises(MarathonError, match=r"500 .*Marathon could not be asked whether it was \(no leader "
                                                    r"answered\); it was sent once and not again") as said:
                client.put_group(group)
            assert "\n" not in said.value.message and "like Marathon" not in said.value.message
            wait_for(lambda: c.leader_url == standby, 10, what="the standby elected")
            assert requests.get(standby + "/v2/apps", timeout=10).json() == {"apps": []}
            return
        body = client.put_group(group)
        assert body.get("deploymentId") and not body.get("adopted"), body
        assert c.leader_url == standby
        apps = requests.get(standby + "/v2/apps", timeout=10).json()["apps"]
        assert [a["id"] for a in apps] == ["/gone/a"]


@pytest.mark.parametrize("version, answer", [
    ("1.4.8", (502, "Failed to successfully establish a connection to the leader.")),
    ("1.5.0", (502, "Failed to successfully establish a connection to the leader.")),
    ("1.5.1", (504, "Connection to leader timed out.")),
    ("1.6.392", (504, "Connection to leader timed out.")),
    (None, (502, "Connection to leader refused.")),
])
def test_a_standby_whose_leader_hangs_answers_as_its_version(tmp_path, version, answer):
    # A leader that takes the connection and gives no status within --leader_proxy_read_timeout: up to 1.5.0
    # the status is read inside a Try whose every failure is 502 ERROR_STATUS_BAD_CONNECTION (v1.4.3 / v1.5.0
    # api/LeaderProxyFilter.scala:325-332); 1.5.1 - 1.6.392 tell the SocketTimeoutException apart: 504
    # ERROR_STATUS_GATEWAY_TIMEOUT (v1.5.1 :341, v1.6.392 :333-335). 1.6.486+ (akka-http): not played, the
    # refused answer stands. The frozen leader applies nothing; thawed, it answers again.
    options = {} if version is None else {"marathon_version": version}
    with LocalCluster(state_dir=tmp_path / "s", dns_refresh=0, marathon_instances=2, zk_session_timeout=30,
                      **options) as c:
        leader, standby = c.marathon_urls
        assert c.freeze_instance(None, read_timeout=0.5) == leader
        for method in ("GET", "PUT", "DELETE"):
            r = requests.request(method, standby + "/v2/apps/x", json={"cmd": "sleep 1"} if method == "PUT" else None,
                                 timeout=10)
            assert (r.status_code, f"<title>Error {answer[0]} {answer[1]}</title>" in r.text) == (*answer[:1], True), (
                method, r.status_code, r.text)
        c.freeze_instance(leader, frozen=False)
        assert requests.get(standby + "/v2/apps", timeout=10).json() == {"apps": []}  # the PUT was never applied


@pytest.mark.parametrize("version", ["1.4.8", "1.6.392"])
def test_a_write_through_a_standby_whose_leader_hangs_lands_once_after_it_thaws(tmp_path, version):
    """The client's side of the answers above (marathon/client.py): a PUT the standby could not get a status for
    is an election answer, not "maybe applied": on 1.4.8 the 502 "Failed to successfully establish…", on
    1.6.392 the 504 "Connection to leader timed out." (before, a "maybe applied" that ended as "sent once"). It
    is looked for through a leader, and sent again once one answers that it is not there: the group lands once."""
    import threading

    from marathon_tf.marathon.client import Client, RetryPolicy

    with LocalCluster(state_dir=tmp_path / "s", dns_refresh=0, marathon_instances=2, zk_session_timeout=30,
                      marathon_version=version) as c:
        leader, standby = c.marathon_urls
        client = Client(standby, retry=RetryPolicy(attempts=3, budget=60, initial=0.05, max_wait=0.2, settle=0.0))
        client.capabilities()
        c.freeze_instance(None, read_timeout=0.3)
        thaw = threading.Timer(1.5, lambda: c.freeze_instance(leader, frozen=False))
        thaw.start()
        group = {"id": "/frozen", "apps": [{"id": "/frozen/a", "cmd": "sleep 600", "cpus": 0.01, "mem": 16,
                                            "instances": 0}]}
        try:
            body = client.put_group(group)
        finally:
            thaw.join()
        assert body.get("deploymentId") and not body.get("adopted"), body
        apps = requests.get(leader + "/v2/apps", timeout=10).json()["apps"]
        assert [a["id"] for a in apps] == ["/frozen/a"]


@pytest.mark.parametrize("version, status", [("1.4.3", 503), ("1.7.149", 502)])
def test_no_leader_is_503_before_1_7_149(tmp_path, version, status):
    # "Could not determine the current leader": sendError(503) up to 1.7.148, BadGateway (502) from 1.7.149
    # (v1.7.50 / v1.7.149 api/LeaderProxyFilter.scala).
    with LocalCluster(state_dir=tmp_path / "s", dns_refresh=0, marathon_instances=2, zk_session_timeout=30,
                      marathon_version=version) as c:
        leader, standby = c.marathon_urls
        assert requests.delete(leader + "/v2/leader", timeout=10).status_code == 200
        wait_for(lambda: c.leader_url is None, 5, what="the abdication")
        r = requests.get(standby + "/v2/info", timeout=10)
        assert r.status_code == status and "Could not determine the current leader" in r.text


@pytest.mark.parametrize("version, plain_placed", [("1.4.3", False), ("1.6.0", False), ("1.6.322", True),
                                                  (None, True)])
def test_a_scalar_attribute_reads_with_thousands_separators_up_to_1_6_0(cluster_with, make_app, version,
                                                                        plain_placed):
    # Constraints.getValueString: NumberFormat.getInstance.format(scalar) up to 1.6.0 (v1.4.3 / v1.6.0
    # src/main/scala/mesosphere/mesos/Constraints.scala:36-37: "1,024"), DecimalFormat("0.###") from 1.6.322
    # (releases/1.8 the same file :39-54: "1024", from the IS operator's commit e891d758f). Mesos makes the
    # numeric attribute rack:1024 a scalar. What marathon-tf renders for those versions (user/render.for_marathon)
    # is placed on every one of them.
    from marathon_tf.marathon import versions
    from marathon_tf.user.versioned import for_marathon

    options = {} if version is None else {"marathon_version": version}
    _, api = cluster_with(agent_attributes=["rack:1024"], **options)
    plain = ["rack", "LIKE", "1024"]
    rendered = for_marathon(plain, versions.capabilities(version))
    assert api.put("/v2/apps/plain", json=make_app("/plain", constraints=[plain])).status_code == 201
    assert api.put("/v2/apps/rendered", json=make_app("/rendered", constraints=[rendered])).status_code == 201
    assert wait_for(lambda: api.running("/rendered"), 15, what=f"the task constrained {rendered}")
    if plain_placed:
        assert wait_for(lambda: api.running("/plain"), 15, what="the task constrained rack LIKE 1024")
    else:
        time.sleep(1.0)  # (offers come every 0.5 s or faster here: it had its chances)
        assert not api.running("/plain") and "/plain" in _queued(api)


def test_gpu_scheduling_follows_the_version(cluster_with, make_app, tmp_path):
    # --gpu_scheduling_behavior exists from 1.5.7 (v1.5.7 GpuSchedulingBehavior.scala; none in v1.5.6) and
    # defaults to "undefined" (a task without GPUs may take a GPU agent) until releases/1.8 MarathonConf.scala
    # makes "restricted" the default: only then is a task without GPUs declined as DeclinedScarceResources
    # (releases/1.11 src/main/scala/mesosphere/mesos/ResourceMatcher.scala).
    with pytest.raises(ValueError, match="no --gpu_scheduling_behavior"):
        LocalCluster(state_dir=tmp_path / "x", marathon_version="1.5.6", gpu_scheduling_behavior="restricted")
    gpu_agent = ("cpus:2;mem:2048;disk:1000;gpus:1;ports:[31000-31100]",)
    _, old = cluster_with(agent_resources=gpu_agent, marathon_version="1.7.236")
    assert old.put("/v2/apps/cpu", json=make_app("/cpu")).status_code == 201
    assert wait_for(lambda: old.running("/cpu"), 15, what="the CPU task on the GPU agent (1.7: undefined)")
    _, new = cluster_with(agent_resources=gpu_agent)
    assert new.put("/v2/apps/cpu", json=make_app("/cpu")).status_code == 201

    def declined() -> bool:
        items = new.get("/v2/queue", params={"embed": "lastUnusedOffers"}).json()["queue"]
        reasons = [r for i in items for o in i.get("lastUnusedOffers", []) for r in o.get("reason", [])]
        return "DeclinedScarceResources" in reasons
    assert wait_for(declined, 15, what="DeclinedScarceResources on 1.11")
    assert new.running("/cpu") == []


@pytest.mark.parametrize("version, label, runs", [("1.7.236", "restricted", False), ("1.7.236", None, True),
                                                  ("1.5.6", "restricted", True)])
def test_the_gpu_scheduling_label_keeps_a_task_without_gpus_off_a_gpu_agent_from_1_5_7(cluster_with, make_app,
                                                                                      version, label, runs):
    # An app's GPU_SCHEDULING_BEHAVIOR label overrides --gpu_scheduling_behavior (v1.7.236
    # src/main/scala/mesosphere/mesos/ResourceMatcher.scala:252-253; "restricted" declines an offer with GPUs to
    # a task without them, :264-270, DeclinedScarceResources); the rule comes with 1.5.7 (v1.5.7
    # ResourceMatcher.scala:211, none at v1.5.6), so 1.5.6 reads no label: the task takes the GPU agent as 1.7's
    # default lets it (:257-262).
    gpu_agent = ("cpus:2;mem:2048;disk:1000;gpus:1;ports:[31000-31100]",)
    _, api = cluster_with(agent_resources=gpu_agent, marathon_version=version)
    app = make_app("/cpu", **({"labels": {"GPU_SCHEDULING_BEHAVIOR": label}} if label else {}))
    assert api.put("/v2/apps/cpu", json=app).status_code == 201
    if runs:
        assert wait_for(lambda: api.running("/cpu"), 15, what="the task without GPUs on the GPU agent")
        return

    def declined() -> bool:
        items = api.get("/v2/queue", params={"embed": "lastUnusedOffers"}).json()["queue"]
        return "DeclinedScarceResources" in [r for i in items for o in i.get("lastUnusedOffers", [])
                                             for r in o.get("reason", [])]
    assert wait_for(declined, 15, what="DeclinedScarceResources for the labelled app")
    assert api.running("/cpu") == []


@pytest.mark.parametrize("version, replaced", [("1.7.236", False), (None, True)])
def test_a_task_lost_with_its_agent_while_a_deployment_holds_its_app(cluster_with, make_app, version, replaced):
    # UnreachableInactive is as scaling-worthy as a terminal state (v1.4.3 core/task/update/impl/steps/
    # ScaleAppUpdateStepImpl.scala:25,44): its ScaleRunSpec is dropped for the lock just the same
    # (v1.7.236 MarathonSchedulerActor.scala:146-159); 1.8+ reschedules it (releases/1.8
    # core/instance/Instance.scala:46).
    options = {"agents": 2, "agent_resources": (SMALL_AGENT,)}
    cluster, api = cluster_with(**options, **({} if version is None else {"marathon_version": version}))
    group = _group(make_app)
    group["apps"][0]["unreachableStrategy"] = {"inactiveAfterSeconds": 0, "expungeAfterSeconds": 0}
    assert api.put("/v2/groups/g", json=group).status_code in (200, 201)
    first = wait_for(lambda: api.running("/g/a"), 15, what="/g/a to run")[0]
    time.sleep(0.5)
    assert len(api.deployments()) == 1
    assert cluster.agent_unreachable(first["host"]) == [first["id"]]
    if replaced:
        assert wait_for(lambda: [t for t in api.running("/g/a") if t["host"] != first["host"]], 10,
                        what="/g/a replaced on the other agent")
        return
    time.sleep(3)
    assert [t for t in api.tasks("/g/a") if t["id"] != first["id"]] == [] and "/g/a" not in _queued(api)


@pytest.mark.parametrize("version, spread", [(None, True), ("1.10.33", True), ("1.10.34", False),
                                             ("1.11.24", False)])
def test_group_by_lets_a_new_value_through_before_1_10_34(cluster_with, make_app, version, spread):
    """``GROUP_BY 1`` with ``UNIQUE`` hostnames: mesosphere/marathon v1.4.3 (and v1.10.26, releases/1.11
    before 1.11.18) ``src/main/scala/mesosphere/mesos/Constraints.scala:66-80`` ``checkGroupBy`` lets a
    hostname no instance has yet through, so the second instance runs on the other agent; from 1.10.34
    (releases/1.10 34bb771f2) and 1.11.18 (releases/1.11 ddd6b19b1, ``Constraints.scala:123-149``) one
    value is taken and it must hold both instances, which UNIQUE forbids: the second waits
    (``UnfulfilledConstraint``)."""
    cluster, api = cluster_with(agents=2, **({} if version is None else {"marathon_version": version}))
    app = make_app("/gb", instances=2, constraints=[["hostname", "GROUP_BY", "1"], ["hostname", "UNIQUE"]])
    assert api.put("/v2/apps/gb", json=app).status_code == 201
    if spread:
        assert wait_for(lambda: len(api.running("/gb")) == 2, 15, what="both instances, one per agent")
        return
    assert wait_for(lambda: len(api.running("/gb")) == 1, 15, what="the first instance")

    def reasons() -> list[str]:
        items = api.get("/v2/queue", params={"embed": "lastUnusedOffers"}).json()["queue"]
        return [r for i in items for o in i.get("lastUnusedOffers", []) for r in o.get("reason", [])]
    assert wait_for(lambda: "UnfulfilledConstraint" in reasons(), 15, what="the other agent declined")
    assert len(api.running("/gb")) == 1


@pytest.mark.parametrize("version, default", [("1.4.3", 300), ("1.4.8", 300), ("1.4.9", 0), ("1.5.0", 300),
                                              ("1.5.1", 0), ("1.7.236", 0), (None, 0)])
def test_an_app_without_unreachable_strategy_gets_its_versions_default(cluster_with, make_app, version, default):
    """``unreachableStrategy`` of an app that sets none: ``UnreachableEnabled.DefaultInactiveAfter`` /
    ``DefaultExpungeAfter`` of mesosphere/marathon ``state/UnreachableStrategy.scala`` are 5 and 10 minutes at
    v1.4.3:33-34, v1.4.8:33-34 and v1.5.0:33-34, 0 s at v1.4.9:33-34, v1.5.1:33-34, v1.7.236:31-32 and
    releases/1.11:32-33 (0480f1766 "Changed default of UnreachableEnabled to (0,0) (#5523)"); the RAML
    defaults agree (``docs/docs/rest-api/public/api/v2/types/unreachableStrategy.raml``: 300/600 at v1.4.3:13,25
    and v1.5.0:14,26, 0/0 at v1.4.9:13,25 and v1.5.1:14,26). A strategy the app sets is kept."""
    _, api = cluster_with(**({} if version is None else {"marathon_version": version}))
    assert api.put("/v2/apps/u", json=make_app("/u", instances=0)).status_code == 201
    assert api.get("/v2/apps/u").json()["app"]["unreachableStrategy"] == {"inactiveAfterSeconds": default,
                                                                          "expungeAfterSeconds": 2 * default}
    group = {"id": "/g", "apps": [make_app("/g/v", instances=0),
                                  make_app("/g/w", instances=0, unreachableStrategy="disabled")]}
    assert api.put("/v2/groups/g", json=group).status_code in (200, 201)
    assert api.get("/v2/apps/g/v").json()["app"]["unreachableStrategy"]["inactiveAfterSeconds"] == default
    assert api.get("/v2/apps/g/w").json()["app"]["unreachableStrategy"] == "disabled"


@pytest.mark.parametrize("version, replaced", [("1.4.3", False), (None, True)])
def test_a_lost_task_of_an_app_without_a_strategy_is_replaced_by_the_versions_default(cluster_with, make_app,
                                                                                       version, replaced):
    """An app without ``unreachableStrategy`` whose agent is lost: on mesosphere/marathon v1.4.3 its
    instance stays ``Unreachable`` (counted, not replaced) for 5 minutes (``state/UnreachableStrategy.scala:33``;
    ``core/task/Task.scala:88-98`` ``isUnreachableExpired``, the same at releases/1.11:159-169); from 1.4.9 /
    1.5.1 (``UnreachableStrategy.scala:33-34`` 0 s) it is replaced at once."""
    cluster, api = cluster_with(agents=2, **({} if version is None else {"marathon_version": version}))
    assert api.put("/v2/apps/l", json=make_app("/l")).status_code == 201
    first = wait_for(lambda: api.running("/l"), 15, what="the task")[0]
    api.wait_deployed()
    assert cluster.kill_agent(first["host"]) == [first["id"]]
    if replaced:
        assert wait_for(lambda: [t for t in api.running("/l") if t["host"] != first["host"]], 10,
                        what="the replacement on the other agent")
        return
    time.sleep(3)
    assert [t["id"] for t in api.tasks("/l")] == [first["id"]] and "/l" not in _queued(api)


def test_played_group_by_and_unreachable_default_by_release():
    """Where each behaviour starts (mesosphere/marathon ``version`` script: 1.x.N = N first-parent commits
    after ``BRANCH_POINT``): ddd6b19b1 is 1.11.18 on releases/1.11 and 34bb771f2 1.10.34 on releases/1.10
    (``src/main/scala/mesosphere/mesos/Constraints.scala``, ``checkGroupBy``); ``state/UnreachableStrategy.scala``
    0/0 from v1.4.9:33-34 and v1.5.1:33-34, 300/600 at v1.4.8:33-34 and v1.5.0:33-34."""
    from marathon_tf.local.versions import played

    assert [played(v).group_by_even for v in ("1.4.3", "1.9.109", "1.10.33", "1.10.34", "1.11.0", "1.11.17",
                                              "1.11.18", "1.11.24")] == [False] * 3 + [True] + [False] * 2 + [True] * 2
    assert [played(v).unreachable_default["inactiveAfterSeconds"]
            for v in ("1.4.0", "1.4.8", "1.4.9", "1.4.13", "1.5.0", "1.5.1", "1.11.0")] == [300, 300, 0, 0, 300, 0, 0]


#: mesosphere/marathon v1.4.5 ``src/main/scala/mesosphere/marathon/state/UnreachableStrategy.scala:37-40``:
#: ``inactiveAfter should be >= 1.second`` and ``< expungeAfter`` (the same at v1.4.0); v1.4.6:37-40 relaxes them
#: to ``>= 0.second`` and ``<=``. The texts are accord's, as v1.4.5
#: ``src/test/scala/mesosphere/marathon/state/UnreachableStrategyTest.scala:28-36`` asserts them ("got 2 seconds,
#: expected less than 1 second"), under the path ``api/v2/Validation.scala:90-132`` builds from the app's field
#: (``state/AppDefinition.scala:707``, ``appDef.unreachableStrategy is valid``) and the model's field name.
ZERO = {"inactiveAfterSeconds": 0, "expungeAfterSeconds": 0}


@pytest.mark.parametrize("version", ["1.4.0", "1.4.5"])
def test_unreachable_strategy_0_0_is_refused_before_1_4_6(cluster_with, make_app, version):
    _, api = cluster_with(marathon_version=version)
    said = api.put("/v2/apps/z", json=make_app("/z", instances=0, unreachableStrategy=ZERO))
    assert said.status_code == 422, said.text
    assert said.json()["details"] == [{"path": "/unreachableStrategy/inactiveAfter",
                                       "errors": ["got 0 seconds, expected 1 second or more",
                                                  "got 0 seconds, expected less than 0 seconds"]}]
    same = api.put("/v2/apps/z", json=make_app("/z", instances=0, unreachableStrategy={
        "inactiveAfterSeconds": 2, "expungeAfterSeconds": 2}))
    assert same.json()["details"] == [{"path": "/unreachableStrategy/inactiveAfter",
                                       "errors": ["got 2 seconds, expected less than 2 seconds"]}]
    group = {"id": "/g", "apps": [make_app("/g/a", instances=0, unreachableStrategy=ZERO)]}
    refused = api.put("/v2/groups/g", json=group)
    assert refused.status_code == 422 and refused.json()["details"][0]["path"] == \
        "/apps(0)/unreachableStrategy/inactiveAfter"
    assert api.get("/v2/apps/z").status_code == 404 and api.get("/v2/groups/g").status_code == 404
    one_two = {"inactiveAfterSeconds": 1, "expungeAfterSeconds": 2}
    assert api.put("/v2/apps/z", json=make_app("/z", instances=0, unreachableStrategy=one_two)).status_code == 201
    assert api.put("/v2/apps/d", json=make_app("/d", instances=0, unreachableStrategy="disabled")).status_code == 201


@pytest.mark.parametrize("version", ["1.4.6", None])
def test_unreachable_strategy_0_0_is_taken_from_1_4_6(cluster_with, make_app, version):
    _, api = cluster_with(**({} if version is None else {"marathon_version": version}))
    assert api.put("/v2/apps/z", json=make_app("/z", instances=0, unreachableStrategy=ZERO)).status_code == 201
    said = api.put("/v2/apps/y", json=make_app("/y", instances=0, unreachableStrategy={
        "inactiveAfterSeconds": 3, "expungeAfterSeconds": 2}))
    assert said.status_code == 422 and said.json()["details"][0]["path"] == \
        "/unreachableStrategy/inactiveAfterSeconds"


@pytest.mark.parametrize("rendered_for, taken", [("1.4.5", True), ("1.4.6", False)])
def test_a_job_rendered_for_1_4_5_is_what_1_4_5_takes(cluster_with, rendered_for, taken):
    """The product writes 1/2 for 1.4.0 – 1.4.5 (``Capabilities.unreachable_strategy``): the local 1.4.5 takes
    it, and refuses the 0/0 a render for 1.4.6 writes."""
    from marathon_tf.user.render import render_group
    from marathon_tf.user.spec import load_dict

    _, api = cluster_with(marathon_version="1.4.5")
    job = {"name": "u", "style": "tf1", "command": ["python3", "train.py"],
           "roles": {"ps": {"count": 1}, "worker": {"count": 2}}}
    group = render_group(load_dict(job), marathon_version=rendered_for)
    for app in group["apps"]:
        app["instances"] = 0
    said = api.put(f"/v2/groups{group['id']}", json=group)
    assert (said.status_code in (200, 201)) is taken, said.text
