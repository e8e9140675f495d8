"""The bootstrap with the job-aware policy, in-process: small real child programs, a fake discovery
backend and a fake Marathon (the record is written through the real client)."""

import io
import os
import signal
import sys
import threading
import time

import pytest
from polling import alive, wait_for

from marathon_tf.contract import labels as L
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.task.bootstrap import Bootstrap, job_lifecycle
from marathon_tf.task.discovery import Observation
from marathon_tf.task.jobcontrol import JobControl
from marathon_tf.task.jobpolicy import JobPolicy
from marathon_tf.task.logdir import FAILURES_FILE

PEERS = {("ps", 0): "127.0.0.1:2000", ("worker", 0): "127.0.0.1:2001", ("worker", 1): "127.0.0.1:2002"}
# Exits with the code in file CODES (one line per run, the last line repeats), printing a step first.
CHILD = ("import os, sys; runs = open('runs', 'a+'); runs.write('x'); runs.close(); "
         "n = len(open('runs').read()); codes = open('codes').read().split(); "
         "print('step=%d loss=1' % (10 * n), flush=True); "
         "sys.stderr.write('run %d: boom: bad data\\n' % n); "
         "sys.exit(int(codes[min(n, len(codes)) - 1]))")
# Its first run prints a step and sleeps (to be killed; with a file "catch" it exits 143 on SIGTERM by
# itself), the next ones exit 0.
#: (its SIGTERM disposition is set before it says its step: a test that signals it once the step is seen must not
#: find it still ignoring SIGTERM, as it inherits from a bootstrap with save rounds — a CI run's race)
SLEEPER = ("import os, signal, sys, time; "
           "os.path.exists('catch') and signal.signal(signal.SIGTERM, lambda *a: sys.exit(143)); "
           "os.path.exists('dfl') and signal.signal(signal.SIGTERM, signal.SIG_DFL); "
           "runs = open('runs', 'a+'); runs.write('x'); runs.close(); "
           "n = len(open('runs').read()); open('pid', 'w').write(str(os.getpid())); "
           "print('step=%d loss=1' % (10 * n), flush=True); "
           "n > 1 and sys.exit(0); time.sleep(60)")


class Backend:
    def __init__(self, addresses):
        self.addresses = dict(addresses)

    def lookup(self, peers):
        return {p: Observation(self.addresses.get(p), "ok" if p in self.addresses else "NXDOMAIN") for p in peers}


class Run:
    def __init__(self, ctx, env, sandbox, codes, *, backend=None, control=True, fake=None, program=CHILD):
        (sandbox / "codes").write_text(" ".join(str(c) for c in codes))
        parts = job_lifecycle(ctx, env)
        if control and fake is not None:
            parts["control"] = JobControl(ctx, fake.client(), retry_interval=0.05, poll_interval=0.05)
        elif not control:
            parts["control"] = None
        self.err = io.BytesIO()
        # the fake backend is read by every task (tests/task/test_rendezvous*)
        env = {**env, "MTF_RENDEZVOUS": "direct"}
        self.boot = Bootstrap(ctx, env, [sys.executable, "-c", program], backend=backend or Backend(PEERS),
                              stdout=io.BytesIO(), stderr=self.err, tick=0.02, restart_backoff=(0.01, 0.05),
                              **parts)
        self.result = None
        self.thread = threading.Thread(target=lambda: setattr(self, "result", self.boot.run()), daemon=True)
        self.thread.start()

    def status(self):
        return self.boot.status.snapshot()


    def stop(self):
        self.boot.request_stop(signal.SIGTERM)
        self.thread.join(10)
        assert not self.thread.is_alive()
        return self.result


@pytest.fixture
def runs():
    started = []

    def start(*args, **kw):
        run = Run(*args, **kw)
        started.append(run)
        return run

    yield start
    for run in started:
        if run.thread.is_alive():
            run.stop()


def job(fake_marathon, n_workers=2):
    fake_marathon.add_app("ps", 0)
    for i in range(n_workers):
        fake_marathon.add_app("worker", i)


def context(make_ctx, fake_marathon, role="worker", index=0, **fields):
    fields.setdefault("style", "tf1")
    fields.setdefault("completion", "worker0")
    return make_ctx(role, index, marathon_url=fake_marathon.url, **fields)


def test_decider_success_records_the_job_and_stays_up(tmp_path, fake_marathon, make_ctx, task_environ, runs):
    job(fake_marathon)
    ctx = context(make_ctx, fake_marathon)
    run = runs(ctx, task_environ(ctx), tmp_path, [0], fake=fake_marathon)
    wait_for(lambda: fake_marathon.puts(), 10, what="the record")
    labels = fake_marathon.apps["/ml/mnist/ps-0"]["labels"]
    assert (labels[L.STATE], labels[L.FINAL_STEP], labels[L.REASON]) == ("Succeeded", "10", "worker-0 finished")
    assert all(a["instances"] == 0 for a in fake_marathon.apps.values())
    run.thread.join(0.2)
    assert run.thread.is_alive() and run.status()["phase"] == "succeeded" and run.boot.status.healthy
    assert run.stop() == 0


def test_a_worker_restarts_in_place_then_succeeds(tmp_path, fake_marathon, make_ctx, task_environ, runs):
    job(fake_marathon)
    ctx = context(make_ctx, fake_marathon, restart_budget=(3, 600.0))
    run = runs(ctx, task_environ(ctx), tmp_path, [1, 1, 0], fake=fake_marathon)
    wait_for(lambda: fake_marathon.puts(), 10, what="the record")
    assert run.status()["restarts"] == 2 and fake_marathon.apps["/ml/mnist/worker-0"]["labels"][L.FINAL_STEP] == "30"
    assert run.stop() == 0


def test_a_program_that_exits_143_by_itself_is_a_failure_not_a_preemption(tmp_path, fake_marathon, make_ctx,
                                                                        task_environ, runs):
    """Issue 21: 143 is a preemption exit code only after a SIGTERM; nobody sent one here, so the exit
    counts against max_failures (0: the job fails) instead of being restarted as a preemption."""
    job(fake_marathon)
    ctx = context(make_ctx, fake_marathon, restart_budget=(0, 600.0))
    run = runs(ctx, task_environ(ctx), tmp_path, [143, 0], fake=fake_marathon)
    wait_for(lambda: fake_marathon.puts(), 10, what="the record")
    labels = fake_marathon.apps["/ml/mnist/worker-0"]["labels"]
    assert labels[L.STATE] == "Failed", labels
    assert labels[L.REASON].endswith("more than restart.max_failures (0); last: worker-0 exited with 143: "
                                     "run 1: boom: bad data"), labels[L.REASON]
    assert run.status()["restarts"] == 0
    summary = run.boot.policy.keeper.ledger.summary()
    assert (summary["failures"], summary["preemptions"]) == (1, 0), summary
    assert run.stop() == 143


def test_a_program_killed_by_a_sigterm_from_outside_is_a_preemption(tmp_path, fake_marathon, make_ctx, task_environ,
                                                                    runs, capsys):
    """SIGTERM to the program alone (not through its bootstrap): it ends of it (143), a preemption:
    restarted, the failure budget (0) untouched; its next run ends the job Succeeded. (A program of a job
    with save rounds starts with SIGTERM ignored, supervisor.ignore_sigterm: this one restores its default,
    as a program may.)"""
    job(fake_marathon)
    (tmp_path / "dfl").write_text("")
    ctx = context(make_ctx, fake_marathon, restart_budget=(0, 600.0))
    run = runs(ctx, task_environ(ctx), tmp_path, [0], fake=fake_marathon, program=SLEEPER)
    wait_for(lambda: run.status()["step"] == 10, 10, what="its first step")
    pid = int((tmp_path / "pid").read_text())
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: fake_marathon.puts(), 10, what="the record")
    assert fake_marathon.apps["/ml/mnist/worker-0"]["labels"][L.STATE] == "Succeeded"
    summary = run.boot.policy.keeper.ledger.summary()
    assert (summary["failures"], summary["preemptions"]) == (0, 1), summary
    assert "training program was preempted (preemption 1 of at most 100, job-wide)" in capsys.readouterr().err
    assert run.status()["restarts"] == 1 and run.stop() == 0


def test_a_program_ending_143_just_before_its_bootstrap_gets_the_tasks_sigterm_is_stopped_not_counted(
        tmp_path, fake_marathon, make_ctx, task_environ, runs, capsys):
    """A task's kill signals its whole process tree (Mesos' command executor): the program may end on
    its SIGTERM (its handler exits 143) just before the bootstrap's own SIGTERM arrives. The bootstrap
    waits a moment for it and stops as a killed task does: no failure counted, no restart."""
    job(fake_marathon)
    (tmp_path / "catch").write_text("")
    ctx = context(make_ctx, fake_marathon, restart_budget=(0, 600.0))
    run = runs(ctx, task_environ(ctx), tmp_path, [0], fake=fake_marathon, program=SLEEPER)
    run.boot.restarts.sigterm_wait = 10.0  # the test's own SIGTERM to the bootstrap comes after the program is reaped
    wait_for(lambda: run.status()["step"] == 10, 30, what="its first step")
    pid = int((tmp_path / "pid").read_text())
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not alive(pid), 30, what="the program's end")
    run.boot.request_stop(signal.SIGTERM)
    run.thread.join(30)  # (seconds on a loaded machine: it reports the stop to the keeper first)
    assert not run.thread.is_alive() and run.result == 143
    assert run.status()["restarts"] == 0 and fake_marathon.puts() == []
    assert run.boot.policy.keeper.ledger.summary()["failures"] == 0
    assert "stopped by SIGTERM: the training program gets it now" in capsys.readouterr().err


def test_budget_is_shared_by_two_bootstraps_through_the_logdir(tmp_path, fake_marathon, make_ctx, task_environ, runs):
    job(fake_marathon)
    shared = tmp_path / "shared"
    shared.mkdir()
    first_box, second_box = tmp_path / "a", tmp_path / "b"
    first_box.mkdir(), second_box.mkdir()
    common = dict(restart_budget=(2, 600.0), logdir=str(shared))
    ps = context(make_ctx, fake_marathon, "ps", 0, **common)
    run = runs(ps, task_environ(ps, first_box), first_box, [1], fake=fake_marathon)
    run.thread.join(10)
    assert run.result == 1 and run.status()["phase"] == "failed"  # a ps exits: Marathon relaunches it
    ps_again = runs(ps, task_environ(ps, first_box), first_box, [1], fake=fake_marathon)  # its "relaunch"
    ps_again.thread.join(10)
    assert ps_again.result == 1
    w1 = context(make_ctx, fake_marathon, "worker", 1, **common)
    worker = runs(w1, task_environ(w1, second_box), second_box, [7], fake=fake_marathon)
    wait_for(lambda: fake_marathon.puts(), 10, what="the record")
    reason = fake_marathon.apps["/ml/mnist/worker-1"]["labels"][L.REASON]
    # no deciding task runs here: the task counts alone, with the logdir's file (the job-wide trace)
    assert reason == ("worker-1 failed 3 times in 600 s, more than restart.max_failures (2; counted by the task "
                      "alone: the deciding task did not answer); last: exited with 7: run 1: boom: bad data")
    assert worker.boot.status.healthy and worker.status()["phase"] == "failed"  # parked, not killed
    lines = (shared / ".marathon-tf" / "failures.jsonl").read_text().splitlines()
    assert [line.split('"task": ')[1].split('"')[1] for line in lines] == ["ps-0", "ps-0", "worker-1"]
    assert worker.stop() == 7


def test_permanent_failure_fails_the_job_and_parks_healthy(tmp_path, fake_marathon, make_ctx, task_environ, runs):
    job(fake_marathon)
    ctx = context(make_ctx, fake_marathon, "worker", 1, permanent_exit_codes=(3,))
    run = runs(ctx, task_environ(ctx), tmp_path, [3], fake=fake_marathon)
    wait_for(lambda: fake_marathon.puts(), 10, what="the record")
    labels = fake_marathon.apps["/ml/mnist/worker-0"]["labels"]
    assert labels[L.STATE] == "Failed"
    assert labels[L.REASON] == "worker-1 exited with 3 (permanent): run 1: boom: bad data"
    assert run.boot.status.healthy and run.thread.is_alive()
    assert run.stop() == 3


def test_multi_worker_mirrored_worker_exits_for_a_group_restart(tmp_path, fake_marathon, make_ctx, task_environ, runs):
    job(fake_marathon)
    ctx = context(make_ctx, fake_marathon, "worker", 1, style="multi_worker_mirrored", cluster={"worker": 2})
    run = runs(ctx, task_environ(ctx), tmp_path, [1, 0], fake=fake_marathon,
               backend=Backend({("worker", 0): "127.0.0.1:2001"}))
    run.thread.join(10)
    assert run.result == 1 and run.status()["restarts"] == 0 and fake_marathon.puts() == []


def test_startup_deadline_fails_the_job_naming_the_missing_peers(tmp_path, fake_marathon, make_ctx, task_environ,
                                                                 runs):
    job(fake_marathon)
    for app in fake_marathon.apps.values():  # every task placed: ps-0 runs but is not in DNS
        app["tasks"].append({"id": f"{app['id']}.1", "state": "TASK_RUNNING", "host": "127.0.0.1", "ports": [1, 2]})
    ctx = context(make_ctx, fake_marathon, "worker", 1, startup_timeout=0.3)
    run = runs(ctx, task_environ(ctx), tmp_path, [0], fake=fake_marathon,
               backend=Backend({("worker", 0): "127.0.0.1:2001"}))
    wait_for(lambda: fake_marathon.puts(), 10, what="the record")
    labels = fake_marathon.apps["/ml/mnist/worker-0"]["labels"]
    assert labels[L.STATE] == "Failed"
    assert labels[L.REASON] == "startup deadline (0.3s) passed; missing: ps-0 (NXDOMAIN)"
    assert run.boot.status.healthy and run.thread.is_alive()  # parked: no relaunch loop
    assert run.stop() == 1
    assert not (tmp_path / "runs").exists()  # the program never ran


def test_startup_deadline_with_a_peer_marathon_never_placed_releases_the_job_not_placed(
        tmp_path, fake_marathon, make_ctx, task_environ, runs):
    job(fake_marathon)  # no app has a task: Marathon placed none of the others
    fake_marathon.apps["/ml/mnist/worker-1"]["tasks"].append(
        {"id": "w1.1", "state": "TASK_RUNNING", "host": "127.0.0.1", "ports": [1, 2]})
    ctx = context(make_ctx, fake_marathon, "worker", 1, startup_timeout=0.3)
    run = runs(ctx, task_environ(ctx), tmp_path, [0], fake=fake_marathon,
               backend=Backend({("worker", 0): "127.0.0.1:2001"}))
    wait_for(lambda: fake_marathon.puts(), 10, what="the record")
    apps = fake_marathon.apps.values()
    assert {a["labels"][L.STATE] for a in apps} == {L.NOT_PLACED} and {a["instances"] for a in apps} == {0}
    assert fake_marathon.apps["/ml/mnist/worker-0"]["labels"][L.REASON] == (
        "ps: 0/1 placed; 1 waiting | worker: 1/2 placed; 1 waiting")
    assert run.stop() == 1
    assert not (tmp_path / "runs").exists()  # the program never ran


def test_all_workers_decider_waits_for_the_others(tmp_path, fake_marathon, make_ctx, task_environ, runs,
                                                  status_endpoint):
    fake_marathon.add_app("ps", 0)
    fake_marathon.add_app("worker", 0)
    other, port = status_endpoint("worker", 1)
    fake_marathon.add_app("worker", 1, status_port=port)
    other.update(phase="running")
    ctx = context(make_ctx, fake_marathon, completion="all_workers")
    run = runs(ctx, task_environ(ctx), tmp_path, [0], fake=fake_marathon)
    wait_for(lambda: run.status()["phase"] == "succeeded", 10, what="worker-0 succeeded")
    time.sleep(0.3)
    assert fake_marathon.puts() == [] and len(fake_marathon.gets()) >= 2  # polling
    other.update(phase="succeeded")
    wait_for(lambda: fake_marathon.puts(), 10, what="the record")
    assert fake_marathon.apps["/ml/mnist/worker-1"]["labels"][L.REASON] == "all 2 workers finished"
    assert run.stop() == 0


def test_without_marathon_the_decider_just_stays_up(tmp_path, make_ctx, task_environ, runs):
    ctx = make_ctx("worker", 0, style="tf1")
    run = runs(ctx, task_environ(ctx), tmp_path, [0], control=False)
    wait_for(lambda: run.status()["phase"] == "succeeded", 10, what="succeeded")
    assert run.boot.control is None and run.stop() == 0


def test_job_lifecycle_builds_policy_and_control_from_the_env(tmp_path, make_ctx):
    (tmp_path / "logs").mkdir()
    ctx = make_ctx(marathon_url="http://127.0.0.1:1", logdir="logs", restart_budget=(4, 30.0))
    parts = job_lifecycle(ctx, {"MESOS_SANDBOX": str(tmp_path), "MARATHON_TOKEN": "t0k"})
    assert isinstance(parts["policy"], JobPolicy) and parts["control"].client.urls == ["http://127.0.0.1:1"]
    budget = parts["policy"].budget
    assert (budget.max_failures, budget.window, budget.path) == (4, 30.0, str(tmp_path / "logs" / FAILURES_FILE))
    assert job_lifecycle(TaskContext(job="j", role="ps", index=0, cluster={"ps": 1}), {})["control"] is None


def test_the_assembly_makes_the_jobs_parts_once_with_the_parts_they_write_to(tmp_path, make_ctx):
    """Issue 40 (assembly through constructors): the bootstrap makes its status, events and the plan's coordinator
    first, then the job's restart ledger and control from them (``lifecycle``, once: the control's keeper, which
    reads Marathon's word on the job's apps, is the policy's, which counts the reports), and nothing is wired into
    them afterwards. A second call made a second keeper: the relaunched coordinator's count of its predecessor's
    crash went to the one the job's record does not read."""
    (tmp_path / "logs").mkdir()
    ctx = make_ctx(marathon_url="http://127.0.0.1:1", logdir="logs")
    calls = []

    def lifecycle(*args, **kwargs):
        calls.append(kwargs)
        return job_lifecycle(*args, **kwargs)

    boot = Bootstrap(ctx, {"MESOS_SANDBOX": str(tmp_path)}, [sys.executable, "-c", "pass"], lifecycle=lifecycle)
    assert len(calls) == 1 and isinstance(boot.policy, JobPolicy) and boot.control is not None
    keeper = boot.policy.keeper
    assert keeper is not None and boot.control.keeper is keeper
    assert (keeper.status, keeper.coordinator) == (boot.status, boot.coordinator) and boot.coordinator is not None
    assert keeper.events is boot.observer.events
    follower = Bootstrap(make_ctx("worker", 1, marathon_url="http://127.0.0.1:1", logdir="logs"),
                         {"MESOS_SANDBOX": str(tmp_path)}, [sys.executable, "-c", "pass"], lifecycle=job_lifecycle)
    assert follower.coordinator is None and isinstance(follower.policy, JobPolicy)
    reporter = follower.policy.reporter
    assert reporter is not None and reporter.locate() is None  # no rendezvous yet: the leader is not known
