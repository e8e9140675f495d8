"""A write during a Marathon leader election (issue 28, item 4, the client's half): a standby that forwards
to the dead leader answers 502 "Connection to leader refused." (``M@1.11:src/main/scala/mesosphere/marathon/
api/forwarder/AsyncUrlConnectionRequestForwarder.scala``; 503 in v1.4.8–v1.4.13). The write is sent again once
a leader answers and lands once:

* up to 1.6.392 that answer proves nothing was forwarded (``HttpURLConnection``, only a ``ConnectException``:
  ``v1.4.3:`` / ``v1.6.392:src/main/scala/mesosphere/marathon/api/LeaderProxyFilter.scala``): sent again at once;
* from 1.6.486 (and when the version is not known) it is also said for a connection that broke after it was
  made (the forwarder's own comment): the group is looked at through a leader first; sent again only when
  it is not there (adopted when it is: the old leader applied it before it died);
* other 502s on a write still mean "maybe applied" (a proxy's): sent once, never again (marathon/marker.py).
"""

from __future__ import annotations

import json
import threading

import pytest
from werkzeug import Response

from marathon_tf.contract.errors import MarathonError, MarathonUnavailable, Timeout
from marathon_tf.marathon import marker
from marathon_tf.marathon.client import Client, RetryPolicy

GROUP = {"id": "/mnist", "apps": [{"id": "/mnist/worker-0", "cmd": "x", "instances": 1}]}
REFUSED = "Connection to leader refused."


def jetty(status: int, reason: str, path: str = "/v2/groups/mnist") -> Response:
    """Jetty's sendError page, as a Marathon standby sends it."""
    return Response(f"<html>\n<head>\n<title>Error {status} {reason}</title>\n</head>\n<body><h2>HTTP ERROR "
                    f"{status}</h2>\n<p>Problem accessing {path}. Reason:\n<pre>    {reason}</pre></p></body>\n"
                    "</html>\n",
                    status=status, content_type="text/html")


def fast(**kw):
    return RetryPolicy(**{"attempts": 3, "budget": 30, "initial": 0.001, "max_wait": 0.01, "jitter": 0, **kw})


class Election:
    """A standby in front of the cluster: while the election lasts (``refusals`` more answers) every request is
    "Connection to leader refused."; then the new leader answers. ``applied``: the dead leader had applied
    the group before it died (Marathon's group then carries our digests)."""

    def __init__(self, server, refusals: int, status: int = 502, applied: bool = False, version: str | None = None,
                 text: str = REFUSED):
        self.left, self.status, self.text = refusals, status, text
        self.stored: dict | None = None
        self.leader_puts: list[dict] = []
        self.log: list[str] = []
        self._lock = threading.Lock()
        self._applied = applied
        server.expect_request("/v2/groups/mnist", method="PUT").respond_with_handler(self.put)
        server.expect_request("/v2/groups/mnist", method="GET").respond_with_handler(self.get)
        server.expect_request("/v2/deployments", method="GET").respond_with_handler(self.deployments)
        if version:
            server.expect_request("/v2/info").respond_with_json({"name": "marathon", "version": version})

    def _refused(self, what: str) -> Response | None:
        with self._lock:
            if self.left > 0:
                self.left -= 1
                self.log.append(f"{what} refused")
                return jetty(self.status, self.text)
        self.log.append(what)
        return None

    def put(self, request):
        body = json.loads(request.data)
        if self._applied and self.stored is None:  # the old leader took it, then died before answering
            self.stored = body
        refused = self._refused("PUT")
        if refused is not None:
            return refused
        self.leader_puts.append(body)
        self.stored = body
        return Response(json.dumps({"deploymentId": f"d-{len(self.leader_puts)}", "version": "v"}),
                        content_type="application/json")

    def get(self, request):
        refused = self._refused("GET")
        if refused is not None:
            return refused
        if self.stored is None:
            return Response(json.dumps({"message": "Group '/mnist' does not exist"}), status=404,
                            content_type="application/json")
        return Response(json.dumps({**self.stored, "apps": [{**a, "version": "v"} for a in self.stored["apps"]]}),
                        content_type="application/json")

    def deployments(self, request):
        refused = self._refused("GET deployments")
        if refused is not None:
            return refused
        return Response(json.dumps([{"id": "d-old", "version": "v", "affectedApps": ["/mnist/worker-0"]}]),
                        content_type="application/json")


def client(server, **kw) -> Client:
    return Client(server.url_for("").rstrip("/"), **{"retry": fast(), **kw})


@pytest.mark.parametrize("refusals", [1, 4, 12])
def test_a_refused_group_put_lands_once_after_the_election(httpserver, refusals):
    """More refusals than ``attempts`` (3): they count no try, only the time budget bounds them."""
    election = Election(httpserver, refusals)
    c = client(httpserver)
    body = c.put_group(GROUP)
    assert body["deploymentId"] == "d-1"
    assert len(election.leader_puts) == 1 and election.leader_puts[0] == marker.stamp(GROUP)
    # while no leader could say whether it was applied, it was not sent again: looks (GETs) only
    sent_after_first = [e for e in election.log[1:] if e.startswith("PUT")]
    assert sent_after_first == ["PUT"], election.log


def test_a_group_the_dead_leader_applied_is_adopted_not_sent_again(httpserver):
    """1.6.486+'s forwarder says "Connection to leader refused." also when the leader took the request and
    died before answering: the look through the new leader finds our digests."""
    election = Election(httpserver, refusals=2, applied=True)
    body = client(httpserver).put_group(GROUP)
    assert body.get("adopted") and body["deploymentId"] == "d-old"
    assert election.leader_puts == []  # the new leader got no PUT: it has the group already
    assert [e for e in election.log if e.startswith("PUT")] == ["PUT refused"]


@pytest.mark.parametrize("version, status", [("1.4.3", 502), ("1.4.8", 503), ("1.6.392", 502)])
def test_where_the_answer_proves_nothing_was_forwarded_it_is_sent_again_at_once(httpserver, version, status):
    election = Election(httpserver, refusals=3, status=status, version=version)
    c = client(httpserver)
    c.capabilities()  # the version, as deploy reads it before the PUT
    assert c.put_group(GROUP)["deploymentId"] == "d-1"
    assert election.log == ["PUT refused"] * 3 + ["PUT"]  # no looks needed
    assert len(election.leader_puts) == 1


def test_an_idempotent_write_without_a_look_is_sent_again(httpserver):
    answers = iter([jetty(502, REFUSED, "/v2/apps")] * 4)
    puts = []

    def put(request):
        puts.append(json.loads(request.data))
        return next(answers, None) or Response('{"deploymentId": "d", "version": "v"}', content_type="application/json")

    httpserver.expect_request("/v2/apps", method="PUT").respond_with_handler(put)
    assert client(httpserver).update_apps([{"id": "/mnist/worker-0", "instances": 0}])["deploymentId"] == "d"
    assert len(puts) == 5


def test_it_gives_up_at_the_budget_saying_no_leader_answered(httpserver):
    election = Election(httpserver, refusals=10**6)
    with pytest.raises(MarathonUnavailable) as e:
        client(httpserver, retry=fast(budget=0.5)).put_group(GROUP)
    assert REFUSED in e.value.message and "no leader answered to tell whether it was applied" in e.value.message
    assert election.leader_puts == [] and [x for x in election.log if x.startswith("PUT")] == ["PUT refused"]


def test_and_within_the_time_limit(httpserver):
    Election(httpserver, refusals=10**6)
    c = client(httpserver, retry=fast(budget=60))
    c.limit(1.0)
    with pytest.raises(Timeout) as e:
        c.put_group(GROUP)
    assert "time limit" in e.value.message  # (naming the refusal, unless the limit came between two tries)


def test_another_502_on_a_write_still_means_maybe_applied_and_is_not_sent_again(httpserver):
    puts = []

    def put(request):
        puts.append(1)
        return jetty(502, "Proxy Error")

    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_handler(put)
    httpserver.expect_request("/v2/groups/mnist", method="GET").respond_with_json(
        {"message": "Group '/mnist' does not exist"}, status=404)
    with pytest.raises(MarathonError) as e:
        client(httpserver, retry=fast(settle=0.0)).put_group(GROUP)
    assert len(puts) == 1 and "it was sent once and not again" in e.value.message


def test_a_read_refused_by_a_standby_fails_over_at_once(httpserver):
    """Reads are sent again freely (nothing to apply): the same as before."""
    answers = iter([jetty(502, REFUSED, "/v2/deployments")] * 2)
    httpserver.expect_request("/v2/deployments").respond_with_handler(
        lambda r: next(answers, None) or Response("[]", content_type="application/json"))
    assert client(httpserver).deployments() == []


#: A 1.4 - 1.6.392 standby's answer to a GET or DELETE it could not forward (v1.4.3 src/main/scala/mesosphere/
#: marathon/api/LeaderProxyFilter.scala:320 ERROR_STATUS_BAD_CONNECTION, sent at :325-332 when the leader
#: gives no status line; a GET/DELETE's HttpURLConnection first connects there, :217-218).
BAD_CONNECTION = "Failed to successfully establish a connection to the leader."


def test_a_delete_answered_bad_connection_during_an_election_is_looked_for_and_sent_again(httpserver):
    """Marathon 1.4.3: the DELETE reached no leader; a leader then says the group is still there, so it is
    sent again and lands once (it used to end as "sent once ... may have been applied")."""
    answers = iter([jetty(502, BAD_CONNECTION)] * 3)
    deletes, gets = [], []

    def delete(request):
        deletes.append(1)
        refused = next(answers, None)
        if refused is not None:
            return refused
        return Response('{"deploymentId": "d-del", "version": "v"}', content_type="application/json")

    def get(request):
        gets.append(1)
        if len(gets) == 1:
            return jetty(502, BAD_CONNECTION)  # the look too, while the election lasts
        return Response(json.dumps({"id": "/mnist", "apps": []}), content_type="application/json")

    httpserver.expect_request("/v2/info").respond_with_json({"name": "marathon", "version": "1.4.3"})
    httpserver.expect_request("/v2/groups/mnist", method="DELETE").respond_with_handler(delete)
    httpserver.expect_request("/v2/groups/mnist", method="GET").respond_with_handler(get)
    c = client(httpserver, retry=fast(settle=0.0))
    c.capabilities()
    assert c.delete_group("/mnist")["deploymentId"] == "d-del"
    assert len(deletes) == 4 and len(gets) >= 2  # each DELETE sent again only after a leader's look


def test_a_put_answered_bad_connection_the_dead_leader_applied_is_adopted(httpserver):
    """The leader took the PUT and died before its status line: the look through the new leader finds it."""
    election = Election(httpserver, refusals=0, applied=True, version="1.4.3")
    puts = []
    httpserver.handlers.clear()
    httpserver.expect_request("/v2/info").respond_with_json({"name": "marathon", "version": "1.4.3"})

    def put(request):
        puts.append(1)
        election.stored = json.loads(request.data)
        return jetty(502, BAD_CONNECTION)

    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_handler(put)
    httpserver.expect_request("/v2/groups/mnist", method="GET").respond_with_handler(election.get)
    httpserver.expect_request("/v2/deployments", method="GET").respond_with_handler(election.deployments)
    c = client(httpserver)
    c.capabilities()
    body = c.put_group(GROUP)
    assert body.get("adopted") and body["deploymentId"] == "d-old" and puts == [1]


def test_a_read_answered_bad_connection_counts_no_try(httpserver):
    answers = iter([jetty(502, BAD_CONNECTION, "/v2/deployments")] * 5)  # more than attempts (3)
    httpserver.expect_request("/v2/deployments").respond_with_handler(
        lambda r: next(answers, None) or Response("[]", content_type="application/json"))
    assert client(httpserver).deployments() == []


#: A 1.4.8 - 1.6.392 standby whose leader's host did not answer in time (packets dropped, not a refused port):
#: v1.4.8 src/main/scala/mesosphere/marathon/api/LeaderProxyFilter.scala:288-289 (504 ERROR_STATUS_GATEWAY_TIMEOUT,
#: :325; the connect path :285-289, :330-338), only out of copyRequestToConnection: a write's connect; v1.5.1 :285
#: and :341 (copyConnectionResponse) also for a status that did not come in time; v1.6.392 :282-284, :333-335 the
#: same.
TIMED_OUT = "Connection to leader timed out."


def test_a_write_timed_out_on_its_connect_to_the_leader_is_sent_again_at_once_on_1_4_8(httpserver):
    """1.4.8 - 1.4.x: the 504 comes only from the write's connect (its body goes with the status read, whose
    failures are 502s): nothing reached a leader, so it is sent again at once, counting no try (it used to end
    as "sent once ... may have been applied")."""
    election = Election(httpserver, refusals=4, status=504, version="1.4.8", text=TIMED_OUT)
    c = client(httpserver)
    c.capabilities()
    assert c.put_group(GROUP)["deploymentId"] == "d-1"
    assert election.log == ["PUT refused"] * 4 + ["PUT"]  # no looks needed; more than attempts (3)
    assert len(election.leader_puts) == 1


@pytest.mark.parametrize("version", ["1.5.1", "1.6.392", None])
@pytest.mark.parametrize("applied", [False, True])
def test_a_write_timed_out_where_the_leader_may_have_taken_it_is_looked_for_first(httpserver, version, applied):
    """From 1.5.1 the same 504 also says a leader took the request and gave no status in time: the group is
    looked at through a leader first; adopted when the old leader applied it, else sent again, landing once."""
    election = Election(httpserver, refusals=2, status=504, version=version, text=TIMED_OUT, applied=applied)
    c = client(httpserver, retry=fast(settle=0.0))
    if version:
        c.capabilities()
    body = c.put_group(GROUP)
    if applied:
        assert body.get("adopted") and body["deploymentId"] == "d-old" and election.leader_puts == []
    else:
        assert body["deploymentId"] == "d-1" and len(election.leader_puts) == 1
    assert election.log[0] == "PUT refused" and any(e.startswith("GET") for e in election.log), election.log


def test_a_read_timed_out_at_the_leader_counts_no_try_and_a_proxys_504_is_still_maybe_applied(httpserver):
    answers = iter([jetty(504, TIMED_OUT, "/v2/deployments")] * 5)  # more than attempts (3)
    httpserver.expect_request("/v2/deployments").respond_with_handler(
        lambda r: next(answers, None) or Response("[]", content_type="application/json"))
    assert client(httpserver).deployments() == []
    puts = []

    def put(request):  # a proxy's own 504 (not a standby's text): the write may have reached Marathon
        puts.append(1)
        return Response("<html><body><h1>504 Gateway Time-out</h1></body></html>", status=504,
                        content_type="text/html")

    httpserver.expect_request("/v2/apps", method="PUT").respond_with_handler(put)
    with pytest.raises(MarathonError):
        client(httpserver, retry=fast(settle=0.0)).update_apps([{"id": "/mnist/worker-0", "instances": 0}])
    assert puts == [1]
