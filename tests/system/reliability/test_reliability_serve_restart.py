"""`marathon-tf local serve` stopped mid-job (SIGINT, or SIGKILL): no task process survives; started again
on the same state dir it comes up cleanly with its jobs (local/extras/persist.py), relaunches their tasks, and a
job resumes from its checkpoint and ends Succeeded (issue 24, finding 6)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import requests
from reliability_helpers import (
    LOOPBACK_V4,
    MARATHON_TF,
    free_ports,
    job,
    listening_addresses,
    processes_under,
    run_subprocess,
    wait_for,
    write_job,
)


class Serve:
    def __init__(self, tmp_path: Path, ports: list[int]) -> None:
        self.state = tmp_path / "serve-state"
        self.port, self.dns, self.dns_http = ports
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.tmp = tmp_path

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MARATHON")}
        self.log = open(self.tmp / f"serve-{time.monotonic_ns()}.log", "wb")
        self.proc = subprocess.Popen(
            [MARATHON_TF, "local", "serve", "--port", str(self.port), "--dns-port", str(self.dns),
             "--dns-http-port", str(self.dns_http), "--state-dir", str(self.state)],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=self.tmp, start_new_session=True)

        def up():
            assert self.proc.poll() is None, self.output()
            try:
                return requests.get(self.url + "/ping", timeout=1).status_code == 200
            except requests.RequestException:
                return False
        wait_for(up, timeout=20, what="local serve to answer /ping")

    def output(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")

    def interrupt(self, timeout: float = 30) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"local serve did not stop within {timeout}s of SIGINT:\n{self.output()}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture
def serve(tmp_path):
    s = Serve(tmp_path, free_ports(3))
    yield s
    s.kill()
    for line in processes_under(s.state):  # nothing may outlive the test, even on failure
        pid = int(line.split()[0])
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _running(url: str) -> list[dict]:
    r = requests.get(url + "/v2/apps/rel/worker-0/tasks", timeout=5)
    return [t for t in r.json().get("tasks", []) if t["state"] == "TASK_RUNNING"] if r.status_code == 200 else []


def test_sigint_stops_every_task_and_restart_comes_up_with_the_job(serve, tmp_path):
    serve.start()
    # `local serve` binds loopback only by default: Marathon API, Mesos-DNS (UDP and TCP) and its HTTP API
    for port in (serve.port, serve.dns, serve.dns_http):
        addrs = listening_addresses(port)
        assert addrs and all(a.split(":", 1)[1] == LOOPBACK_V4 for a in addrs), (port, addrs)
    assert any(a.startswith("udp:") for a in listening_addresses(serve.dns))
    path = write_job(tmp_path / "job.json", job(command="sleep 600", roles={"worker": {"count": 2, "cpus": 0.1,
                                                                                       "mem": 32}}))
    p = run_subprocess(["deploy", str(path), "--detach"], env={"MARATHON_URL": serve.url}, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    wait_for(lambda: _running(serve.url), timeout=20, what="worker-0 running")
    wait_for(lambda: len(processes_under(serve.state)) >= 2, timeout=20, what="task processes in the sandboxes")
    before = processes_under(serve.state)
    assert any("sleep 600" in line or "bootstrap" in line for line in before), before

    code = serve.interrupt()
    assert code in (0, 130, -signal.SIGINT), (code, serve.output())
    assert "Traceback" not in serve.output(), serve.output()
    assert processes_under(serve.state) == [], "task processes survived local serve's SIGINT"
    with pytest.raises(requests.ConnectionError):
        requests.get(serve.url + "/ping", timeout=2)

    # the same ports and state dir again: it comes up cleanly, with the job it had (Marathon keeps its
    # state in ZooKeeper across restarts; local serve keeps it in its state dir)
    serve.start()
    assert requests.get(serve.url + "/v2/info", timeout=5).status_code == 200
    assert requests.get(serve.url + "/v2/groups/rel", timeout=5).status_code == 200
    wait_for(lambda: _running(serve.url), timeout=20, what="worker-0 relaunched after the restart")
    p = run_subprocess(["list"], env={"MARATHON_URL": serve.url})
    assert p.returncode == 0 and b"rel" in p.stdout, (p.stdout, p.stderr)
    # the old job's sandboxes are still on disk (kept for post-mortems)
    assert len(list((serve.state / "sandboxes").iterdir())) >= 3
    # and it is usable: the job deploys again
    p = run_subprocess(["deploy", str(path), "--detach"], env={"MARATHON_URL": serve.url}, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    wait_for(lambda: _running(serve.url), timeout=20, what="worker-0 running after the restart")
    assert serve.interrupt() in (0, 130, -signal.SIGINT)
    assert processes_under(serve.state) == []


#: Trains to step 10, checkpointing in its own file; the first run stops at step 5 (checkpointed) and waits
#: there for ever, so that the runner is SIGKILLed mid-job; a run that finds the checkpoint goes on from it.
PROGRAM = """\
import os, sys, time
ckpt = sys.argv[1]
start = int(open(ckpt).read()) if os.path.exists(ckpt) else 0
if start:
    print(f"resumed from checkpoint step={start}", flush=True)
for step in range(start + 1, 11):
    print(f"step={step}", flush=True)
    if step == 5 and not start:
        open(ckpt + ".tmp", "w").write("5")
        os.replace(ckpt + ".tmp", ckpt)
        time.sleep(600)
print("done", flush=True)
"""


def test_sigkilled_serve_restarted_resumes_the_job_from_its_checkpoint(serve, tmp_path):
    program, ckpt = tmp_path / "train.py", tmp_path / "ckpt"
    program.write_text(PROGRAM)
    serve.start()
    path = write_job(tmp_path / "job.json", job(command=f"python3 {program} {ckpt}"))
    p = run_subprocess(["deploy", str(path), "--detach"], env={"MARATHON_URL": serve.url}, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    wait_for(ckpt.exists, timeout=30, what="the first checkpoint")
    os.kill(serve.proc.pid, signal.SIGKILL)  # the runner only: nothing of it may outlive it
    serve.proc.wait(10)
    wait_for(lambda: processes_under(serve.state) == [], timeout=20, what="the task processes to die with the runner")

    serve.start()
    env = {"MARATHON_URL": serve.url}

    def state() -> str | None:
        r = requests.get(serve.url + "/v2/apps/rel/worker-0", timeout=5)
        return r.json()["app"]["labels"].get("marathon-tf/state") if r.status_code == 200 else None

    assert wait_for(state, timeout=60, what="the job's record") == "Succeeded"
    p = run_subprocess(["status", "rel", "-o", "json"], env=env)
    assert p.returncode == 0 and json.loads(p.stdout)["state"] == "Succeeded", (p.stdout, p.stderr)
    p = run_subprocess(["logs", "rel", "worker-0"], env=env)
    assert p.returncode == 0, p.stderr.decode()
    out = p.stdout.decode()
    assert "resumed from checkpoint step=5" in out and "step=6" in out and "done" in out, out
    assert "step=1\n" not in out, out  # the relaunched task started from the checkpoint, not from scratch
    assert serve.interrupt() in (0, 130, -signal.SIGINT)
    assert processes_under(serve.state) == []
