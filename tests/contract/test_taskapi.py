"""The task HTTP API (contract/taskapi): its routes listed once, the control routes' typed requests, the one client
against a real status server on 127.0.0.1, and the one batched fan-out."""

import threading
import time

import pytest
import requests

from marathon_tf.contract import taskapi, taskauth
from marathon_tf.contract.taskapi import (
    HOLD,
    SAVE,
    HoldRequest,
    LedgerReport,
    Reply,
    SaveRequest,
    TaskApiError,
    TaskClient,
    broadcast,
)
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.task.keeper import Keeper
from marathon_tf.task.ledger import Ledger
from marathon_tf.task.status_server import StatusServer, TaskStatus

KEY = "k" * 43


def test_the_routes_are_listed_once_and_the_key_check_reads_them():
    paths = [(r.method, r.path) for r in taskapi.ROUTES]
    assert len(set(paths)) == len(paths)
    assert taskauth.CONTROL_PATHS == {"/rendezvous", "/leader", "/save", "/hold", "/ledger"}
    assert taskauth.CONTROL_GETS == {"/rendezvous", "/leader"}
    assert all(r.control for r in taskapi.ROUTES if r.method == "POST")


def test_the_control_requests_go_to_json_and_back():
    save = SaveRequest("ml/mnist", "ps-0 is stopped", hold=True, timeout=20.0, exclude=("worker-1",))
    assert save.to_json() == {"job": "ml/mnist", "reason": "ps-0 is stopped", "hold": True, "timeout": 20.0,
                              "exclude": ["worker-1"]}
    assert SaveRequest.from_json(save.to_json()) == save
    hold = HoldRequest("ml/mnist", "ps-0 is stopped", 12.5)
    assert hold.to_json() == {"job": "ml/mnist", "reason": "ps-0 is stopped", "seconds": 12.5}
    assert HoldRequest.from_json(hold.to_json()) == hold
    assert HoldRequest("j", release=True).to_json() == {"job": "j", "release": True}
    assert HoldRequest.from_json(HoldRequest("j", "r", 3.0, extend=True).to_json()).extend
    report = LedgerReport("j", {"id": "a", "task": "worker-1", "kind": "failure"}, 3, True,
                          ({"id": "b", "task": "worker-1"},), "2026-01-01T00:00:00.000Z")
    assert LedgerReport.from_json(report.to_json()) == report


def test_the_servers_read_is_bounded_and_a_wrong_shape_is_one_line():
    # bounded as the deciding task takes them: a timeout within 0.5..600 s, a reason of at most 300 characters
    assert SaveRequest.from_json({"job": "j", "timeout": 10_000, "reason": "r" * 1000}) == \
        SaveRequest("j", "r" * 300, False, 600.0)
    assert SaveRequest.from_json({"job": "j", "timeout": 0.01}).timeout == 0.5
    assert SaveRequest.from_json({"job": "j"}) == SaveRequest("j")  # unknown keys, missing ones: defaults
    for body, said in (([], "POST /save: expected a JSON object, got list"),
                       ({"timeout": "soon"}, "timeout: a number of seconds"),
                       ({"timeout": float("inf")}, "timeout: a number of seconds")):
        with pytest.raises(TaskApiError, match="^" + said.replace("(", r"\(") + "$"):
            SaveRequest.from_json(body)
    assert HoldRequest.from_json({"job": "j", "seconds": "x"}).seconds is None  # the longest hold, bounded
    for body in ({"job": "j"}, {"job": "j", "entry": "x"}, {"job": "j", "entry": ["a"]}):
        with pytest.raises(TaskApiError, match="^the report's entry is missing or malformed$"):
            LedgerReport.from_json(body)
    odd = LedgerReport.from_json({"job": "j", "entry": {}, "generation": True, "history": "abc", "app_version": 3})
    assert (odd.generation, odd.history, odd.app_version) == (None, (), None)


def test_a_keeper_answers_a_report_of_another_shape_with_one_line_not_a_traceback():
    """A ``POST /ledger`` whose entry is not an object (a string, a list): 400 with one line. Before, the keeper's
    ``dict(entry)`` raised out of the route."""
    keeper = Keeper(TaskContext(job="ml/mnist", role="worker", index=0, cluster={"worker": 2}),
                    Ledger((3, 600.0), (5, 600.0)))
    for entry in ("worker-1 failed", ["worker-1"]):
        assert keeper.post({}, {"job": "ml/mnist", "entry": entry}) == (
            400, {"message": "the report's entry is missing or malformed"})


@pytest.fixture
def server():
    status = TaskStatus(job="ml/mnist", task="worker-1", role="worker", index=1)
    srv = StatusServer(status, "127.0.0.1", 0, guard=taskauth.Guard(KEY)).start()
    seen: list = []

    def hold(query, body):
        seen.append(body)
        return 200, {"held": True, "step": 7}

    srv.add_post_route(HOLD.path, hold)
    srv.add_post_route(SAVE.path, lambda query, body: (409, {"ok": False, "message": "no save hook"}))
    srv.seen = seen
    yield srv
    srv.close()


def test_the_client_sends_the_key_the_session_or_the_owner_holds(server):
    where = f"127.0.0.1:{server.port}"
    bare = TaskClient(requests.Session())
    refused = bare.call(where, HOLD, HoldRequest("ml/mnist", "r", 1.0).to_json())
    assert refused.code == 401 and "needs the job's key" in refused.json()["message"]
    owner = TaskClient(requests.Session(), headers=taskauth.headers(KEY))  # the owner's side (checkpoint)
    assert owner.call(where, HOLD, HoldRequest("ml/mnist", "r", 1.0).to_json()) == Reply(200, {"held": True,
                                                                                                "step": 7})
    session = requests.Session()
    session.auth = taskauth.JobKeyAuth(KEY)  # a task's session (taskauth.install)
    task = TaskClient(session)
    assert task.save(where, SaveRequest("ml/mnist"), timeout=5.0) == Reply(409, {"ok": False,
                                                                                 "message": "no save hook"})
    assert task.call(f"http://{where}", taskapi.PROGRESS).ok  # a base URL works as well as host:port
    answers = task.hold({"worker-1": where, "worker-2": "127.0.0.1:1"}, HoldRequest("ml/mnist", "r", 2.0),
                        timeout=2.0)
    assert answers["worker-1"] == Reply(200, {"held": True, "step": 7})
    away = answers["worker-2"]
    assert away is not None and away.code is None and isinstance(away.error, requests.ConnectionError)
    assert server.seen[-1] == {"job": "ml/mnist", "reason": "r", "seconds": 2.0}


def test_a_reply_that_is_not_json_has_its_code_and_no_body():
    class Session:
        def post(self, url, json=None, timeout=None, **kw):
            return type("R", (), {"status_code": 502, "json": lambda self: (_ for _ in ()).throw(ValueError("html"))})()

    reply = TaskClient(Session()).report("127.0.0.1:9", LedgerReport("j", {}), timeout=(1.0, 1.0))
    assert reply == Reply(502, None) and not reply.ok and reply.json() is None


def test_broadcast_keeps_the_order_bounds_its_threads_and_takes_a_fault_as_none():
    lock, running, most = threading.Lock(), [0], [0]

    def call(n):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.002)
        with lock:
            running[0] -= 1
        if n % 7 == 0:
            raise RuntimeError("away")
        return n * 2

    targets = {f"worker-{i}": i for i in range(1, 200)}
    out = broadcast(call, targets, workers=8, batch=50)
    assert list(out) == list(targets) and most[0] <= 8
    assert all(out[f"worker-{i}"] == (None if i % 7 == 0 else 2 * i) for i in range(1, 200))
    assert broadcast(call, [1, 2, 7]) == [2, 4, None] and broadcast(call, {}) == {} and broadcast(call, []) == []
    started = time.monotonic()
    assert len(broadcast(lambda n: n, range(10_000))) == 10_000  # a 10,000-task fan-out in batches
    assert time.monotonic() - started < 20


def test_the_client_follows_no_redirect_so_the_jobs_key_goes_nowhere_else(httpserver):
    """The user side sends the job's key in a header (``requests`` carries a header on through a redirect, only
    ``Authorization`` is dropped): a task's status port that redirects (a proxy, a hostile host) gets its answer
    taken as it is — not ok — and the address it names is never asked."""

    httpserver.expect_request("/save", method="POST").respond_with_data(
        "", status=307, headers={"Location": httpserver.url_for("/elsewhere")})
    httpserver.expect_request("/elsewhere").respond_with_json({"ok": True, "step": 1})
    client = TaskClient(requests.Session(), headers={"X-Key": "secret"})
    reply = client.save(httpserver.url_for(""), SaveRequest("j", "r"), timeout=5)
    assert reply.code == 307 and not reply.ok
    assert [req.path for req, _ in httpserver.log] == ["/save"]
    assert httpserver.log[0][0].headers.get("X-Key") == "secret"


def test_read_gets_a_tasks_get_route_by_its_url_and_gives_none_for_anything_but_a_200_object(httpserver):
    """The user side's ``status`` and ``events`` and the tasks' reads of their peers' ``/status`` and ``/progress``
    go through the one client: a route of the task API, its query kept; an answer that is not a whole 200 JSON
    object, or a path that is no route, is None (a task's status is advisory)."""
    httpserver.expect_request("/status").respond_with_json({"phase": "running", "step": 7})
    httpserver.expect_request("/events", query_string="shared=1").respond_with_json({"shared": []})
    httpserver.expect_request("/progress").respond_with_json({"message": "starting"}, status=503)
    client = TaskClient(requests.Session())
    assert client.read(httpserver.url_for("/status")) == {"phase": "running", "step": 7}
    assert client.read(httpserver.url_for("/events") + "?shared=1") == {"shared": []}
    assert client.read(httpserver.url_for("/progress")) is None
    assert client.read(httpserver.url_for("/v2/apps")) is None and client.read("http://127.0.0.1:1/status") is None
    assert [req.path for req, _ in httpserver.log] == ["/status", "/events", "/progress"]
