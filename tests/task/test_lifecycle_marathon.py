"""The all_workers poll and JobControl against a fake Marathon (pytest-httpserver) and real status endpoints."""

import threading

from marathon_tf.contract import labels as L
from marathon_tf.contract.errors import MarathonError
from marathon_tf.task.jobcontrol import JobControl, await_workers, client_from_env
from marathon_tf.task.policy import startup_reason


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_job_control_finish_keeps_retrying_until_marathon_answers(fake_marathon, make_ctx):
    fake_marathon.add_app("worker", 0)
    fake_marathon.fail_puts = 4  # more than one client call's 3 attempts
    logs = []
    control = JobControl(make_ctx(), fake_marathon.client(), retry_interval=0.01, log=logs.append)
    assert control.finish(L.SUCCEEDED, "done", 7, threading.Event())
    assert fake_marathon.apps["/ml/mnist/worker-0"]["labels"][L.STATE] == "Succeeded"
    assert any("retrying" in m for m in logs) and control.finished == ("Succeeded", "done")
    stopped = threading.Event()
    stopped.set()
    assert not control.finish(L.FAILED, "x", 1, stopped)


def _workers(fake_marathon, status_endpoint, n=3):
    statuses = {}
    for i in range(n):
        status, port = status_endpoint("worker", i)
        fake_marathon.add_app("worker", i, status_port=port)
        statuses[i] = status
    fake_marathon.add_app("ps", 0)
    return statuses


def test_await_workers_until_every_other_worker_succeeded(fake_marathon, status_endpoint, make_ctx):
    statuses = _workers(fake_marathon, status_endpoint)
    ctx = make_ctx("worker", 0, cluster={"ps": 1, "worker": 3}, completion="all_workers")
    clock, polls = FakeClock(), []

    def sleep(seconds):
        clock.sleep(seconds)
        polls.append(seconds)
        if len(polls) == 1:
            statuses[1].update(phase="succeeded")
        if len(polls) == 2:
            statuses[2].update(phase="succeeded")

    statuses[1].update(phase="running")
    statuses[2].update(phase="running")
    result = await_workers(fake_marathon.client(), ctx, interval=2, clock=clock, sleep=sleep)
    assert result == (L.SUCCEEDED, "all 3 workers finished")
    gets = fake_marathon.gets()
    assert len(gets) == 3 and all(g[2]["embed"] == ["group.groups", "group.apps", "group.apps.tasks"] for g in gets)


def test_await_workers_a_failed_worker_fails_the_job(fake_marathon, status_endpoint, make_ctx):
    statuses = _workers(fake_marathon, status_endpoint)
    statuses[1].update(phase="succeeded")
    statuses[2].update(phase="failed", last_error="training program exited with 1")
    ctx = make_ctx("worker", 0, cluster={"ps": 1, "worker": 3})
    assert await_workers(fake_marathon.client(), ctx, sleep=lambda s: None) == (
        L.FAILED, "worker-2 failed after worker-0 finished: training program exited with 1")


def test_await_workers_is_bounded_and_names_the_pending(fake_marathon, status_endpoint, make_ctx):
    statuses = _workers(fake_marathon, status_endpoint)
    statuses[1].update(phase="succeeded")
    statuses[2].update(phase="running")
    fake_marathon.apps["/ml/mnist/worker-1"]["tasks"] = []  # relaunching: no status to read
    ctx = make_ctx("worker", 0, cluster={"ps": 1, "worker": 3})
    clock = FakeClock()
    state, reason = await_workers(fake_marathon.client(), ctx, timeout=10, interval=2, clock=clock,
                                     sleep=clock.sleep)
    assert state == L.FAILED and clock.now == 10
    assert reason == ("worker-0 finished but not every worker did: nothing new for 10 s from worker-1 (unreachable), "
                      "worker-2 (running)")


def test_await_workers_waits_for_a_worker_that_trains_and_names_one_that_went_silent(fake_marathon, status_endpoint,
                                                                                    make_ctx):
    """(issue 24) the wait is bounded by silence, not by a fixed time: a slower worker still training is
    waited for; a frozen one is named with its last step and the peer it waits for."""
    statuses = _workers(fake_marathon, status_endpoint)
    statuses[1].update(phase="running", step=100)
    statuses[2].update(phase="running", step=100)
    ctx = make_ctx("worker", 0, cluster={"ps": 1, "worker": 3})
    clock = FakeClock()

    def sleep(seconds):
        clock.sleep(seconds)
        if clock.now < 40:  # worker-1 trains on for 40 s, then freezes waiting for ps-0; worker-2 trains to the end
            statuses[1].update(step=100 + int(clock.now))
        else:
            statuses[1].update(waiting_for={"peer": "ps-0", "why": "its TF server does not answer", "seconds": 9})
        statuses[2].update(step=100 + int(clock.now))
        if clock.now >= 80:
            statuses[2].update(phase="succeeded")

    state, reason = await_workers(fake_marathon.client(), ctx, timeout=30, interval=2, clock=clock, sleep=sleep)
    assert state == L.FAILED and 68 <= clock.now <= 72, clock.now  # 30 s after worker-1's last new step
    assert reason == ("worker-0 finished but not every worker did: nothing new for 30 s from worker-1 (running, at "
                      "step 138; waiting for ps-0: its TF server does not answer)")


def test_await_workers_stops_when_the_job_already_has_a_record(fake_marathon, status_endpoint, make_ctx):
    _workers(fake_marathon, status_endpoint)
    fake_marathon.apps["/ml/mnist/ps-0"]["labels"][L.STATE] = "Failed"
    ctx = make_ctx("worker", 0, cluster={"ps": 1, "worker": 3})
    assert await_workers(fake_marathon.client(), ctx, sleep=lambda s: None) is None


def test_await_workers_survives_marathon_errors(make_ctx):
    class Flaky:
        calls = 0

        def get_group(self, *a, **kw):
            Flaky.calls += 1
            if Flaky.calls == 1:
                raise MarathonError("503 busy")
            return {"apps": [], "groups": []}

    ctx = make_ctx("worker", 0, cluster={"ps": 1, "worker": 1})  # no other worker: done at once
    logs = []
    assert await_workers(Flaky(), ctx, sleep=lambda s: None, log=logs.append)[0] == L.SUCCEEDED
    assert Flaky.calls == 2 and "503 busy" in logs[0]


def test_client_from_env_uses_the_task_credentials(make_ctx, httpserver):
    ctx = make_ctx(marathon_url=httpserver.url_for(""))
    assert client_from_env(make_ctx(), {}) is None
    token = client_from_env(ctx, {"MARATHON_TOKEN": "s3cret"})
    assert token.session.headers["Authorization"] == "token=s3cret"
    basic = client_from_env(ctx, {"MARATHON_USER": "u", "MARATHON_PASSWORD": "p"})
    assert basic.session.auth == ("u", "p") and "s3cret" not in basic.url


def test_startup_reason():
    assert startup_reason(300, {"worker-1": "NXDOMAIN", "ps-0": "DNS timeout"}) == (
        "startup deadline (300s) passed; missing: ps-0 (DNS timeout), worker-1 (NXDOMAIN)")


def test_the_records_final_step_is_the_jobs_the_largest_step_any_chief_or_worker_reported(
        fake_marathon, status_endpoint, make_ctx):
    """Issue 32: one job, two final steps: `[worker-1] done final_step=301` and the progress line `step 301,
    target 300 reached`, then the record's `final step 300` (worker-0's own). The record's final step is
    the job's step (contract/progress.job_step): the largest any chief or worker reported, the ps' (its
    logdir's) aside."""
    statuses = _workers(fake_marathon, status_endpoint)
    statuses[1].update(phase="succeeded", step=301)
    statuses[2].update(phase="succeeded", step=299)
    ps, port = status_endpoint("ps", 0)
    fake_marathon.add_app("ps", 0, status_port=port)
    ps.update(step=400)  # a ps' step is the logdir's, not a trained one
    ctx = make_ctx("worker", 0, cluster={"ps": 1, "worker": 3}, completion="all_workers")
    control = JobControl(ctx, fake_marathon.client(), retry_interval=0.01)
    assert control.finish(L.SUCCEEDED, "all 3 workers finished", 300, threading.Event())
    assert fake_marathon.apps["/ml/mnist/worker-0"]["labels"][L.FINAL_STEP] == "301"
