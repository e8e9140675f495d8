"""Mesos-DNS emulation: A/SRV records over DNS (dnspython), the /v1 HTTP API, refresh lag.

What is modelled, from Mesos-DNS's own source (mesosphere/mesos-dns@e888ef4, its last commit): task records
``<task>.<framework>.<domain>`` (A), the canonical ``<task>-<hash>-<slave id tail>`` name and
``_<task>._<proto>.<framework>[.slave].<domain>`` (SRV) in ``records/generator.go``
(``taskRecord``, ``insertTaskRR``); records rebuilt only at each reload, every
``RefreshSeconds`` (default 60), the previous ones answered meanwhile (``resolver/resolver.go``
``Reload``, "keeping old DNS state" on an error); ``TTL`` default 60 on SRV and A answers
(``records/config.go`` ``NewConfig``; ``resolver.go`` ``formatSRV``/``formatA``); NXDOMAIN with the
SOA for an unknown name of the domain (``resolver.go`` ``HandleMesos``). FACTS.md §7 in the
project's shared material summarises the same."""

from __future__ import annotations

import time

import dns.message
import dns.query
import dns.rcode
import dns.resolver
import pytest
import requests

from marathon_tf.contract import naming
from marathon_tf.local import LocalCluster


def _resolver(cluster) -> dns.resolver.Resolver:
    host, port = cluster.mesos_dns.split(":")
    res = dns.resolver.Resolver(configure=False)
    res.nameservers = [host]
    res.port = int(port)
    res.lifetime = 3
    return res


def _query(cluster, name: str, rdtype: str) -> dns.message.Message:
    host, port = cluster.mesos_dns.split(":")
    return dns.query.udp(dns.message.make_query(name, rdtype), host, port=int(port), timeout=3)


SPEC = {"id": "worker-3", "cmd": "sleep 600", "cpus": 0.1,
        "portDefinitions": [{"port": 0, "name": "tf"}, {"port": 0, "name": "status"}]}


def test_a_and_srv_records(api, cluster):
    api.put("/v2/groups/ml/mnist", json={"apps": [SPEC]})
    api.wait_deployed()
    task = api.running("/ml/mnist/worker-3")[0]
    res = _resolver(cluster)
    label = naming.mesos_dns_label("/ml/mnist/worker-3")
    assert label == "worker-3-mnist-ml"
    for name in (naming.host_name("/ml/mnist/worker-3"), "worker-3.mnist.ml.marathon.mesos.",
                 f"{label}.marathon.slave.mesos."):
        assert [r.address for r in res.resolve(name, "A")] == ["127.0.0.1"]
    srv = res.resolve(naming.srv_name("/ml/mnist/worker-3"), "SRV")
    assert sorted(r.port for r in srv) == sorted(task["ports"])
    assert {r.priority for r in srv} == {0} and {r.weight for r in srv} == {1}
    named = res.resolve(naming.srv_name("/ml/mnist/worker-3", port_name="tf"), "SRV")
    assert [r.port for r in named] == [task["ports"][0]]
    target = str(named[0].target)
    assert target.startswith(f"{label}-") and target.endswith("-s0.marathon.mesos.")
    assert [r.address for r in res.resolve(target, "A")] == ["127.0.0.1"]
    legacy = res.resolve("_tf._worker-3.mnist.ml._tcp.marathon.mesos.", "SRV")
    assert [r.port for r in legacy] == [task["ports"][0]]
    slave = res.resolve(f"_{label}._udp.marathon.slave.mesos.", "SRV")
    assert sorted(r.port for r in slave) == sorted(task["ports"])
    msg = _query(cluster, naming.srv_name("/ml/mnist/worker-3", port_name="tf"), "SRV")
    assert [str(rr.name) for rr in msg.additional] == [target]
    assert msg.answer[0].ttl == 5


def test_nxdomain(api, cluster):
    msg = _query(cluster, "nothing.marathon.mesos.", "A")
    assert msg.rcode() == dns.rcode.NXDOMAIN
    with pytest.raises(dns.resolver.NXDOMAIN):
        _resolver(cluster).resolve("_nothing._tcp.marathon.mesos.", "SRV")


def test_http_api(api, cluster):
    """The ``/v1`` API's not-found shapes as mesos-dns@e888ef4 ``resolver/resolver.go``'s ``Rest*`` handlers
    answer them."""
    base = cluster.mesos_dns_http
    assert requests.get(base + "/v1/version").json()["Service"] == "Mesos-DNS"
    config = requests.get(base + "/v1/config").json()
    assert config["Domain"] == "mesos" and config["RefreshSeconds"] == 0 and "IPSources" in config
    assert requests.get(base + "/v1/hosts/nope.marathon.mesos").json() == [{"host": "", "ip": ""}]
    assert requests.get(base + "/v1/services/_nope._tcp.marathon.mesos").json() == [
        {"service": "", "host": "", "ip": "", "port": ""}]
    api.put("/v2/groups/ml/mnist", json={"apps": [SPEC]})
    api.wait_deployed()
    task = api.running("/ml/mnist/worker-3")[0]
    hosts = requests.get(base + "/v1/hosts/Worker-3-Mnist-ML.marathon.mesos").json()
    assert hosts == [{"host": "worker-3-mnist-ml.marathon.mesos.", "ip": "127.0.0.1"}]
    given = "_tf._worker-3-mnist-ml._tcp.marathon.mesos"
    services = requests.get(base + f"/v1/services/{given}").json()
    assert len(services) == 1 and services[0]["service"] == given
    assert services[0]["port"] == str(task["ports"][0]) and services[0]["ip"] == "127.0.0.1"
    assert requests.get(base + "/v1/hosts/x/ports").status_code == 501


def test_refresh_interval_delays_records(tmp_path):
    with LocalCluster(state_dir=tmp_path / "s", dns_refresh=1.5, shutdown_grace=0.5) as cluster:
        requests.put(cluster.marathon_url + "/v2/apps/late", json={"cmd": "sleep 600", "cpus": 0.1}).raise_for_status()
        started = time.monotonic()
        while not [t for t in requests.get(cluster.marathon_url + "/v2/apps/late/tasks").json()["tasks"]
                   if t["state"] == "TASK_RUNNING"]:
            time.sleep(0.02)
        running_at = time.monotonic()
        res = _resolver(cluster)
        seen_at = None
        saw_nx = False
        while time.monotonic() - started < 5:
            try:
                res.resolve("late.marathon.mesos.", "A")
                seen_at = time.monotonic()
                break
            except dns.resolver.NXDOMAIN:
                saw_nx = True
                time.sleep(0.05)
        assert seen_at is not None, "record never appeared"
        assert saw_nx, "record appeared without refresh lag"
        assert seen_at - running_at <= 1.6


_OPEN_CONNECTION_AT_EXIT = """
import socket, sys
from pathlib import Path
import dns.message
from marathon_tf.local import LocalCluster
cluster = LocalCluster(state_dir=Path(sys.argv[1]), dns_refresh=0, heartbeat=0.5, kill_grace=1.0,
                       shutdown_grace=1.0)
cluster.start()
host, port = cluster.mesos_dns.split(":")
conn = socket.create_connection((host, int(port)))  # a resolver that keeps its TCP connection open
query = dns.message.make_query("leader.mesos.", "A").to_wire()
conn.sendall(len(query).to_bytes(2, "big") + query)
size = int.from_bytes(conn.recv(2), "big")
assert conn.recv(size)
cluster.stop()
print("stopped")
"""


def test_a_program_using_the_local_cluster_exits_cleanly_with_a_dns_connection_open(tmp_path):
    """A program that uses the Python API's ``LocalCluster`` (the benchmarks do) and stops it while a
    resolver's TCP connection is still open ends without a word on stderr: no "Task was destroyed but it
    is pending!" for the DNS connection's handler, no "Event loop is closed" traceback (issue 43, item 11)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _OPEN_CONNECTION_AT_EXIT, str(tmp_path / "state")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stopped"
    assert "Task was destroyed" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr
