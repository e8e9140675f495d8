"""The deciding task's view of the job (task/jobview) against a fake Marathon and real status endpoints:
tasks per role, the start's events from Marathon's times, placement waits with /v2/queue's reason,
stragglers after three looks in a row, the job's events in its record."""

from __future__ import annotations

import json
import time
from pathlib import Path

from marathon_tf.contract import labels as L
from marathon_tf.contract import timeline as T
from marathon_tf.task.jobview import JobView, stragglers
from marathon_tf.task.status_server import TaskStatus
from marathon_tf.task.timeline import TaskEvents

QUEUE_EXAMPLE = Path("/work/shared/marathon-api/examples/1.11/queue.json")


def test_stragglers_are_below_half_the_median_of_the_others_of_their_role():
    assert stragglers({"worker-0": 2.0, "worker-1": 0.9, "worker-2": 2.2}) == {"worker-1"}
    assert stragglers({"worker-0": 2.0, "worker-1": 1.1}) == set()  # 1.1 >= 0.5 x 2.0
    assert stragglers({"worker-0": 2.0, "worker-1": 0.5, "chief-0": 0.1}) == {"worker-1"}  # chief: alone in its role
    assert stragglers({"worker-0": 0.0, "worker-1": 0.0}) == set() and stragglers({"worker-0": None}) == set()


def _view(fake_marathon, status_endpoint, make_ctx, tmp_path):
    workers = {}
    for i in range(3):
        status, port = status_endpoint("worker", i)
        app = fake_marathon.add_app("worker", i, status_port=port)
        app["versionInfo"] = {"lastConfigChangeAt": "2026-01-01T10:00:00.000Z"}
        app["tasks"][0].update(startedAt=f"2026-01-01T10:00:0{5 + i}.000Z", healthCheckResults=[
            {"alive": True, "firstSuccess": f"2026-01-01T10:00:1{i}.000Z"}])
        app["healthChecks"] = [{"protocol": "MESOS_HTTP"}]
        status.update(phase="running", first_step_at=1.0, report_rate=2.0)
        workers[i] = status
    ps = fake_marathon.add_app("ps", 0)
    ps["versionInfo"] = {"lastConfigChangeAt": "2026-01-01T10:00:00.000Z"}
    ctx = make_ctx("worker", 0, cluster={"ps": 1, "worker": 3})
    own = TaskStatus(job=ctx.job, task="worker-0", role="worker", index=0)
    own.update(phase="running", first_step_at=1.0, report_rate=2.0)
    events = TaskEvents("worker-0", str(tmp_path / "events.jsonl"))
    return JobView(ctx, fake_marathon.client(), own, events), workers, ps, own


def test_the_job_view_counts_tasks_records_the_start_and_a_placement_wait(fake_marathon, status_endpoint, make_ctx,
                                                                          tmp_path):
    view, workers, ps, own = _view(fake_marathon, status_endpoint, make_ctx, tmp_path)
    fake_marathon.queue = [{**json.loads(QUEUE_EXAMPLE.read_text())["queue"][1], "app": {"id": ps["id"]}}]
    view.look()
    job = own.light()["job_view"]
    assert job["roles"] == {"ps": {"total": 1, "running": 0}, "worker": {"total": 3, "running": 3}}
    kinds = [(e["kind"], e["task"]) for e in view.events.mine()]
    assert kinds == [(T.SUBMITTED, "job"), (T.PLACEMENT_WAIT, "ps-0")]  # not every task runs yet
    wait = view.events.mine()[-1]["message"]
    assert wait == "ps-0 waits to be placed: not placed: InsufficientCpus (75 of 123 offers declined)"
    ps["tasks"] = [{"id": "ps.1", "state": "TASK_RUNNING", "host": "h", "ports": [1, 2],
                    "startedAt": "2026-01-01T10:00:20.000Z"}]
    view.look()
    view.look()  # recorded once per deployment
    kinds = [e["kind"] for e in view.events.mine()]
    assert kinds == [T.SUBMITTED, T.PLACEMENT_WAIT, T.PLACED, T.ALL_RUNNING, T.DEPLOYED]
    times = {e["kind"]: e["time"] for e in view.events.mine()}
    assert times[T.SUBMITTED] == 1767261600.0 and times[T.ALL_RUNNING] == 1767261620.0
    assert times[T.DEPLOYED] == 1767261620.0  # ps-0 started last (it has no health check)
    assert [e["kind"] for e in view.events.shared()] == kinds  # also in the job's shared file


def test_a_slow_worker_is_a_straggler_after_three_looks_in_a_row(fake_marathon, status_endpoint, make_ctx, tmp_path):
    view, workers, _, own = _view(fake_marathon, status_endpoint, make_ctx, tmp_path)
    workers[2].update(report_rate=0.5)
    view.look()
    view.look()
    assert own.light()["job_view"]["stragglers"] == []
    view.look()
    job = own.light()["job_view"]
    assert job["stragglers"] == ["worker-2"] and job["rates"]["worker-2"] == 0.5
    workers[2].update(report_rate=1.9)  # caught up: no longer flagged
    view.look()
    assert own.light()["job_view"]["stragglers"] == []


def test_the_end_puts_the_jobs_events_into_the_deciding_tasks_labels(fake_marathon, status_endpoint, make_ctx,
                                                                      tmp_path):
    view, workers, _, _ = _view(fake_marathon, status_endpoint, make_ctx, tmp_path)
    view.events.path = None  # no shared logdir: the others are asked for theirs
    view.look()
    worker1 = TaskEvents("worker-1")
    worker1.record(T.FIRST_STEP, "first step: 3", step=3, at=time.time() - 5)
    from marathon_tf.task.status_server import StatusServer

    server = StatusServer(workers[1], "127.0.0.1", 0, routes={"/events": worker1.route}).start()
    try:
        view.urls["worker-1"] = f"http://127.0.0.1:{server.port}"
        labels = view.end_labels(L.SUCCEEDED, "all 3 workers finished")
    finally:
        server.close()
    assert list(labels) == ["/ml/mnist/worker-0"]
    events, omitted = T.expand(labels["/ml/mnist/worker-0"][L.EVENTS])
    assert omitted == 0 and [(e["task"], e["kind"]) for e in events][-2:] == [("worker-1", T.FIRST_STEP),
                                                                             ("job", T.JOB_ENDED)]
    assert events[-1]["message"] == "Succeeded: all 3 workers finished"


# --- Marathon 1.4-1.7: a task its relaunch was dropped for (the deployment lock) -------------------------


def _forgotten(httpserver, make_ctx, tmp_path, version, answers=()):
    """A job of ps-0 (no task: Marathon left it dead) and worker-0 (this deciding task, running) on a fake
    Marathon of ``version``; ``answers``: what its ``POST /v2/apps/<id>/restart`` answers first (then 200)."""
    import re

    from fake_marathon import FakeMarathon
    from werkzeug import Response

    fake = FakeMarathon(httpserver, version=version)
    answers, restarts = list(answers), []

    def restart(request):
        restarts.append(request.path)
        status, body = answers.pop(0) if answers else (200, {"deploymentId": "d-r", "version": "2026-01-01T00:00:05Z"})
        return Response(json.dumps(body), status, content_type="application/json")

    httpserver.expect_request(re.compile(r"^/v2/apps/.+/restart$"), method="POST").respond_with_handler(restart)
    ps = fake.add_app("ps", 0)
    fake.add_app("worker", 0, status_port=1)
    ctx = make_ctx("worker", 0, cluster={"ps": 1, "worker": 1})
    own = TaskStatus(job=ctx.job, task="worker-0", role="worker", index=0)
    view = JobView(ctx, fake.client(), own, TaskEvents("worker-0", str(tmp_path / "events.jsonl")))
    return view, fake, ps, restarts


def test_on_1_7_an_app_left_without_task_queue_entry_or_deployment_is_restarted_at_the_second_look(
        httpserver, make_ctx, tmp_path):
    """Marathon 1.4-1.7 drop the relaunch of a task that failed while a deployment held its app ("Did not try to
    scale run spec; it is locked": mesosphere/marathon v1.7.236 src/main/scala/mesosphere/marathon/
    MarathonSchedulerActor.scala:146-159, v1.4.3 :169) and queue it only at the next periodic scale check
    (MarathonConf.scala scale_apps_interval, 300 s); a restart deployment launches an app's missing instances
    (v1.7.236 core/deployment/impl/TaskReplaceActor.scala:66-80 preStart, 139-150 launchInstances: with no old
    instance it queues the app's `instances`)."""
    view, fake, ps, restarts = _forgotten(httpserver, make_ctx, tmp_path, "1.7.236")
    view.look()
    assert restarts == []  # one look: Marathon may be between the task's end and its relaunch's queue entry
    view.look()
    assert restarts == ["/v2/apps/ml/mnist/ps-0/restart"]
    said = [e for e in view.events.mine() if e["kind"] == T.RELAUNCHED]
    assert [e["task"] for e in said] == ["ps-0"]
    assert said[0]["message"].startswith("ps-0 relaunched: Marathon 1.7.236 left it without a task")
    view.look()  # (the restart's task not there yet): asked again only after two more looks
    assert len(restarts) == 1


def test_on_1_7_a_queued_or_deploying_app_is_left_to_marathon(httpserver, make_ctx, tmp_path):
    view, fake, ps, restarts = _forgotten(httpserver, make_ctx, tmp_path, "1.7.236")
    fake.queue = [{"app": {"id": ps["id"]}, "count": 1, "delay": {"timeLeftSeconds": 3, "overdue": False}}]
    for _ in range(3):
        view.look()
    fake.queue = []
    ps["deployments"] = [{"id": "d-1"}]  # a deployment holds it: its own step may launch it
    for _ in range(3):
        view.look()
    assert restarts == []
    ps["deployments"] = []
    view.look()
    view.look()
    assert restarts == ["/v2/apps/ml/mnist/ps-0/restart"]


def test_on_1_7_a_restart_refused_for_a_lock_is_asked_again_at_the_next_look(httpserver, make_ctx, tmp_path):
    locked = (409, {"message": "App is locked by one or more deployments.", "deployments": [{"id": "d-9"}]})
    view, fake, ps, restarts = _forgotten(httpserver, make_ctx, tmp_path, "1.6.322", answers=[locked])
    view.look()
    view.look()
    assert len(restarts) == 1 and not [e for e in view.events.mine() if e["kind"] == T.RELAUNCHED]
    view.look()
    assert len(restarts) == 2 and [e["task"] for e in view.events.mine() if e["kind"] == T.RELAUNCHED] == ["ps-0"]


def test_from_1_8_marathon_relaunches_whatever_locks_it_and_nothing_is_restarted(httpserver, make_ctx, tmp_path):
    """1.8 reschedules a failed instance whatever deployment holds its app (mesosphere/marathon releases/1.8
    src/main/scala/mesosphere/marathon/core/instance/Instance.scala:46 isScheduled)."""
    view, fake, ps, restarts = _forgotten(httpserver, make_ctx, tmp_path, "1.11.0")
    for _ in range(3):
        view.look()
    assert restarts == []


def test_the_first_other_tasks_of_the_cluster_spec_watch_the_deciding_tasks_app(make_ctx):
    from dataclasses import replace

    from marathon_tf.task.jobview import watches_decider
    from marathon_tf.task.policy import decider_task

    def watchers(**cluster):
        ctx = make_ctx("worker", 0, cluster=cluster)
        return decider_task(ctx.completion), [f"{r}-{i}" for r, i in ctx.members()
                                              if watches_decider(replace(ctx, role=r, index=i))]

    assert watchers(ps=1, worker=3) == ("worker-0", ["ps-0", "worker-1"])
    assert watchers(ps=2, worker=1) == ("worker-0", ["ps-0", "ps-1"])


def test_a_watcher_restarts_the_deciding_tasks_app_left_dead_on_1_7(httpserver, make_ctx, tmp_path):
    """The watcher reads the deciding task's app alone: Marathon's one-app GET embeds its tasks and deployments
    unasked (mesosphere/marathon v1.7.236 src/main/scala/mesosphere/marathon/api/v2/AppsResource.scala:130-133)."""
    import threading

    from werkzeug import Response

    from marathon_tf.task.jobview import watch_decider

    view, fake, ps, restarts = _forgotten(httpserver, make_ctx, tmp_path, "1.7.236")
    fake.apps["/ml/mnist/worker-0"]["tasks"] = []  # the deciding task lost; ps-0 watches it
    httpserver.expect_request("/v2/apps/ml/mnist/worker-0", method="GET").respond_with_handler(
        lambda request: Response(json.dumps({"app": fake.apps["/ml/mnist/worker-0"]}), 200,
                                 content_type="application/json"))
    stop = threading.Event()
    events = TaskEvents("ps-0", str(tmp_path / "ps-events.jsonl"))
    thread = watch_decider(make_ctx("ps", 0, cluster={"ps": 1, "worker": 1}), fake.client(), events, stop,
                           interval=0.2)
    try:
        deadline = time.monotonic() + 10
        while not restarts and time.monotonic() < deadline:
            time.sleep(0.05)
        assert restarts == ["/v2/apps/ml/mnist/worker-0/restart"]
        assert [e["task"] for e in events.mine() if e["kind"] == T.RELAUNCHED] == ["worker-0"]
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()


def test_on_1_7_a_look_that_sees_a_lost_task_held_by_a_deployment_comes_again_soon(httpserver, make_ctx, tmp_path):
    """The lock's own case (a task lost while a deployment holds its app): looked at every FORGOTTEN_AGAIN s, so
    that it is restarted within seconds of the deployment's end; a task never placed yet (no failure) is not."""
    view, fake, ps, restarts = _forgotten(httpserver, make_ctx, tmp_path, "1.7.236")
    ps["deployments"] = [{"id": "d-1"}]
    view.look()
    assert not view.relauncher.pending  # waiting to be placed: the usual looks
    ps["lastTaskFailure"] = {"appId": ps["id"], "taskId": "ps.1", "state": "TASK_KILLED", "message": "killed",
                             "timestamp": "2026-01-01T10:00:30.000Z", "version": "2026-01-01T10:00:00.000Z"}
    view.look()
    assert view.relauncher.pending and restarts == []
    ps["deployments"] = []
    view.look()
    view.look()
    assert restarts == ["/v2/apps/ml/mnist/ps-0/restart"]


def test_on_1_11_a_lost_task_held_by_a_deployment_changes_nothing(httpserver, make_ctx, tmp_path):
    view, fake, ps, restarts = _forgotten(httpserver, make_ctx, tmp_path, "1.11.0")
    ps["deployments"] = [{"id": "d-1"}]
    ps["lastTaskFailure"] = {"appId": ps["id"], "taskId": "ps.1", "state": "TASK_KILLED", "message": "killed",
                             "timestamp": "2026-01-01T10:00:30.000Z", "version": "2026-01-01T10:00:00.000Z"}
    view.look()
    assert not view.relauncher.pending and restarts == []
