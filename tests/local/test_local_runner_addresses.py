"""What `local serve` needs to run a plain Marathon app rendered for a cluster: its own addresses in
every task's environment (MTF_RUNNER_*), relative volumes kept in its state, a one-line error for
a busy port, an absolute default state dir."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

from click.testing import CliRunner

from marathon_tf.contract import joblock
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.local.ports import busy_ports
from marathon_tf.user import config
from marathon_tf.user.cli import cli


def test_tasks_get_the_runners_addresses_and_relative_volumes_live_in_its_state(api, make_app, cluster, wait):
    dump = (f"{sys.executable} -c 'import json,os; json.dump(dict(os.environ), open(\"env.json\",\"w\"))'; "
            "echo saved > ckpt/file; sleep 600")
    volumes = [{"containerPath": "ckpt", "hostPath": "ckpt", "mode": "RW"}]
    apps = [make_app(f"w-{i}", cmd=dump, container={"type": "MESOS", "volumes": volumes}) for i in (0, 1)]
    api.put("/v2/groups/ml/job", json={"apps": apps})
    api.wait_deployed()
    box = cluster.state_dir / "sandboxes" / api.running("/ml/job/w-0")[0]["id"]
    env = wait(lambda: (box / "env.json").exists() and (box / "env.json").stat().st_size and
               json.loads((box / "env.json").read_text()), what="env.json")
    assert env["MTF_RUNNER_MARATHON_URL"] == cluster.marathon_url
    assert env["MTF_RUNNER_MESOS_DNS"] == cluster.mesos_dns
    assert env["MTF_RUNNER_MESOS_DNS_HTTP"] == cluster.mesos_dns_http
    # both tasks of the job share one directory inside the runner's state
    shared = cluster.state_dir / "volumes" / "ml" / "job" / "ckpt"
    wait(lambda: (shared / "file").exists(), what="volume write")
    assert (box / "ckpt").resolve() == shared.resolve()
    other = cluster.state_dir / "sandboxes" / api.running("/ml/job/w-1")[0]["id"]
    assert (other / "ckpt").resolve() == shared.resolve()


def test_the_bootstrap_prefers_the_runners_addresses_over_the_rendered_ones():
    rendered = {"MTF_JOB": "j", "MTF_ROLE": "worker", "MTF_INDEX": "0", "MTF_CLUSTER": '{"worker":1}',
                "MTF_MARATHON_URL": "http://marathon.mesos:8080", "MESOS_DNS": "10.0.0.1:53"}
    ctx = TaskContext.from_env(rendered)
    assert (ctx.marathon_url, ctx.mesos_dns, ctx.mesos_dns_http) == ("http://marathon.mesos:8080", "10.0.0.1:53", "")
    local = TaskContext.from_env({**rendered, "MTF_RUNNER_MARATHON_URL": "http://127.0.0.1:9",
                                  "MTF_RUNNER_MESOS_DNS": "127.0.0.1:8053",
                                  "MTF_RUNNER_MESOS_DNS_HTTP": "http://127.0.0.1:8123"})
    assert (local.marathon_url, local.mesos_dns, local.mesos_dns_http) == (
        "http://127.0.0.1:9", "127.0.0.1:8053", "http://127.0.0.1:8123")


def test_state_home_is_absolute_and_follows_xdg(tmp_path, monkeypatch):
    assert config.state_home({"MARATHON_TF_STATE_DIR": "rel"}) == Path.cwd() / "rel"
    assert config.state_home({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "marathon-tf"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config.state_home({}) == tmp_path / ".local" / "state" / "marathon-tf"


def test_local_serve_help_names_the_real_default():
    r = CliRunner().invoke(cli, ["local", "serve", "--help"])
    assert r.exit_code == 0
    text = " ".join(r.output.split())
    assert "~/.local/state/marathon-tf/serve" in text and "XDG_STATE_HOME" in text
    assert "./.marathon-tf" not in text


def test_local_serve_on_a_busy_port_is_one_line_naming_the_port_and_the_option(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = CliRunner().invoke(cli, ["local", "serve", "--port", str(port), "--dns-port", "0",
                                     "--dns-http-port", "0", "--state-dir", str(tmp_path)])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    lines = r.stderr.splitlines()
    assert lines[0] == f"error: Marathon API port {port} on 127.0.0.1 is already in use (another `local serve`?)"
    assert lines[1].startswith("hint:") and "--port" in lines[1]
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = CliRunner().invoke(cli, ["local", "serve", "--port", "0", "--dns-port", "0",
                                     "--dns-http-port", str(port), "--state-dir", str(tmp_path)])
    assert r.exit_code == 2 and f"Mesos-DNS HTTP API port {port}" in r.stderr and "--dns-http-port" in r.stderr


def test_local_serve_reports_every_busy_port_in_one_line_before_starting_anything(tmp_path):
    # was: the first busy port, after starting the runner and stopping it again (3-5 s), then the next…
    holders = [socket.socket(), socket.socket(socket.AF_INET, socket.SOCK_DGRAM), socket.socket()]
    try:
        for s in holders:
            s.bind(("127.0.0.1", 0))
            if s.type == socket.SOCK_STREAM:
                s.listen()
        api, dns, http = (s.getsockname()[1] for s in holders)
        state = tmp_path / "state"
        r = CliRunner().invoke(cli, ["local", "serve", "--port", str(api), "--dns-port", str(dns),
                                     "--dns-http-port", str(http), "--state-dir", str(state)])
    finally:
        for s in holders:
            s.close()
    assert r.exit_code == 2, r.output
    lines = r.stderr.splitlines()
    assert lines[0] == (f"error: ports in use on 127.0.0.1: Marathon API {api} (--port), Mesos-DNS {dns} "
                        f"(--dns-port), Mesos-DNS HTTP API {http} (--dns-http-port) (another `local serve`?)")
    assert lines[1].startswith("hint:") and "--port / --dns-port / --dns-http-port" in lines[1] and len(lines) == 2
    # nothing was started: no sandbox, no runner left holding the state directory
    assert not (state / "sandboxes").exists() and joblock.holder(str(state)) is None


def test_busy_ports_checks_udp_and_tcp_of_the_dns_port():
    with socket.socket() as tcp:  # the DNS port taken on TCP only is busy too (Mesos-DNS serves both)
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        port = tcp.getsockname()[1]
        assert busy_ports("127.0.0.1", [("Mesos-DNS", port, (socket.SOCK_DGRAM, socket.SOCK_STREAM)),
                                        ("unused", 0, (socket.SOCK_STREAM,))]) == [("Mesos-DNS", port)]
