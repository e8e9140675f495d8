"""transport.fanout_session: what one task reaching thousands (the leader's hints, a save round's holds) goes through
— the same bounds as every other session (a deadline for the whole exchange, a size cap, no redirect followed, the
job's key on control routes only), and the task API's client reads its answers as it reads requests'. Against a raw
server on 127.0.0.1 that answers as no well-behaved one would (tests/hostile_server.py)."""

import json
import socket
import time

import pytest
import requests
from hostile_server import Answer, Hostile

from marathon_tf.contract import taskauth
from marathon_tf.contract.taskapi import HOLD, LEADER, STATUS, HoldRequest, TaskClient
from marathon_tf.marathon import transport


@pytest.fixture
def key():
    taskauth.install("k" * 32)
    try:
        yield "k" * 32
    finally:
        taskauth.install(None)


def test_a_get_with_its_query_and_a_post_with_json_are_read_as_the_task_api_client_reads_them(key):
    with Hostile(lambda r: Answer(200, json.dumps({"path": r.path, "query": r.query,
                                                   "body": r.body.decode()}).encode())) as server:
        with transport.fanout_session() as session:
            client = TaskClient(session)
            got = client.call(f"127.0.0.1:{server.port}", LEADER, params={"job": "j", "at": "h:1"}, timeout=(2, 2))
            held = client.hold({"worker-1": server.url}, HoldRequest("j", "a scale", 30.0), timeout=2.0)["worker-1"]
            status = client.read(f"{server.url}/status")
        assert got.ok and got.json() == {"path": "/leader", "query": "job=j&at=h%3A1", "body": ""}
        assert held is not None and held.ok and json.loads(held.json()["body"]) == HoldRequest(
            "j", "a scale", 30.0).to_json()
        assert status is not None and status["path"] == STATUS.path
        sent = {r.path: r for r in server.requests()}
    # the job's key on the control routes (the hint, the hold), not on /status
    assert sent[LEADER.path].headers.get("authorization") == f"Bearer {key}"
    assert sent[HOLD.path].headers.get("authorization") == f"Bearer {key}"
    assert sent[HOLD.path].headers.get("content-type") == "application/json"
    assert "authorization" not in sent[STATUS.path].headers


def test_a_dripping_task_cannot_hold_a_request_past_its_deadline():
    drip = Answer(200, b'{"held": true}' + b" " * 200, drip=0.2)
    with Hostile(lambda r: drip) as server, transport.fanout_session() as session:
        started = time.monotonic()
        with pytest.raises(transport.DeadlineExceeded, match="no whole answer within 1 s"):
            session.post(f"{server.url}/hold", json={}, timeout=(0.5, 0.5))
        assert time.monotonic() - started < 2.5
        reply = TaskClient(session).call(server.url, HOLD, {}, timeout=(0.5, 0.5))
        assert reply.code is None and isinstance(reply.error, transport.DeadlineExceeded)


def test_an_answer_over_the_cap_is_refused_whether_its_length_says_so_or_not():
    big = b"x" * 5000
    with Hostile(lambda r: Answer(200, big, length=r.path == "/said")) as server, \
            transport.fanout_session(max_bytes=4096) as session:
        for path in ("/said", "/unsaid"):
            with pytest.raises(transport.AnswerTooLarge, match="4 KiB"):
                session.get(f"{server.url}{path}", timeout=(2, 2))


def test_a_redirect_is_not_followed_and_a_refused_connection_is_a_requests_error():
    moved = Answer(302, b"{}", headers={"Location": "http://127.0.0.1:9/elsewhere", "Content-Type": "application/json"})
    with Hostile(lambda r: moved) as server, transport.fanout_session() as session:
        r = session.get(f"{server.url}/leader", timeout=(2, 2))
        assert r.status_code == 302 and len(server.requests()) == 1
        with socket.socket() as s:  # a port nothing listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with pytest.raises(requests.ConnectionError):
            session.get(f"http://127.0.0.1:{port}/leader", timeout=(1, 1))
        assert TaskClient(session).call(f"127.0.0.1:{port}", LEADER, timeout=(1, 1)).code is None
