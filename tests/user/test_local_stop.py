"""Ctrl-C of `deploy --local` answers at once (issue 21): the first stop signal says how many tasks
stop and the longest grace they get; a second one kills them at once (exit 130, nothing left)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from leaks import kill_referring_to, wait_none_referring_to
from polling import wait_for

# Ignores SIGTERM: only SIGKILL ends it (its bootstrap would wait the whole grace for it).
STUBBORN = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('step=1 ready', flush=True); time.sleep(600)")


def _env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARATHON")}
    env.update(MARATHON_TF_STATE_DIR=str(tmp_path / "state"), MARATHON_TF_CONFIG="/nonexistent")
    return env


@pytest.mark.timeout(180)
def test_a_second_ctrl_c_kills_every_task_at_once(tmp_path):
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"name": "stubborn", "command": ["python3", "-c", STUBBORN],
                               "roles": {"worker": {"count": 1, "cpus": 0.1, "mem": 64}}}))
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen([sys.executable, "-m", "marathon_tf.user.cli", "deploy", str(job), "--local"],
                                stdout=o, stderr=e, env=_env(tmp_path), cwd=tmp_path, start_new_session=True)
    try:
        wait_for(lambda: "[worker-0] step=1 ready" in out.read_text(errors="replace") or proc.poll() is not None,
                 timeout=90, what="the program running")
        assert proc.poll() is None, err.read_text()[-3000:]
        os.kill(proc.pid, signal.SIGINT)
        line = "stopping 1 task (grace up to 30 s; Ctrl-C again to kill now)"
        wait_for(lambda: line in err.read_text(errors="replace") or proc.poll() is not None, timeout=30,
                 what="the stopping line")
        assert line in err.read_text(errors="replace"), err.read_text()[-3000:]
        assert proc.poll() is None  # the task has its grace: the program ignores SIGTERM, so it is waited for
        _second_ctrl_c_kills_at_once(proc, err, tmp_path / "state")
        assert "the local job stubborn was stopped (its tasks killed at once: a second stop signal)" in err.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        kill_referring_to(tmp_path / "state")


@pytest.mark.timeout(180)
def test_a_stopping_local_serve_says_at_once_what_it_stops_and_for_how_long(tmp_path):
    """Issue 32: Ctrl-C on `local serve` with a job running took 30 s with no output at all (`deploy --local`
    says at once what it stops and for how long). It says the same line; a second Ctrl-C kills every task."""
    import re

    job = tmp_path / "job.json"
    job.write_text(json.dumps({"name": "stubborn", "command": ["python3", "-c", STUBBORN],
                               "roles": {"worker": {"count": 1, "cpus": 0.1, "mem": 64}}}))
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    env = _env(tmp_path)
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen([sys.executable, "-m", "marathon_tf.user.cli", "local", "serve", "--port", "0",
                                 "--dns-port", "0", "--dns-http-port", "0"],
                                stdout=o, stderr=e, env=env, cwd=tmp_path, start_new_session=True)
    try:
        found = wait_for(lambda: re.search(r"export MARATHON_URL=(\S+)\)", err.read_text(errors="replace"))
                         or proc.poll() is not None, timeout=60, what="the serve's URL")
        assert proc.poll() is None, err.read_text()[-3000:]
        url = found.group(1)
        r = subprocess.run([sys.executable, "-m", "marathon_tf.user.cli", "deploy", str(job), "--detach"],
                           capture_output=True, text=True, env={**env, "MARATHON_URL": url}, cwd=tmp_path, timeout=60)
        assert r.returncode == 0, r.stderr
        wait_for(lambda: list((tmp_path / "state" / "serve" / "sandboxes").glob("*/stdout")) and "step=1 ready" in
                 next((tmp_path / "state" / "serve" / "sandboxes").glob("*/stdout")).read_text(), timeout=90,
                 what="the program running")
        os.kill(proc.pid, signal.SIGINT)
        line = "stopping 1 task (grace up to 30 s; Ctrl-C again to kill now)"
        wait_for(lambda: line in err.read_text(errors="replace") or proc.poll() is not None, timeout=10,
                 what="the stopping line, at once")
        assert line in err.read_text(errors="replace"), err.read_text()[-3000:]
        _second_ctrl_c_kills_at_once(proc, err, tmp_path / "state")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        kill_referring_to(tmp_path / "state")


def _second_ctrl_c_kills_at_once(proc, err, state):
    """A second SIGINT: the runner exits 130 within 15 s (not the 30 s grace) and leaves no process behind."""
    second = time.monotonic()
    os.kill(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=60) == 130, err.read_text()[-3000:]
    took = time.monotonic() - second
    assert took < 15, f"{took:.1f} s after the second Ctrl-C (the grace is 30 s)\n" + err.read_text()[-3000:]
    assert wait_none_referring_to(state, seconds=10) == []
