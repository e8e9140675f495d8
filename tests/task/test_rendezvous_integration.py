"""The leader rendezvous with real bootstrap processes against a real Mesos-DNS-style server on
127.0.0.1: only the leader (worker-0) asks for the peers' TF records, the others ask once for the
leader's status record and long-poll it; a moved ps reaches every task's spec."""

import json
import signal
import sys

import pytest
from task_helpers import free_port, http_json, task_env, wait_for

CLUSTER = {"ps": 1, "worker": 2}
MEMBERS = [("ps", 0), ("worker", 0), ("worker", 1)]
PRINT = ("import os, time; print('TFC=' + os.environ['TF_CONFIG'], flush=True); time.sleep(600)")


def _tf_configs(procs, proc) -> list[dict]:
    return [json.loads(line[4:]) for line in procs.output(proc).splitlines() if line.startswith("TFC=")]


def _status(port):
    try:
        return http_json(f"http://127.0.0.1:{port}/status", timeout=1)[1]
    except OSError:
        return {}


@pytest.mark.timeout(90)
def test_followers_ask_the_leader_not_dns_and_follow_a_moved_ps(tmp_path, mesos_dns, procs):
    ports = {m: (free_port(), free_port()) for m in MEMBERS}
    started = {}
    for role, index in MEMBERS:
        sandbox = tmp_path / f"{role}-{index}"
        sandbox.mkdir()
        tf_port, status_port = ports[(role, index)]
        env = task_env(role, index, CLUSTER, sandbox=str(sandbox), tf_port=tf_port, status_port=status_port,
                       mesos_dns=mesos_dns.address, spec_style="tf_config")
        started[(role, index)] = procs.start(env, [sys.executable, "-c", PRINT], options=["--grace", "2"],
                                             name=f"{role}-{index}")
        mesos_dns.set_task(role, index, tf_port, status_port=status_port)
    try:
        for member, proc in started.items():
            wait_for(lambda: _tf_configs(procs, proc), 30, what=f"{member}'s TF_CONFIG")
    except AssertionError as e:
        raise AssertionError("\n".join(procs.output(p)[-2000:] for p in started.values())) from e
    expected = [f"127.0.0.1:{ports[('worker', 0)][0]}", f"127.0.0.1:{ports[('worker', 1)][0]}"]
    for proc in started.values():
        assert _tf_configs(procs, proc)[0]["cluster"]["worker"] == expected
    leader_out = procs.output(started[("worker", 0)])
    assert "leading the rendezvous of 3 task(s)" in leader_out
    for follower in (("ps", 0), ("worker", 1)):
        assert "following the rendezvous leader worker-0" in procs.output(started[follower])
    # the leader's published view, as the followers read it
    code, view = http_json(f"http://127.0.0.1:{ports[('worker', 0)][1]}/rendezvous?job=ml/mnist")
    assert code == 200 and view["complete"] and set(view["peers"]) == {"ps-0", "worker-0", "worker-1"}
    # who asked DNS for what: TF records of the others only by the leader (one SRV per missing peer
    # per poll while forming, then its watch); the followers only the leader's status record
    tf_queries = [q for q in mesos_dns.queries if q.startswith("SRV _tf.")]
    status_queries = [q for q in mesos_dns.queries if q.startswith("SRV _status.")]
    assert status_queries and all("_worker-0-mnist-ml." in q for q in status_queries)
    assert not any("_worker-0-mnist-ml." in q for q in tf_queries)  # nobody looks the leader's TF port up

    # the ps moves (relaunched elsewhere): every task gets the rewritten spec
    ps_proc = started[("ps", 0)]
    ps_proc.send_signal(signal.SIGTERM)
    ps_proc.wait(20)
    new_tf, new_status = free_port(), free_port()
    sandbox = tmp_path / "ps-0-again"
    sandbox.mkdir()
    env = task_env("ps", 0, CLUSTER, sandbox=str(sandbox), tf_port=new_tf, status_port=new_status,
                   mesos_dns=mesos_dns.address, spec_style="tf_config")
    again = procs.start(env, [sys.executable, "-c", PRINT], options=["--grace", "2"], name="ps-0-again")
    mesos_dns.set_task("ps", 0, new_tf, status_port=new_status)
    for member in (("worker", 0), ("worker", 1)):
        wait_for(lambda: any(c["cluster"]["ps"] == [f"127.0.0.1:{new_tf}"]
                             for c in _tf_configs(procs, started[member])),
                 30, what=f"{member} restarted with the moved ps")
        assert "peer ps-0 moved" in procs.output(started[member])
    wait_for(lambda: _tf_configs(procs, again), 30, what="the relaunched ps's TF_CONFIG")
    assert _tf_configs(procs, again)[0]["cluster"]["worker"] == expected
    assert _status(ports[("worker", 1)][1])["restarts"] == 1
