"""The bootstrap in-process (fake discovery backend injected) with small real child programs."""

import io
import json
import signal
import subprocess
import sys
import threading
import time

import pytest
from task_helpers import FakeBackend, task_env, wait_for

from marathon_tf.contract.errors import UsageError
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.task.bootstrap import Bootstrap, parse_args, shell_command
from marathon_tf.task.policy import ExitPolicy

CLUSTER = {"ps": 1, "worker": 2}
PEERS = {("ps", 0): "10.0.0.1:2000", ("worker", 0): "10.0.0.2:2001", ("worker", 1): "10.0.0.3:2002"}
CHILD = ("import os, sys, time; print('TFC=' + os.environ.get('TF_CONFIG', '<unset>')); "
         "print('ARGV=' + ' '.join(sys.argv[1:])); print('step=%s loss=1' % os.environ.get('STEP', '7')); "
         "sys.stdout.flush(); time.sleep(float(os.environ.get('SLEEP', '0'))); "
         "sys.exit(int(os.environ.get('CODE', '0')))")


class Run:
    """A Bootstrap running in a thread; ``result`` is its exit code once it returned."""

    def __init__(self, env, backend, command=None, **kw):
        self.out, self.err = io.BytesIO(), io.BytesIO()
        self.boot = Bootstrap(TaskContext.from_env(env), env, command or [sys.executable, "-c", CHILD],
                              backend=backend, stdout=self.out, stderr=self.err, tick=0.05, **kw)
        self.result = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        self.result = self.boot.run()

    def status(self):
        return self.boot.status.snapshot()

    def wait_phase(self, phase, timeout=10):
        return wait_for(lambda: self.status()["phase"] == phase, timeout, interval=0.02, what=f"phase {phase}")

    def stop(self, timeout=10):
        self.boot.request_stop(signal.SIGTERM)
        self.thread.join(timeout)
        assert not self.thread.is_alive()
        return self.result

    def lines(self, prefix):
        return [line[len(prefix):] for line in self.out.getvalue().decode().splitlines() if line.startswith(prefix)]


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


def env_for(tmp_path, role="worker", index=0, cluster=CLUSTER, **extra):
    fields = {"spec_style": "both", **{k: v for k, v in extra.items() if k.islower()}}
    env = task_env(role, index, cluster, sandbox=str(tmp_path), tf_port=2001, **fields)
    env["MTF_RENDEZVOUS"] = "direct"  # each task reads the fake backend; the leader protocol: test_leader_*.py
    env.update({k: v for k, v in extra.items() if k.isupper()})
    return env


def test_success_writes_the_spec_then_stays_up_until_stopped(tmp_path, runs):
    run = runs(env_for(tmp_path), FakeBackend(PEERS))
    run.wait_phase("succeeded")
    config = json.loads(run.lines("TFC=")[0])
    assert config == {"cluster": {"ps": ["10.0.0.1:2000"], "worker": ["127.0.0.1:2001", "10.0.0.3:2002"]},
                      "task": {"type": "worker", "index": 0}}
    assert run.lines("ARGV=") == ["--ps_hosts=10.0.0.1:2000 --worker_hosts=127.0.0.1:2001,10.0.0.3:2002 "
                                  "--job_name=worker --task_index=0"]
    status = run.status()
    assert status["step"] == 7 and status["exit_code"] == 0 and status["peers"]["worker-1"] == "10.0.0.3:2002"
    assert json.loads((tmp_path / "cluster_spec.json").read_text())["tf_config"] == config
    run.thread.join(0.3)
    assert run.thread.is_alive()  # Marathon would relaunch a task that exits
    assert run.stop() == 0


def test_only_other_members_are_discovered(tmp_path, runs):
    backend = FakeBackend(PEERS)
    run = runs(env_for(tmp_path), backend)
    run.wait_phase("succeeded")
    assert backend.calls[0] == [("ps", 0), ("worker", 1)]


def test_failure_exits_with_the_program_code(tmp_path, runs):
    run = runs(env_for(tmp_path, CODE="3"), FakeBackend(PEERS))
    run.thread.join(10)
    assert run.result == 3
    assert run.status()["phase"] == "failed" and not run.boot.status.healthy
    assert run.status()["last_error"] == "training program exited with code 3"


def test_permanent_exit_code_stays_up_and_healthy(tmp_path, runs):
    run = runs(env_for(tmp_path, CODE="3", permanent_exit_codes=(3, 4)), FakeBackend(PEERS))
    run.wait_phase("failed")
    run.thread.join(0.3)
    assert run.thread.is_alive() and run.boot.status.healthy
    assert run.stop() == 3


def test_peer_that_moves_restarts_the_program_with_the_new_spec(tmp_path, runs):
    backend = FakeBackend(PEERS)
    run = runs(env_for(tmp_path, SLEEP="60"), backend, watch_interval=0.1, grace=5)
    wait_for(lambda: run.lines("TFC="), 10, what="first run")
    backend.addresses[("worker", 1)] = "10.0.0.99:3000"
    wait_for(lambda: len(run.lines("TFC=")) == 2, 10, what="restart")
    first, second = (json.loads(x) for x in run.lines("TFC="))
    assert first["cluster"]["worker"][1] == "10.0.0.3:2002"
    assert second["cluster"]["worker"][1] == "10.0.0.99:3000"
    assert run.lines("ARGV=")[1].startswith("--ps_hosts=10.0.0.1:2000 --worker_hosts=127.0.0.1:2001,10.0.0.99:3000")
    assert run.status()["restarts"] == 1 and run.status()["phase"] == "running"
    assert "10.0.0.99:3000" in (tmp_path / "cluster_spec.json").read_text()
    assert run.stop() == 128 + signal.SIGTERM


def test_ps_restarts_with_the_new_spec_when_a_worker_moves(tmp_path, runs):
    """A TF1 ps receives tensors from workers at the addresses in its own spec: it must not keep
    a moved worker's old address (the relaunched worker's first step hung when it did)."""
    backend = FakeBackend(PEERS)
    run = runs(env_for(tmp_path, role="ps", SLEEP="60"), backend, watch_interval=0.1)
    wait_for(lambda: run.lines("TFC="), 10, what="first run")
    backend.addresses[("worker", 0)] = "10.0.0.77:1"
    wait_for(lambda: len(run.lines("TFC=")) == 2, 10, what="restart with the new spec")
    assert "10.0.0.77:1" in run.lines("TFC=")[-1] and "10.0.0.77:1" not in run.lines("TFC=")[0]
    assert run.status()["restarts"] == 1


def test_deadline_fails_naming_the_missing_peers(tmp_path, runs):
    backend = FakeBackend({("ps", 0): "10.0.0.1:2000"})
    run = runs(env_for(tmp_path, startup_timeout=0.5), backend)
    run.thread.join(10)
    assert run.result == 1
    status = run.status()
    assert status["phase"] == "failed" and not run.boot.status.healthy
    assert status["last_error"].startswith("1 peer(s) not found within 0.5s: worker-1: NXDOMAIN")
    assert status["missing"] == {"worker-1": "NXDOMAIN"}
    assert run.lines("TFC=") == []  # the program never ran


def test_user_tf_config_is_kept_and_reported(tmp_path, runs):
    mine = '{"cluster":{"worker":["mine:1"]},"task":{"type":"worker","index":0}}'
    run = runs(env_for(tmp_path, TF_CONFIG=mine), FakeBackend(PEERS))
    run.wait_phase("succeeded")
    assert run.lines("TFC=") == [mine]
    assert run.status()["tf_config"] == json.loads(mine)
    assert "TF_CONFIG is already set" in run.status()["warnings"][0]


def test_empty_user_tf_config_is_never_exported(tmp_path, runs):
    run = runs(env_for(tmp_path, TF_CONFIG="", spec_style="flags"), FakeBackend(PEERS))
    run.wait_phase("succeeded")
    assert run.lines("TFC=") == ["<unset>"]


def test_chief_with_tf_config_style_only(tmp_path, runs):
    cluster = {"chief": 1, "ps": 1, "worker": 1}
    backend = FakeBackend({("ps", 0): "p:1", ("worker", 0): "w:2"})
    run = runs(env_for(tmp_path, role="chief", cluster=cluster, spec_style="tf_config"), backend)
    run.wait_phase("succeeded")
    assert json.loads(run.lines("TFC=")[0]) == {
        "cluster": {"chief": ["127.0.0.1:2001"], "ps": ["p:1"], "worker": ["w:2"]},
        "task": {"type": "chief", "index": 0}}
    assert run.lines("ARGV=") == [""]


def test_evaluator_discovers_every_member_and_is_not_one(tmp_path, runs):
    backend = FakeBackend(PEERS)
    run = runs(env_for(tmp_path, role="evaluator", cluster={**CLUSTER, "evaluator": 1}, spec_style="tf_config"),
               backend)
    run.wait_phase("succeeded")
    assert backend.calls[0] == [("ps", 0), ("worker", 0), ("worker", 1)]
    config = json.loads(run.lines("TFC=")[0])
    assert config["task"] == {"type": "evaluator", "index": 0} and "evaluator" not in config["cluster"]


def test_tensorboard_skips_discovery_and_gets_no_spec(tmp_path, runs):
    backend = FakeBackend({})
    run = runs(env_for(tmp_path, role="tensorboard", cluster={**CLUSTER, "tensorboard": 1}), backend)
    run.wait_phase("succeeded")
    assert backend.calls == [] and run.lines("TFC=") == ["<unset>"] and run.lines("ARGV=") == [""]


def test_shell_string_with_placeholders(tmp_path, runs):
    run = runs(env_for(tmp_path), FakeBackend(PEERS),
               command=["echo ps={ps_hosts} me={job_name}/{task_index} | tr a-z A-Z"])
    run.wait_phase("succeeded")
    assert run.out.getvalue().decode().strip() == "PS=10.0.0.1:2000 ME=WORKER/0"


def test_program_ignoring_sigterm_is_killed_after_the_grace_period(tmp_path, runs):
    """Alone (no save rounds), a program that ignores SIGTERM is SIGKILLed after the grace. In a job with save
    rounds every program starts with SIGTERM ignored (supervisor.ignore_sigterm) and one that still ignores it
    is ended at once, as SIGTERM's default would have ended it (143): its grace served the round. Either way the
    bootstrap's own code is its signal's (143), not its program's: a stopped task is a stop in Marathon's word."""
    command = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                     "print('ready', flush=True); time.sleep(60)"]
    run = runs(env_for(tmp_path, cluster={"worker": 1}), FakeBackend({("worker", 0): "127.0.0.1:2001"}),
               command=command, grace=1.0)
    wait_for(lambda: b"ready" in run.out.getvalue(), 10, what="child ready")
    began = time.monotonic()
    assert run.stop() == 128 + signal.SIGTERM and time.monotonic() - began >= 1.0
    assert run.status()["exit_code"] == 128 + signal.SIGKILL  # the program's
    run = runs(env_for(tmp_path), FakeBackend(PEERS), command=command, grace=30.0)
    wait_for(lambda: b"ready" in run.out.getvalue(), 10, what="child ready")
    began = time.monotonic()
    assert run.stop() == 128 + signal.SIGTERM and time.monotonic() - began < 10.0


def test_parse_args_and_shell_detection():
    assert parse_args(["--", "python3", "t.py", "--x=1"]) == (
        {"watch_interval": 20.0, "grace": None}, ["python3", "t.py", "--x=1"])  # grace: the task's (MTF_GRACE_SECONDS)
    assert parse_args(["--watch-interval", "0.5", "--grace", "3", "--", "a"])[0] == {"watch_interval": 0.5,
                                                                                        "grace": 3.0}
    assert parse_args(["python3", "t.py"])[1] == ["python3", "t.py"]
    with pytest.raises(UsageError, match="no training command"):
        parse_args(["--"])
    with pytest.raises(UsageError, match="unknown bootstrap option"):
        parse_args(["--bogus", "1", "--", "x"])
    assert shell_command(["python3 train.py && echo ok"]) and shell_command(["a;b"])
    assert not shell_command(["python3"]) and not shell_command(["python3", "t py"])
    assert not shell_command(["--flag=x"])


def test_exit_policy():
    policy = ExitPolicy(permanent_exit_codes=(42,))
    ok, transient, permanent = policy.decide(0), policy.decide(1), policy.decide(42)
    assert (ok.phase, ok.stay_up, ok.exit_code, ok.healthy) == ("succeeded", True, 0, True)
    assert (transient.phase, transient.stay_up, transient.exit_code, transient.healthy) == ("failed", False, 1, False)
    assert (permanent.phase, permanent.stay_up, permanent.exit_code, permanent.healthy) == ("failed", True, 42, True)


def test_main_without_a_command_is_a_usage_error():
    proc = subprocess.run([sys.executable, "-m", "marathon_tf.bootstrap", "--"], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 2 and "no training command" in proc.stderr


def test_main_without_the_task_env_is_a_usage_error():
    proc = subprocess.run([sys.executable, "-m", "marathon_tf.bootstrap", "--", "true"], capture_output=True,
                          text=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2 and "MTF_CLUSTER" in proc.stderr


def test_bootstrap_never_imports_tensorflow():
    code = ("import sys, marathon_tf.task.bootstrap, marathon_tf.task.discovery; "
            "sys.exit(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')) != [])")
    assert subprocess.run([sys.executable, "-c", code], timeout=30).returncode == 0
