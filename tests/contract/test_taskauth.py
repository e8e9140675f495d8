"""The job key and the one check of the task API's control routes (issue 44 item 1): 401 without the key,
403 with a wrong one, the read-only routes open; the key only in 0600 files of 0700 folders, sent only to
control paths."""

from __future__ import annotations

import os
import stat

import pytest
import requests

from marathon_tf.contract import taskauth
from marathon_tf.marathon import transport
from marathon_tf.task.status_server import StatusServer, TaskStatus

KEY = "k" * 64


def test_the_job_key_is_derived_from_the_owner_key_per_job_and_kept_in_private_files(tmp_path):
    env = {"MARATHON_TF_STATE_DIR": str(tmp_path / "home")}
    assert taskauth.owner_key(env, create=False) is None
    owner = taskauth.owner_key(env)
    assert owner is not None and len(owner) == 32 and taskauth.owner_key(env, create=False) == owner
    folder = tmp_path / "home" / ".keys"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "owner-key").stat().st_mode) == 0o600
    a, b = taskauth.job_key(owner, "/ml/mnist"), taskauth.job_key(owner, "ml/mnist/")
    assert a == b and a != taskauth.job_key(owner, "/ml/other") and a != taskauth.job_key(b"x" * 32, "/ml/mnist")
    (tmp_path / "box").mkdir()
    path = taskauth.write_task_key(a, tmp_path / "box")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "box" / ".secrets").stat().st_mode) == 0o700
    sandbox_env = {taskauth.KEY_FILE_VAR: taskauth.KEY_FILE, "MESOS_SANDBOX": str(tmp_path / "box")}
    assert taskauth.task_key(sandbox_env) == a
    assert taskauth.task_key({}) is None


@pytest.mark.parametrize("method, path", [("POST", "/hold"), ("POST", "/save"), ("POST", "/ledger"),
                                          ("GET", "/rendezvous"), ("GET", "/leader"), ("POST", "/anything")])
def test_every_control_route_needs_the_key(method, path):
    guard = taskauth.Guard(KEY)
    assert guard.refusal(method, path, None, "10.0.0.7")[0] == 401
    assert guard.refusal(method, path, "Bearer " + "x" * 64, "127.0.0.1")[0] == 403
    assert guard.refusal(method, path, KEY, "127.0.0.1")[0] == 403  # the scheme is part of it
    assert guard.refusal(method, path, "Bearer " + KEY, "10.0.0.7") is None
    assert KEY not in str(guard.refusal(method, path, "Bearer " + KEY[:-1], "10.0.0.7"))


@pytest.mark.parametrize("path", ["/health", "/status", "/progress", "/metrics", "/events", "/ledger"])
def test_read_only_routes_stay_open(path):
    assert taskauth.Guard(KEY).refusal("GET", path, None, "10.0.0.7") is None


def test_without_a_key_control_routes_are_taken_from_the_jobs_hosts_only():
    guard = taskauth.Guard(None, lambda: {"worker-0": "10.0.0.9:2222"})
    assert guard.refusal("POST", "/hold", None, "10.0.0.7", {"job": "j"})[0] == 403
    assert guard.refusal("POST", "/hold", None, "10.0.0.9", {"job": "j"}) is None
    assert guard.refusal("POST", "/save", None, "10.0.0.7", {"job": "j", "hold": True})[0] == 403
    assert guard.refusal("POST", "/save", None, "10.0.0.7", {"job": "j", "hold": False}) is None  # `checkpoint`
    assert taskauth.Guard(None).refusal("POST", "/hold", None, "10.0.0.7", {}) is None  # nothing known yet


def test_a_task_sends_its_key_to_control_paths_only():
    auth = taskauth.JobKeyAuth(KEY)
    for url, sent in (("http://10.0.0.1:3000/hold", True), ("http://10.0.0.1:3000/rendezvous?after=1", True),
                      ("http://10.0.0.1:3000/save", True), ("http://10.0.0.1:3000/ledger", True),
                      ("http://10.0.0.1:3000/leader?job=j", True), ("http://10.0.0.1:3000/status", False),
                      ("http://m:8080/v2/apps/ml/mnist", False), ("http://dns:8123/v1/services/x", False)):
        prepared = requests.Request("GET", url).prepare()
        assert (prepared.headers.get("Authorization") == "Bearer " + KEY) is False
        assert (auth(prepared).headers.get("Authorization") == "Bearer " + KEY) is sent, url
    assert KEY not in repr(auth)


@pytest.fixture
def installed():
    taskauth.install(KEY)
    yield
    taskauth.install(None)


def test_the_status_server_checks_every_control_route_in_one_place(installed):
    status = TaskStatus(job="j", task="worker-1", role="worker", index=1)
    got: list[object] = []
    server = StatusServer(status, "127.0.0.1", 0, guard=taskauth.Guard(KEY)).start()
    try:
        server.add_post_route("/hold", lambda q, body: (got.append(body), (200, {"held": True}))[1])
        server.add_route("/rendezvous", lambda q: (200, {"version": 1}))
        server.add_route("/ledger", lambda q: (200, {"summary": {}}))
        base = f"http://127.0.0.1:{server.port}"
        plain = requests.Session()
        r = plain.post(base + "/hold", json={"job": "j"}, timeout=5)
        assert r.status_code == 401 and "key" in r.json()["message"]
        r = plain.post(base + "/hold", json={"job": "j"}, headers={"Authorization": "Bearer nope"}, timeout=5)
        assert r.status_code == 403
        assert plain.get(base + "/rendezvous", timeout=5).status_code == 401
        assert got == []
        for path in ("/health", "/status", "/ledger"):  # read-only: open
            assert plain.get(base + path, timeout=5).status_code == 200, path
        task_side = transport.session()  # what the bootstrap's clients use once it installed its key
        assert task_side.post(base + "/hold", json={"job": "j"}, timeout=5).json() == {"held": True}
        assert task_side.get(base + "/rendezvous", timeout=5).json() == {"version": 1}
        assert got == [{"job": "j"}]
    finally:
        server.close()


def test_processes_making_the_owner_key_at_once_all_get_the_same_whole_key(tmp_path):
    """xdist workers, or a runner and a CLI, may make the owner key at the same moment: none may read a key
    half written (an empty one would derive other job keys: every control request then 403)."""
    import subprocess
    import sys

    code = ("import sys; from marathon_tf.contract import taskauth; "
            "print(taskauth.owner_key({'MARATHON_TF_STATE_DIR': sys.argv[1]}).hex())")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
             for _ in range(8)]
    keys = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert len(keys) == 1 and len(bytes.fromhex(keys.pop())) == 32
    assert [p.name for p in (tmp_path / ".keys").iterdir()] == ["owner-key"]  # no temporary file left


def test_on_a_cluster_the_key_reaches_the_tasks_in_the_apps_env_and_only_in_what_is_sent(httpserver, tmp_path,
                                                                                          monkeypatch):
    """Issue 44 item 1 on a real cluster: no local runner writes a key file there, and the "request from a job
    host" check let any process on a job's agent steer it. The owner's deploy (and scale: the same PUT) puts
    the job's key into each app's env; `render` never shows it; the bootstrap guards with it and keeps it
    from the training program."""
    import json

    from click.testing import CliRunner

    from marathon_tf.user.cli import cli

    monkeypatch.setenv("MARATHON_TF_STATE_DIR", str(tmp_path / "home"))
    job = {"name": "mnist", "style": "tf1", "command": ["python3", "-c", "pass"],
           "roles": {"ps": {"count": 1}, "worker": {"count": 1}}}
    (tmp_path / "job.json").write_text(json.dumps(job))
    httpserver.expect_request("/v2/info").respond_with_json({"name": "marathon", "version": "1.11.24"})
    httpserver.expect_request("/v2/groups/mnist", method="GET").respond_with_json(
        {"message": "Group '/mnist' does not exist"}, status=404)
    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_json(
        {"deploymentId": "d1", "version": "2026-12-06T00:00:00.000Z"})
    httpserver.expect_request("/v2/deployments").respond_with_json([])
    httpserver.expect_request("/v2/queue").respond_with_json({"queue": []})
    r = CliRunner().invoke(cli, ["deploy", "--detach", "--marathon", httpserver.url_for(""), "--no-wait-for-resources",
                                 str(tmp_path / "job.json")])
    assert r.exit_code == 0, r.output
    [put] = [json.loads(q.data) for q, _ in httpserver.log if q.method == "PUT"]
    owner = taskauth.owner_key({"MARATHON_TF_STATE_DIR": str(tmp_path / "home")}, create=False)
    key = taskauth.job_key(owner, "/mnist")
    assert [a["env"][taskauth.KEY_VAR] for a in put["apps"]] == [key, key]
    assert key not in r.output
    rendered = CliRunner().invoke(cli, ["render", str(tmp_path / "job.json")])
    assert rendered.exit_code == 0 and taskauth.KEY_VAR not in rendered.stdout and key not in rendered.stdout
    # the task takes it from its environment (before a local runner's file: the deployer owns the job)
    file_key = "f" * 64
    (tmp_path / "box").mkdir()
    taskauth.write_task_key(file_key, tmp_path / "box")
    env = {taskauth.KEY_VAR: key, taskauth.KEY_FILE_VAR: taskauth.KEY_FILE, "MESOS_SANDBOX": str(tmp_path / "box")}
    assert taskauth.task_key(env) == key and taskauth.task_key({taskauth.KEY_VAR: " "}) is None
    guard = taskauth.Guard(taskauth.task_key(env))
    assert guard.refusal("POST", "/hold", None, "10.0.0.9", {"job": "mnist"})[0] == 401
    assert guard.refusal("POST", "/hold", "Bearer " + key, "10.0.0.9", {"job": "mnist"}) is None
