"""The local cluster's options on ``local serve`` and ``deploy --local``: help, one-line refusals,
and a deploy on agents too small for the job (refused at once, leaving nothing behind)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from user_helpers import minimal

from marathon_tf.user.cli import cli

OPTIONS = ("--agents", "--agent-resources", "--agent-attributes", "--features", "--gpu-scheduling-behavior",
           "--dns-refresh", "--dns-ttl", "--zk-session-timeout", "--filter-gpu-resources / --no-filter-gpu-resources",
           "--offer-filter", "--revive-interval", "--marathon-version VERSION", "--scale-apps-interval SECONDS")


@pytest.mark.parametrize("verb", [["deploy"], ["local", "serve"]])
def test_help_describes_the_cluster_options(verb):
    text = CliRunner().invoke(cli, [*verb, "--help"], terminal_width=200).stdout
    for option in OPTIONS:
        assert option in text
    assert "cpus:4;mem:8192;disk:20000;gpus:2;ports:[31000-32000]" in text.replace("\n", "").replace(" ", "")
    for default in ("--zk-session-timeout SECONDS", "--offer-filter SECONDS", "--revive-interval SECONDS"):
        line = text[text.index(default):].split("[default:", 1)[1].split("]", 1)[0].split(";")[0].strip()
        assert line in ("10.0", "120.0", "5.0")  # stock Marathon 1.11's
    if verb == ["local", "serve"]:  # the HA Marathon (local serve only)
        assert "--marathon-instances N" in text and "--election-gap SECONDS" in text
        assert "Deprecated alias of --zk-session-timeout" in text


@pytest.mark.parametrize("args, message", [
    (["--agents", "2"], "--agents: only with --local"),
    (["--local", "--agent-resources", "cpus:x"], "--agent-resources: resource cpus: 'x' is not a number"),
    (["--local", "--agents", "2", "--agent-attributes", "rack:a|rack:b|rack:c"],
     "--agent-attributes: 3 agent values for 2 agents"),
    (["--local", "--features", "gpu_resources,gpus"], "--features: gpus unknown to Marathon 1.8"),
    (["--local", "--dns-ttl", "-1"], "--dns-ttl"),
    (["--marathon-version", "1.7.236"], "--marathon-version: only with --local"),
    (["--local", "--marathon-version", "1.3.0"], "--marathon-version: marathon version '1.3.0': the local cluster "
                                                 "plays 1.4.0 to 1.11.x"),
    (["--local", "--marathon-version", "1.4.3", "--gpu-scheduling-behavior", "restricted"],
     "--gpu-scheduling-behavior: Marathon 1.4.3 has no --gpu_scheduling_behavior"),
    (["--local", "--scale-apps-interval", "0"], "--scale-apps-interval"),
])
def test_bad_cluster_options_are_one_line_and_start_nothing(tmp_path, args, message):
    job = tmp_path / "job.json"
    job.write_text(json.dumps(minimal()))
    r = CliRunner().invoke(cli, ["deploy", str(job), "--dry-run", *args])
    assert r.exit_code == 2, r.output
    assert message in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "state").exists()


def test_local_serve_refuses_bad_resources_before_it_listens():
    r = CliRunner().invoke(cli, ["local", "serve", "--port", "0", "--agent-resources", "ports:31000"])
    assert r.exit_code == 2
    assert "--agent-resources: resource ports: must be ranges like [31000-32000]" in r.stderr


def _deploy_local(tmp_path, roles: dict, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"name": "toobig", "command": ["sleep", "600"], "roles": roles}))
    state = tmp_path / "state"
    env = dict(os.environ, MARATHON_TF_STATE_DIR=str(state))
    env.pop("MARATHON_URL", None)
    r = subprocess.run([str(Path(sys.executable).parent / "marathon-tf"), "deploy", str(job), "--local", *args],
                       capture_output=True, text=True, env=env, timeout=100, cwd=tmp_path)
    return r, state


@pytest.mark.timeout(120)
def test_deploy_local_on_agents_too_small_for_the_whole_job_is_refused_at_once_and_leaves_no_folder(tmp_path):
    """Issue 32: every task fits an agent, but the three agents can never hold the job at once (3.5 cpus of 3):
    it waited for room until its admission deadline (10 minutes by default, printing a long line every
    second), and a refused deploy left its run folder behind (prewarm/*.log). Refused like a task that fits
    no agent: exit 2 with the numbers, nothing sent, no run folder."""
    r, state = _deploy_local(tmp_path, {"ps": {"count": 1, "cpus": 0.5, "mem": 64}, "worker": {"count": 3, "cpus": 1,
                             "mem": 64}}, "--agents", "3", "--agent-resources", "cpus:1;mem:512;ports:[33400-33499]")
    assert r.returncode == 2, r.stderr[-3000:]
    assert r.stderr.splitlines()[0] == ("error: job toobig needs cpus 3.5 in all; the cluster has 3 in all (3 agents): "
                                        "its tasks can never all run at once; nothing was sent")
    assert "does not enforce" not in r.stderr  # the agents do enforce
    assert not state.exists() or list(state.iterdir()) == [], list(state.rglob("*"))


@pytest.mark.timeout(60)
def test_deploy_local_no_wait_for_resources_refuses_a_job_its_agents_cannot_hold_now_and_leaves_no_folder(tmp_path):
    # the whole job fits two agents of 1.5 cpus (a ps and a worker on each), but offers are taken as they come:
    # both ps land on the first agent, and the second worker finds no room (exit 4 without waiting)
    r, state = _deploy_local(tmp_path, {"ps": {"count": 2, "cpus": 0.5, "mem": 64}, "worker": {"count": 2, "cpus": 1,
                             "mem": 64}}, "--no-wait-for-resources", "--agents", "2", "--agent-resources",
                             "cpus:1.5;mem:512;ports:[33400-33499]")
    assert r.returncode == 4, r.stderr[-3000:]
    assert r.stderr.splitlines()[0] == ("error: job toobig does not fit what the cluster has free now: 1 of 2 worker "
                                        "would wait; nothing was sent")
    assert not state.exists() or list(state.iterdir()) == [], list(state.rglob("*"))


def test_the_stock_options_reach_the_cluster_and_election_gap_is_an_alias(monkeypatch):
    from marathon_tf.user import local_options

    # Stock Marathon 1.11's defaults (mesosphere/marathon@releases/1.11): --zk_session_timeout 10 s
    # (src/main/scala/mesosphere/marathon/ZookeeperConf.scala), --decline_offer_duration 120 s
    # (.../core/launcher/OfferProcessorConfig.scala), --min_revive_offers_interval 5 s
    # (.../core/launchqueue/ReviveOffersConfig.scala).
    kw = local_options.to_cluster(agents=1, agent_resources=(), agent_attributes=(), features="task_killing",
                                  gpu_scheduling_behavior="restricted", dns_refresh=1.0, dns_ttl=5)
    assert (kw["zk_session_timeout"], kw["offer_filter"], kw["revive_interval"], kw["filter_gpu_resources"]) == \
        (10.0, 120.0, 5.0, True)
    seen = {}

    def fake_serve(port, host, dns_port, dns_http_port, state_dir, auth, allow_origins, ui_dir, cluster):
        seen.update(cluster)

    import marathon_tf.user.cli.local as cli_local
    monkeypatch.setattr(cli_local, "_local_serve", fake_serve)
    args = ["local", "serve", "--port", "0", "--dns-port", "0", "--dns-http-port", "0"]
    assert CliRunner().invoke(cli, args + ["--offer-filter", "0", "--no-filter-gpu-resources"]).exit_code == 0
    assert seen["election_gap"] is None and seen["zk_session_timeout"] == 10.0 and seen["offer_filter"] == 0.0
    assert seen["filter_gpu_resources"] is False
    assert CliRunner().invoke(cli, args + ["--election-gap", "2"]).exit_code == 0
    assert seen["election_gap"] == 2.0  # given: it wins (LocalCluster takes election_gap over zk_session_timeout)


def test_the_marathon_version_and_scale_apps_interval_reach_the_cluster(monkeypatch):
    # MarathonConf.scala's --scale_apps_interval default, 300000 ms (mesosphere/marathon v1.7.236
    # src/main/scala/mesosphere/marathon/MarathonConf.scala:202-206)
    seen = {}

    def fake_serve(port, host, dns_port, dns_http_port, state_dir, auth, allow_origins, ui_dir, cluster):
        seen.update(cluster)

    import marathon_tf.user.cli.local as cli_local
    monkeypatch.setattr(cli_local, "_local_serve", fake_serve)
    args = ["local", "serve", "--port", "0", "--dns-port", "0", "--dns-http-port", "0"]
    assert CliRunner().invoke(cli, args).exit_code == 0
    assert (seen["marathon_version"], seen["scale_apps_interval"], seen["gpu_scheduling_behavior"]) == \
        (None, 300.0, None)  # the newest, and its GPU default (restricted) chosen by the cluster
    r = CliRunner().invoke(cli, args + ["--marathon-version", "1.7.236", "--scale-apps-interval", "5"])
    assert r.exit_code == 0, r.output
    assert (seen["marathon_version"], seen["scale_apps_interval"]) == ("1.7.236", 5.0)


def test_deploy_local_passes_the_marathon_version_to_its_cluster(tmp_path, monkeypatch):
    job = tmp_path / "job.json"
    job.write_text(json.dumps(minimal()))
    seen = {}

    def fake_deploy_local(job, **kw):
        seen.update(kw["cluster"])

    import marathon_tf.user.cli.change as change
    monkeypatch.setattr(change, "_deploy_local", fake_deploy_local)
    r = CliRunner().invoke(cli, ["deploy", str(job), "--local", "--marathon-version", "1.4.3",
                                 "--scale-apps-interval", "10"])
    assert r.exit_code == 0, r.output
    assert (seen["marathon_version"], seen["scale_apps_interval"], seen["gpu_scheduling_behavior"]) == \
        ("1.4.3", 10.0, None)
