"""A program that always fails ends its job Failed within the budget: every style, with and without
a logdir, on ``deploy --local`` and on ``local serve`` (issue 21).

Before the job-wide ledger (marathon_tf.task.keeper) a task relaunched by Marathon started a fresh
bootstrap whose count began at 0 again: a ``multi_worker_mirrored`` job without a logdir whose
program exits 3 was relaunched 32 times in 90 s and never ended. The programs here are one-line
Python (no TensorFlow), so the whole matrix is cheap.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time

import pytest
from e2e_helpers import MARATHON_TF, Serve, wait_no_processes

pytestmark = pytest.mark.timeout(240)

MAX_FAILURES = 3
#: (roles, completion) of a small job of each style
STYLES = {
    "tf1": ({"ps": {"count": 1}, "worker": {"count": 2}}, "all_workers"),
    "parameter_server": ({"chief": {"count": 1}, "ps": {"count": 1}, "worker": {"count": 1}}, "chief"),
    "multi_worker_mirrored": ({"worker": {"count": 2}}, "all_workers"),
    "custom": ({"chief": {"count": 1}, "worker": {"count": 2}}, "chief"),
}
FAILED_LINE = re.compile(rf"more than restart\.max_failures \({MAX_FAILURES}")


def failing_job(tmp_path, style: str, logdir: bool, name: str | None = None):
    roles, completion = STYLES[style]
    job = {"name": name or f"fails-{style.replace('_', '-')}-{'logdir' if logdir else 'nologdir'}",
           "style": style, "completion": completion, "prewarm": False,
           "command": ["python3", "-c", "import sys; print('failing on purpose', file=sys.stderr); sys.exit(3)"],
           "roles": {r: {**spec, "cpus": 0.1, "mem": 64} for r, spec in roles.items()},
           "restart": {"max_failures": MAX_FAILURES, "window_seconds": 600},
           "discovery": {"startup_timeout": 120}}
    if logdir:
        job.update(logdir="ckpt", volumes=[{"host_path": "ckpt", "container_path": "ckpt", "mode": "RW"}])
    path = tmp_path / f"{job['name']}.json"
    path.write_text(json.dumps(job))
    return path


def _deploy_local(path, tmp_path, results, key):
    import os

    env = dict(os.environ, MARATHON_TF_STATE_DIR=str(tmp_path / f"state-{key}"))
    env.pop("MARATHON_URL", None)
    began = time.monotonic()
    r = subprocess.run([MARATHON_TF, "deploy", str(path), "--local", "--timeout", "150"], capture_output=True,
                       text=True, env=env, cwd=tmp_path, timeout=200)
    results[key] = (r, time.monotonic() - began)


@pytest.mark.parametrize("style", sorted(STYLES))
def test_an_always_failing_program_fails_the_job_within_the_budget_on_deploy_local(tmp_path, style):
    results: dict = {}
    threads = [threading.Thread(target=_deploy_local, args=(failing_job(tmp_path, style, logdir), tmp_path, results,
                                                            "logdir" if logdir else "nologdir"))
               for logdir in (False, True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for key, (r, seconds) in sorted(results.items()):
        assert r.returncode == 1, f"{style}/{key}: exit {r.returncode}\n{r.stderr[-3000:]}"
        assert ": Failed in " in r.stderr and FAILED_LINE.search(r.stderr), f"{style}/{key}\n{r.stderr[-3000:]}"
        assert seconds <= 90, f"{style}/{key} took {seconds:.0f} s"  # 60 s on a quiet machine; 2 parallel runs here
        starts = r.stderr.count("started training program")
        tasks = sum(s["count"] for s in STYLES[style][0].values())
        # every failure restarts at most the whole group once: never the endless relaunches of before
        assert starts <= tasks * (MAX_FAILURES + 2), f"{style}/{key}: {starts} program starts\n{r.stderr[-3000:]}"
        assert "failing on purpose" in r.stderr.split(": Failed in ", 1)[1], "the reason names the program's stderr"
    assert wait_no_processes(tmp_path) == []


def test_every_style_with_and_without_logdir_fails_within_the_budget_on_local_serve(tmp_path):
    serve = Serve(tmp_path)
    try:
        names = []
        for style in sorted(STYLES):
            for logdir in (False, True):
                path = failing_job(tmp_path, style, logdir)
                r = serve.cli("deploy", str(path), "--detach")
                assert r.returncode == 0, r.stderr
                names.append(json.loads(path.read_text())["name"])
        began = time.monotonic()
        for name in names:
            st = serve.wait_state(name, timeout=150)
            assert st["state"] == "Failed", st
            assert FAILED_LINE.search(st.get("reason", "")), st
            assert st["failures"] > MAX_FAILURES and st["preemptions"] == 0, st
            assert st["restartBudget"]["maxFailures"] == MAX_FAILURES, st
        assert time.monotonic() - began <= 150  # 8 jobs at once on a 2-core machine
    finally:
        serve.stop()
    assert wait_no_processes(tmp_path) == []
