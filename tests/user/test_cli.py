"""The CLI in-process with CliRunner: help, exit codes, JSON output, no requests on bad input."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from user_helpers import minimal, no_job_yet

from marathon_tf.contract.errors import UsageError
from marathon_tf.user import jobs
from marathon_tf.user.cli import cli
from marathon_tf.user.render import render_group
from marathon_tf.user.spec import load_dict

VERBS = [["deploy"], ["render"], ["validate"], ["export"], ["schema"], ["scale"], ["status"], ["list"], ["delete"],
         ["local"], ["local", "serve"]]


@pytest.mark.parametrize("verb", VERBS, ids=[" ".join(v) for v in VERBS])
def test_help_on_every_verb(verb):
    r = CliRunner().invoke(cli, [*verb, "--help"])
    assert r.exit_code == 0, r.output
    assert "Usage: " in r.stdout


@pytest.mark.parametrize("verb", ["deploy", "scale", "status", "list", "delete"])
def test_help_shows_the_environment_variables(verb):
    text = CliRunner().invoke(cli, [verb, "--help"]).stdout
    for var in ("MARATHON_URL", "MARATHON_USER", "MARATHON_PASSWORD", "MARATHON_TOKEN"):
        assert var in text


def test_bootstrap_is_listed_and_version_prints():
    r = CliRunner().invoke(cli, ["--help"])
    assert "bootstrap" in r.stdout and "deploy" in r.stdout
    assert CliRunner().invoke(cli, ["--version"]).stdout.startswith("marathon-tf, version ")


def test_render_prints_the_group(write_job):
    f = write_job(minimal())
    r = CliRunner().invoke(cli, ["render", str(f)])
    assert r.exit_code == 0
    assert json.loads(r.stdout) == render_group(load_dict(minimal()))


def test_render_is_compact_for_programs_and_indented_when_asked(write_job):
    f = write_job(minimal())
    compact = CliRunner().invoke(cli, ["render", str(f)]).stdout  # stdout is not a terminal here
    pretty = CliRunner().invoke(cli, ["render", str(f), "--pretty"]).stdout
    assert compact.count("\n") == 1 and ", " not in compact.replace('", "', "")
    assert pretty.startswith('{\n  "apps": [') and json.loads(pretty) == json.loads(compact)
    assert CliRunner().invoke(cli, ["render", str(f), "--compact"]).stdout == compact


def test_render_on_a_terminal_is_indented(write_job):
    import os
    import pty
    import subprocess
    import sys

    f = write_job(minimal())
    main, child = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "marathon_tf.user.cli", "render", str(f)], stdout=child,
                              stderr=subprocess.PIPE, timeout=60)
        os.close(child)
        child = None
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the terminal's other side is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(main)
        if child is not None:
            os.close(child)
    text = b"".join(chunks).decode().replace("\r\n", "\n")
    assert proc.returncode == 0, proc.stderr
    assert text.startswith('{\n  "apps": [') and json.loads(text) == render_group(load_dict(minimal()))


def test_validate_json_output_parses(write_job):
    f = write_job(minimal())
    r = CliRunner().invoke(cli, ["validate", str(f), "-o", "json"])
    assert r.exit_code == 0
    assert json.loads(r.stdout) == {"file": str(f), "valid": True,
                                    "name": "mnist", "style": "tf1", "counts": {"ps": 1, "worker": 2}, "apps": 3,
                                    "warnings": [], "placement": []}


def test_bad_job_sends_nothing(write_job, httpserver):
    f = write_job(minimal(roles={"ps": {"count": 1}, "worker": {"count": 2, "gpus": -1}}))
    r = CliRunner().invoke(cli, ["deploy", str(f), "--marathon", httpserver.url_for("")])
    assert r.exit_code == 2
    assert "roles.worker.gpus: must be >= 0" in r.stderr
    assert httpserver.log == []


@pytest.mark.parametrize("args,message", [
    (["workers"], "expected ROLE=N"),
    (["workers=1.5"], "expected ROLE=N"),
    (["workers=1\n"], "expected ROLE=N"),
    ([" workers=1"], "expected ROLE=N"),

    (["workers=abc"], "expected ROLE=N"),
    (["gpus=2"], "unknown role"),
    (["workers=2", "worker=3"], "given twice"),
    (["workers=99999999"], "expected ROLE=N"),
    (["workers=20000"], "at most 10000"),
])
def test_bad_scale_arguments_are_exit_2_before_any_request(httpserver, args, message):
    r = CliRunner().invoke(cli, ["scale", *args, "--marathon", httpserver.url_for("")])
    if message is None:  # a valid delta: rejected only once the job's count is known
        return
    assert r.exit_code == 2, r.output
    assert message in r.stderr
    assert httpserver.log == []


def test_no_marathon_url_is_a_usage_error(monkeypatch, tmp_path, write_job):
    monkeypatch.delenv("MARATHON_URL", raising=False)
    monkeypatch.setenv("MARATHON_TF_CONFIG", str(tmp_path / "none.json"))
    r = CliRunner().invoke(cli, ["list"])
    assert r.exit_code == 2 and "no Marathon URL" in r.stderr and "--local" in r.stderr


def test_unreachable_marathon_is_exit_1_with_a_hint(write_job, monkeypatch):
    r = CliRunner().invoke(cli, ["deploy", str(write_job(minimal())), "--marathon", "http://127.0.0.1:9", "--detach"])
    assert r.exit_code == 1
    assert "connection failed" in r.stderr and "hint:" in r.stderr


def test_deploy_detach_and_json_output(write_job, httpserver):
    no_job_yet(httpserver)
    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_json(
        {"deploymentId": "d1", "version": "2026-11-21T00:00:00.000Z"}, headers={"Marathon-Deployment-Id": "d1"})
    r = CliRunner().invoke(cli, ["deploy", str(write_job(minimal())), "--marathon", httpserver.url_for(""),
                                 "--detach", "-o", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"job": "mnist", "groupId": "/mnist", "deploymentId": "d1", "changed": True,
                                    "version": "2026-11-21T00:00:00.000Z"}
    sent = json.loads([req for req, _ in httpserver.log if req.method == "PUT"][0].data)
    assert [a["id"] for a in sent["apps"]] == ["/mnist/ps-0", "/mnist/worker-0", "/mnist/worker-1"]


def test_dry_run_shows_marathons_plan(write_job, httpserver):
    no_job_yet(httpserver)
    httpserver.expect_request("/v2/groups/mnist", method="PUT", query_string="dryRun=true").respond_with_json(
        {"steps": [{"actions": [{"action": "StartApplication", "app": "/mnist/ps-0"}]}]})
    r = CliRunner().invoke(cli, ["deploy", str(write_job(minimal())), "--marathon", httpserver.url_for(""),
                                 "--dry-run"])
    assert r.exit_code == 0
    assert "step 1: StartApplication /mnist/ps-0" in r.stdout


def test_dry_run_without_marathon_renders(write_job, monkeypatch, tmp_path):
    monkeypatch.delenv("MARATHON_URL", raising=False)
    r = CliRunner().invoke(cli, ["deploy", str(write_job(minimal())), "--dry-run"])
    assert r.exit_code == 0 and json.loads(r.stdout)["id"] == "/mnist"


def test_list_status_and_delete_against_a_marathon(write_job, httpserver):
    group = render_group(load_dict(minimal()))
    apps = []
    for i, app in enumerate(group["apps"]):
        app = dict(app, tasksRunning=1, deployments=[], tasks=[{
            "id": f"mnist_{app['id'].rsplit('/', 1)[1]}.instance-x._app.1", "appId": app["id"], "host": "10.0.0.5",
            "state": "TASK_RUNNING", "ports": [31000 + i, 32000 + i], "stagedAt": "2026-11-21T00:00:00.000Z",
            "healthCheckResults": [{"alive": True}]}])
        apps.append(app)
    httpserver.expect_request("/v2/apps").respond_with_json({"apps": apps})
    httpserver.expect_request("/v2/groups/mnist", method="GET").respond_with_json({"id": "/mnist", "apps": apps})
    httpserver.expect_request("/v2/queue").respond_with_json({"queue": []})
    httpserver.expect_request("/v2/groups/mnist", method="DELETE").respond_with_json(
        {"deploymentId": "d9", "version": "v"})
    url = httpserver.url_for("")
    r = CliRunner().invoke(cli, ["list", "--marathon", url, "-o", "json"])
    assert r.exit_code == 0 and json.loads(r.stdout) == [{"job": "mnist", "tasks": 3, "running": 3, "state": "Running"}]
    r = CliRunner().invoke(cli, ["status", "--marathon", url, "-o", "json"])  # the only job is found by label
    assert r.exit_code == 0, r.output
    st = json.loads(r.stdout)
    assert st["state"] == "Running"
    assert [(t["task"], t["address"], t["health"]) for t in st["tasks"]] == [
        ("ps-0", "10.0.0.5:31000", "healthy"), ("worker-0", "10.0.0.5:31001", "healthy"),
        ("worker-1", "10.0.0.5:31002", "healthy")]
    r = CliRunner().invoke(cli, ["status", "mnist", "--marathon", url])
    assert r.exit_code == 0 and "worker-1" in r.stdout and "10.0.0.5:31002" in r.stdout
    r = CliRunner().invoke(cli, ["delete", "mnist", "--marathon", url, "-o", "json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["deploymentId"] == "d9"


def test_scale_with_several_jobs_asks_which(httpserver):
    httpserver.expect_request("/v2/apps").respond_with_json({"apps": [
        {"id": "/a/worker-0", "labels": {"marathon-tf/job": "a"}},
        {"id": "/b/worker-0", "labels": {"marathon-tf/job": "b"}}]})
    r = CliRunner().invoke(cli, ["scale", "workers=3", "--marathon", httpserver.url_for("")])
    assert r.exit_code == 2 and "several marathon-tf jobs" in r.stderr and "a, b" in r.stderr


def test_scale_renders_the_new_group_from_the_stored_spec(httpserver):
    group = render_group(load_dict(minimal()))
    httpserver.expect_request("/v2/groups/mnist", method="GET").respond_with_json(group)
    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_json(
        {"deploymentId": "d2", "version": "v"})
    r = CliRunner().invoke(cli, ["scale", "--job", "mnist", "workers=3", "--marathon", httpserver.url_for(""),
                                 "-o", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["tasks"]["start"] == ["worker-2"] and out["tasks"]["stop"] == []
    assert sorted(out["tasks"]["restart"]) == ["ps-0", "worker-0", "worker-1"]
    sent = json.loads([req for req, _ in httpserver.log if req.method == "PUT"][0].data)
    assert len(sent["apps"]) == 4
    assert json.loads(sent["apps"][0]["env"]["MTF_CLUSTER"]) == {"ps": 1, "worker": 3}


def test_importing_the_cli_does_not_import_tensorflow():
    code = ("import sys, marathon_tf.user.cli, marathon_tf.user.render, marathon_tf.marathon.client, "
            "marathon_tf.user.jobs; "
            "bad = [m for m in sys.modules if m == 'tensorflow' or m.startswith('tensorflow.')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_status_explains_a_stalled_task_with_marathons_reason(httpserver):
    group = render_group(load_dict(minimal(roles={"ps": {"count": 1}, "worker": {"count": 1, "gpus": 4}})))
    apps = [dict(a, tasks=[], deployments=[{"id": "d1"}]) for a in group["apps"]]
    apps[1]["lastTaskFailure"] = {"state": "TASK_FAILED", "message": "Failed to pull image"}
    httpserver.expect_request("/v2/groups/mnist", method="GET").respond_with_json({"id": "/mnist", "apps": apps})
    httpserver.expect_request("/v2/queue").respond_with_json({"queue": [
        {"app": {"id": "/mnist/ps-0"}, "count": 1, "delay": {"overdue": True}, "since": "2026-11-21T00:00:00.000Z",
         "processedOffersSummary": {"processedOffersCount": 0}},
        {"app": {"id": "/mnist/worker-0"}, "count": 1, "delay": {"overdue": True},
         "processedOffersSummary": {"processedOffersCount": 3, "rejectSummaryLastOffers": [
             {"reason": "InsufficientGpus", "declined": 3, "processed": 3},
             {"reason": "InsufficientCpus", "declined": 0, "processed": 3}]}}]})
    r = CliRunner().invoke(cli, ["status", "mnist", "--marathon", httpserver.url_for(""), "-o", "json"])
    assert r.exit_code == 0, r.output
    st = json.loads(r.stdout)
    assert st["state"] == "Deploying"
    ps, worker = st["tasks"]
    assert ps["waitingFor"] == "no offers received since 2026-11-21T00:00:00.000Z"
    assert worker["waitingFor"] == "no offer with enough gpus (3 of 3 offers declined)"
    assert worker["lastFailure"] == "TASK_FAILED: Failed to pull image"


@pytest.mark.parametrize("argv,options,command", [
    (["--", "python3", "x.py", "--", "y"], {}, ["python3", "x.py", "--", "y"]),
    (["--watch-interval", "2", "--", "cmd", "--", "z"], {"watch_interval": 2.0}, ["cmd", "--", "z"]),
    (["--grace", "5", "--", "cmd"], {"grace": 5.0}, ["cmd"]),
])
def test_bootstrap_verb_passes_options_and_the_command_through(monkeypatch, argv, options, command):
    from marathon_tf.task import bootstrap

    seen = {}

    def fake_main(args):
        seen["parsed"] = bootstrap.parse_args(args)
        return 0

    monkeypatch.setattr(bootstrap, "main", fake_main)
    r = CliRunner().invoke(cli, ["bootstrap", *argv])
    assert r.exit_code == 0, r.output
    opts, cmd = seen["parsed"]
    assert cmd == command
    for k, v in options.items():
        assert opts[k] == v


def test_scale_takes_the_job_files_role_names_and_their_plurals():
    assert jobs.parse_scale_args(["worker=3", "ps=+1", "evaluators=1"]) == {
        "worker": ("=", 3), "ps": ("+", 1), "evaluator": ("=", 1)}
    assert jobs.parse_scale_args(["workers=3"]) == jobs.parse_scale_args(["worker=3"])
    with pytest.raises(UsageError) as e:
        jobs.parse_scale_args(["wokrer=3"])
    assert "unknown role 'wokrer'; did you mean worker?" in e.value.message


def test_bootstrap_help_prints_help_not_an_environment_error():
    r = CliRunner().invoke(cli, ["bootstrap", "--help"])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("Usage: marathon-tf bootstrap") and "MTF_CLUSTER is not set" not in r.output
    r = subprocess.run([sys.executable, "-m", "marathon_tf.bootstrap", "-h"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("Usage: marathon-tf bootstrap") and r.stderr == ""
