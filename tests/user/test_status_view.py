"""`status`: plain columns within 80, RESTARTS and AGE (also in JSON), no stale TASK_KILLED after a
clean finish, the logdir, progress `step S/T, R steps/s, ETA` from the job's progress.target_step."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from user_helpers import minimal

from marathon_tf.contract.progress import StepRate, describe, duration
from marathon_tf.user import output
from marathon_tf.user import status as job_status_module
from marathon_tf.user.cli import cli
from marathon_tf.user.render import render_group
from marathon_tf.user.spec import load_dict
from marathon_tf.user.status import job_status


def _apps(finished: bool):
    job = minimal(logdir="ckpt", volumes=[{"host_path": "/shared/mnist", "container_path": "ckpt"}],
                  progress={"target_step": 1000})
    group = render_group(load_dict(job))
    apps = []
    for i, app in enumerate(group["apps"]):
        app = dict(app, deployments=[])
        if finished:
            app["instances"] = 0
            app["tasks"] = []
            app["labels"] = {**app["labels"], "marathon-tf/state": "Succeeded", "marathon-tf/final-step": "1000",
                             "marathon-tf/reason": "all 2 workers finished"}
            app["lastTaskFailure"] = {"state": "TASK_KILLED", "message": "Command terminated with signal Terminated"}
        else:
            app["tasks"] = [{"id": f"mnist_{app['id'].rsplit('/', 1)[1]}.instance-{'x' * 36}._app.1",
                             "host": "ip-10-0-0-5.eu-west-1.compute.internal", "state": "TASK_RUNNING",
                             "ports": [31000 + i, 32000 + i], "stagedAt": "2020-01-01T00:00:00.000Z",
                             "startedAt": "2020-01-01T00:00:01.000Z"}]
            if i == 1:
                app["lastTaskFailure"] = {"state": "TASK_FAILED",
                                          "message": "Command exited with status 1: " + "a long stderr tail " * 8}
        apps.append(app)
    return apps


def _serve(httpserver, apps):
    httpserver.expect_request("/v2/groups/mnist", method="GET").respond_with_json({"id": "/mnist", "apps": apps})
    httpserver.expect_request("/v2/queue").respond_with_json({"queue": []})


def _probe(url):
    return {"phase": "running", "step": 400, "restarts": 2 if ":32001" in url else 0, "steps_per_second": 20.0}


def test_running_job_progress_restarts_age_and_logdir(httpserver, monkeypatch):
    _serve(httpserver, _apps(finished=False))
    from marathon_tf.marathon.client import Client

    st = job_status(Client(httpserver.url_for("")), "mnist", probe_get=_probe).to_dict()
    assert st["progress"] == {"step": 400, "targetStep": 1000, "stepsPerSecond": 20.0, "etaSeconds": 30.0}
    assert st["logdir"] == "ckpt" and st["logdirVolume"] == "/shared/mnist"
    w0 = next(t for t in st["tasks"] if t["task"] == "worker-0")
    assert w0["restarts"] == 2 and w0["ageSeconds"] > 3600 and w0["startedAt"] == "2020-01-01T00:00:01.000Z"
    text = output.status_text(st)
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert "step 400/1000, 20 steps/s, ETA 30s" in text
    assert "logdir     ckpt (volume /shared/mnist)" in text
    header = next(line for line in text.splitlines() if line.startswith("TASK"))
    assert header.split() == ["TASK", "STATE", "ADDRESS", "STEP", "RESTARTS", "AGE", "LAST", "FAILURE"]
    row = next(line for line in text.splitlines() if line.startswith("worker-0"))
    assert row.split()[:6] == ["worker-0", "running", "ip-10-0-0-5:31001", "400", "2",
                               row.split()[5]] and re.fullmatch(r"\d+d\d+h", row.split()[5])  # age in days
    assert row.endswith("…")  # the long failure is cut to fit
    wide = output.status_text(st, wide=True)
    assert ("a long stderr tail " * 8).strip() in wide and "TASK ID" in wide and "STEPS/S" in wide
    assert "ip-10-0-0-5.eu-west-1.compute.internal:31001" in wide


def test_finished_job_shows_no_stale_kill_and_the_cli_json_has_the_columns(httpserver):
    _serve(httpserver, _apps(finished=True))
    r = CliRunner().invoke(cli, ["status", "mnist", "--marathon", httpserver.url_for(""), "-o", "json"])
    assert r.exit_code == 0, r.output
    st = json.loads(r.stdout)
    assert st["state"] == "Succeeded" and st["finalStep"] == 1000 and st["targetStep"] == 1000
    assert not any("lastFailure" in t for t in st["tasks"])
    r = CliRunner().invoke(cli, ["status", "mnist", "--marathon", httpserver.url_for("")])
    assert r.exit_code == 0
    assert "TASK_KILLED" not in r.stdout and "killed" not in r.stdout
    assert "final step 1000/1000" in r.stdout and "reason     all 2 workers finished" in r.stdout
    assert "─" not in r.stdout and "┃" not in r.stdout  # plain text, no box drawing


def test_progress_words():
    assert describe(None) == ""
    assert describe(17625) == "step 17625"
    assert describe(120, 300, 14.2) == "step 120/300, 14.2 steps/s, ETA 13s"
    assert describe(300, 300, 14.2) == "step 300/300, 14.2 steps/s"
    assert [duration(s) for s in (5, 185, 7800, 90000)] == ["5s", "3m05s", "2h10m", "1d1h"]
    now = [0.0]
    rate = StepRate(window=60, clock=lambda: now[0])
    assert rate.add(0) is None
    now[0] = 10
    assert rate.add(100) == 10.0
    now[0] = 20
    assert rate.add(5) is None  # restarted from an older checkpoint: start over


def test_a_task_waiting_on_the_local_runner_does_not_speak_of_offers(httpserver):
    group = render_group(load_dict(minimal()))
    apps = [dict(a, tasks=[], deployments=[{"id": "d1"}]) for a in group["apps"]]
    httpserver.expect_request("/v2/info").respond_with_json({"name": "marathon", "version": "1.8.222",
                                                             "buildref": "local"})
    httpserver.expect_request("/v2/groups/mnist", method="GET").respond_with_json({"id": "/mnist", "apps": apps})
    httpserver.expect_request("/v2/queue").respond_with_json({"queue": [
        {"app": {"id": "/mnist/ps-0"}, "count": 1, "delay": {"overdue": True}, "since": "2026-11-21T00:00:00.000Z",
         "processedOffersSummary": {"processedOffersCount": 0}}]})
    from marathon_tf.marathon.client import Client

    st = job_status(Client(httpserver.url_for("")), "mnist").to_dict()
    ps = st["tasks"][0]
    assert ps["waitingFor"] == "launch by the local runner (queued since 2026-11-21T00:00:00.000Z)"
    assert "offer" not in output.status_text(st)


def test_progress_never_shows_more_than_the_target():
    # a TF1 job with target 300 ends at global step 301 (its workers' last steps race): was "step 301/300"
    assert describe(301, 300, 14.2) == "step 301, target 300 reached"
    text = output.status_text({"job": "j", "groupId": "/j", "state": "Succeeded", "finalStep": 301,
                               "targetStep": 300, "tasks": []})
    assert "final step 301 (target 300 reached)" in text and "301/300" not in text


def test_the_progress_line_counts_healthy_among_the_running():
    # a finished job's tasks being killed keep their last health check result: was "worker 0/2 running, 2 healthy"
    tasks = [{"task": f"worker-{i}", "role": "worker", "state": "TASK_KILLING", "health": "healthy"} for i in (0, 1)]
    tasks.append({"task": "ps-0", "role": "ps", "state": "TASK_RUNNING", "health": "healthy"})
    line = output.progress_line({"job": "j", "state": "Succeeded", "counts": job_status_module._counts(tasks)})
    assert "worker 0/2 running, 0 healthy" in line and "ps 1/1 running, 1 healthy" in line


def test_a_released_job_with_an_attempt_left_shows_queued_with_its_next_attempt():
    from marathon_tf.contract import labels as L
    from marathon_tf.contract.timeline import iso
    from marathon_tf.marathon.jobstate import job_state
    from marathon_tf.user import gang

    group = render_group(load_dict(minimal(admission={"timeout": 60, "retries": 3})))
    now = 1_800_000_000.0
    reason = "worker: 1/2 placed; 1 waiting 1m00s: InsufficientGpus on 3 agents (need 1 each, 0 free)"
    record = {L.STATE: L.NOT_PLACED, L.REASON: reason, L.ATTEMPT: "1", L.ATTEMPTS: "4",
              L.NEXT_ATTEMPT_AT: iso(now + 40)}
    apps = {a["id"]: dict(a, instances=0, tasks=[], labels={**a["labels"], **record}) for a in group["apps"]}
    status = {"job": "mnist", "groupId": "/mnist", "state": job_state(apps.values()).value, "reason": reason,
              "tasks": [], "counts": {}}
    gang.annotate(status, apps, {}, now=now)
    assert status["state"] == "Queued"
    assert status["admission"] == {"attempt": 2, "attempts": 4, "timeoutSeconds": 60.0,
                                   "nextAttemptAt": iso(now + 40), "nextInSeconds": 40.0}
    assert output.status_text(status).splitlines()[0] == (
        f"job mnist (/mnist): Queued (attempt 2 of 4, next in 40s): {reason}")
    assert output.progress_line(status) == f"mnist: Queued (attempt 2 of 4, next in 40s): {reason}"
    # no attempt left: the record stays NotPlaced
    last = {k: dict(v, labels={k2: v2 for k2, v2 in v["labels"].items() if k2 != L.NEXT_ATTEMPT_AT})
            for k, v in apps.items()}
    status = {"job": "mnist", "groupId": "/mnist", "state": job_state(last.values()).value, "reason": reason,
              "tasks": [], "counts": {}}
    gang.annotate(status, last, {}, now=now)
    assert status["state"] == L.NOT_PLACED and status["admission"]["attempt"] == 1


def test_status_says_where_the_running_tensorboard_answers(httpserver):
    """Issue 22: a job with a tensorboard role: `status` prints its URL (its task's host and first port),
    in text and JSON, once it runs."""
    job = minimal(logdir="ckpt", roles={"ps": {"count": 1}, "worker": {"count": 1}, "tensorboard": {"count": 1}})
    apps = []
    for i, app in enumerate(render_group(load_dict(job))["apps"]):
        name = app["id"].rsplit("/", 1)[1]
        app = dict(app, deployments=[], tasks=[{"id": f"mnist_{name}.instance-{'x' * 36}._app.1", "host": "10.0.0.7",
                                                 "state": "TASK_RUNNING", "ports": [31000 + i, 32000 + i],
                                                 "startedAt": "2020-01-01T00:00:01.000Z"}])
        apps.append(app)
    _serve(httpserver, apps)
    tb = next(i for i, a in enumerate(apps) if a["id"].endswith("/tensorboard-0"))
    r = CliRunner().invoke(cli, ["status", "mnist", "--marathon", httpserver.url_for(""), "-o", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["tensorboard"] == f"http://10.0.0.7:{31000 + tb}"
    r = CliRunner().invoke(cli, ["status", "mnist", "--marathon", httpserver.url_for("")])
    assert f"TensorBoard http://10.0.0.7:{31000 + tb}" in r.stdout, r.stdout


def test_the_waiting_progress_line_is_printed_when_it_changes_not_every_second(capsys):
    """Issue 32: a job waiting for room printed a ~500-character progress line every second for 10 minutes
    (only its `waiting 13s` and `deadline in 9m47s` counted on). A line is printed again when something
    else in it changes, or once a minute."""
    now = [0.0]
    show = output.ProgressPrinter(clock=lambda: now[0])

    def waiting(seconds: int, placed: int = 3) -> dict:
        text = f"worker: {placed}/4 placed; 1 waiting {seconds}s: InsufficientGpus on 3 agents (need 2 each, 0 free)"
        return {"job": "mnist", "state": "Deploying", "admission": {
            "waiting": [text], "secondsLeft": 600 - seconds, "timeoutSeconds": 600, "attempt": 1, "attempts": 1}}

    for second in range(1, 60):
        now[0] = second
        show(waiting(second))
    assert len(capsys.readouterr().err.splitlines()) == 1
    now[0] = 61
    show(waiting(61))  # a minute later: once more, with its counts
    now[0] = 62
    show(waiting(62, placed=4))  # something else changed: at once
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and "waiting 61s" in lines[0] and "4/4 placed" in lines[1]


@pytest.mark.parametrize("state", ["TASK_KILLING", "TASK_RUNNING"])
def test_a_task_being_stopped_at_the_jobs_end_is_stopped_for_the_api_as_for_the_cli(httpserver, state):
    """Issue 32: `final = run.wait()` showed `TASK_KILLING` in `final.tasks` where the CLI, a moment later,
    showed `stopped`: a task of an app at 0 instances on its way out is `stopped` in both. A stock Marathon
    (1.4–1.11 without the ``task_killing`` feature: ``M@1.11:src/main/scala/mesosphere/marathon/Features.scala``)
    shows no TASK_KILLING: the task stays TASK_RUNNING until its kill ends, and the job's record on the app
    says it is on its way out (seen once in a fresh-clone CI: tests/user/test_api.py's status twice)."""
    apps = _apps(finished=True)
    for i, app in enumerate(apps):
        app["tasks"] = [{"id": f"t{i}", "host": "h", "state": state, "ports": [31000 + i, 32000 + i],
                         "stagedAt": "2020-01-01T00:00:00.000Z", "startedAt": "2020-01-01T00:00:01.000Z"}]
    _serve(httpserver, apps)
    from marathon_tf.marathon.client import Client

    final = job_status(Client(httpserver.url_for("")), "mnist", probe=False)
    assert [t.state for t in final.tasks] == ["stopped"] * 3
    text = CliRunner().invoke(cli, ["status", "mnist", "--marathon", httpserver.url_for("")]).stdout
    assert [line.split()[1] for line in text.splitlines() if line.startswith(("ps-", "worker-"))] == ["stopped"] * 3


def test_an_ended_jobs_tasks_on_their_way_out_are_not_asked_so_every_look_says_the_same(httpserver):
    """Issue 43.4: the per-task STEP of a job that ended showed 101, then blank on the next call: the first look
    asked the tasks still being stopped, the next found none. A job with its record is not asked: its final
    step is the job's (the record's), the same on every look."""
    apps = _apps(finished=True)
    for i, app in enumerate(apps):
        app["tasks"] = [{"id": f"t{i}", "host": "h", "state": "TASK_RUNNING", "ports": [31000 + i, 32000 + i],
                         "stagedAt": "2020-01-01T00:00:00.000Z", "startedAt": "2020-01-01T00:00:01.000Z"}]
    _serve(httpserver, apps)
    from marathon_tf.marathon.client import Client

    asked = []
    first = job_status(Client(httpserver.url_for("")), "mnist", probe_get=lambda url: asked.append(url) or _probe(url))
    assert asked == [] and [t.step for t in first.tasks] == [None] * 3 and first.final_step == 1000
    httpserver.clear()
    _serve(httpserver, _apps(finished=True))  # the next look: the tasks are gone
    later = job_status(Client(httpserver.url_for("")), "mnist", probe_get=_probe)
    assert [t.step for t in later.tasks] == [t.step for t in first.tasks] and later.final_step == 1000


def test_a_task_a_placement_rule_holds_says_which_rule():
    from marathon_tf.contract import spread
    from marathon_tf.user.status import Observed, build

    spec = load_dict(minimal(constraints=[["hostname", "UNIQUE"]], roles={"ps": {"count": 1},
                                                                          "worker": {"count": 2}}))
    apps = {}
    for app in render_group(spec)["apps"]:
        name = app["id"].rsplit("/", 1)[-1]
        apps[name] = dict(app, tasks=[], deployments=[])
    apps["worker-0"]["tasks"] = [{"id": "w0", "state": "TASK_RUNNING", "host": "10.0.0.1", "ports": [1, 2],
                                  "startedAt": "2026-11-21T00:00:00.000Z"}]
    released = (("hostname", "UNLIKE", "10\\.0\\.0\\.1"),)
    apps["ps-0"] = dict(apps["ps-0"], constraints=[list(c) for c in released], labels={
        **apps["ps-0"]["labels"], spread.LABEL: spread.label_value(released, 'job rule ["hostname", "UNIQUE"]: away '
                                                                            'from 10.0.0.1 (worker-0)')})
    queue = {a["id"]: {"app": {"id": a["id"]}, "count": 1, "delay": {"overdue": True},
                       "processedOffersSummary": {"processedOffersCount": 3, "rejectSummaryLastOffers": [
                           {"reason": "UnfulfilledConstraint", "declined": 3, "processed": 3}]}}
             for name, a in apps.items() if name != "worker-0"}
    st = build(Observed("mnist", apps, queue, now=0.0)).to_dict()
    rows = {t["task"]: t for t in st["tasks"]}
    assert rows["ps-0"]["placement"] == 'job rule ["hostname", "UNIQUE"]: away from 10.0.0.1 (worker-0)'
    assert rows["ps-0"]["waitingFor"].startswith('job rule ["hostname", "UNIQUE"]: away from 10.0.0.1 (worker-0); ')
    assert rows["worker-1"]["waitingFor"].startswith('held by job rule ["hostname", "UNIQUE"]: its tasks are placed '
                                                     "one at a time by the job's leader; ")
    assert "placement" not in rows["worker-0"]
    assert 'waits: held by job rule' in output.status_text(st)


def test_the_restart_count_never_goes_past_the_limit():
    """Issue 43, item 1: a job with two workers failing together showed `restarts 7/5 in 10m`. A restart is
    a failure the budget allowed: at most the limit; the failures past it are said apart."""
    assert output.restarts_text({"failures": 4, "maxFailures": 5, "windowSeconds": 600}) == "restarts 4/5 in 10m"
    assert output.restarts_text({"failures": 7, "maxFailures": 5, "windowSeconds": 600}) == (
        "restarts 5/5 in 10m (7 failures: the budget is spent)")
    assert output.restarts_text({"failures": 1}) == "restarts 1/?"
