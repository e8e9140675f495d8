"""The client and the event stream through a leader's death on the local HA Marathon (three instances,
basic auth as Marathon's --http_credentials): what a real leader election does to marathon-tf."""

from __future__ import annotations

import time

import pytest
from polling import wait_for

from marathon_tf.local import LocalCluster
from marathon_tf.local.security import Credentials
from marathon_tf.marathon.client import CLI_TIMEOUT, Client, RetryPolicy
from marathon_tf.marathon.events import EventStream

GAP = 10.0  # stock Marathon's --zk_session_timeout, the LocalCluster default
SHORT = 3.0  # the other tests' session: the same election, 7 s sooner
AUTH = {"user": "ops", "password": "s3cret"}


def _ha(tmp_path, **options):
    with LocalCluster(state_dir=tmp_path / "state", dns_refresh=0, heartbeat=0.5, kill_grace=1.0,
                      shutdown_grace=1.0, marathon_instances=3, auth=Credentials(**AUTH), **options) as c:
        yield c


@pytest.fixture
def ha(tmp_path):
    """Three instances with a 3 s ZooKeeper session (``SHORT``: a cluster configured shorter than stock; the
    election at stock Marathon's 10 s is the ``stock-10s`` case of the first test)."""
    yield from _ha(tmp_path, zk_session_timeout=SHORT)


@pytest.fixture
def stock_ha(tmp_path):
    yield from _ha(tmp_path)


def app(app_id: str, instances: int = 1) -> dict:
    return {"id": app_id, "cmd": "sleep 600", "cpus": 0.1, "mem": 32, "instances": instances}


def cli_client(urls) -> Client:
    """As the CLI makes it (user/cli/params.py Connection.marathon)."""
    return Client(urls, timeout=CLI_TIMEOUT, retry=RetryPolicy(connection_errors=False), **AUTH)


@pytest.mark.parametrize("which", [
    pytest.param("stock_ha", id="stock-10s"),
    pytest.param("ha", id="zk-session-3s")])
def test_the_cli_client_given_every_url_rides_through_the_leaders_death(which, request):
    ha = request.getfixturevalue(which)
    client = cli_client(ha.marathon_urls)
    client.put_group({"id": "/g", "apps": [app("/g/a")]})
    killed_at = time.monotonic()
    ha.kill_leader()
    assert [a["id"] for a in client.list_apps()] == ["/g/a"]  # refused, 502s, then the new leader
    assert client.url != ha.marathon_urls[0]
    assert client.put_group({"id": "/g", "apps": [app("/g/a", 2)]})["deploymentId"]
    assert time.monotonic() - killed_at < GAP + 30


def test_a_client_of_one_standby_waits_out_the_election(ha):
    client = Client(ha.marathon_urls[2], retry=RetryPolicy(attempts=20, budget=30, initial=0.2, max_wait=1), **AUTH)
    ha.kill_leader()
    assert client.ping()
    assert client.info()["leader"] == ha.marathon_urls[1].split("://")[1]


def test_the_event_stream_through_a_standby_keeps_its_credentials_and_survives_the_election(ha):
    leader, standby, other = ha.marathon_urls
    client = Client([standby, other], retry=RetryPolicy(attempts=20, budget=30, initial=0.2, max_wait=1), **AUTH)
    with EventStream(client, reconnect_max=0.5) as stream:
        assert wait_for(lambda: stream.attached, 10, what="the stream (redirected to the leader)")
        body = client.put_group({"id": "/g", "apps": [app("/g/a")]})
        seen: list[dict] = []

        def saw(deployment_id: str) -> bool:
            seen.extend(stream.wait(0.2))
            return any(e.get("eventType") == "deployment_success" and e.get("id") == deployment_id for e in seen)

        assert wait_for(lambda: saw(body["deploymentId"]), 20, what="deployment_success through the redirect")
        before = stream._response
        ha.kill_leader()  # the stream to the leader drops; the redirect now names the next leader
        assert wait_for(lambda: ha.leader_url == standby, SHORT + 10, what="the next leader")
        # attached to the new leader (a 200 means it subscribed: what is published from then on arrives)
        assert wait_for(lambda: stream._response is not before and stream._response is not None, 15,
                        what="the stream attached again")
        body = client.put_group({"id": "/g", "apps": [app("/g/a", 2)]})
        assert wait_for(lambda: saw(body["deploymentId"]), 20, what="deployment_success from the new leader")
        assert stream.available


def test_a_write_sent_during_the_election_lands_once(ha):
    # Stock 1.11: until the dead leader's ZooKeeper session expires (--zk_session_timeout, 10 s; 3 s here) the standbys
    # forward to it and answer sendError(502, "Connection to leader refused.")
    # (M@1.11:src/main/scala/mesosphere/marathon/api/forwarder/AsyncUrlConnectionRequestForwarder.scala).
    client = cli_client(ha.marathon_urls)
    client.put_group({"id": "/g", "apps": [app("/g/a")]})
    ha.kill_leader()
    body = client.put_group({"id": "/g", "apps": [app("/g/a", 2)]})  # the scale, sent during the election
    assert body["deploymentId"]
    versions = client.request("GET", "/v2/apps/g/a/versions").body["versions"]
    assert len(versions) == 2  # applied once: the first deploy, then the scale
    assert client.get_app("/g/a")["instances"] == 2
