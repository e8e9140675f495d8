"""TensorFlow's words about a peer (task/tflog) and the peer a stalled task waits for (task/peers).

The lines are TensorFlow 2.21's own texts (tensorflow/tensorflow v2.21.0 and its shared libraries' strings):
``tensorflow/core/distributed_runtime/master.cc`` (``DeviceFinder::Wait``, ``LOG(INFO)``: "CreateSession still
waiting for response from worker"), ``grpc_util.h`` ("Additional GRPC error information from remote target"),
``tensorflow/python/distribute/collective_all_reduce_strategy.py`` ("seems down, retrying", "Cluster check
alive failed"), ``tensorflow/core/distributed_runtime/base_rendezvous_mgr.cc`` ("was probably restarted") and
``xla/tsl/distributed_runtime/coordination/coordination_service.cc`` (heartbeat timeouts, unhealthy tasks,
barrier stragglers). The probe is
checked against sockets that answer like a gRPC server (a SETTINGS frame), accept and stay silent
(a stopped process: the kernel accepts for it), or refuse."""

from __future__ import annotations

import threading

import pytest
from task_helpers import GrpcLikeServer

from marathon_tf.task import peers as P
from marathon_tf.task.tflog import TFLogWatcher, parse_line, task_of


@pytest.mark.parametrize("line, task, why", [
    ("2017-11-07 13:04:58.438432: I tensorflow/core/distributed_runtime/master.cc:221] CreateSession still "
     "waiting for response from worker: /job:ps/replica:0/task:0", "ps-0", "does not answer"),
    ("tensorflow.python.framework.errors_impl.UnavailableError: From /job:ps/replica:0/task:1:", "ps-1",
     "unavailable"),
    ("Additional GRPC error information from remote target /job:worker/replica:0/task:3:", "worker-3", "unavailable"),
    ("WARNING:tensorflow:/job:worker/replica:0/task:2 seems down, retrying 1/3", "worker-2", "seems down"),
    ("ERROR:tensorflow:Cluster check alive failed, /job:worker/replica:0/task:0 is down, aborting collectives: "
     "Deadline Exceeded", "worker-0", "is down"),
    ("UNAVAILABLE: Task /job:chief/replica:0/task:0 heartbeat timeout. This indicates that the remote task has "
     "failed, got preempted, or crashed unexpectedly.", "chief-0", "stopped sending heartbeats"),
    ("DeadlineExceeded: RPC to /job:ps/replica:0/task:0/device:CPU:0 timed out", "ps-0", "deadline exceeded"),
])
def test_tensorflows_lines_name_the_marathon_tf_task(line, task, why):
    signal = parse_line(line)
    assert signal is not None and (signal.task, signal.why) == (task, why)


def test_lines_that_name_no_peer_and_the_task_names():
    assert parse_line("step=100 loss=0.5") is None
    assert parse_line("I0000 grpc_server_lib.cc:467] Started server with target: grpc://127.0.0.1:2222") is None
    assert task_of("/job:localhost/replica:0/task:0") is None
    assert task_of("/job:evaluator/replica:0/task:0/device:CPU:0") == "evaluator-0"


def test_the_coordination_services_lists_of_tasks_and_the_tasks_own_name():
    now = [100.0]
    w = TFLogWatcher("worker-0", clock=lambda: now[0])
    w.feed("E0000 coordination_service_agent.cc] UNAVAILABLE: The following tasks are unhealthy (stopped sending "
           "heartbeats):\n/job:worker/replica:0/task:1\n/job:worker/replica:0/task:0\nThe tasks have crashed. "
           "Check the task logs for an earlier error.\n/job:ps/replica:0/task:0\n")
    seen = w.signals()
    assert set(seen) == {"worker-1"}  # itself is no peer; a name after the list's end is not in it
    assert seen["worker-1"][1] == "stopped sending heartbeats"
    w.feed("Barrier timed out. Id: x. # of tasks that reached the barrier: 1/2.\nThe first task at the barrier: "
           "/job:worker/replica:0/task:0. Some timed out task names:\n/job:chief/replica:0/task:0\n")
    assert w.signals()["chief-0"][1] == "did not reach a barrier"
    now[0] = 200.0
    assert w.signals(since=150.0) == {}
    w.clear()
    assert w.signals() == {}


def test_the_probe_tells_an_answering_a_silent_and_a_dead_server_apart():
    answering, silent = GrpcLikeServer(True), GrpcLikeServer(False)
    address = silent.address
    try:
        assert P.probe(answering.address) == P.ANSWERS
        assert P.probe(address, timeout=0.5) == P.SILENT
    finally:
        answering.close()
        silent.close()
    assert P.probe(address) == P.REFUSED  # closed: nothing listens any more
    assert P.probe("not-a-host.invalid:1") == "unreachable"


def test_a_connection_reset_without_an_answer_is_silent_not_refused(monkeypatch):
    """A listener that takes the connection and resets it (a stopped program's full accept queue with
    ``tcp_abort_on_overflow``) did not answer; only a connection refused outright means nothing listens
    (fresh-clone CI run 22: a SIGSTOPped ps-0 was said to refuse connections)."""
    import socket
    import struct

    listener = socket.create_server(("127.0.0.1", 0))

    def reset_each():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()  # RST

    threading.Thread(target=reset_each, daemon=True).start()
    try:
        assert P.probe(f"127.0.0.1:{listener.getsockname()[1]}", timeout=2.0) == P.SILENT
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()

    # the reset can reach the prober before its connect() returns (a loaded machine: the listener accepted and
    # reset first; fresh clone of i30-elastic said "unreachable"): the same listener, the same answer
    def reset_at_connect(*a, **k):
        raise ConnectionResetError(104, "Connection reset by peer")

    monkeypatch.setattr(P.socket, "create_connection", reset_at_connect)
    assert P.probe("127.0.0.1:1") == P.SILENT


def test_a_stalled_task_names_the_peer_that_does_not_answer_and_prefers_tensorflows_word(monkeypatch):
    now = [1000.0]
    looked = {"ps-0": P.SILENT, "worker-1": P.ANSWERS, "chief-0": P.REFUSED}
    tflog = TFLogWatcher("worker-0", clock=lambda: now[0])
    d = P.PeerDiagnosis(tflog, probe=lambda address: looked[address], clock=lambda: now[0], wall=lambda: now[0])
    peers = {name: name for name in looked}  # the fake probe looks the "address" up
    d.update(5.0, None, peers)  # not stalled yet (10 s)
    assert d.waiting_for() is None
    d.update(12.0, None, peers)
    for thread in [t for t in threading.enumerate() if t.name == "peer-look"]:
        thread.join(5)
    assert d.waiting_for() == {"peer": "ps-0", "why": "its TF server does not answer", "seconds": 12.0,
                               "others": ["chief-0"]}  # ps first, then chief
    tflog.feed("CreateSession still waiting for response from worker: /job:chief/replica:0/task:0")
    waiting = d.waiting_for()
    assert waiting["peer"] == "chief-0" and waiting["why"] == ("TensorFlow: does not answer; its TF server refuses "
                                                               "connections")
    d.update(0.5, None, peers)  # a new step: no longer stalled
    assert d.waiting_for() is None
    d.update(12.0, 2.0, peers)  # usual interval 2 s: stalled after 3 x 2 = 6 s ... (12 s here) ...
    d.update(20.0, 30.0, peers)  # ... but a job with 30 s between steps is not stalled at 20 s
    assert d.waiting_for() is None


def test_the_ps_a_hang_waits_for_is_frozen_only_when_its_server_takes_the_connection_and_does_not_answer():
    """Issue 44 item 4: which peer the watchdog's hang restarts instead of the hung program."""
    from marathon_tf.task.peers import frozen_ps

    assert frozen_ps({"peer": "ps-0", "why": "its TF server does not answer", "seconds": 12.0}) == "ps-0"
    assert frozen_ps({"peer": "ps-1", "why": "TensorFlow: CreateSession still waiting for response from worker: "
                                              "/job:ps/replica:0/task:1; its TF server does not answer"}) == "ps-1"
    assert frozen_ps({"peer": "ps-0", "why": "its TF server refuses connections"}) is None  # dead: its own end
    assert frozen_ps({"peer": "worker-1", "why": "its TF server does not answer"}) is None
    assert frozen_ps({"peer": "ps-0", "why": "TensorFlow: CreateSession still waiting for response"}) is None
    assert frozen_ps(None) is None
