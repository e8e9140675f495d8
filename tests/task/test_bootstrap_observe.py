"""The bootstrap's observer in-process (fake discovery backend, a small real program that serves a TF-like
port): the peer a stalled task waits for in /status, the watchdog's verdict naming it, the task's events."""

from __future__ import annotations

import json
import sys

import pytest
from task_helpers import FakeBackend, GrpcLikeServer, free_port, task_env, wait_for
from test_bootstrap_run import Run  # noqa: E402  (the in-process bootstrap runner)

from marathon_tf.contract import timeline as T
from marathon_tf.task.machine import TaskMachine
from marathon_tf.task.peers import PROBE_TIMEOUT

# a program that serves its TF port like a gRPC server (a SETTINGS frame), prints one step, then hangs
PROGRAM = ("import os, socket, sys, threading, time\n"
           "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
           "s.bind(('127.0.0.1', int(os.environ['PORT_TF']))); s.listen(8)\n"
           "def serve():\n"
           "    while True:\n"
           "        c, _ = s.accept(); c.recv(64); c.sendall(b'\\x00\\x00\\x00\\x04\\x00\\x00\\x00\\x00\\x00')\n"
           "threading.Thread(target=serve, daemon=True).start()\n"
           "print('step=1 loss=1', flush=True); time.sleep(600)\n")


def test_a_stalled_worker_names_the_silent_ps_and_the_watchdogs_verdict_does_too(tmp_path, capsys):
    silent, answering = GrpcLikeServer(False), GrpcLikeServer(True)
    port = free_port()
    env = task_env("worker", 0, {"ps": 1, "worker": 2}, sandbox=str(tmp_path), tf_port=port,
                   progress_timeouts=(3 * PROBE_TIMEOUT + 2, 0))
    env["MTF_RENDEZVOUS"] = "direct"
    backend = FakeBackend({("ps", 0): silent.address, ("worker", 1): answering.address})
    run = Run(env, backend, command=[sys.executable, "-c", PROGRAM])
    try:
        waiting = wait_for(lambda: run.status()["waiting_for"], 15, interval=0.1, what="a named wait")
        assert waiting["peer"] == "ps-0" and waiting["why"] == "its TF server does not answer"
        assert run.status()["server_up"] is True and run.status()["stall_seconds"] >= 1
        run.thread.join(30)
        assert run.result == 143  # stopped by the watchdog (ExitPolicy: exit for a relaunch)
        err = capsys.readouterr().err
        assert "since step 1; waiting for ps-0 (its TF server does not answer): stopping the training program" in err
        kinds = [(e["kind"], e.get("peer")) for e in run.boot.observer.events.mine()]
        assert kinds[:3] == [(T.TASK_STARTED, None), (T.PEERS_FOUND, None), (T.PROGRAM_STARTED, None)]
        assert (T.WAITING, "ps-0") in kinds and (T.HANG, "ps-0") in kinds and kinds[-1][0] == T.PROGRAM_EXITED
        assert kinds.index((T.SERVER_UP, None)) < kinds.index((T.WAITING, "ps-0"))
        assert run.status()["failures"] == 1
    finally:
        silent.close()
        answering.close()


# a coordinator whose first run TensorFlow tells that worker-1 was restarted under it (it then hangs,
# as TF 2.21's ParameterServerStrategy coordinator does); its second run trains and ends
COORDINATOR = ("import os, pathlib, sys, time\n"
               "runs = pathlib.Path(os.environ['MESOS_SANDBOX'], 'runs'); "
               "n = len(runs.read_text()) if runs.exists() else 0\n"
               "runs.write_text('x' * (n + 1))\n"
               "if n == 0:\n"
               "    print('ERROR:tensorflow:Worker /job:worker/replica:0/task:1 failed with AbortedError(): "
               "RecvTensor '\n"
               "          'expects a different device incarnation: 1 vs. 2. Your worker job "
               "(\"/job:worker/replica:0/'\n"
               "          'task:1\") was probably restarted. Make sure your worker program is running with the same '\n"
               "          'ClusterSpec that was used to create the client.', file=sys.stderr, flush=True)\n"
               "    time.sleep(600)\n"
               "print('step=1 loss=1', flush=True)\n")


def test_a_coordinator_that_holds_a_restarted_workers_old_incarnation_is_restarted_uncounted(tmp_path, capsys):
    """TF_RUNTIME.md: a ParameterServerStrategy ps + chief restarted while the old workers still reconnect
    "often failed": the coordinator keeps the old incarnation of a worker restarted after it connected,
    and fails every step on it for ever (seen in the mnist-ps-strategy recovery after chief + ps were
    killed, once its tasks started pre-warmed). The chief's bootstrap restarts it in place, not counted."""
    env = task_env("chief", 0, {"chief": 1, "ps": 1, "worker": 2}, sandbox=str(tmp_path), style="parameter_server")
    env["MTF_RENDEZVOUS"] = "direct"
    backend = FakeBackend({("ps", 0): "127.0.0.1:1", ("worker", 0): "127.0.0.1:2", ("worker", 1): "127.0.0.1:3"})
    run = Run(env, backend, command=[sys.executable, "-c", COORDINATOR])
    try:
        run.wait_phase("succeeded", 30)  # (no Marathon to record the job's end in: it stays up)
    finally:
        run.stop()
    assert (tmp_path / "runs").read_text() == "xx"
    err = capsys.readouterr().err
    assert "TensorFlow says worker-1 was restarted under the training program" in err, err[-3000:]
    assert run.status()["failures"] == 0 and run.status()["restarts"] == 1


def test_first_step_is_the_tasks_own_after_its_server_up_once_per_run():
    """Issue 32: after relaunches `FirstStep` came before `ServerUp` (the look at the port lags the step),
    and a ParameterServerStrategy worker's `FirstStep` said `first step: 200` (the logdir's, the job's step:
    its program prints none). FirstStep is the task's first printed step of each run, after its ServerUp."""
    from marathon_tf.contract.taskenv import TaskContext
    from marathon_tf.task.observer import TaskObserver
    from marathon_tf.task.status_server import TaskStatus
    from marathon_tf.task.watchdog import ProgressWatchdog

    ctx = TaskContext(job="j", role="worker", index=1, cluster={"ps": 1, "worker": 2})
    status = TaskStatus(job="j", task="worker-1", role="worker", index=1)
    observer = TaskObserver(ctx, status, ProgressWatchdog.for_role("worker", (0, 0)), probe=lambda address: "silent",
                            machine=TaskMachine(status))
    for run in (1, 2):
        observer.program_started(run - 1, "127.0.0.1:1")
        observer.on_step(200 * run, printed=False)  # the logdir's step: not this program's first
        observer.on_step(200 * run + 1)
        observer.on_step(200 * run + 2)
        observer.program_exited(137, "killed")
    kinds = [(e["kind"], e.get("step")) for e in observer.events.mine()
             if e["kind"] in (T.PROGRAM_STARTED, T.SERVER_UP, T.FIRST_STEP)]
    assert kinds == [(T.PROGRAM_STARTED, None), (T.SERVER_UP, None), (T.FIRST_STEP, 201),
                     (T.PROGRAM_STARTED, None), (T.SERVER_UP, None), (T.FIRST_STEP, 401)], kinds
    assert status.snapshot()["server_up"] is True


def test_a_planned_restart_of_the_program_is_an_event_of_its_own_kind_never_a_failure():
    """Issue 32: the program stopped for the job's group restart (or a moved peer, a peer restarted under
    a coordinator) was a `ProgramExited`; a planned restart is a `Restarting` event with its why, counts no
    failure, and the timeline still shows how long it took to train again."""
    from marathon_tf.contract.taskenv import TaskContext
    from marathon_tf.task.observer import TaskObserver
    from marathon_tf.task.status_server import TaskStatus
    from marathon_tf.task.watchdog import ProgressWatchdog

    ctx = TaskContext(job="j", role="worker", index=0, cluster={"ps": 1, "worker": 2})
    status = TaskStatus(job="j", task="worker-0", role="worker", index=0)
    observer = TaskObserver(ctx, status, ProgressWatchdog.for_role("worker", (0, 0)), probe=lambda a: "silent",
                            machine=TaskMachine(status))
    observer.program_started(0, None)
    observer.on_step(10)
    observer.planned_restart("group", 143, "ps-0 failed (exit 137)")
    observer.program_started(1, None)
    observer.on_step(20)
    [event] = [e for e in observer.events.mine() if e["kind"] == T.RESTARTING]
    assert event["why"] == "group" and event["code"] == 143
    assert event["message"] == ("training program stopped for the job's group restart (ps-0 failed (exit 137)); it "
                                "starts again (exit 143)")
    assert not any(e["kind"] == T.PROGRAM_EXITED for e in observer.events.mine())
    assert status.snapshot()["failures"] == 0
    [recovery] = T.timeline(observer.events.mine())["recoveries"]
    assert recovery["kind"] == T.RESTARTING and recovery["how"] == "in place" and "trainingAgain" in recovery


@pytest.mark.parametrize("served, kind, why, said", [
    ({"ps": 1, "worker": 3}, T.RESTARTING, "scale", "training program stopped for scale (2 → 3 workers); it starts "
                                                    "again (exit 137)"),
    ({"ps": 1, "worker": 2}, T.RESTARTING, "redeploy", "training program stopped for a new configuration; it starts "
                                                       "again (exit 137)"),
    (None, T.PROGRAM_EXITED, None, "training program stopped: its task was stopped by SIGTERM (exit 137)"),
    ("same", T.PROGRAM_EXITED, None, "training program stopped: its task was stopped by SIGTERM (exit 137)"),
])
def test_a_task_stopped_for_its_apps_new_configuration_records_a_planned_restart(httpserver, served, kind, why, said):
    """Issue 43.4: a fixed-size job's ``scale worker=3`` gives every app a new configuration; Marathon kills every
    task and starts it again with the new cluster spec. Each stopped task recorded only ``ProgramExited … 137``
    (its task was stopped by SIGTERM); it is a planned restart, ``Restarting for scale (2 → 3 workers)``
    (``redeploy`` when the counts are the same), never a failure. A stop for good (the app removed: ``delete``)
    or one Marathon says nothing of (an operator's kill, the same version) stays the program's stop. Marathon
    is asked once per stop: the save round and the event read the same answer."""
    import signal
    import threading
    import time
    from types import SimpleNamespace

    from marathon_tf.contract.taskenv import TaskContext
    from marathon_tf.marathon.client import Client, RetryPolicy
    from marathon_tf.task.budget import RestartBudget
    from marathon_tf.task.jobpolicy import JobPolicy
    from marathon_tf.task.keeper import stop_asked
    from marathon_tf.task.observer import TaskObserver
    from marathon_tf.task.restarts import Restarter
    from marathon_tf.task.saving import SaveResult
    from marathon_tf.task.status_server import TaskStatus
    from marathon_tf.task.watchdog import ProgressWatchdog

    launched, changed = "2026-12-06T07:00:00.000Z", "2026-12-06T07:05:00.000Z"
    if served is None:
        httpserver.expect_request("/v2/apps/ml/mnist/worker-1").respond_with_json(
            {"message": "App '/ml/mnist/worker-1' does not exist"}, status=404)
    else:
        version = launched if served == "same" else changed
        cluster = {"ps": 1, "worker": 2} if served == "same" else served
        httpserver.expect_request("/v2/apps/ml/mnist/worker-1").respond_with_json({"app": {
            "id": "/ml/mnist/worker-1", "labels": {}, "version": version,
            "versionInfo": {"lastConfigChangeAt": version}, "env": {"MTF_CLUSTER": json.dumps(cluster)}}})
    client = Client(httpserver.url_for(""), retry=RetryPolicy(attempts=1, budget=1, initial=0.1, max_wait=0.1))
    ctx = TaskContext(job="ml/mnist", role="worker", index=1, cluster={"ps": 1, "worker": 2})
    status = TaskStatus(job="ml/mnist", task="worker-1", role="worker", index=1)
    observer = TaskObserver(ctx, status, ProgressWatchdog.for_role("worker", (0, 0)), probe=lambda a: "silent",
                            machine=TaskMachine(status))
    policy = JobPolicy(ctx, RestartBudget(3, 600, task=ctx.task),
                       planned=lambda: stop_asked(client, ctx.job, ctx.task, launched))
    restarter = Restarter(ctx, policy, None, status, observer, threading.Event(), lambda: signal.SIGTERM, grace=5.0,
                          clock=time.monotonic, log=lambda m: None, machine=observer.machine)
    asked_in_round = []
    restarter.saving = SimpleNamespace(  # type: ignore[assignment]
        before_stop=lambda budget, planned: asked_in_round.append(planned()) or SaveResult(False, "no chief"))
    observer.program_started(0, None)
    observer.on_step(10)
    trainer = SimpleNamespace(wait=lambda timeout=None: None, stop=lambda grace, sig=None: 137)
    assert restarter.stopped(trainer) == 137  # type: ignore[arg-type]
    [event] = [e for e in observer.events.mine() if e["kind"] in (T.RESTARTING, T.PROGRAM_EXITED)]
    assert (event["kind"], event.get("why"), event["message"]) == (kind, why, said)
    assert status.snapshot()["failures"] == 0
    assert len(httpserver.log) == 1, httpserver.log  # one GET, read by the round and the event alike
    assert [str(a) if a else None for a in asked_in_round] == [
        None if served == "same" else "its app was removed" if served is None else "its app has a new configuration"]
