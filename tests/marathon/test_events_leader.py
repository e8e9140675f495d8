"""The event stream reaches the leader when a standby's redirect cannot be followed (issue 28, item 3).

A Marathon standby answers ``/v2/events`` with a 302 to ``http://<leader --hostname>:<http port>`` unless it
runs with ``--disable_http`` (``M@1.11:src/main/scala/mesosphere/marathon/api/LeaderProxyFilter.scala``:
``scheme``, ``buildUrl``, ``shouldBeRedirectedToLeader``; the host:port is ``MarathonModule.provideHostPort``).
Without a leader ``/v2/leader`` is 404 "There is no leader" (``M@1.11:.../api/v2/LeaderResource.scala``).
A client on https will not follow it (its credentials would travel in clear), nor can it follow a name that
does not resolve where it runs. The stream then attaches to the leader through the configured URLs or the
one ``/v2/leader`` names, says so once, and does not go back to the standby while the leader holds.

The https servers here are real TLS servers with a self-signed certificate made by the ``openssl`` CLI (the
``cryptography`` package is not installed here); without it those tests are skipped.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import threading
import time

import pytest
from polling import wait_for
from pytest_httpserver import HTTPServer
from werkzeug import Response

from marathon_tf.marathon.client import Client, RedirectNotFollowed, RetryPolicy
from marathon_tf.marathon.events import EventStream

AUTH = {"user": "ops", "password": "s3cret"}
SSE = ("event: event_stream_attached\r\n"
       "data: {\"remoteAddress\":\"127.0.0.1\",\"eventType\":\"event_stream_attached\"}\r\n\r\n")


def fast():
    return RetryPolicy(attempts=3, budget=10, initial=0.01, max_wait=0.05, jitter=0)


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("the openssl CLI is not available to make a certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,IP:127.0.0.2"],
                   check=True, capture_output=True, timeout=60)
    return str(cert), str(key)


def _server(host="127.0.0.1", port=0, cert=None) -> HTTPServer:
    context = None
    if cert is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*cert)
    server = HTTPServer(host=host, port=port, ssl_context=context)
    server.start()
    return server


@pytest.fixture
def servers():
    started: list[HTTPServer] = []

    def start(**kw) -> HTTPServer:
        started.append(_server(**kw))
        return started[-1]

    yield start
    for s in started:
        s.clear()
        s.stop()


def url(server: HTTPServer) -> str:
    return server.url_for("").rstrip("/")


def standby(server: HTTPServer, redirect_to: str, leader: str | None) -> None:
    """A 1.7.50+ standby without --disable_http: /v2/events redirects to the leader's http URL; /v2/leader is
    forwarded to the leader, which names itself (host:http port)."""

    def events(request):
        query = request.query_string.decode()
        location = f"{redirect_to}/v2/events" + (f"?{query}" if query else "")
        return Response("", status=302, headers={"Location": location})

    server.expect_request("/v2/events").respond_with_handler(events)
    if leader is None:
        server.expect_request("/v2/leader").respond_with_json({"message": "There is no leader"}, status=404)
    else:
        server.expect_request("/v2/leader").respond_with_json({"leader": leader})


def leader_stream(server: HTTPServer, event_id: str, *, close_after: bool = False) -> list[str]:
    """The leader's /v2/events: the attach event and one deployment event, with the credentials checked;
    returns the list of Authorization headers seen."""
    seen: list[str] = []

    def events(request):
        seen.append(request.headers.get("Authorization", ""))
        if not request.headers.get("Authorization", "").startswith("Basic "):
            return Response("", status=401)
        event = json.dumps({"eventType": "deployment_success", "id": event_id})
        body = SSE + f"event: deployment_success\r\ndata: {event}\r\n\r\n"
        if close_after:
            return Response(body, content_type="text/event-stream")
        return Response(iter([body.encode(), *_heartbeats()]), content_type="text/event-stream")

    server.expect_request("/v2/events").respond_with_handler(events)
    return seen


def _heartbeats():
    for _ in range(20):  # Jetty's 10 s heartbeat, faster; ends by itself so the server can stop
        time.sleep(0.1)
        yield b"\r\n"


def got(stream: EventStream, event_id: str, seconds: float = 10) -> bool:
    seen: list = []
    return wait_for(lambda: seen.extend(stream.wait(0.2)) or any(e.get("id") == event_id for e in seen), seconds)


def asked(server: HTTPServer, path: str) -> int:
    return sum(1 for request, _ in server.log if request.path == path)


def test_an_https_standby_s_redirect_to_http_attaches_to_the_configured_leader(servers, cert):
    plain_leader = servers()  # the leader's http port: the redirect's target, never to be used
    plain_leader.expect_request("/v2/events").respond_with_data("", status=500)
    s, leader = servers(cert=cert), servers(cert=cert)
    standby(s, url(plain_leader), f"127.0.0.1:{plain_leader.port}")
    seen = leader_stream(leader, "d-1")
    said: list[str] = []
    client = Client([url(s), url(leader)], verify=cert[0], retry=fast(), **AUTH)
    with EventStream(client, reconnect_max=0.2, say=said.append) as stream:
        assert got(stream, "d-1")
        time.sleep(0.5)
    assert url(s).startswith("https://") and plain_leader.log == []  # the credentials never went in clear
    assert len(said) == 1 and "not following it without TLS" in said[0]
    assert f"attached to the leader at {url(leader)} instead" in said[0] and "s3cret" not in said[0]
    assert asked(s, "/v2/events") == 1 and seen and all(h.startswith("Basic ") for h in seen)
    assert stream.base == url(leader)


def test_the_leader_v2_leader_names_is_tried_at_the_configured_scheme_and_port(servers, cert):
    """Only the standby is configured: /v2/leader names the leader's host (127.0.0.2 here); its https port is
    taken to be the standby's (Marathons of one cluster share their ports)."""
    s = servers(cert=cert)
    try:
        leader = servers(host="127.0.0.2", port=s.port, cert=cert)
    except OSError:
        pytest.skip("127.0.0.2 cannot be bound here")
    standby(s, "http://127.0.0.2:8080", "127.0.0.2:8080")
    leader_stream(leader, "d-2")
    said: list[str] = []
    client = Client(url(s), verify=cert[0], retry=fast(), **AUTH)
    with EventStream(client, reconnect_max=0.2, say=said.append) as stream:
        assert got(stream, "d-2")
    assert stream.base == f"https://127.0.0.2:{s.port}" and len(said) == 1 and "127.0.0.2" in said[0]


def test_a_redirect_to_a_name_that_does_not_resolve_is_passed_by_and_said_once(servers):
    s, leader = servers(), servers()
    standby(s, "http://leader.invalid:8080", "leader.invalid:8080")
    leader_stream(leader, "d-3", close_after=True)  # the stream drops after each event: reconnects
    said: list[str] = []
    client = Client([url(s), url(leader)], retry=fast(), **AUTH)
    with EventStream(client, reconnect_max=0.2, say=said.append) as stream:
        assert got(stream, "d-3")
        assert wait_for(lambda: stream.reconnects >= 3, 10)
    assert len(said) == 1 and "leader.invalid" in said[0] and f"attached to the leader at {url(leader)}" in said[0]
    assert asked(s, "/v2/events") == 1  # it went back to the leader each time, never to the standby
    assert asked(leader, "/v2/events") >= 3


def test_with_no_way_to_the_leader_it_says_so_once_and_keeps_trying(servers, cert):
    s = servers(cert=cert)
    standby(s, "http://127.0.0.1:9", "127.0.0.1:9")  # the named leader's port: nothing listens there
    said: list[str] = []
    client = Client(url(s), verify=cert[0], retry=fast(), **AUTH)
    with EventStream(client, reconnect_max=0.1, say=said.append) as stream:
        assert wait_for(lambda: stream.reconnects >= 3, 10)
        assert stream.available  # still trying: the leader may come back within reach
    assert len(said) == 1 and "the leader could not be reached another way" in said[0]
    assert "--marathon URL,URL" in said[0]


def test_the_client_says_which_redirect_it_could_not_follow(servers, cert):
    s = servers(cert=cert)
    standby(s, "http://127.0.0.1:9", None)
    with pytest.raises(RedirectNotFollowed) as e:
        Client(url(s), verify=cert[0], retry=fast(), **AUTH).events()
    assert e.value.standby == url(s) and e.value.target.startswith("http://127.0.0.1:9/v2/events")
    assert Client(url(s), verify=cert[0], retry=fast(), **AUTH).leader() is None  # 404 "There is no leader"


def test_the_leader_moving_on_sends_the_stream_back_through_the_configured_urls(servers):
    """The leader found earlier stops answering: the next connection starts from the configured URLs again."""
    s, leader = servers(), servers()
    standby(s, "http://leader.invalid:8080", None)
    answers = threading.Event()

    def events(request):
        if answers.is_set():
            return Response("", status=503)
        answers.set()
        return Response(SSE, content_type="text/event-stream")

    leader.expect_request("/v2/events").respond_with_handler(events)
    client = Client([url(s), url(leader)], retry=fast(), **AUTH)
    with EventStream(client, reconnect_max=0.1, say=lambda line: None) as stream:
        assert wait_for(lambda: asked(s, "/v2/events") >= 2, 10)
    assert stream.base in (None, url(leader))
