"""Preemption is not failure (issue 21), on ``local serve`` with a tiny program (no TensorFlow):

1. a whole task stopped from outside (SIGTERM to worker-0's bootstrap, as Mesos does through the
   kill grace period on an agent's drain or an operator's kill): the bootstrap passes SIGTERM to its
   program at once, the program "checkpoints" and exits 42, Marathon relaunches the task, and the
   keeper records a preemption (the app's configuration did not change: marathon-tf did not ask);
2. the chief's program alone gets SIGTERM: it "checkpoints" and exits 42 (a preemption exit code),
   restarted in place at once, resumes from its checkpoint.

3. ``scale worker=2``: the tasks whose app changed are killed and started with the new spec; those
   kills are marathon-tf's own, counted neither as failures nor as preemptions.

The job shows ``preemptions: 2, failures: 0`` and ends Succeeded under ``restart.max_failures: 0``:
before the ledger, each of these spent the failure budget (here: the job Failed at the first).
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from e2e_helpers import Serve, wait_no_processes

pytestmark = pytest.mark.timeout(240)

PROGRAM = r"""
import os, pathlib, signal, sys, time
d = pathlib.Path(sys.argv[1]); me = os.environ["MTF_ROLE"] + "-" + os.environ["MTF_INDEX"]
ckpt = d / (me + ".ckpt")
step = int(ckpt.read_text()) if ckpt.exists() else 0
print(f"{me} resumed at step {step}" if step else f"{me} starts", file=sys.stderr, flush=True)
def preempted(signum, frame):
    ckpt.write_text(str(step))
    print(f"{me} preempted at step {step}: checkpoint saved", file=sys.stderr, flush=True)
    sys.exit(42)
signal.signal(signal.SIGTERM, preempted)
(d / (me + ".pids.tmp")).write_text(f"{os.getpid()} {os.getppid()}")
os.replace(d / (me + ".pids.tmp"), d / (me + ".pids"))
while not (d / "release").exists():
    step += 1
    time.sleep(0.05)
print(f"{me} done at step {step}", file=sys.stderr, flush=True)
"""


def _pids(d, task, old=None, timeout=60):
    """(program pid, its parent: the bootstrap) that ``task``'s program wrote (other than ``old``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pids = tuple(int(p) for p in (d / f"{task}.pids").read_text().split())
        except (OSError, ValueError):
            pids = None
        if pids and pids != old:
            return pids
        time.sleep(0.1)
    raise AssertionError(f"{task}'s program did not start (pids {old})")


def _status(serve, name):
    r = serve.cli("status", name, "-o", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _wait_preemptions(serve, name, n, timeout=60):
    deadline, st = time.monotonic() + timeout, {}
    while time.monotonic() < deadline:
        st = _status(serve, name)
        if st.get("preemptions", 0) >= n:
            return st
        time.sleep(0.5)
    raise AssertionError(f"{name}: no preemption {n} in {timeout} s: {st}")


def test_preemptions_and_a_scale_spend_no_failure(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    job = {"name": "preempted", "style": "custom", "completion": "chief", "prewarm": False,
           "command": ["python3", "-c", PROGRAM, str(shared)],
           "roles": {"chief": {"count": 1, "cpus": 0.1, "mem": 64}, "worker": {"count": 1, "cpus": 0.1, "mem": 64}},
           "restart": {"max_failures": 0, "window_seconds": 600, "grace_seconds": 10},
           "discovery": {"startup_timeout": 120}}
    path = tmp_path / "preempted.json"
    path.write_text(json.dumps(job))
    serve = Serve(tmp_path)
    try:
        r = serve.cli("deploy", str(path), "--detach")
        assert r.returncode == 0, r.stderr
        chief = _pids(shared, "chief-0")
        worker, bootstrap = _pids(shared, "worker-0")
        os.kill(bootstrap, signal.SIGTERM)  # 1. the whole task is stopped from outside
        _pids(shared, "worker-0", old=(worker, bootstrap))  # relaunched
        st = _wait_preemptions(serve, "preempted", 1)
        assert st["failures"] == 0 and st["state"] not in ("Failed", "Succeeded"), st
        assert (shared / "worker-0.ckpt").exists()  # it saved within the grace
        chief = _pids(shared, "chief-0", timeout=5)  # (the chief may have restarted for the moved worker)
        os.kill(chief[0], signal.SIGTERM)  # 2. the chief's program alone
        _pids(shared, "chief-0", old=chief)  # restarted in place at once
        st = _wait_preemptions(serve, "preempted", 2)
        assert st["failures"] == 0, st
        # 3. scale: the kills of the tasks whose app changed (the new spec) are marathon-tf's, not preemptions
        before = _pids(shared, "chief-0", timeout=5)
        r = serve.cli("scale", "preempted", "worker=2")
        assert r.returncode == 0, r.stderr
        _pids(shared, "worker-1")
        _pids(shared, "chief-0", old=before)  # the keeper itself was restarted with the new spec
        (shared / "release").touch()
        st = serve.wait_state("preempted", timeout=90)
        assert st["state"] == "Succeeded", st
        # the relaunched keeper learns what the surviving reporters and Marathon still know: at most the 2
        assert st["failures"] == 0 and st["preemptions"] <= 2, st
        logs = serve.cli("logs", "preempted", "chief-0")
        assert "chief-0 resumed at step" in logs.stdout + logs.stderr, logs.stdout[-2000:] + logs.stderr[-2000:]
    finally:
        serve.stop()
    assert wait_no_processes(tmp_path) == []
