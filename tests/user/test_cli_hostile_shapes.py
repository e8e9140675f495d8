"""Every answer we read, in every wrong shape, for every verb that reads it: one line, exit 1, never a traceback.

The corpus: what the local Marathon (and its Mesos master and agents' endpoints) answers each verb for a
running job, recorded once through a proxy (tests/hostile_server.py); then every node of every recorded
JSON answer (the first item of each list, every key of each object) is replaced, one at a time, by a value
of another shape — a string where an object or a number is, a list where a string is, an object, a number,
``null`` — and each verb that read that endpoint is run against the recorded answers with that one change.
The verb either does its work (a field it does not read, or one that may be absent) or says one error
line (a hint may follow), exit 1; never a traceback, never another exit code.

The shapes (marathon_tf/marathon/shapes.py) follow Marathon 1.4–1.11's RAML (mesosphere/marathon
``docs/docs/rest-api/public/api/v2/`` at v1.4.3 and releases/1.11), the Mesos master's ``/master/slaves``
(apache/mesos 1.x ``src/master/http.cpp``) and an agent's ``/state`` (``src/slave/http.cpp``).

The writes are not sent on: they get Marathon's answer to a PUT/DELETE of a group (``{"deploymentId",
"version"}``, FACTS §1.3) from the proxy, so every case starts from the same recorded state.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from click.testing import CliRunner
from hostile_server import DEPLOYMENT, VERSION, Answer, Hostile, Request
from polling import wait_for

from marathon_tf.local import LocalCluster
from marathon_tf.user.cli import cli
from marathon_tf.user.render import render_group
from marathon_tf.user.spec import load_dict

JOB = {"name": "mnist", "style": "tf1", "command": ["python3", "train.py"],
       "roles": {"ps": {"count": 1}, "worker": {"count": 2}}}
#: the verbs, run with ``--marathon URL --timeout 10`` (the job file's path is put in for ``{job}``)
VERBS = {"status": ["status", "mnist"], "list": ["list"], "scale": ["scale", "mnist", "worker=3", "--detach"],
         "deploy": ["deploy", "{job}", "--detach"], "delete": ["delete", "mnist"],
         # follows the deployment (/v2/deployments; the events are tests/marathon/test_events_hostile.py's):
         # still in progress at its --timeout, exit 3, is what it does with the recorded answers
         "scale-wait": ["scale", "mnist", "worker=3", "--wait", "--timeout", "1"],
         "logs": ["logs", "mnist"]}
#: run only for the answers no other verb reads, and only for /v2/deployments and its deployments' own
#: fields (each of its runs waits its --timeout: the rest of what it reads, the other verbs read too)
WAITING = {"scale-wait"}
WAITED_ON = "/v2/deployments"
SELF = "{{proxy}}"  # where the recorded answers name the runner's address (the proxy's, when served)
WRONG = ("a string", ["a", "list"], {"an": "object"}, 7, None)


def _job_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("job") / "job.json"
    path.write_text(json.dumps(JOB))
    return str(path)


def _written(request: Request) -> Answer:
    return Answer(200, json.dumps({"deploymentId": DEPLOYMENT, "version": VERSION}).encode())


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict[str, Any]:
    """verb -> the GETs it made, in order: (path, query) -> (status, content type, body with SELF)."""
    group = render_group(load_dict(JOB))
    for app in group["apps"]:  # the apps as rendered (labels, ports, env), running a stand-in
        app.update(cmd="sleep 600", cpus=0.1, mem=16)
        for key in ("args", "healthChecks", "readinessChecks", "fetch"):
            app.pop(key, None)
    group["apps"][-1]["cpus"] = 100000  # worker-1 is never placed: a queue entry, a deployment in flight
    job_file = _job_file(tmp_path_factory)
    out: dict[str, Any] = {"job": job_file, "answers": {}, "read_by": {}}
    with LocalCluster(dns_refresh=0, kill_grace=1.0, shutdown_grace=1.0, agents=2,  # agents enforced: a queue
                      agent_resources=["cpus:2;mem:4096;disk:10000;ports:[20000-30000]"]) as c:
        runner = c.marathon_url.split("//", 1)[1]
        assert requests.put(c.marathon_url + "/v2/groups/mnist", json=group, timeout=10).status_code == 200
        wait_for(lambda: sum(a["tasksRunning"] for a in requests.get(c.marathon_url + "/v2/apps", timeout=10)
                             .json()["apps"]) == 2, 30, what="ps-0 and worker-0 running")
        wait_for(lambda: requests.get(c.marathon_url + "/v2/queue", timeout=10).json()["queue"], 30,
                 what="worker-1 queued")
        verb_now = [""]

        def forward(request: Request) -> Answer:
            if request.method != "GET":
                return _written(request)
            if request.path == "/v2/events":  # no event stream here: the watch polls /v2/deployments
                return Answer(405, b"", headers={"Content-Type": "text/html"})
            r = requests.get(f"{c.marathon_url}{request.path}", params=request.query or None, timeout=10,
                             headers={k: v for k, v in request.headers.items() if k in ("accept",)})
            body = r.content.replace(runner.encode(), SELF.encode()) if "json" in r.headers.get(
                "Content-Type", "") else r.content
            key = (request.path, request.query)
            out["answers"].setdefault(key, (r.status_code, r.headers.get("Content-Type", ""), body))
            out["read_by"].setdefault(key, [])
            if verb_now[0] not in out["read_by"][key]:
                out["read_by"][key].append(verb_now[0])
            return Answer(r.status_code, body.replace(SELF.encode(), proxy_at[0].encode()),
                          headers={"Content-Type": r.headers.get("Content-Type", "application/json")})

        proxy_at = [""]
        with Hostile(forward) as proxy:
            proxy_at[0] = proxy.url.split("//", 1)[1]
            for name, verb in VERBS.items():
                verb_now[0] = name
                r = _run(proxy.url, verb, job_file)
                assert r.exit_code == (3 if name in WAITING else 0), (name, r.output)
    return out


def _run(url: str, verb: list[str], job_file: str):
    timeout = [] if "--timeout" in verb else ["--timeout", "10"]
    return CliRunner().invoke(cli, [*(job_file if a == "{job}" else a for a in verb), "--marathon", url, *timeout])


def _nodes(value: Any, path: tuple = ()) -> Iterator[tuple]:
    """Every node's path: each key of an object, the first item of a list."""
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _nodes(v, path + (k,))
    elif isinstance(value, list) and value:
        yield from _nodes(value[0], path + (0,))


def _replaced(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    out = copy.deepcopy(value)
    node = out
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = new
    return out


#: the local agent's ``/state`` is run only with ``logs``: ``user/localstate.py`` (outside this change's
#: reach) reads its flags for the other verbs without a shape check
#: (:func:`test_the_local_agents_state_flags_in_a_wrong_shape_are_one_line` shows what that does today)
ONLY = {"/state": {"logs"}}


def _cases(recorded: dict[str, Any]) -> Iterator[tuple]:
    for key, (status, ctype, body) in recorded["answers"].items():
        if "json" not in ctype or status != 200:
            continue
        doc = json.loads(body)
        for path in _nodes(doc):
            node = doc
            for step in path:
                node = node[step]
            for new in WRONG:
                if type(new) is not type(node):
                    yield key, path, new


def _wrong(r, waits: bool = False) -> str | None:
    """What is wrong with the verb's result (None: it did its work, or said one error line, exit 1; a verb
    that ``waits`` may also time out, exit 3, in one line)."""
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        return f"{type(r.exception).__name__}: {r.exception}"
    if "Traceback" in r.output:
        return "a traceback: " + r.output[-300:]
    if r.exit_code not in ((0, 1, 3) if waits else (0, 1)):
        return f"exit {r.exit_code}: {r.output[-300:]}"
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error: ")]
    if r.exit_code in (1, 3) and len(errors) != 1:
        return f"{len(errors)} error lines: {r.stderr[-300:]}"
    return None


def test_every_wrong_shape_of_every_answer_is_one_line_for_every_verb_that_reads_it(recorded):
    answers = recorded["answers"]
    # the case's endpoint and its answer with the one node replaced, made once per case, not once per request
    case: dict[str, Any] = {"now": (None, b"")}

    def serve(request: Request) -> Answer:
        if request.method != "GET":
            return _written(request)
        key = (request.path, request.query)
        if key not in answers:
            return Answer(404, b'{"message": "not recorded"}')
        status, ctype, body = answers[key]
        changed_key, changed = case["now"]
        body = changed if key == changed_key else served[key]
        return Answer(status, body, headers={"Content-Type": ctype})

    here = [""]
    served: dict[tuple, bytes] = {}  # each answer as recorded, naming the server's address
    cases = list(_cases(recorded))
    endpoints = {key[0] for key, _, _ in cases}
    # every endpoint the verbs read is in the corpus: Marathon's and the Mesos master's
    assert {"/v2/info", "/v2/groups/mnist", "/v2/apps", "/v2/queue", "/v2/deployments", "/_local/agents",
            "/mesos/master/slaves", "/state"} <= endpoints, sorted(endpoints)
    ran: dict[str, int] = {}
    failed = []
    with Hostile(serve) as server:
        here[0] = server.url.split("//", 1)[1]
        served.update({k: body.replace(SELF.encode(), here[0].encode()) for k, (_, _, body) in answers.items()})
        for key, path, new in cases:
            readers = [v for v in recorded["read_by"][key] if v in ONLY.get(key[0], VERBS)]
            if not [v for v in readers if v not in WAITING] and (key[0] != WAITED_ON or len(path) > 2):
                continue
            changed = json.dumps(_replaced(json.loads(answers[key][2]), path, new)).encode()
            case["now"] = (key, changed.replace(SELF.encode(), here[0].encode()))
            for name in [v for v in readers if v not in WAITING] or readers:
                ran[name] = ran.get(name, 0) + 1
                wrong = _wrong(_run(server.url, VERBS[name], recorded["job"]), name in WAITING)
                if wrong:
                    failed.append(f"{name}: {key[0]} {'.'.join(map(str, path))} = {json.dumps(new)}: {wrong}")
    assert not failed, f"{len(failed)} of {len(cases)} cases:\n" + "\n".join(failed)
    assert set(ran) == set(VERBS) - {"delete"}, ran  # delete reads nothing but what it writes


def test_the_local_agents_state_flags_in_a_wrong_shape_are_one_line(recorded):
    key = next(k for k in recorded["answers"] if k[0] == "/state")
    status, ctype, body = recorded["answers"][key]

    def serve(request: Request) -> Answer:
        if request.method != "GET":
            return _written(request)
        got = recorded["answers"].get((request.path, request.query))
        if got is None:
            return Answer(404, b'{"message": "not recorded"}')
        text = got[2] if (request.path, request.query) != key else json.dumps(
            {**json.loads(body), "flags": "a string"}).encode()
        return Answer(got[0], text.replace(SELF.encode(), here[0].encode()), headers={"Content-Type": got[1]})

    here = [""]
    with Hostile(serve) as server:
        here[0] = server.url.split("//", 1)[1]
        assert _wrong(_run(server.url, VERBS["deploy"], recorded["job"])) is None


@pytest.mark.parametrize("verb", [["status", "mnist"], ["deploy", "{job}", "--timeout", "2"]], ids=["status", "deploy"])
def test_the_issues_queue_entry_whose_app_is_a_string(recorded, verb):
    """Issue 47's case: ``status`` and ``deploy`` (after its PUT) met ``AttributeError: 'str' object has no
    attribute 'get'`` (marathon/queue.py); now one line: the queue's shape is named, or the verb goes on
    without it (``status``: the queue only explains waits)."""
    def serve(request: Request) -> Answer:
        if request.method != "GET":
            return _written(request)
        got = recorded["answers"].get((request.path, request.query))
        if got is None:
            return Answer(404, b'{"message": "not recorded"}')
        body = got[2]
        if request.path == "/v2/queue":
            queue = json.loads(body)
            queue["queue"][0]["app"] = "/mnist/worker-1"
            body = json.dumps(queue).encode()
        return Answer(got[0], body.replace(SELF.encode(), here[0].encode()), headers={"Content-Type": got[1]})

    here = [""]
    with Hostile(serve) as server:
        here[0] = server.url.split("//", 1)[1]
        r = _run(server.url, verb, recorded["job"])
        assert any(q.path == "/v2/queue" for q in server.log), "the verb did not read the queue"
    assert _wrong(r, waits=True) is None, r.output
    assert "AttributeError" not in r.output


@pytest.mark.parametrize("frameworks", [
    "a string", [{"id": "fw", "offers": "a string"}], [{"id": "fw", "offers": [{"slave_id": "a1",
                                                                                "allocation_info": "a string"}]}],
    [{"id": "fw", "offers": [{"slave_id": "a1", "resources": ["cpus"]}]}],
    [{"id": "fw", "offers": [{"slave_id": ["a1"], "resources": {"cpus": 1.0}}]}]])
def test_the_mesos_masters_frameworks_in_a_wrong_shape_count_as_unknown(frameworks):
    """``/master/frameworks`` (what is offered to Marathon now, read only while agents have offers out: not in
    the recorded corpus): a wrong shape counts as "cannot be told" (``{}``), never an AttributeError."""
    from marathon_tf.marathon.model import Info
    from marathon_tf.user import capacity

    body = json.dumps({"frameworks": frameworks}).encode()
    with Hostile(lambda r: Answer(200, body)) as server:
        assert capacity._own_offers(requests.Session(), server.url, Info(framework_id="fw")) == {}
