"""What a task's own token may do on ``local serve --auth`` (local/taskscope.py): exactly what the
bootstrap does within its job — read the job's group, apps, tasks, versions; record the job's end (bulk
``PUT /v2/apps`` of labels and ``instances: 0``) — and nothing else. The end-to-end check (a real task
calling back, POST /v2/apps and DELETE /v2/groups refused) is in test_local_security.py."""

from __future__ import annotations

import asyncio
import json
from unittest import mock

import pytest
from aiohttp import streams
from aiohttp.test_utils import make_mocked_request

from marathon_tf.local.taskscope import Grant, Grants, event_visible, refusal

GRANT = Grant("ml_mnist_worker-0.instance-1._app.1", "/ml/mnist/worker-0")


def _why(method: str, path: str, body=None):
    async def run():
        payload = None
        if body is not None:
            payload = streams.StreamReader(mock.Mock(_reading_paused=False), 2 ** 16, loop=asyncio.get_running_loop())
            payload.feed_data(json.dumps(body).encode())
            payload.feed_eof()
        return await refusal(make_mocked_request(method, path, payload=payload), GRANT)
    return asyncio.run(run())


@pytest.mark.parametrize("method,path,body", [
    ("GET", "/v2/groups/ml/mnist?embed=group.apps", None), ("GET", "/v2/groups/ml/mnist/versions", None),
    ("GET", "/v2/apps/ml/mnist/ps-0", None), ("GET", "/v2/apps/ml/mnist/worker-0/tasks", None),
    ("GET", "/v2/apps/ml/mnist/worker-0/versions/2026-01-01T00:00:00.000Z", None),
    ("HEAD", "/v2/info", None), ("GET", "/v2/queue", None), ("GET", "/v2/events", None), ("GET", "/ping", None),
    ("PUT", "/v2/apps?force=true", [{"id": "/ml/mnist/worker-0", "instances": 0, "labels": {"a": "b"}},
                                    {"id": "ml/mnist/ps-0", "labels": {}}]),
])
def test_what_the_bootstrap_does_is_allowed(method, path, body):
    assert _why(method, path, body) is None


@pytest.mark.parametrize("method,path,body,why", [
    ("GET", "/v2/apps", None, "nothing else"), ("GET", "/v2/groups/ml", None, "nothing else"),
    ("GET", "/v2/groups/ml/mnist2", None, "nothing else"), ("GET", "/v2/apps/other/x", None, "nothing else"),
    ("GET", "/v2/deployments", None, "nothing else"), ("GET", "/v2/tasks", None, "nothing else"),
    ("GET", "/state", None, "nothing else"), ("GET", "/files/read?path=/x", None, "nothing else"),
    ("POST", "/v2/apps", {"id": "/ml/mnist/evil", "cmd": "x"}, "nothing else"),
    ("DELETE", "/v2/groups/ml/mnist", None, "nothing else"), ("DELETE", "/v2/apps/ml/mnist/ps-0", None, "nothing else"),
    ("PUT", "/v2/groups/ml/mnist", {"apps": []}, "nothing else"),
    ("POST", "/v2/apps/ml/mnist/ps-0/restart", None, "nothing else"),
    ("DELETE", "/v2/deployments/1", None, "nothing else"), ("POST", "/_local/kill", {}, "nothing else"),
    ("PUT", "/v2/apps", [{"id": "/ml/mnist/worker-0", "cmd": "evil"}], "not cmd"),
    ("PUT", "/v2/apps", [{"id": "/ml/mnist/worker-0", "instances": 5}], "not scale"),
    ("PUT", "/v2/apps", [{"id": "/other/worker-0", "labels": {}}], "not an app of job /ml/mnist"),
    ("PUT", "/v2/apps", [{"id": "/ml/mnist/../other/a", "labels": {}}], "not an app of job"),
    ("PUT", "/v2/apps", {"id": "/ml/mnist/worker-0"}, "a list"),
    ("PUT", "/v2/apps?partialUpdate=false", [{"id": "/ml/mnist/worker-0", "labels": {}}], "partialUpdate"),
])
def test_everything_else_is_refused(method, path, body, why):
    assert why in (_why(method, path, body) or "allowed")


def test_events_and_revocation(tmp_path):
    assert event_visible(GRANT, {"eventType": "status_update_event", "appId": "/ml/mnist/ps-0"})
    assert not event_visible(GRANT, {"eventType": "status_update_event", "appId": "/other/a"})
    plan = {"steps": [{"actions": [{"app": "/ml/mnist/ps-0"}, {"app": "/other/a"}]}]}
    assert not event_visible(GRANT, {"eventType": "deployment_info", "plan": plan})  # another job's app in it
    assert not event_visible(GRANT, {"eventType": "event_stream_detached"})  # about nobody's job: not shown
    grants = Grants()
    path = grants.issue("t1", "/ml/mnist/worker-0", tmp_path)
    token = open(path).read()
    assert grants.find(token) == Grant("t1", "/ml/mnist/worker-0")
    assert oct((tmp_path / path).stat().st_mode)[-3:] == "600"
    assert Grant("t", "/top-level-app").covers("/top-level-app") is False  # no job: nothing
    grants.revoke("t1", tmp_path)
    assert grants.find(token) is None and not (tmp_path / path).exists() and len(grants) == 0


# -- the job's placement (marathon_tf.task.placer): LIKE / UNLIKE constraints of the job's apps ------

CURRENT = {"/ml/mnist/worker-1": {"constraints": [["rack", "IS", "r1"], ["hostname", "UNLIKE", ".*"]]}}


def _placement_why(body):
    async def run():
        payload = streams.StreamReader(mock.Mock(_reading_paused=False), 2 ** 16, loop=asyncio.get_running_loop())
        payload.feed_data(json.dumps(body).encode())
        payload.feed_eof()
        return await refusal(make_mocked_request("PUT", "/v2/apps?force=true", payload=payload), GRANT,
                             CURRENT.get)
    return asyncio.run(run())


@pytest.mark.parametrize("constraints, why", [
    ([["rack", "IS", "r1"], ["hostname", "UNLIKE", "127\\.0\\.0\\.1"]], None),  # released, its siblings' hosts
    ([["rack", "IS", "r1"], ["hostname", "UNLIKE", ".*"], ["rack", "LIKE", "r1|r2"]], None),
    ([["rack", "IS", "r1"]], None),
    ([["hostname", "UNLIKE", "x"]], "only LIKE and UNLIKE"),  # the IS dropped: the job could go anywhere
    ([["rack", "IS", "r2"], ["hostname", "UNLIKE", "x"]], "only LIKE and UNLIKE"),
    ([["rack", "IS", "r1"], ["hostname", "UNIQUE"]], "only LIKE and UNLIKE"),
    ([["rack", "IS", "r1"], ["hostname", "UNLIKE"]], "needs its value"),
    ("x", "must be [field, OPERATOR(, value)] lists"),
])
def test_a_task_may_change_only_the_like_and_unlike_constraints_of_its_jobs_apps(constraints, why):
    said = _placement_why([{"id": "/ml/mnist/worker-1", "constraints": constraints, "labels": {"a": "b"}}])
    assert said is None if why is None else why in said
    # another job's app, or an app the runner does not know, stays refused
    assert "not an app of job" in _placement_why([{"id": "/ml/other/worker-1", "constraints": []}])
    assert "cannot be checked" in _placement_why([{"id": "/ml/mnist/worker-9", "constraints": []}])


def test_without_the_apps_definitions_no_constraint_may_change():
    assert "cannot be checked" in _why("PUT", "/v2/apps", [{"id": "/ml/mnist/worker-1", "constraints": []}])
    assert _why("GET", "/mesos/master/slaves") is None  # the agents' attributes, for a rule on an attribute
    assert "nothing else" in _why("GET", "/mesos/master/state")
