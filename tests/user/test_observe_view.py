"""What `status` adds from the tasks' own view (user/observe): a wait named by the peer with the peer's
state from Marathon (staging, not placed with /v2/queue's reason, running), stragglers; the lines
`deploy --local` / `local serve` print once; `events` and `status --timeline` (user/history)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from user_helpers import minimal

from marathon_tf.contract import labels as L
from marathon_tf.contract import timeline as T
from marathon_tf.marathon.client import Client
from marathon_tf.user import announce, history, output
from marathon_tf.user.cli import cli
from marathon_tf.user.render import render_group
from marathon_tf.user.spec import load_dict
from marathon_tf.user.status import job_status

QUEUE = json.loads(Path("/work/shared/marathon-api/examples/1.11/queue.json").read_text())["queue"]


def _apps(ps_state: str | None):
    group = render_group(load_dict(minimal(roles={"ps": {"count": 1}, "worker": {"count": 2}})))
    apps = []
    for i, app in enumerate(group["apps"]):
        app = dict(app, deployments=[])
        state = ps_state if app["id"].endswith("ps-0") else "TASK_RUNNING"
        app["tasks"] = [] if state is None else [
            {"id": f"t{i}", "host": f"agent-{i}", "state": state, "ports": [31000 + i, 32000 + i],
             "stagedAt": "2020-01-01T00:00:00.000Z"}]
        apps.append(app)
    return apps


def _probe(url):
    if ":32001" in url:  # worker-0 (the deciding task): stalled on ps-0, and the job's view
        return {"phase": "running", "step": 40, "waiting_for": {"peer": "ps-0", "seconds": 45.0,
                                                                "why": "its TF server does not answer"},
                "job_view": {"roles": {}, "stragglers": ["worker-1"], "rates": {"worker-0": 2.0, "worker-1": 0.4}}}
    return {"phase": "running", "step": 40}


def _status(httpserver, ps_state, queue=()):
    httpserver.expect_request("/v2/groups/mnist", method="GET").respond_with_json({"id": "/mnist",
                                                                                   "apps": _apps(ps_state)})
    httpserver.expect_request("/v2/queue").respond_with_json({"queue": list(queue)})
    return job_status(Client(httpserver.url_for("")), "mnist", probe_get=_probe).to_dict()


def test_a_wait_names_the_peer_and_its_state_from_marathon(httpserver):
    st = _status(httpserver, "TASK_RUNNING")
    assert st["waits"] == ["worker-0 waiting 45s for ps-0 (ps-0: running on agent-0; its TF server does not answer)"]
    httpserver.clear()
    st = _status(httpserver, "TASK_STAGING")
    assert st["waits"] == ["worker-0 waiting 45s for ps-0 (ps-0: Staging on agent-0)"]
    httpserver.clear()
    st = _status(httpserver, None, [{**QUEUE[1], "app": {"id": "/mnist/ps-0"}}])
    assert st["waits"] == ["worker-0 waiting 45s for ps-0 (ps-0: not placed: InsufficientCpus (75 of 123 offers "
                           "declined))"]
    text = output.status_text(st)
    assert "waiting    worker-0 waiting 45s for ps-0 (ps-0: not placed: InsufficientCpus" in text
    assert "worker-0 waiting 45s for ps-0" in output.progress_line(st)


def test_stragglers_come_from_the_deciding_tasks_view(httpserver):
    st = _status(httpserver, "TASK_RUNNING")
    assert [t["task"] for t in st["tasks"] if t.get("straggler")] == ["worker-1"]
    assert st["stragglers"] == ["worker-1 (0.4 step reports/s; its role's median 2)"]
    assert "straggler  worker-1 (0.4 step reports/s" in output.status_text(st)
    assert st["tasks"][1]["metricsUrl"] == "http://agent-1:32001/metrics"


def test_metrics_urls_once_every_task_runs_and_tensorboard_once_it_answers():
    answers = {"http://h:6006": False}
    announcer = announce.Announcer(lambda url: answers[url])
    tasks = [{"task": "ps-0", "role": "ps", "state": "TASK_RUNNING", "metricsUrl": "http://h:1/metrics"},
             {"task": "worker-0", "role": "worker", "state": "TASK_STAGING"},
             {"task": "tensorboard-0", "role": "tensorboard", "state": "TASK_RUNNING"}]
    status = {"job": "j", "tasks": tasks, "tensorboard": "http://h:6006"}
    assert announcer.lines(status) == []
    tasks[1].update(state="TASK_RUNNING", metricsUrl="http://h:2/metrics")
    assert announcer.lines(status) == ["job j: metrics at ps-0 http://h:1/metrics, worker-0 http://h:2/metrics"]
    answers["http://h:6006"] = True
    assert announcer.lines(status) == ["job j: TensorBoard http://h:6006"]
    assert announcer.lines(status) == []  # once each


EVENTS = [
    {"time": 100.0, "task": "job", "kind": T.SUBMITTED, "message": "deployed version v1"},
    {"time": 101.0, "task": "worker-1", "kind": T.TASK_STARTED, "message": "worker-1 started on h"},
    {"time": 105.0, "task": "worker-1", "kind": T.FIRST_STEP, "message": "first step: 0"},
    {"time": 200.0, "task": "worker-1", "kind": T.PROGRAM_EXITED, "code": 137,
     "message": "training program exited with 137 (failure 1 of at most 5 in 600 s); restarting it in place: " +
                "a long tail " * 20},
    {"time": 201.0, "task": "worker-1", "kind": T.PROGRAM_STARTED, "message": "training program started (restart 1)"},
    {"time": 204.5, "task": "worker-1", "kind": T.FIRST_STEP, "message": "first step: 900 (run 2)"},
]


def test_events_and_the_timeline_from_the_jobs_record(httpserver):
    apps = _apps("TASK_RUNNING")
    for app in apps:
        app.update(instances=0, tasks=[], labels={**app["labels"], L.STATE: "Succeeded"})
        if app["id"].endswith("worker-0"):
            app["labels"][L.EVENTS] = T.compact(EVENTS)
    apps[2]["lastTaskFailure"] = {"state": "TASK_KILLED", "message": "killed", "timestamp": "2020-01-01T00:00:00Z"}
    httpserver.expect_request("/v2/groups/mnist", method="GET").respond_with_json({"id": "/mnist", "apps": apps})
    httpserver.expect_request("/v2/queue").respond_with_json({"queue": []})
    url = httpserver.url_for("")
    r = CliRunner().invoke(cli, ["events", "mnist", "--marathon", url])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["TIME", "TASK", "EVENT", "MESSAGE"] and len(lines) == 1 + len(EVENTS)
    assert lines[4].split()[1:3] == ["worker-1", "ProgramExited"] and lines[4].endswith(EVENTS[3]["message"])
    assert lines[1].startswith("1970-01-01T00:01:40.000Z  job       Submitted")
    r = CliRunner().invoke(cli, ["events", "mnist", "--marathon", url, "-o", "json"])
    found = json.loads(r.stdout)
    assert found["source"] == "record" and found["events"][3]["code"] == 137
    r = CliRunner().invoke(cli, ["status", "mnist", "--marathon", url, "--timeline", "-o", "json"])
    timeline = json.loads(r.stdout)["timeline"]
    assert [p["phase"] for p in timeline["start"]] == ["submitted", "every task running", "first step"]
    assert timeline["recoveries"][0]["secondsToTraining"] == 3.5
    text = CliRunner().invoke(cli, ["status", "mnist", "--marathon", url, "--timeline"]).stdout
    assert "→ restarted (in place) after 1.0s" in text and "→ training again after 3.5s (4.5s in all)" in text


def test_a_running_jobs_events_come_from_the_deciding_tasks_shared_file_or_from_every_task():
    class FakeClient:
        def get_group(self, *a, **kw):
            return {"id": "/j", "apps": [{"id": "/j/worker-0", "labels": {}}, {"id": "/j/worker-1", "labels": {}}]}

        def queue(self):
            return []

    status = {"tasks": [{"task": "worker-0", "metricsUrl": "http://a/metrics"},
                        {"task": "worker-1", "metricsUrl": "http://b/metrics"}]}
    asked = []

    def shared(url):
        asked.append(url)
        return {"events": EVENTS[:1], "shared": EVENTS[1:]}

    found = history.job_events(FakeClient(), "j", status, get=shared)
    assert asked == ["http://a/events?shared=1"] and len(found["events"]) == len(EVENTS)
    asked.clear()

    def own(url):
        asked.append(url)
        return {"events": [e for e in EVENTS if (e["task"] == "worker-1") == url.startswith("http://b")]}

    found = history.job_events(FakeClient(), "j", status, get=own)
    assert sorted(asked) == ["http://a/events", "http://a/events?shared=1", "http://b/events"]  # no shared file
    assert [e["kind"] for e in found["events"]] == [e["kind"] for e in EVENTS] and found["source"] == "tasks"


def test_every_start_failure_is_in_events_with_its_whole_message(httpserver):
    """Issue 32: `events big` said `no events` (`-o json`: `{"events": [], "source": "tasks"}`) for a job
    that failed at start, whose record carried no events (written by a task that kept none, or from the
    user's side): the record's reason, whole, is an event; a task that died says Marathon's word with
    its last words (its bootstrap's lines at the end of its stderr)."""
    reason = ("worker-1: given 4 GPUs but no GPU device (/dev/nvidia0, …) is visible: " + "the whole reason " * 20)
    apps = _apps("TASK_RUNNING")
    for app in apps:
        app.update(instances=0, tasks=[], labels={**app["labels"], L.STATE: "Failed", L.REASON: reason,
                                                  L.FINISHED_AT: "2026-11-28T11:27:13.801Z"})
    apps[1]["lastTaskFailure"] = {"state": "TASK_KILLED", "message": "Command exited with status 1",
                                  "timestamp": "2026-11-28T11:27:14.447Z"}  # parked, then stopped: no failure
    apps[2]["lastTaskFailure"] = {"state": "TASK_FAILED", "message": "Command exited with status 2",
                                  "timestamp": "2026-11-28T11:27:12.000Z"}
    httpserver.expect_request("/v2/groups/mnist", method="GET").respond_with_json({"id": "/mnist", "apps": apps})
    httpserver.expect_request("/v2/queue").respond_with_json({"queue": []})
    client = Client(httpserver.url_for(""))
    status = job_status(client, "mnist", probe=False).to_dict()
    words = {"worker-1": "error: MTF_CLUSTER is not JSON"}
    found = history.job_events(client, "mnist", status, words=lambda c, job, task: words.get(task))
    assert [(e["task"], e["kind"]) for e in found["events"]] == [("worker-1", T.TASK_FAILED), ("job", T.JOB_ENDED)]
    assert found["events"][0]["message"] == ("Marathon: TASK_FAILED Command exited with status 2; its last words: "
                                             "error: MTF_CLUSTER is not JSON")
    assert found["events"][1]["message"] == f"Failed: {reason}"  # whole
    r = CliRunner().invoke(cli, ["events", "mnist", "--marathon", httpserver.url_for("")])
    assert r.exit_code == 0 and "no events" not in r.output
    assert r.stdout.splitlines()[-1].split()[1:3] == ["job", "JobEnded"] and r.stdout.rstrip().endswith(
        reason.rstrip())


def test_a_tasks_last_words_are_its_bootstraps_lines_at_the_end_of_its_stderr(monkeypatch):
    from marathon_tf.user import logs

    stderr = ("2026 I tensorflow: something\nmarathon-tf bootstrap: status on http://0.0.0.0:1/status\n"
              "marathon-tf bootstrap: FAILED: worker-1: given 4 GPUs but no GPU device\nTraceback: noise\n")
    monkeypatch.setattr(logs, "find_task_logs", lambda client, job, task: ([object()], None))
    monkeypatch.setattr(logs, "AgentSession", lambda client: None)
    monkeypatch.setattr(logs, "read_new", lambda session, log, stream, tail: stderr)
    assert history.last_words(None, "j", "worker-1") == ("status on http://0.0.0.0:1/status / FAILED: worker-1: "
                                                         "given 4 GPUs but no GPU device")
    monkeypatch.setattr(logs, "read_new", lambda session, log, stream, tail: "x" * 5000 + "\n")
    assert history.last_words(None, "j", "worker-1") == "x" * history.WORDS_LIMIT + " …"


def test_a_scale_restart_is_a_planned_restart_not_a_failure_nor_a_placement_wait(httpserver):
    """Issue 32: during `scale … worker=3`, `status` said `Deploying` with `placement chief: 0/1 placed; 1 waiting`,
    events said `PlacementWait chief-0 … no offers since …` while the chief was still being killed, and the
    stops were `TaskFailed … TASK_KILLED` in events and in LAST FAILURE. A new configuration restarting the
    job's tasks is a planned restart: `Restarting for scale (2 → 3 workers)`, its own event kind, no failure."""
    old_version, new_version = "2026-11-28T12:20:33.161Z", "2026-11-28T12:20:56.005Z"
    spec = load_dict(minimal(roles={"ps": {"count": 1}, "worker": {"count": 3}}))
    apps = []
    for app in render_group(spec)["apps"]:
        app = dict(app, version=new_version, versionInfo={"lastConfigChangeAt": new_version},
                   deployments=[{"id": "d-scale"}])
        if app["id"].endswith("worker-2"):  # the new task: starting
            app["tasks"] = [{"id": "w2", "host": "h", "state": "TASK_STAGING", "version": new_version,
                             "stagedAt": "2026-11-28T12:20:57.000Z", "ports": [1, 2]}]
        elif app["id"].endswith("worker-1"):  # stopped already, its new task not launched yet
            app["tasks"] = []
            app["lastTaskFailure"] = {"state": "TASK_KILLED", "message": "Command terminated with signal Terminated",
                                      "timestamp": "2026-11-28T12:20:58.000Z", "version": old_version}
        else:  # being stopped with its grace
            app["tasks"] = [{"id": app["id"][1:].replace("/", "_"), "host": "h", "state": "TASK_KILLING",
                             "version": old_version, "stagedAt": "2026-11-28T12:20:34.000Z", "ports": [1, 2]}]
        apps.append(app)
    old_env = dict(apps[0]["env"], MTF_CLUSTER=json.dumps({"ps": 1, "worker": 2}))
    httpserver.expect_request("/v2/groups/mnist", method="GET").respond_with_json({"id": "/mnist", "apps": apps})
    httpserver.expect_request("/v2/queue").respond_with_json({"queue": [
        {**QUEUE[1], "app": {"id": "/mnist/worker-1"}, "since": "2026-11-28T12:20:58.100Z"}]})
    for app in apps:
        httpserver.expect_request(f"/v2/apps{app['id']}/versions/{old_version}").respond_with_json(
            dict(app, env=old_env))
    url = httpserver.url_for("")
    client = Client(url)
    st = job_status(client, "mnist", probe=False).to_dict()
    assert st["restarting"]["text"] == "Restarting for scale (2 → 3 workers)"
    assert st["restarting"]["tasks"] == ["ps-0", "worker-0", "worker-1"] and "admission" not in st
    assert not any(t.get("lastFailure") or t.get("waitingFor") for t in st["tasks"]), st["tasks"]
    text = output.status_text(st)
    assert text.splitlines()[0] == "job mnist (/mnist): Restarting for scale (2 → 3 workers)"
    assert "placement" not in text and "TASK_KILLED" not in text and "waits" not in text
    assert output.progress_line(st).startswith("mnist: Restarting for scale (2 → 3 workers) — ")
    found = history.job_events(client, "mnist", st, words=lambda *a: None)["events"]
    assert [(e["task"], e["kind"]) for e in found] == [("worker-1", T.RESTARTING)], found
    assert found[0]["message"].startswith("worker-1 stopped for scale (2 → 3 workers): its app has a new "
                                          "configuration; it starts again (Marathon: TASK_KILLED")
    r = CliRunner().invoke(cli, ["events", "mnist", "--marathon", url])
    assert "TaskFailed" not in r.stdout and "PlacementWait" not in r.stdout and " Restarting " in r.stdout


def test_a_task_waiting_for_room_on_a_full_logdir_says_so_in_status(httpserver):
    """Issue 46.1: a program that failed on a full logdir waits for room; `status` says which task, how long,
    why, and when the job fails."""
    why = "no space left on the logdir's filesystem (logdir ckpt: 0 bytes free)"

    def probe(url):
        if ":32001" in url:  # worker-0 (the deciding task)
            return {"phase": "running", "step": 2001, "waiting_for_space": {"why": why, "seconds": 12.3,
                                                                             "limit": 600.0},
                    "ledger": {"failures": 1, "max_failures": 5, "window_seconds": 600.0, "preemptions": 0,
                               "infrastructure": 1}}  # its failure on the full logdir: not counted
        return {"phase": "running", "step": 2001}

    httpserver.expect_request("/v2/groups/mnist", method="GET").respond_with_json({"id": "/mnist",
                                                                                   "apps": _apps("TASK_RUNNING")})
    httpserver.expect_request("/v2/queue").respond_with_json({"queue": []})
    st = job_status(Client(httpserver.url_for("")), "mnist", probe_get=probe).to_dict()
    line = (f"worker-0 waiting 12s for room: {why}; its program starts again from the last checkpoint once there "
            f"is room (the job fails after 10m00s)")
    assert st["waits"] == [line]
    assert f"waiting {line}" in " ".join(output.status_text(st).split())  # (wrapped to the terminal)
    assert line in output.progress_line(st)
    assert "restarts 1/5 in 10m, 1 not counted (infrastructure: the runner's machinery, a full logdir)" in \
        output.progress_line(st)  # (it said "the runner's machinery" alone)


def test_the_event_column_is_a_closed_vocabulary_and_the_text_has_its_own():
    """Issue 43, item 4: `events`' type column held free text (`marathon-tf scale (2 → 3 workers)`, `worker-0 is
    stopped`, `grow: …`): a save round's ``reason`` detail took the type's place. The type is always one of
    the documented types; the round's why is ``cause``; every type is in docs/observability.md."""
    from pathlib import Path

    from marathon_tf.contract import timeline as T
    from marathon_tf.user import output
    from marathon_tf.user.history import events_rows

    events = [{"time": 1_700_000_000.0, "task": "worker-0", "kind": T.SAVE_ROUND,
               "message": "save round: marathon-tf scale (2 → 3 workers)",
               "reason": "marathon-tf scale (2 → 3 workers)", "hold": True},
              {"time": 1_700_000_001.0, "task": "worker-0", "kind": "from_a_newer_version", "message": "x"}]
    rows = events_rows(events)
    assert [r["reason"] for r in rows] == ["SaveRound", "Other"]
    assert rows[0]["cause"] == "marathon-tf scale (2 → 3 workers)" and rows[0]["hold"] is True
    assert rows[1]["kind"] == "from_a_newer_version"
    text = output.events_text(rows).splitlines()
    assert text[1].split()[2] == "SaveRound" and text[1].endswith("save round: marathon-tf scale (2 → 3 workers)")
    doc = (Path(__file__).resolve().parents[2] / "docs" / "observability.md").read_text()
    assert [t for t in T.REASONS.values() if f"`{t}`" not in doc] == []
