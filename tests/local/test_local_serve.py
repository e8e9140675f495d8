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


def test_a_second_stop_signal_handed_to_another_thread_cuts_the_stop_short(cluster, api, make_app):
    """The kernel hands a process-directed signal to any of the process's threads that does not block it;
    there the C handler only sets Python's flag, and the main thread runs the Python handler when it next
    wakes. ``LocalCluster.stop`` waited for the tasks' graces in one 60 s wait: a second Ctrl-C of
    ``local serve`` landing on the loop's thread killed the tasks only when their 30 s grace was over
    (``tests/user/test_local_stop.py`` failed 2 runs of 6 under load: "25.6 s after the second Ctrl-C").
    Here the signal is sent to a helper thread on purpose; the handler kills the tasks as serve's does."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("Python runs signal handlers in the main thread only")
    stubborn = "trap '' TERM; while true; do sleep 0.1; done"  # only SIGKILL ends it: the whole grace is waited
    api.put("/v2/apps/s", json=make_app("s", cmd=stubborn, taskKillGracePeriodSeconds=30))
    api.wait_deployed()
    assert cluster.shutdown_plan() == (1, 30.0)
    pid = cluster.task_pids()[0]
    handled: list[float] = []

    def second_ctrl_c(signum, frame):
        handled.append(time.monotonic())
        cluster.kill_tasks_now()

    def elsewhere():
        time.sleep(1.0)
        signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)  # this thread gets it, not the main one

    previous = signal.signal(signal.SIGUSR1, second_ctrl_c)
    try:
        threading.Thread(target=elsewhere, daemon=True).start()
        t0 = time.monotonic()
        cluster.stop()
        took = time.monotonic() - t0
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert handled and handled[0] - t0 < 3, handled
    assert took < 10, f"the stop took {took:.1f} s: the signal's handler ran only after the 30 s grace"
    assert not _alive(pid)
