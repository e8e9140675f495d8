"""HA Marathon in the local cluster (``marathon_instances=3``): one leader, standbys that proxy to it,
the events redirect, /v2/leader, no-leader 502s, and a killed leader replaced while the tasks run on.

What each test models is Marathon 1.8's own code (the REST API the runner emulates), mesosphere/marathon
branch releases/1.8 (79889a6e3cc2dd3dcc7c70c74fe7499275adae46), cited as ``M@1.8:<path>``; releases/1.11,
whose defaults the local cluster has, has the same code for all of it.
"""

from __future__ import annotations

import base64
import errno
import socket
import time

import pytest
import requests
from polling import wait_for

from marathon_tf.local import LocalCluster
from marathon_tf.local.leadership import HOLD_INTERVAL, HOLD_LOOKS
from marathon_tf.local.security import Credentials

#: A short ZooKeeper session (named: the default is stock Marathon's 10 s, --zk_session_timeout,
#: M@1.11:src/main/scala/mesosphere/marathon/ZookeeperConf.scala) so that the abdication and admin-API tests,
#: which are about what happens around an election and not its length, do not wait 10 s each;
#: test_a_killed_leader_is_replaced_and_the_tasks_run_on runs on the default.
GAP = 1.0


@pytest.fixture
def ha(tmp_path):
    with LocalCluster(state_dir=tmp_path / "state", dns_refresh=0, heartbeat=0.5, kill_grace=1.0,
                      shutdown_grace=1.0, marathon_instances=3, zk_session_timeout=GAP) as c:
        yield c


@pytest.fixture
def stock_ha(tmp_path):
    with LocalCluster(state_dir=tmp_path / "state", dns_refresh=0, heartbeat=0.5, kill_grace=1.0,
                      shutdown_grace=1.0, marathon_instances=3) as c:
        yield c


def host_port(url: str) -> str:
    return url.split("://", 1)[1]


def sleeper(app_id: str) -> dict:
    return {"id": app_id, "cmd": "sleep 600", "cpus": 0.1, "mem": 32, "instances": 1}


def test_three_instances_one_leader_and_standbys_proxy_to_it(ha):
    # M@1.8:src/main/scala/mesosphere/marathon/api/LeaderProxyFilter.scala (mounted on /*:
    # M@1.8:src/main/scala/mesosphere/marathon/api/HttpBindings.scala): the leader adds
    # X-Marathon-Leader (buildUrl(myHostPort)) and serves; a standby forwards the request
    # (api/forwarder/AsyncUrlConnectionRequestForwarder.scala: the request's headers except Connection/Host,
    # plus X-Marathon-Via and X-Forwarded-For; the leader's status, headers and body back,
    # X-Marathon-Via "1.1 <standby host:port>" added).
    leader, a, b = ha.marathon_urls
    assert len({leader, a, b}) == 3 and ha.leader_url == leader
    r = requests.get(leader + "/v2/info", timeout=10)
    assert r.headers["X-Marathon-Leader"] == leader and "X-Marathon-Via" not in r.headers
    for standby in (a, b):
        r = requests.get(standby + "/v2/info", timeout=10)
        assert r.status_code == 200 and r.json()["leader"] == host_port(leader)
        assert r.headers["X-Marathon-Leader"] == leader
        assert r.headers["X-Marathon-Via"] == f"1.1 {host_port(standby)}"
    # a change through a standby is a change of the one state
    r = requests.put(a + "/v2/apps/ha/one", json=sleeper("/ha/one"), timeout=10)
    assert r.status_code == 201 and r.headers.get("Marathon-Deployment-Id")
    assert requests.get(b + "/v2/apps/ha/one", timeout=10).json()["app"]["id"] == "/ha/one"
    assert requests.get(b + "/ping", timeout=10).text == "pong"
    assert requests.get(leader + "/_local/instances", timeout=10).json() == {
        "leader": leader, "instances": [{"url": leader, "state": "leader"}, {"url": a, "state": "standby"},
                                        {"url": b, "state": "standby"}]}


def test_a_standby_redirects_the_event_stream_to_the_leader(ha):
    # M@1.8 LeaderProxyFilter.shouldBeRedirectedToLeader: /v2/events on a standby is
    # response.sendRedirect(<leader>/v2/events?<query>) (Jetty: 302), not forwarded.
    leader, standby, _ = ha.marathon_urls
    r = requests.get(standby + "/v2/events?event_type=deployment_info", headers={"Accept": "text/event-stream"},
                     allow_redirects=False, timeout=10)
    assert r.status_code == 302
    assert r.headers["Location"] == leader + "/v2/events?event_type=deployment_info"


def test_a_proxy_loop_is_refused(ha):
    # AsyncUrlConnectionRequestForwarder.forward: a request already carrying our own X-Marathon-Via
    # is answered sendError(502, "Detected proxying loop.").
    _, standby, _ = ha.marathon_urls
    r = requests.get(standby + "/v2/apps", headers={"X-Marathon-Via": f"1.1 {host_port(standby)}"}, timeout=10)
    assert r.status_code == 502 and "Detected proxying loop." in r.text


def test_v2_leader_names_the_leader_and_delete_abdicates(ha):
    # M@1.8:src/main/scala/mesosphere/marathon/api/v2/LeaderResource.scala: GET {"leader": "host:port"};
    # DELETE on the leader: {"message": "Leadership abdicated"}, abdicateLeadership() 500 ms later
    # (abdicationDelay). A real 1.11 leader that abdicates closes its leader latch and exits
    # (M@1.11:src/main/scala/mesosphere/marathon/core/election/ElectionService.scala abdicateLeadership);
    # here the next live instance is elected after the election gap.
    # During the election LeaderProxyFilter holds a request (waitForConsistentLeadership: 11 looks, 250 ms
    # apart), then sendError(BadGateway, "Could not determine the current leader") (1.7+; 1.4-1.6: 503).
    leader, a, b = ha.marathon_urls
    for url in ha.marathon_urls:
        assert requests.get(url + "/v2/leader", timeout=10).json() == {"leader": host_port(leader)}
    r = requests.delete(a + "/v2/leader", timeout=10)  # through a standby: forwarded to the leader
    assert r.status_code == 200 and r.json() == {"message": "Leadership abdicated"}
    assert wait_for(lambda: ha.leader_url is None, 5, what="the abdication")
    started = time.monotonic()
    r = requests.get(b + "/v2/apps", timeout=10)
    if ha.leader_url is None:  # still no leader after the hold (GAP < the hold: it may be elected meanwhile)
        assert r.status_code == 502
    else:
        assert r.status_code == 200 and time.monotonic() - started <= HOLD_LOOKS * HOLD_INTERVAL + 1
    assert wait_for(lambda: ha.leader_url is not None, GAP + 5, what="a new leader")
    assert ha.leader_url == a  # the next instance after the one that abdicated
    assert requests.get(leader + "/v2/leader", timeout=10).json() == {"leader": host_port(a)}


def test_no_leader_answers_502_with_jettys_page(tmp_path):
    # LeaderProxyFilter (1.7-1.11): with no leader, after waitForConsistentLeadership,
    # response.sendError(BadGateway.intValue, "Could not determine the current leader"): Jetty's HTML error page.
    # named: a ZooKeeper session long enough that no leader is elected while the request is held
    with LocalCluster(state_dir=tmp_path / "state", dns_refresh=0, marathon_instances=2, zk_session_timeout=30) as c:
        leader, standby = c.marathon_urls
        assert requests.delete(leader + "/v2/leader", timeout=10).status_code == 200
        assert wait_for(lambda: c.leader_url is None, 5, what="the abdication")
        started = time.monotonic()
        r = requests.get(standby + "/v2/groups", timeout=10)
        held = time.monotonic() - started
        assert r.status_code == 502 and r.headers["Content-Type"].startswith("text/html")
        assert "<title>Error 502 Could not determine the current leader</title>" in r.text
        assert "X-Marathon-Leader" not in r.headers
        assert HOLD_LOOKS * HOLD_INTERVAL - 0.3 <= held <= HOLD_LOOKS * HOLD_INTERVAL + 2
        # the abdicated instance itself has no leader either
        assert requests.get(leader + "/ping", timeout=10).status_code == 502


def test_a_killed_leader_is_replaced_and_the_tasks_run_on(stock_ha):
    # A crash: the leader's port stops answering. Until its ZooKeeper session expires (--zk_session_timeout,
    # 10 s by default: M@1.11:src/main/scala/mesosphere/marathon/ZookeeperConf.scala) the standbys still name
    # it and their forwards fail: AsyncUrlConnectionRequestForwarder answers a refused connection with
    # sendError(502, "Connection to leader refused.") (M@1.11:src/main/scala/mesosphere/marathon/api/forwarder/
    # RequestForwarder.scala ERROR_STATUS_CONNECTION_REFUSED): Jetty's error page, no X-Marathon-Leader;
    # then another instance is elected.
    ha = stock_ha
    leader, a, b = ha.marathon_urls
    assert requests.put(a + "/v2/apps/ha/one", json=sleeper("/ha/one"), timeout=10).status_code == 201
    assert wait_for(lambda: [t["state"] for t in requests.get(a + "/v2/apps/ha/one/tasks", timeout=10)
                             .json()["tasks"]] == ["TASK_RUNNING"], 20, what="the task to run")
    task = requests.get(a + "/v2/apps/ha/one/tasks", timeout=10).json()["tasks"][0]
    killed_at = time.monotonic()
    assert ha.kill_leader() == leader
    with pytest.raises(requests.ConnectionError):
        requests.get(leader + "/ping", timeout=5)
    refused = []
    while ha.leader_url is None:
        r = requests.get(b + "/v2/apps", timeout=10)
        if r.status_code == 200:
            break
        refused.append(time.monotonic() - killed_at)
        assert r.status_code == 502 and "<title>Error 502 Connection to leader refused.</title>" in r.text
        assert r.headers["Content-Type"].startswith("text/html") and "X-Marathon-Leader" not in r.headers
        assert requests.get(b + "/v2/leader", timeout=10).status_code == 502  # forwarded too
        time.sleep(0.5)
    elected = time.monotonic() - killed_at
    assert refused and 9.0 <= elected <= 13.0, (refused, elected)  # the session, 10 s
    assert wait_for(lambda: requests.get(b + "/v2/leader", timeout=10).status_code == 200, 5, what="a new leader")
    assert requests.get(b + "/v2/leader", timeout=10).json() == {"leader": host_port(a)}
    assert ha.leader_url == a
    tasks = requests.get(b + "/v2/apps/ha/one/tasks", timeout=10).json()["tasks"]
    assert [(t["id"], t["state"]) for t in tasks] == [(task["id"], "TASK_RUNNING")]  # the same task, running on
    ha.start_instance(leader)  # back, as a standby
    assert requests.get(leader + "/v2/leader", timeout=10).json() == {"leader": host_port(a)}
    assert requests.get(leader + "/v2/info", timeout=10).headers["X-Marathon-Via"] == f"1.1 {host_port(leader)}"


def test_a_dead_instances_port_stays_its_own_refusing_connections_until_it_starts_again(ha):
    # A crashed Marathon's host keeps its port: nothing else of this machine may take it meanwhile (an outgoing
    # connection's ephemeral port did once, and the instance could not start again on it), and a connect to it
    # is refused as to any port nobody listens on.
    leader, a, _ = ha.marathon_urls
    port = int(leader.rsplit(":", 1)[1])
    assert ha.kill_instance(a) == a
    assert ha.kill_leader() == leader
    for url in (leader, a):
        with pytest.raises(requests.ConnectionError):
            requests.get(url + "/ping", timeout=5)
    with socket.socket() as other:
        with pytest.raises(OSError) as taken:
            other.bind(("127.0.0.1", port))
        assert taken.value.errno == errno.EADDRINUSE
    for url in (leader, a):
        ha.start_instance(url)
        assert requests.get(url + "/_local/instances", timeout=10).status_code == 200  # the same port, listening
    ha.kill_instance(a)
    ha.stop()  # whatever is dead lets go of its port with the cluster
    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as a server would: TIME_WAIT is free
        other.bind(("127.0.0.1", int(a.rsplit(":", 1)[1])))


def test_the_admin_api_kills_the_leader_even_through_itself(ha):
    leader, a, b = ha.marathon_urls
    r = requests.post(leader + "/_local/instances/kill", json={}, timeout=10)
    assert r.status_code == 200 and r.json() == {"killed": leader}
    assert wait_for(lambda: requests.get(a + "/_local/instances", timeout=10).json()["instances"][0]["state"]
                    == "dead", 5, what="the leader's death")
    assert wait_for(lambda: ha.leader_url == a, GAP + 5, what="the next leader")
    r = requests.post(b + "/_local/instances/kill", json={"url": a}, timeout=10)
    assert r.json() == {"killed": a}
    assert requests.post(b + "/_local/instances/kill", json={"url": a}, timeout=10).status_code == 404
    assert requests.post(b + "/_local/instances/start", json={"url": leader}, timeout=10).json() == {"started": leader}
    assert wait_for(lambda: ha.leader_url in (leader, b), GAP + 5, what="a leader among the live ones")


def test_basic_auth_is_checked_before_the_proxy_and_answered_as_jetty_does(tmp_path):
    # Marathon's --http_credentials: a Jetty ConstraintSecurityHandler with BasicAuthenticator on /*
    # (M@1.8:src/main/scala/mesosphere/marathon/api/HttpModule.scala createSecurityHandler), realm
    # --http_realm, default "Mesosphere" (M@1.8:src/main/scala/mesosphere/marathon/HttpConf.scala).
    # jetty/jetty.project jetty-security/.../authentication/BasicAuthenticator.java (9.4):
    # setHeader(WWW_AUTHENTICATE, "basic realm=\"" + _loginService.getName() + "\""); sendError(401).
    # The security handler runs before the servlet filters, so a standby refuses too, and forwards
    # the Authorization header (AsyncUrlConnectionRequestForwarder copies every header but a few).
    with LocalCluster(state_dir=tmp_path / "state", dns_refresh=0, marathon_instances=2,
                      auth=Credentials(user="ops", password="s3cret")) as c:
        for url in c.marathon_urls:
            r = requests.get(url + "/v2/apps", timeout=10)
            assert r.status_code == 401
            assert r.headers["WWW-Authenticate"] == 'basic realm="Mesosphere"'
            assert r.headers["Content-Type"].startswith("text/html")
            assert "<title>Error 401 Unauthorized</title>" in r.text and "Problem accessing /v2/apps" in r.text
            bad = {"Authorization": "Basic " + base64.b64encode(b"ops:wrong").decode()}
            assert requests.get(url + "/v2/apps", headers=bad, timeout=10).status_code == 401
        r = requests.get(c.marathon_urls[1] + "/v2/apps", auth=("ops", "s3cret"), timeout=10)
        assert r.status_code == 200 and r.headers["X-Marathon-Via"]
