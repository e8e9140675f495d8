"""``serve()`` as ``marathon-tf local serve`` runs it: stops everything on SIGINT; tasks die with a SIGKILLed runner."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from polling import alive as _alive


def _start_runner(state: Path) -> tuple[subprocess.Popen, str]:
    code = f"from marathon_tf.local import serve; serve(port=0, state_dir={str(state)!r}, shutdown_grace=0.5)"
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    assert line.startswith("marathon: http://127.0.0.1:"), line
    return proc, line.split()[1]


def _task_pid(url: str, state: Path) -> int:
    requests.put(url + "/v2/apps/t", json={"cmd": "echo $$ > pid; exec sleep 600", "cpus": 0.1}).raise_for_status()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        files = [p for p in state.glob("sandboxes/*/pid") if p.read_text().strip()]
        if files:
            return int(files[0].read_text())
        time.sleep(0.05)
    pytest.fail("task never wrote its pid")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_stops_tasks_on_signal(tmp_path, sig):
    proc, url = _start_runner(tmp_path)
    try:
        assert requests.get(url + "/ping").text == "pong"
        pid = _task_pid(url, tmp_path)
        assert _alive(pid)
        proc.send_signal(sig)
        assert proc.wait(timeout=15) == 0
        assert not _alive(pid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_tasks_die_with_a_killed_runner(tmp_path):
    proc, url = _start_runner(tmp_path)
    try:
        pid = _task_pid(url, tmp_path)
        proc.kill()
        proc.wait(timeout=5)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.05)
        assert not _alive(pid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
