"""Verbs take a job the same way (positional JOB), hints name only real flags, `scale` says "no change"
truthfully and does not quietly start a finished job, durations like 5m."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner
from user_helpers import minimal, no_job_yet

from marathon_tf.contract.progress import parse_duration
from marathon_tf.user.cli import cli
from marathon_tf.user.cli.params import DURATION
from marathon_tf.user.render import render_group
from marathon_tf.user.spec import load_dict


def _as_marathon_returns_it(group):
    """Marathon's copy of the group carries its defaults (what made every task look changed)."""
    apps = []
    for app in group["apps"]:
        app = json.loads(json.dumps(app))
        app.update(version="2026-11-24T00:00:00.000Z", tasksRunning=1, requirePorts=False, backoffSeconds=1,
                   upgradeStrategy={"minimumHealthCapacity": 1, "maximumOverCapacity": 1})
        for p in app.get("portDefinitions") or []:
            p.setdefault("protocol", "tcp")
            p.setdefault("labels", {})
        apps.append(app)
    return {**group, "apps": apps}


def _serve(httpserver, labels=None):
    group = _as_marathon_returns_it(render_group(load_dict(minimal())))
    if labels:
        for app in group["apps"]:
            app["labels"] = {**app["labels"], **labels}
    httpserver.expect_request("/v2/groups/mnist", method="GET").respond_with_json(group)
    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_json(
        {"deploymentId": "d2", "version": "v"})
    return httpserver.url_for("")


def _puts(httpserver):
    return [req for req, _ in httpserver.log if req.method == "PUT"]


def test_scale_to_the_current_counts_is_no_change_and_sends_nothing(httpserver):
    url = _serve(httpserver)
    r = CliRunner().invoke(cli, ["scale", "mnist", "workers=2", "--marathon", url])
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == "no change: mnist already has 2 worker"
    assert "restart" not in r.output and _puts(httpserver) == []


def test_scale_takes_the_job_like_every_verb_and_restarts_what_changes(httpserver):
    url = _serve(httpserver)
    r = CliRunner().invoke(cli, ["scale", "mnist", "workers=+1", "--marathon", url, "-o", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["changed"] and out["tasks"]["start"] == ["worker-2"]
    assert sorted(out["tasks"]["restart"]) == ["ps-0", "worker-0", "worker-1"]  # the cluster spec changed
    assert len(_puts(httpserver)) == 1


@pytest.mark.parametrize("state", ["Succeeded", "Failed"])
def test_scale_refuses_to_start_a_finished_job_again_without_force(httpserver, state):
    url = _serve(httpserver, labels={"marathon-tf/state": state})
    r = CliRunner().invoke(cli, ["scale", "mnist", "workers=-1", "--marathon", url])
    assert r.exit_code == 2, r.output
    assert f"job mnist has ended ({state})" in r.stderr and "--force" in r.stderr
    assert _puts(httpserver) == []
    r = CliRunner().invoke(cli, ["scale", "mnist", "workers=-1", "--force", "--marathon", url])
    assert r.exit_code == 0, r.output
    assert "start: ps-0, worker-0" in r.stdout and "stop: worker-1" in r.stdout
    assert len(_puts(httpserver)) == 1


@pytest.mark.parametrize("step, refused", [(300, True), (120, False)])
def test_scale_refuses_a_job_that_reached_its_target_step_without_force(httpserver, step, refused):
    """Issue 21: `scale` of a job whose training reached its target (its end not recorded yet)
    restarted every program and trained again. The step is what its tasks report on /status."""
    group = _as_marathon_returns_it(render_group(load_dict(minimal(progress={"target_step": 300}))))
    for app in group["apps"]:
        app["tasks"] = [{"id": app["id"].strip("/").replace("/", "_") + ".1", "state": "TASK_RUNNING",
                         "host": "127.0.0.1", "ports": [1, httpserver.port], "stagedAt": "2026-11-24T00:00:00.000Z"}]
    httpserver.expect_request("/v2/groups/mnist", method="GET").respond_with_json(group)
    httpserver.expect_request("/v2/queue").respond_with_json({"queue": []})
    httpserver.expect_request("/status").respond_with_json({"phase": "running", "step": step})
    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_json(
        {"deploymentId": "d2", "version": "v"})
    url = httpserver.url_for("")
    r = CliRunner().invoke(cli, ["scale", "mnist", "workers=3", "--marathon", url])
    if refused:
        assert r.exit_code == 2, r.output
        assert "job mnist has reached its target step (300 of 300)" in r.stderr and "--force" in r.stderr
        assert _puts(httpserver) == []
        r = CliRunner().invoke(cli, ["scale", "mnist", "workers=3", "--force", "--marathon", url])
    assert r.exit_code == 0, r.output
    assert len(_puts(httpserver)) == 1


def test_hints_name_only_flags_that_exist(httpserver, monkeypatch, tmp_path):
    monkeypatch.delenv("MARATHON_URL", raising=False)
    monkeypatch.setenv("MARATHON_TF_CONFIG", str(tmp_path / "none.json"))
    for verb in (["status"], ["list"], ["delete", "j"], ["logs", "j"], ["scale", "j", "workers=1"]):
        r = CliRunner().invoke(cli, verb)
        assert r.exit_code == 2
        hint = r.stderr.split("hint:", 1)[1]
        assert f"{verb[0]} --local" not in hint and "--job" not in hint
        assert "marathon-tf local serve" in hint and "deploy job.json --local" in hint
    httpserver.expect_request("/v2/apps").respond_with_json({"apps": [
        {"id": "/a/worker-0", "labels": {"marathon-tf/job": "a"}},
        {"id": "/b/worker-0", "labels": {"marathon-tf/job": "b"}}]})
    r = CliRunner().invoke(cli, ["status", "--marathon", httpserver.url_for("")])
    assert r.exit_code == 2 and "--job" not in r.stderr and "marathon-tf status a" in r.stderr


def test_durations():
    assert [parse_duration(t) for t in ("90", "90s", "5m", "1h30m", "1.5h", "2d")] == [
        90, 90, 300, 5400, 5400, 172800]
    for bad in ("", "5x", "m", "1h30", "-5"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    with pytest.raises(click.BadParameter):
        DURATION.convert("soon", None, None)
    r = CliRunner().invoke(cli, ["deploy", "x.json", "--timeout", "soon"])
    assert r.exit_code == 2 and "not a duration" in r.output


@pytest.mark.parametrize("buildref,code", [("8f2e5a1", 2), ("local", 0)])
def test_a_relative_fetch_is_not_sent_to_a_remote_marathon_as_this_machines_path(httpserver, tmp_path,
                                                                                 buildref, code):
    (tmp_path / "train.py").write_text("print('hi')\n")
    job = tmp_path / "job.json"
    job.write_text(json.dumps(minimal(fetch=["train.py"])))
    httpserver.expect_request("/v2/info").respond_with_json({"name": "marathon", "version": "1.8.222",
                                                             "buildref": buildref})
    no_job_yet(httpserver)
    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_json({"deploymentId": "d", "version": "v"})
    r = CliRunner().invoke(cli, ["deploy", str(job), "--detach", "--marathon", httpserver.url_for("")])
    assert r.exit_code == code, r.output
    if code:
        assert "fetch[0] is a file of this machine" in r.stderr and "hint:" in r.stderr
        assert _puts(httpserver) == []
    else:
        assert len(_puts(httpserver)) == 1
    # an explicit file:// URI is the user's statement that every agent has it: sent as it is
    job.write_text(json.dumps(minimal(fetch=[(tmp_path / "train.py").as_uri()])))
    r = CliRunner().invoke(cli, ["deploy", str(job), "--detach", "--marathon", httpserver.url_for("")])
    assert r.exit_code == 0, r.output


def test_quiet_and_verbose(httpserver, tmp_path):
    job = tmp_path / "job.json"
    job.write_text(json.dumps(minimal()))
    no_job_yet(httpserver)
    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_json({"deploymentId": "d", "version": "v"})
    url = httpserver.url_for("")
    r = CliRunner().invoke(cli, ["-q", "deploy", str(job), "--detach", "--marathon", url])
    assert r.exit_code == 0 and r.stderr == "", r.stderr
    r = CliRunner().invoke(cli, ["deploy", str(job), "--detach", "--marathon", url])
    assert "deployed /mnist" in r.stderr and "marathon_tf.marathon" not in r.stderr
    r = CliRunner().invoke(cli, ["-v", "deploy", str(job), "--detach", "--marathon", url])
    assert r.exit_code == 0
    assert f"marathon_tf.marathon: PUT {url.rstrip('/')}/v2/groups/mnist -> 200" in r.stderr
    r = CliRunner().invoke(cli, ["deploy", str(job), "--detach", "--marathon", url])
    assert "marathon_tf.marathon" not in r.stderr  # -v does not stick


def test_deploy_local_warns_that_gpus_and_cpus_are_not_enforced(tmp_path):
    job = tmp_path / "job.json"
    job.write_text(json.dumps(minimal(roles={"ps": {"count": 1}, "worker": {"count": 1, "gpus": 1, "cpus": 64}})))
    r = CliRunner().invoke(cli, ["deploy", str(job), "--local", "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "warning: roles.worker.gpus: 1, roles.worker.cpus: 64: the local runner does not enforce" in r.stderr
    job.write_text(json.dumps(minimal()))
    r = CliRunner().invoke(cli, ["deploy", str(job), "--local", "--dry-run"])
    assert "warning" not in r.stderr
