"""The bootstrap as real processes (``python -m marathon_tf.bootstrap``) against a real DNS
server on 127.0.0.1: the status endpoint over HTTP, a peer that appears late, and a real
TensorFlow cluster (1 ps + 2 workers) that finds itself and trains."""

import os
import signal
import sys
import time

import pytest
from task_helpers import free_port, http_json, task_env, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))


def env_for(tmp_path, mesos_dns, role, index, cluster, tf_port, status_port, **fields):
    sandbox = tmp_path / f"{role}-{index}"
    sandbox.mkdir()
    return task_env(role, index, cluster, sandbox=str(sandbox), tf_port=tf_port, status_port=status_port,
                    mesos_dns=mesos_dns.address, **fields)


@pytest.mark.timeout(60)
def test_status_endpoint_over_http(tmp_path, mesos_dns, procs):
    status_port = free_port()
    mesos_dns.set_task("ps", 0, 40000)
    env = env_for(tmp_path, mesos_dns, "worker", 0, {"ps": 1, "worker": 1}, free_port(), status_port,
                  spec_style="tf_config")
    proc = procs.start(env, ["echo step=41 loss=0.5; echo step: 42; sleep 60"], name="worker-0")
    base = f"http://127.0.0.1:{status_port}"
    wait_for(lambda: _get(base + "/status").get("step") == 42, 20, what="step 42 in /status")
    code, status = http_json(base + "/status")
    assert code == 200
    assert status["phase"] == "running" and status["job"] == "ml/mnist" and status["task"] == "worker-0"
    assert status["peers"] == {"ps-0": "127.0.0.1:40000", "worker-0": env["HOST"] + ":" + env["PORT_TF"]}
    assert status["tf_config"]["task"] == {"type": "worker", "index": 0}
    assert status["restarts"] == 0 and status["exit_code"] is None and status["last_error"] is None
    assert http_json(base + "/health") == (200, {"healthy": True, "phase": "running"})
    assert http_json(base + "/nope")[0] == 404
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 128 + signal.SIGTERM  # the shell was terminated too
    assert "step=41" in procs.output(proc)


def _get(url):
    try:
        return http_json(url, timeout=1)[1]
    except OSError:
        return {}


@pytest.mark.timeout(60)
def test_peer_that_appears_late_in_dns(tmp_path, mesos_dns, procs):
    status_port = free_port()
    env = env_for(tmp_path, mesos_dns, "worker", 0, {"worker": 2}, free_port(), status_port,
                  spec_style="tf_config")
    proc = procs.start(env, [sys.executable, "-c", "import os; print('TFC=' + os.environ['TF_CONFIG'])"],
                       name="worker-0")
    base = f"http://127.0.0.1:{status_port}"
    # The leader shows its peers "not asked yet" before its first look (rendezvous/leader.py); wait for
    # the look's answer, not for the first view of the missing peers.
    wait_for(lambda: set(_get(base + "/status").get("missing", {}).values()) - {"not asked yet"}, 20,
             what="the first answer from Mesos-DNS")
    status = _get(base + "/status")
    assert status["phase"] == "discovering"
    assert status["missing"] == {"worker-1": "NXDOMAIN (_tf._worker-1-mnist-ml._tcp.marathon.mesos.)"}
    assert http_json(base + "/health")[0] == 200  # healthy while waiting
    time.sleep(1.0)
    mesos_dns.set_task("worker", 1, 45678)
    wait_for(lambda: _get(base + "/status").get("phase") == "succeeded", 20, what="succeeded")
    assert f'"worker":["127.0.0.1:{env["PORT_TF"]}","127.0.0.1:45678"]' in procs.output(proc)
    assert proc.poll() is None  # a finished task stays up
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    asked = [q for q in mesos_dns.queries if "worker-1" in q]
    assert len(asked) >= 2


@pytest.mark.timeout(60)
def test_deadline_exit_names_the_missing_peer(tmp_path, mesos_dns, procs):
    env = env_for(tmp_path, mesos_dns, "worker", 0, {"ps": 1, "worker": 1}, free_port(), free_port(),
                  startup_timeout=1)
    proc = procs.start(env, ["true"], name="worker-0")
    assert proc.wait(20) == 1
    assert "1 peer(s) not found within 1s: ps-0: NXDOMAIN (_tf._ps-0-mnist-ml._tcp.marathon.mesos.)" \
        in procs.output(proc)


@pytest.mark.tf
@pytest.mark.timeout(90)
def test_tf1_cluster_finds_itself_and_trains(tmp_path, mesos_dns, procs):
    cluster = {"ps": 1, "worker": 2}
    members = [("ps", 0), ("worker", 0), ("worker", 1)]
    ports = {m: (free_port(), free_port()) for m in members}
    started = {}
    for role, index in members:  # the last worker is registered in DNS only after everyone started
        env = env_for(tmp_path, mesos_dns, role, index, cluster, *ports[(role, index)], spec_style="flags")
        started[(role, index)] = procs.start(
            env, [sys.executable, os.path.join(HERE, "tf1_between_graph.py"), "--steps", "5"],
            options=["--watch-interval", "2"], name=f"{role}-{index}")
        if (role, index) != ("worker", 1):
            mesos_dns.set_task(role, index, ports[(role, index)][0], status_port=ports[(role, index)][1])
    mesos_dns.set_task("worker", 1, ports[("worker", 1)][0], status_port=ports[("worker", 1)][1])

    def phase(member):
        return _get(f"http://127.0.0.1:{ports[member][1]}/status").get("phase")

    for worker in members[1:]:
        try:
            wait_for(lambda: phase(worker) == "succeeded", 75, interval=0.5, what=f"{worker} succeeded")
        except AssertionError as e:
            raise AssertionError("\n".join(procs.output(p)[-3000:] for p in started.values())) from e
        status = _get(f"http://127.0.0.1:{ports[worker][1]}/status")
        # 5 steps each; the global step read in the same run may precede its own increment
        assert status["exit_code"] == 0 and status["step"] >= 4
    assert phase(("ps", 0)) == "running"
    for proc in started.values():
        proc.send_signal(signal.SIGTERM)
    assert started[("worker", 0)].wait(20) == 0 and started[("worker", 1)].wait(20) == 0
    assert started[("ps", 0)].wait(30) == 128 + signal.SIGTERM
    out = procs.output(started[("worker", 1)])
    assert "worker=1" in out and "all 2 peer(s) found" in out
