"""Nothing outlives the local runner, whatever kills it (real TensorFlow, TF1 example: 1 ps + 2 workers).

Leftovers are found by scanning /proc for processes whose cwd, command line or environment refers
to the run's state directory (every task and everything it starts does), never by pids the runner kept.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jobfiles
import pytest
import requests
from leaks import kill_referring_to, processes_referring_to, wait_none_referring_to
from polling import wait_for

pytestmark = [pytest.mark.tf, pytest.mark.timeout(300)]

MARATHON_TF = str(Path(sys.executable).parent / "marathon-tf")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARATHON")}
    env.update(MARATHON_TF_STATE_DIR=str(tmp_path / "state"), MARATHON_TF_CONFIG="/nonexistent", **extra)
    return env


def _long_job(tmp_path: Path, **changes) -> Path:
    return jobfiles.example_job("linear-regression-tf1", tmp_path, command=jobfiles.ENDLESS_TF1, **changes)


def _serve_endpoints(log: Path) -> tuple[str, str] | None:
    """(Marathon URL, Mesos-DNS host:port) from `local serve`'s banner."""
    url = dns = None
    for line in log.read_text(errors="replace").splitlines():
        if "Marathon API" in line:
            url = next((w for w in line.split() if w.startswith("http://")), None)
        if "Mesos-DNS" in line:
            dns = next((w for w in line.split() if w.startswith("127.0.0.1:")), None)
    return (url, dns) if url and dns else None


def _guardians_of(runner_pid: int) -> list[int]:
    """Live guardian processes (local/reaper.py) started by the runner ``runner_pid``."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any(a.endswith("reaper.py") for a in argv) and any(a.startswith(f"{runner_pid}-") for a in argv):
            out.append(int(pid))
    return out


def _training(out: Path) -> bool:
    text = out.read_text(errors="replace") if out.exists() else ""
    return "[worker-0] step=" in text and "[worker-1] step=" in text


def _start_deploy_local(tmp_path: Path) -> tuple[subprocess.Popen, Path, Path]:
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen([MARATHON_TF, "deploy", str(_long_job(tmp_path)), "--local"], stdout=o, stderr=e,
                                env=_env(tmp_path), cwd=tmp_path, start_new_session=True)
    return proc, out, err


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP])
def test_deploy_local_leaves_no_process_when_the_runner_is_signalled(tmp_path, sig):
    state = tmp_path / "state"
    proc, out, err = _start_deploy_local(tmp_path)
    try:
        wait_for(lambda: _training(out) or proc.poll() is not None, timeout=180, what="both workers training")
        assert proc.poll() is None, err.read_text()[-3000:]
        before = processes_referring_to(state)
        assert len(before) >= 6, before  # 3 bootstraps + 3 training programs at least
        os.kill(proc.pid, sig)  # the runner alone, not its process group
        code = proc.wait(timeout=60)
        left = wait_none_referring_to(state, seconds=20)
        assert left == [], f"task processes outlived the runner ({signal.Signals(sig).name}): {left}"
        wait_for(lambda: not _guardians_of(proc.pid), timeout=10, what="the guardian to exit")
        stderr = err.read_text(errors="replace")
        if sig == signal.SIGKILL:
            assert code == -signal.SIGKILL
        else:
            assert code == 128 + sig, (code, stderr[-2000:])
            assert f"stopped by {signal.Signals(sig).name}: the local job linear-regression was stopped" in stderr
            assert "Traceback" not in stderr, stderr[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        kill_referring_to(state)


def _start_serve(tmp_path: Path, state: Path, log: Path) -> subprocess.Popen:
    """`marathon-tf local serve` on free ports with ``state`` as its state dir, output to ``log``."""
    with open(log, "wb") as f:
        return subprocess.Popen([MARATHON_TF, "local", "serve", "--port", "0", "--dns-port", "0",
                                 "--dns-http-port", "0", "--state-dir", str(state)],
                                stdout=f, stderr=subprocess.STDOUT, env=_env(tmp_path), cwd=tmp_path,
                                start_new_session=True)


def test_local_serve_sigkill_leaves_no_process(tmp_path):
    state, log = tmp_path / "serve-state", tmp_path / "serve.txt"
    serve = _start_serve(tmp_path, state, log)
    try:
        url, dns = wait_for(lambda: _serve_endpoints(log), timeout=30, what="local serve's endpoints")
        job = _long_job(tmp_path, discovery={"mode": "mesos-dns", "nameserver": dns, "marathon_url": url})
        deploy = subprocess.run([MARATHON_TF, "deploy", str(job), "--detach"],
                                env=_env(tmp_path, MARATHON_URL=url), capture_output=True, text=True, timeout=120)
        assert deploy.returncode == 0, deploy.stderr

        def trainers() -> bool:
            outs = [p.read_text(errors="replace") for p in state.glob("sandboxes/*/stdout")]
            return sum("step=" in o for o in outs) >= 2
        wait_for(trainers, timeout=180, what="both workers training")
        assert len(processes_referring_to(state)) >= 6
        requests.get(url + "/ping", timeout=5).raise_for_status()
        os.kill(serve.pid, signal.SIGKILL)
        serve.wait(timeout=30)
        left = wait_none_referring_to(state, seconds=20)
        assert left == [], f"task processes outlived a SIGKILLed local serve: {left}"
        wait_for(lambda: not _guardians_of(serve.pid), timeout=10, what="the guardian to exit")
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
        kill_referring_to(state)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_local_serve_stops_like_ctrl_c_on_sigterm_and_sighup(tmp_path, sig):
    state, log = tmp_path / "serve-state", tmp_path / "serve.txt"
    serve = _start_serve(tmp_path, state, log)
    try:
        url, _ = wait_for(lambda: _serve_endpoints(log), timeout=30, what="local serve's endpoints")
        # a task whose shell forks a child that moves to its own session: still stopped
        r = requests.put(url + "/v2/apps/t", json={
            "cmd": "setsid sleep 600 & sleep 600", "cpus": 0.1, "mem": 32}, timeout=10)
        assert r.status_code in (200, 201), r.text
        wait_for(lambda: len(processes_referring_to(state)) >= 3, timeout=30, what="task processes")
        time.sleep(0.5)
        os.kill(serve.pid, sig)
        assert serve.wait(timeout=60) == 128 + sig
        assert f"stopped by {signal.Signals(sig).name}" in log.read_text()
        assert wait_none_referring_to(state, seconds=10) == []
        assert not _guardians_of(serve.pid)  # a normal stop waits for its guardian
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
        kill_referring_to(state)


def test_sigterm_gives_the_training_program_its_grace_period(tmp_path):
    """Like Ctrl-C: the runner stops every task with its grace period, so a program that saves on
    SIGTERM (here: 3 s of work, then a file) finishes that work before everything is gone."""
    program = ("import pathlib, signal, sys, time\n"
               "def stop(*_):\n    time.sleep(3)\n"
               "    pathlib.Path('saved-on-sigterm').write_text('ok')\n    sys.exit(0)\n"
               "signal.signal(signal.SIGTERM, stop)\nprint('step=1', flush=True)\ntime.sleep(600)\n")
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"name": "graceful", "command": ["python3", "-c", program],
                               "roles": {"worker": {"count": 1, "cpus": 0.1, "mem": 64}}}))
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen([MARATHON_TF, "deploy", str(job), "--local"], stdout=o, stderr=e,
                                env=_env(tmp_path), cwd=tmp_path, start_new_session=True)
    try:
        wait_for(lambda: "[worker-0] step=1" in out.read_text(errors="replace") or proc.poll() is not None,
                 timeout=60, what="the program running")
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=60) == 143, err.read_text()[-2000:]
        saved = [p.read_text() for p in (tmp_path / "state").glob("*/sandboxes/*/saved-on-sigterm")]
        assert saved == ["ok"], "\n".join(  # the tasks' own words, to see where the grace period went
            f"--- {box.name}\n{(box / 'stderr').read_text(errors='replace')[-3000:]}"
            for box in (tmp_path / "state").glob("*/sandboxes/*")) + "\n--- runner\n" + err.read_text()[-2000:]
        assert wait_none_referring_to(tmp_path / "state", seconds=10) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        kill_referring_to(tmp_path / "state")
