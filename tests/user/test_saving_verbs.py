"""The user's side of save rounds and goodput (issue 29): ``marathon-tf checkpoint`` and
``JobHandle.checkpoint()`` ask the job's deciding task (``POST /save`` on its status port) and print the step
and the path, or exit 1 with the reason; ``delete --save``; ``scale`` saves first; ``status`` shows the
goodput in one line (and ``-o json``), the last save round, and once that the program has no save hook."""

from __future__ import annotations

import json

from click.testing import CliRunner
from user_helpers import minimal

from marathon_tf.contract import labels as L
from marathon_tf.user import output, saveround
from marathon_tf.user.cli import cli
from marathon_tf.user.render import render_group
from marathon_tf.user.spec import load_dict


def _serve(httpserver, *, style="tf1", state=None, saver_runs=True, record=None):
    """The job's group on the fake Marathon, every task running on 127.0.0.1 with its status port at the
    fake's own port (so its ``/save`` is the fake's too)."""
    port = httpserver.port
    job = minimal(style=style, logdir="ckpt", **({"roles": {"chief": {"count": 1}, "ps": {"count": 1},
                                                            "worker": {"count": 2}}}
                                                  if style == "parameter_server" else {}))
    apps = []
    for app in render_group(load_dict(job))["apps"]:
        name = app["id"].rsplit("/", 1)[1]
        running = saver_runs or name not in ("worker-0", "chief-0")
        app = dict(app, deployments=[], tasks=[{"id": f"mnist_{name}.x", "host": "127.0.0.1", "state": "TASK_RUNNING",
                                               "ports": [1, port], "startedAt": "2020-01-01T00:00:01.000Z"}]
                   if running else [])
        if state:
            app = dict(app, instances=0, tasks=[], labels={**app["labels"], L.STATE: state, **(record or {})})
        apps.append(app)
    httpserver.expect_request("/v2/groups/mnist", method="GET").respond_with_json({"id": "/mnist", "apps": apps})
    httpserver.expect_request("/v2/queue").respond_with_json({"queue": []})
    return apps


def test_checkpoint_prints_the_step_and_the_path_and_asks_the_deciding_task(httpserver):
    _serve(httpserver)
    httpserver.expect_request("/save", method="POST").respond_with_json(
        {"ok": True, "step": 3012, "path": "ckpt/model.ckpt-3012", "seconds": 0.4})
    r = CliRunner().invoke(cli, ["checkpoint", "mnist", "--marathon", httpserver.url_for("")])
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == "checkpoint of mnist at step 3012: ckpt/model.ckpt-3012 (saved by worker-0 in 0.4s)"
    sent = [req.json for req, _ in httpserver.log if req.path == "/save"]
    assert sent == [{"job": "mnist", "reason": "marathon-tf checkpoint", "hold": False, "timeout": 120.0,
                     "exclude": []}]  # the one form of a save request (contract/taskapi SaveRequest)
    r = CliRunner().invoke(cli, ["checkpoint", "mnist", "--marathon", httpserver.url_for(""), "-o", "json"])
    assert json.loads(r.stdout) == {"job": "mnist", "task": "worker-0", "step": 3012,
                                    "path": "ckpt/model.ckpt-3012", "seconds": 0.4}


def test_checkpoint_of_a_parameter_server_job_asks_its_chief(httpserver):
    _serve(httpserver, style="parameter_server")
    httpserver.expect_request("/save", method="POST").respond_with_json(
        {"ok": True, "step": 7, "path": "ckpt/ckpt-7", "seconds": 0.1})
    from marathon_tf.marathon.client import Client
    from marathon_tf.user.api import Marathon

    saved = Marathon(client=Client(httpserver.url_for(""))).job("mnist").checkpoint()
    assert (saved.task, saved.step, saved.path) == ("chief-0", 7, "ckpt/ckpt-7")


def test_checkpoint_says_why_not_and_exits_1(httpserver):
    _serve(httpserver)
    httpserver.expect_request("/save", method="POST").respond_with_json(
        {"ok": False, "message": "worker-0's training program declares no save hook (it never printed "
                                 "'marathon-tf save-hook: ready'; docs/restarts.md)"}, status=409)
    r = CliRunner().invoke(cli, ["checkpoint", "mnist", "--marathon", httpserver.url_for("")])
    assert r.exit_code == 1
    assert "job mnist could not save a checkpoint: worker-0's training program declares no save hook" in r.stderr
    assert "docs/restarts.md" in r.stderr


def test_checkpoint_waits_for_a_program_that_is_starting_within_its_timeout(httpserver):
    """Issue 43, item 2: `checkpoint` during start-up said "declares no save hook" while the program was still
    importing TensorFlow. The deciding task says the program is starting (409, ``starting``); the command asks
    again until its timeout, and says so in one line if it is still starting then."""
    from marathon_tf.marathon.client import Client

    _serve(httpserver)
    starting = {"ok": False, "starting": True,
                "message": "worker-0's training program is starting: it has not said yet whether it can save"}
    answers = [(starting, 409), (starting, 409), ({"ok": True, "step": 12, "path": "ckpt/model.ckpt-12",
                                                    "seconds": 0.2}, 200)]

    def answer(request):
        from werkzeug.wrappers import Response

        body, code = answers.pop(0)
        return Response(json.dumps(body), status=code, content_type="application/json")

    httpserver.expect_request("/save", method="POST").respond_with_handler(answer)
    slept: list[float] = []
    saved = saveround.save_round(Client(httpserver.url_for("")), "mnist", timeout=30, sleep=slept.append)
    assert (saved["step"], slept) == (12, [1.0, 1.0])
    httpserver.clear()
    _serve(httpserver)
    httpserver.expect_request("/save", method="POST").respond_with_json(starting, status=409)
    r = CliRunner().invoke(cli, ["checkpoint", "mnist", "--marathon", httpserver.url_for(""), "--timeout", "2s"])
    assert r.exit_code == 1
    assert ("job mnist could not save a checkpoint within 2 s: worker-0's training program is starting" in r.stderr
            and "declares no save hook" not in r.stderr), r.stderr
    assert 1 <= len([q for q, _ in httpserver.log if q.path == "/save"]) <= 3


def test_checkpoint_of_a_job_whose_saver_does_not_run_or_that_ended(httpserver):
    _serve(httpserver, saver_runs=False)
    r = CliRunner().invoke(cli, ["checkpoint", "mnist", "--marathon", httpserver.url_for("")])
    assert r.exit_code == 1 and "its deciding task worker-0 is not running" in r.stderr, r.output


def test_an_ended_job_has_nothing_to_save(httpserver):
    _serve(httpserver, state="Succeeded")
    r = CliRunner().invoke(cli, ["checkpoint", "mnist", "--marathon", httpserver.url_for("")])
    assert r.exit_code == 1 and "job mnist is Succeeded: no program runs that could save" in r.stderr, r.output


def test_delete_save_saves_first_and_a_job_that_cannot_is_not_deleted(httpserver):
    _serve(httpserver)
    httpserver.expect_oneshot_request("/save", method="POST").respond_with_json(
        {"ok": False, "message": "no training program runs in worker-0 now"}, status=409)
    r = CliRunner().invoke(cli, ["delete", "mnist", "--save", "--marathon", httpserver.url_for("")])
    assert r.exit_code == 1 and "no training program runs" in r.stderr
    assert not any(req.method == "DELETE" for req, _ in httpserver.log)
    httpserver.expect_request("/save", method="POST").respond_with_json(
        {"ok": True, "step": 12, "path": "ckpt/model.ckpt-12", "seconds": 0.2})
    httpserver.expect_request("/v2/groups/mnist", method="DELETE").respond_with_json(
        {"deploymentId": "d1", "version": "v"})
    r = CliRunner().invoke(cli, ["delete", "mnist", "--save", "--marathon", httpserver.url_for("")])
    assert r.exit_code == 0, r.output
    assert "saved a checkpoint first: step 12, ckpt/model.ckpt-12 (by worker-0" in r.stderr
    assert r.stdout.strip() == "deleted mnist (deployment d1)"
    r = CliRunner().invoke(cli, ["delete", "mnist", "--save", "--purge", "--marathon", httpserver.url_for("")])
    assert r.exit_code == 2 and "--save and --purge" in r.stderr


def test_status_shows_the_goodput_the_last_save_and_once_a_missing_hook():
    good = {"ratio": 0.931, "wallSeconds": 1300.0, "trainingSeconds": 1210.0, "productiveSeconds": 1210.0,
            "lostSeconds": {"placement": 40.0, "start": 41.0, "recovery": 12.0, "retrained": 0.0, "stalled": 0.0}}
    assert output.goodput_text(good) == "goodput 93.1% (lost: placement 40s, start 41s, recovery 12s, retrained 0s)"
    stalled = {**good, "lostSeconds": {**good["lostSeconds"], "stalled": 95.0}}
    assert output.goodput_text(stalled).endswith("retrained 0s, stalled 1m35s)")
    status = {"job": "mnist", "groupId": "/mnist", "state": "Running", "tasks": [], "goodput": good,
              "saveHook": {"task": "worker-0", "declared": False}}
    text = output.status_text(status)
    assert "  goodput    93.1% (lost: placement 40s, start 41s, recovery 12s, retrained 0s)" in text
    assert text.count("declares no save hook") == 1 and "save hook  none: worker-0's program" in text
    status.update(saveHook={"task": "worker-0", "declared": True},
                  lastSave={"task": "worker-0", "step": 3059, "path": "ckpt/model.ckpt-3059",
                            "reason": "ps-0 is stopped"})
    assert "saved      checkpoint at step 3059 (ckpt/model.ckpt-3059; ps-0 is stopped)" in output.status_text(status)


def test_status_reads_the_goodput_from_the_deciding_task_and_from_the_record_once_it_ended(httpserver):
    from marathon_tf.marathon.client import Client
    from marathon_tf.user.status import job_status

    good = {"ratio": 0.5, "wallSeconds": 10.0, "lostSeconds": {"placement": 5.0}}
    _serve(httpserver)

    def probe(url):
        mine = f":{httpserver.port}/" in url
        return {"phase": "running", "step": 3, "save_hook": True, "goodput": good if mine else None,
                "last_save": {"step": 3, "path": "ckpt/model.ckpt-3", "at": 1.0, "reason": "r"} if mine else None}
    st = job_status(Client(httpserver.url_for("")), "mnist", probe_get=probe).to_dict()
    assert st["goodput"] == good and st["saveHook"] == {"task": "worker-0", "declared": True}
    assert st["lastSave"]["step"] == 3 and not any("_goodput" in t for t in st["tasks"])
    httpserver.clear()
    _serve(httpserver, state="Succeeded", record={L.GOODPUT: json.dumps({**good, "ratio": 0.75})})
    st = job_status(Client(httpserver.url_for("")), "mnist").to_dict()
    assert st["goodput"]["ratio"] == 0.75


def test_scale_and_delete_save_hold_the_job_at_the_checkpoint_and_let_go_when_marathon_refuses(httpserver):
    """One save round per scale: the scale asks the deciding task to save *and hold* (the stopped tasks' own rounds
    then find the job saved there, so nothing is trained past it and no second round runs); a PUT Marathon
    refuses lets go at once (``POST /hold {"release": true}``), as does a refused ``delete --save``."""
    from marathon_tf.contract.errors import MarathonTFError
    from marathon_tf.marathon.client import Client, RetryPolicy
    from marathon_tf.user import jobs

    _serve(httpserver)
    httpserver.expect_request("/v2/info").respond_with_json({"version": "1.11.24", "name": "marathon"})
    httpserver.expect_request("/save", method="POST").respond_with_json(
        {"ok": True, "step": 12, "path": "ckpt/model.ckpt-12", "seconds": 0.2, "held": True})
    httpserver.expect_request("/hold", method="POST").respond_with_json({"held": False, "released": True})
    httpserver.expect_oneshot_request("/v2/groups/mnist", method="PUT").respond_with_json(
        {"message": "Not Authorized to perform this action!"}, status=403)
    client = Client(httpserver.url_for(""), retry=RetryPolicy(attempts=1))
    try:
        jobs.scale(client, "mnist", {"worker": ("=", 3)}, wait_for_resources=False)
        raise AssertionError("the refused PUT raised nothing")
    except MarathonTFError:
        pass
    sent = [(req.path, req.json) for req, _ in httpserver.log if req.path in ("/save", "/hold")]
    assert sent == [("/save", {"job": "mnist", "reason": "marathon-tf scale (2 → 3 workers)", "hold": True,
                               "timeout": saveround.SCALE_SAVE_TIMEOUT, "exclude": []}),
                    ("/hold", {"job": "mnist", "release": True, "reason": "the scale's PUT did not go through"})], sent
    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_json({"deploymentId": "d2",
                                                                                  "version": "v2"})
    httpserver.log.clear()
    plan, result = jobs.scale(client, "mnist", {"worker": ("=", 3)}, wait_for_resources=False)
    assert result is not None and result.saved == {"task": "worker-0", "step": 12, "path": "ckpt/model.ckpt-12",
                                                   "seconds": 0.2, "held": True}, result
    assert [req.path for req, _ in httpserver.log if req.path in ("/save", "/hold")] == ["/save"]  # held: no release
    httpserver.expect_oneshot_request("/v2/groups/mnist", method="DELETE").respond_with_json(
        {"message": "Not Authorized to perform this action!"}, status=403)
    httpserver.log.clear()
    r = CliRunner().invoke(cli, ["delete", "mnist", "--save", "--marathon", httpserver.url_for("")])
    assert r.exit_code != 0 and "Not Authorized" in r.stderr, r.output
    sent = [(req.path, req.json) for req, _ in httpserver.log if req.path in ("/save", "/hold")]
    assert [(p, b.get("hold"), b.get("release")) for p, b in sent] == [("/save", True, None), ("/hold", None, True)]
