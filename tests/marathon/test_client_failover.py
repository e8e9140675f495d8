"""The client against HA Marathon's answers (fake servers speaking as Marathon 1.4–1.11 do): failover on
502/503, the standby's event-stream redirect with credentials kept, Jetty's HTML 401, 403s that are not
about credentials, ``plan-format=light``.

``M@1.x:<path>`` = mesosphere/marathon, branch releases/1.x, that path.
"""

from __future__ import annotations

import base64
import io
import json

import pytest
import requests
from polling import wait_for
from pytest_httpserver import HTTPServer
from werkzeug import Response

from marathon_tf.contract.errors import MarathonAuthError, MarathonError, MarathonUnavailable
from marathon_tf.marathon.client import Client, RetryPolicy
from marathon_tf.marathon.events import EventStream


def jetty_page(status: int, reason: str, path: str = "/v2/apps") -> str:
    """Jetty 9.4's ErrorHandler page for sendError(status, reason), as Marathon's server sends it."""
    return (f"<html>\n<head>\n<meta http-equiv=\"Content-Type\" content=\"text/html;charset=ISO-8859-1\"/>\n"
            f"<title>Error {status} {reason}</title>\n</head>\n<body><h2>HTTP ERROR {status}</h2>\n"
            f"<p>Problem accessing {path}. Reason:\n<pre>    {reason}</pre></p><hr>"
            "<a href=\"http://eclipse.org/jetty\">Powered by Jetty:// 9.4.8.v20171121</a><hr/>\n</body>\n</html>\n")


def fast(attempts=6):
    return RetryPolicy(attempts=attempts, budget=30, initial=0.001, max_wait=0.01, jitter=0.001)


def base(server) -> str:
    return server.url_for("").rstrip("/")


@pytest.fixture
def leader():
    server = HTTPServer(host="127.0.0.1")
    server.start()
    yield server
    server.clear()
    server.stop()


SSE = ("event: event_stream_attached\r\n"
       "data: {\"remoteAddress\":\"127.0.0.1\",\"eventType\":\"event_stream_attached\"}\r\n\r\n")


@pytest.mark.parametrize("status", [502, 503])
def test_no_leader_fails_over_to_the_next_url(httpserver, leader, status):
    # 1.7-1.11: LeaderProxyFilter sendError(BadGateway, "Could not determine the current leader")
    # (M@1.8:src/main/scala/mesosphere/marathon/api/LeaderProxyFilter.scala); 1.4-1.6 the same with
    # ServiceUnavailable (M@1.6:.../api/LeaderProxyFilter.scala). Either: the next URL, at once.
    httpserver.expect_request("/v2/info").respond_with_data(
        jetty_page(status, "Could not determine the current leader", "/v2/info"), status=status,
        content_type="text/html")
    leader.expect_request("/v2/info").respond_with_json({"version": "1.8.222"})
    c = Client([base(httpserver), base(leader)], retry=fast())
    assert c.info()["version"] == "1.8.222"
    assert len(httpserver.log) == 1 and c.url == base(leader)


def test_a_standby_that_cannot_reach_the_leader_is_failed_over_too(httpserver, leader):
    # M@1.8:.../api/forwarder/AsyncUrlConnectionRequestForwarder.scala: a refused connection to the leader
    # is sendError(BadGateway, "Connection to leader refused.").
    httpserver.expect_request("/v2/deployments").respond_with_data(
        jetty_page(502, "Connection to leader refused.", "/v2/deployments"), status=502, content_type="text/html")
    leader.expect_request("/v2/deployments").respond_with_json([])
    assert Client([base(httpserver), base(leader)], retry=fast()).deployments() == []


@pytest.mark.parametrize("status, reason", [(401, "Unauthorized"), (403, "Forbidden")])
def test_jettys_html_401_and_403_are_auth_errors_naming_the_credentials(httpserver, status, reason):
    # --http_credentials: Jetty's BasicAuthenticator sends 401, WWW-Authenticate: basic realm="Mesosphere"
    # and Jetty's HTML error page (M@1.8:src/main/scala/mesosphere/marathon/api/HttpModule.scala;
    # jetty/jetty.project jetty-security/.../authentication/BasicAuthenticator.java). /v2/info is
    # refused the same way: the page must not be read as "not Marathon".
    page = jetty_page(status, reason, "/v2/groups/mnist")
    for path in ("/v2/groups/mnist", "/v2/info"):
        httpserver.expect_request(path).respond_with_data(page, status=status, content_type="text/html",
                                                          headers={"WWW-Authenticate": 'basic realm="Mesosphere"'})
    with pytest.raises(MarathonAuthError) as e:
        Client(base(httpserver), user="ops", password="hunter2", retry=fast()).get_group("mnist")
    message = e.value.message
    assert "\n" not in message and "hunter2" not in message
    assert f"{status} Error {status} {reason}" in message and "user 'ops'" in message
    assert ("refused the credentials" if status == 401 else "denied access") in message
    assert "does not answer like Marathon" not in message
    with pytest.raises(MarathonAuthError) as e:
        Client(base(httpserver), retry=fast()).get_group("mnist")
    assert "no credentials were sent" in e.value.message and "MARATHON_USER" in e.value.hint
    assert not [r for r, _ in httpserver.log if r.path == "/v2/info"]


def test_too_many_running_deployments_is_not_an_auth_error(httpserver):
    # 1.5+: TooManyRunningDeploymentsException (M@1.11:src/main/scala/mesosphere/marathon/Exception.scala)
    # is mapped to 403 Forbidden (M@1.11:.../api/MarathonExceptionMapper.scala) with its message.
    message = ("Max number (100) of running deployments is achieved. Wait for existing deployments to complete or "
               "cancel oneusing force=true parameter. You can increase max deployment number by using "
               "--max_running_deployments parameter but be advised that this can have negative effects on the "
               "performance.")
    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_json({"message": message}, status=403)
    with pytest.raises(MarathonError) as e:
        Client(base(httpserver), user="ops", password="pw", retry=fast()).put_group({"id": "/mnist", "apps": []})
    assert not isinstance(e.value, MarathonAuthError) and e.value.status == 403
    assert "Max number (100) of running deployments" in e.value.message
    assert "--max_running_deployments" in e.value.hint and "credentials" not in e.value.message


def _standby_redirects_to(standby, leader):
    def redirect(request):
        return Response("", status=302, headers={"Location": base(leader) + request.full_path.rstrip("?")})

    standby.expect_request("/v2/events").respond_with_handler(redirect)


@pytest.mark.parametrize("auth", [{"user": "ops", "password": "s3cret"}, {"token": "tok-123"}])
def test_the_event_stream_follows_the_standbys_redirect_keeping_the_credentials(httpserver, leader, auth):
    # 1.7+: a standby answers /v2/events with a 302 to the leader (LeaderProxyFilter.shouldBeRedirectedToLeader).
    # requests drops Authorization when a redirect changes host or port (Session.rebuild_auth): the leader
    # would answer 401 and the stream would be lost.
    _standby_redirects_to(httpserver, leader)
    expected = ("Basic " + base64.b64encode(b"ops:s3cret").decode()) if "user" in auth else "token=tok-123"

    def stream(request):
        if request.headers.get("Authorization") != expected:
            return Response(jetty_page(401, "Unauthorized", "/v2/events"), status=401, content_type="text/html")
        return Response(SSE, content_type="text/event-stream")

    leader.expect_request("/v2/events").respond_with_handler(stream)
    r = Client(base(httpserver), retry=fast(), **auth).events(["deployment_info"])
    try:
        assert r.status_code == 200
    finally:
        r.close()
    seen = leader.log[-1][0]
    assert seen.headers["Authorization"] == expected
    assert seen.args.getlist("event_type") == ["deployment_info"]
    # without following it ourselves: requests' own redirect loses the credentials on the new port
    plain = requests.get(base(httpserver) + "/v2/events", headers={"Accept": "text/event-stream"}, timeout=5,
                         auth=("ops", "s3cret"))
    assert plain.status_code == 401 and "Authorization" not in leader.log[-1][0].headers


def test_the_event_stream_asks_for_light_plans(httpserver):
    # plan-format=light: read by 1.5-1.7 (M@1.5..1.7:src/main/scala/mesosphere/marathon/core/event/impl/
    # stream/HttpEventStreamServlet.scala useLightWeightEvents); 1.4 and 1.8+ read only event_type from the
    # query (same file) and so ignore it; 1.8+ always send light plans.
    httpserver.expect_request("/v2/events").respond_with_data(SSE, content_type="text/event-stream")
    Client(base(httpserver), retry=fast()).events(["deployment_success", "deployment_failed"]).close()
    request = httpserver.log[0][0]
    assert request.args.getlist("plan-format") == ["light"]
    assert request.args.getlist("event_type") == ["deployment_success", "deployment_failed"]
    assert request.headers["Accept"] == "text/event-stream"


def test_a_401_after_the_redirect_does_not_switch_the_stream_off(httpserver, leader):
    # The leader may change between the redirect and the connection (or refuse once): the stream retries.
    _standby_redirects_to(httpserver, leader)
    answers = iter([Response(jetty_page(401, "Unauthorized", "/v2/events"), status=401, content_type="text/html"),
                    Response(jetty_page(502, "Could not determine the current leader", "/v2/events"), status=502,
                             content_type="text/html")])
    event = {"eventType": "deployment_success", "id": "d-1"}

    def stream(request):
        try:
            return next(answers)
        except StopIteration:
            return Response(SSE + f"event: deployment_success\r\ndata: {json.dumps(event)}\r\n\r\n",
                            content_type="text/event-stream")

    leader.expect_request("/v2/events").respond_with_handler(stream)
    client = Client(base(httpserver), user="ops", password="pw", retry=fast())
    with EventStream(client, reconnect_max=0.2) as s:
        got = []
        assert wait_for(lambda: got.extend(s.wait(0.2)) or any(e.get("id") == "d-1" for e in got), 10), got
        assert s.available


def test_a_direct_401_switches_the_stream_off(httpserver):
    httpserver.expect_request("/v2/events").respond_with_data(jetty_page(401, "Unauthorized", "/v2/events"),
                                                              status=401, content_type="text/html")
    with EventStream(Client(base(httpserver), retry=fast()), reconnect_max=0.2) as s:
        assert wait_for(lambda: not s.available, 5)


def test_the_event_stream_does_not_follow_a_redirect_from_tls_to_plain_http():
    """Credentials are not sent in clear on a standby's say-so."""

    class Redirecting(requests.Session):
        def request(self, method, url, **kw):
            r = requests.Response()
            r.status_code, r.url, r.raw = 302, url, io.BytesIO(b"")
            r.headers["Location"] = "http://leader.example:8080/v2/events"
            return r

    c = Client("https://standby.example:8443", user="ops", password="pw", session=Redirecting(), retry=fast())
    with pytest.raises(MarathonUnavailable) as e:
        c.events()
    assert "without TLS" in e.value.message and "pw" not in e.value.message


def test_a_dead_url_and_a_leaderless_one_are_passed_over_at_once_then_backed_off_as_a_round(httpserver, leader):
    # One attempt tries every URL (a refused connection or a 502 applied nothing): the dead leader of an
    # election costs no backoff while another URL answers; the backoff comes between rounds.
    answers = iter([Response(jetty_page(502, "Could not determine the current leader"), status=502,
                             content_type="text/html")] * 2
                   + [Response('{"apps": []}', content_type="application/json")])
    httpserver.expect_request("/v2/apps").respond_with_handler(lambda request: next(answers))
    slept = []
    c = Client(["http://127.0.0.1:9", base(httpserver)], retry=fast(), sleep=slept.append)
    assert c.list_apps() == []
    assert len(httpserver.log) == 3 and len(slept) == 2  # rounds: [dead, 502], [dead, 502], [dead, 200]


@pytest.mark.parametrize("status, waits", [(502, [1.0, 1.0]), (503, [1.0, 1.0]), (504, [2.0, 4.0])])
def test_while_there_is_no_leader_the_backoff_stays_short(httpserver, status, waits):
    # An election lasts about Marathon's --zk_session_timeout (10 s, M@1.8:src/main/scala/mesosphere/marathon/
    # ZookeeperConf.scala): a backoff growing past a second would only see the new leader later.
    answers = iter([Response(jetty_page(status, "Could not determine the current leader"), status=status,
                             content_type="text/html")] * 2
                   + [Response('{"apps": []}', content_type="application/json")])
    httpserver.expect_request("/v2/apps").respond_with_handler(lambda request: next(answers))
    slept = []
    policy = RetryPolicy(attempts=5, budget=60, initial=2.0, max_wait=10, jitter=0)
    assert Client(base(httpserver), retry=policy, sleep=slept.append).list_apps() == []
    assert slept == waits
