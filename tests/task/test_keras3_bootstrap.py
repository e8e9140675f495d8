"""A program that fails the way Keras 3's model.fit does under MultiWorkerMirroredStrategy (its real
stderr, tests/data/keras3) fails the job at once, with one line that says the fix, in the task's
log and in the job's record (no relaunches: none would fix it)."""

import io
import signal
import sys
import threading
from pathlib import Path

from polling import wait_for

from marathon_tf.contract import keras3
from marathon_tf.contract import labels as L
from marathon_tf.task.bootstrap import Bootstrap, job_lifecycle
from marathon_tf.task.discovery import Observation
from marathon_tf.task.jobcontrol import JobControl

STDERR = Path(__file__).resolve().parent.parent / "data" / "keras3" / "mwms.stderr"
PEERS = {("worker", 0): "127.0.0.1:2001", ("worker", 1): "127.0.0.1:2002"}


class Backend:
    def lookup(self, peers):
        return {p: Observation(PEERS.get(p), "ok" if p in PEERS else "NXDOMAIN") for p in peers}


def test_keras_3_under_multi_worker_mirrored_fails_the_job_with_the_fix(tmp_path, fake_marathon, make_ctx,
                                                                         task_environ):
    for i in range(2):
        fake_marathon.add_app("worker", i)
    ctx = make_ctx("worker", 0, style="multi_worker_mirrored", completion="all_workers", cluster={"worker": 2},
                   marathon_url=fake_marathon.url, restart_budget=(5, 600.0))
    parts = job_lifecycle(ctx, task_environ(ctx))
    parts["control"] = JobControl(ctx, fake_marathon.client(), retry_interval=0.05, poll_interval=0.05)
    program = f"import sys; sys.stderr.write(open({str(STDERR)!r}).read()); sys.exit(1)"
    err = io.BytesIO()
    boot = Bootstrap(ctx, {**task_environ(ctx), "MTF_RENDEZVOUS": "direct"}, [sys.executable, "-c", program],
                     backend=Backend(), stdout=io.BytesIO(), stderr=err, tick=0.02, restart_backoff=(0.01, 0.05),
                     **parts)
    result = []
    thread = threading.Thread(target=lambda: result.append(boot.run()), daemon=True)
    thread.start()
    try:
        wait_for(lambda: fake_marathon.puts(), 10, what="the record")
        labels = fake_marathon.apps["/ml/mnist/worker-1"]["labels"]
        fix = f"Keras 3 does not run model.fit under MultiWorkerMirroredStrategy: {keras3.FIX}"
        assert (labels[L.STATE], labels[L.REASON]) == ("Failed", f"worker-0 exited with 1 (permanent): {fix}")
        assert boot.status.snapshot()["restarts"] == 0  # failed at once, not after the restart budget
    finally:
        boot.request_stop(signal.SIGTERM)
        thread.join(10)
    assert not thread.is_alive() and result == [1]
