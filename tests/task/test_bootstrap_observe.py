"""The bootstrap's observer in-process (fake discovery backend, a small real program that serves a TF-like
port): the peer a stalled task waits for in /status, the watchdog's verdict naming it, the task's events."""

from __future__ import annotations

import sys

from task_helpers import FakeBackend, GrpcLikeServer, free_port, task_env, wait_for

from marathon_tf.contract import timeline as T
from marathon_tf.task.peers import PROBE_TIMEOUT

from test_bootstrap_run import Run  # noqa: E402  (the in-process bootstrap runner)

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
