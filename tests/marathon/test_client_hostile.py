"""The client against a server that does not behave (tests/hostile_server.py): a proxy's 504 for a
PUT that went through, a body dripped byte by byte, hundreds of MB, redirect loops, empty or
shapeless answers. Every outcome is a return value or one :class:`MarathonTFError` line; never a
traceback, a hang, unbounded memory or a second PUT of a write that may have been applied."""

from __future__ import annotations

import json
import time
import tracemalloc

import pytest
from hostile_server import DEPLOYMENT, INFO, VERSION, Answer, Hostile, ProxiedMarathon, json_answer, repeat

from marathon_tf.contract.errors import MarathonError, MarathonTFError, MarathonUnavailable, Timeout
from marathon_tf.marathon import marker
from marathon_tf.marathon.client import Client, RetryPolicy

GROUP = {"id": "/mnist", "apps": [{"id": "/mnist/worker-0", "cmd": "x", "instances": 1}]}


def fast(**kw):
    kw = {"attempts": 4, "budget": 20, "initial": 0.001, "max_wait": 0.01, "jitter": 0.001, "settle": 0.5, **kw}
    return RetryPolicy(**kw)


def client(server: Hostile, **kw) -> Client:
    kw.setdefault("retry", fast())
    kw.setdefault("sleep", lambda s: time.sleep(min(s, 0.01)))
    return Client(server.url, **kw)


@pytest.mark.parametrize("first", [
    json_answer("<html><title>504 Gateway Time-out</title></html>", 504, headers={"Content-Type": "text/html"}),
    json_answer("<html><title>502 Bad Gateway</title></html>", 502, headers={"Content-Type": "text/html"}),
    Answer(200, b'{"deploymentId": "', headers={"Content-Type": "application/json", "Content-Length": "90"}),
], ids=["504", "502", "cut-off"])
def test_a_put_that_went_through_is_adopted_with_exactly_one_put(first):
    marathon = ProxiedMarathon(first)
    with Hostile(marathon) as server:
        body = client(server).put_group(GROUP)
    assert body == {"deploymentId": DEPLOYMENT, "version": VERSION, "adopted": True}
    assert marathon.puts == 1


def test_a_lock_met_first_is_looked_at_and_adopted_when_it_is_ours():
    """A 409 lock is a refusal (nothing applied) but may be our own earlier deploy's: a look first."""
    marathon = ProxiedMarathon(json_answer("{}", 504))
    marathon.puts = 1  # the earlier deploy's PUT went through: its group is there
    marathon.group = marker.stamp(GROUP)
    marathon.group["apps"][0]["version"] = VERSION
    with Hostile(marathon) as server:
        body = client(server).put_group(GROUP)
    assert body["deploymentId"] == DEPLOYMENT and body["adopted"] and marathon.puts == 2


def test_a_put_that_did_not_go_through_is_not_sent_again_and_says_so():
    with Hostile(lambda r: INFO if r.path == "/v2/info" else json_answer('{"message": "Group does not exist"}', 404)
                 if r.method == "GET" else json_answer("<title>504 Gateway Time-out</title>", 504)) as server:
        with pytest.raises(MarathonUnavailable) as e:
            client(server).put_group(GROUP)
        assert len(server.requests("PUT")) == 1
    assert "504" in e.value.message and "sent once and not again" in e.value.message
    assert "\n" not in e.value.message


def test_an_empty_or_id_less_answer_to_a_put_is_an_error():
    for body in (b"", b"{}", b'{"version": "x"}', b"[]"):
        answers = {"PUT": Answer(200, body), "GET": json_answer('{"message": "Group \'/mnist\' does not exist"}', 404)}
        with Hostile(lambda r: INFO if r.path == "/v2/info" else answers[r.method]) as server:
            with pytest.raises(MarathonError) as e:
                client(server).put_group(GROUP)
            assert len(server.requests("PUT")) == 1
        assert "does not answer like Marathon" in e.value.message and "deploymentId" in e.value.message, body


def test_a_dripping_server_is_cut_off_at_the_request_deadline():
    """One byte every 0.2 s: each socket read is quick, so only a deadline for the whole exchange ends it."""
    drip = Answer(200, b'{"version": "1.11.0"' + b" " * 200 + b"}", drip=0.2)
    with Hostile(lambda r: drip) as server:
        c = client(server, timeout=(0.5, 1.0), retry=fast(attempts=1))
        start = time.monotonic()
        with pytest.raises(MarathonUnavailable) as e:
            c.info()
        assert time.monotonic() - start < 4.0
        assert "1.5 s" in e.value.message and "\n" not in e.value.message
        # the caller's limit bounds the retries too: past it, Timeout (exit 3)
        c = client(server, timeout=(0.5, 1.0), retry=fast(attempts=50, budget=600))
        c.limit(2.5)
        start = time.monotonic()
        with pytest.raises(Timeout):
            c.info()
        assert time.monotonic() - start < 5.0


@pytest.mark.parametrize("length", [True, False], ids=["announced", "unannounced"])
def test_a_huge_answer_is_refused_naming_the_size_with_bounded_memory(length):
    total = 400 << 20
    headers = {"Content-Type": "application/json"}
    if length:
        headers["Content-Length"] = str(total)
    with Hostile(lambda r: Answer(200, repeat(b"[" * 65536, total), headers=headers)) as server:
        c = client(server, max_bytes=8 << 20)
        tracemalloc.start()
        try:
            with pytest.raises(MarathonError) as e:
                c.list_apps()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert "larger than the 8 MiB limit" in e.value.message and "--max-response" in e.value.hint
    assert ("400 MiB" in e.value.message) == length
    assert peak < 64 << 20, peak


def test_redirects_are_capped_and_named():
    def loop(r):
        return Answer(302, b"", headers={"Location": r.path})

    with Hostile(loop) as server:
        with pytest.raises(MarathonError) as e:
            client(server).info()
        assert len(server.requests()) == 4  # the request and 3 redirects
    assert "more than 3 redirects" in e.value.message and "/v2/info" in e.value.message

    with Hostile(lambda r: Answer(302, b"", headers={"Location": "/elsewhere"})) as server:
        with pytest.raises(MarathonError) as e:
            client(server).put_group(GROUP)
        assert [r.method for r in server.requests()] == ["PUT"]  # a write is not turned into a GET
    assert "not followed" in e.value.message and "/elsewhere" in e.value.message


def test_a_write_follows_307_with_its_method_and_body():
    def answer(r):
        if r.path == "/v2/groups/mnist":
            return Answer(307, b"", headers={"Location": "/leader/v2/groups/mnist"})
        return json_answer(f'{{"deploymentId": "{DEPLOYMENT}", "version": "{VERSION}"}}')

    with Hostile(answer) as server:
        assert client(server).put_group(GROUP)["deploymentId"] == DEPLOYMENT
        followed = server.requests(path="/leader/v2/groups/mnist")
    assert [r.method for r in followed] == ["PUT"] and json.loads(followed[0].body) == marker.stamp(GROUP)


def test_a_redirect_to_a_dead_port_names_the_target():
    with Hostile(lambda r: Answer(307, b"", headers={"Location": "http://127.0.0.1:9/v2/info"})) as server:
        with pytest.raises(MarathonUnavailable) as e:
            client(server).info()
    assert "redirected to http://127.0.0.1:9/v2/info" in e.value.message


HOSTILE_BODIES = [b"", b"null", b"[]", b"{}", b'"text"', b"42", b"true", b'{"apps": "x"}', b'{"apps": [1]}',
                  b'{"apps": [{"labels": []}]}', b'{"app": []}', b'{"tasks": {}}', b'{"queue": [{"app": 3}]}',
                  b'[{"affectedApps": 5}]', b'{"version": 3}', b'{"groups": [{"apps": [{"tasks": [7]}]}]}',
                  b"[" * 100000, b'{"apps": [', b"\xff\xfe\x00garbage", b"<html><body>hello</body></html>",
                  b'{"message": "line one\\nline two\\u2028three\\u001b[31m"}',
                  b'{"message": ["x"], "deployments": [1, "x"], "details": [{"errors": 5}, 3]}']
STATUSES = [200, 204, 301, 400, 401, 404, 409, 418, 500, 502, 503]


def _calls(c: Client):
    return [c.info, lambda: c.get_group("/mnist"), lambda: c.get_group("/mnist", embed=("group.apps.tasks",)),
            c.list_apps, lambda: c.get_app("/mnist/worker-0"), c.deployments, c.queue, lambda: c.put_group(GROUP),
            lambda: c.delete_group("/mnist"), lambda: c.update_apps([{"id": "/mnist/worker-0", "instances": 0}])]


def test_fuzz_no_server_answer_gives_anything_but_a_result_or_one_line_error():
    """Every hostile body as a 200 to every call; a few of them with every other status to a read and
    to the writes (the status decides the path taken, the body only what is said)."""
    cases = [(200, body, _calls) for body in HOSTILE_BODIES]
    cases += [(status, body, lambda c: _calls(c)[:1] + _calls(c)[-3:]) for status in STATUSES[1:]
              for body in (b"", HOSTILE_BODIES[19], HOSTILE_BODIES[20], HOSTILE_BODIES[21])]
    case = {"status": 200, "body": b""}
    with Hostile(lambda r: Answer(case["status"], case["body"])) as server:
        c = client(server, retry=fast(attempts=2, settle=0.0))
        for status, body, calls in cases:
            case.update(status=status, body=body)
            c._marathon_ok.clear()
            for call in calls(c):
                try:
                    call()
                except MarathonTFError as e:
                    for line in e.lines():
                        assert "\n" not in line and "\x1b" not in line and len(line) < 2000, (status, body, line)


def test_an_unknown_charset_or_a_lying_length_is_one_line():
    for answer in (Answer(500, b"<title>boom</title>", headers={"Content-Type": "text/html; charset=no-such"}),
                   Answer(200, b'{"apps": []}', headers={"Content-Type": "application/json", "Content-Length": "99"})):
        with Hostile(lambda r: answer) as server:
            with pytest.raises(MarathonError) as e:
                client(server, retry=fast(attempts=1)).list_apps()
        assert "\n" not in e.value.message


def test_a_status_server_probe_is_bounded_in_time_and_size():
    """transport.get_json: what status, observe and the bootstrap ask the tasks' status servers."""
    from marathon_tf.marathon import transport

    answers = iter([Answer(200, b'{"step": 3}' + b" " * 100, drip=0.1), Answer(200, repeat(b" " * 65536, 8 << 20)),
                    Answer(200, b"[1]"), Answer(200, b'{"step": 3}')])
    with Hostile(lambda r: next(answers)) as server:
        start = time.monotonic()
        assert transport.get_json(server.url, timeout=1.0) is None  # dripping: cut off at 1 s
        assert time.monotonic() - start < 3.0
        assert transport.get_json(server.url, max_bytes=1 << 20) is None  # too large
        assert transport.get_json(server.url) is None  # not an object
        assert transport.get_json(server.url) == {"step": 3}
