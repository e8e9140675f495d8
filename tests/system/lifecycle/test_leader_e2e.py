"""chief + ps SIGKILLed together (real TensorFlow, mnist-ps-strategy on the local runner): the chief
is the rendezvous leader, so its death takes the leader away too. Marathon relaunches both at new
addresses; the relaunched chief leads again, the workers find it and restart with the rewritten
spec; the job completes, and the checkpoint never goes back more than one save interval."""

import re
import sys
import time

import pytest
from jobfiles import example_job

from marathon_tf.contract import labels as L

pytestmark = [pytest.mark.tf]

BOOTSTRAP = f"{sys.executable} -m marathon_tf.bootstrap --watch-interval 2 --grace 5"
TARGET = 1500
SAVE_EVERY = 100
RESTORED = re.compile(r"chief: restored .*?global step (\d+)/")


def pss_job(tmp_path) -> str:
    command = ["python3", "train.py", "--train_steps", str(TARGET), "--checkpoint_dir", "ckpt",
               "--log_every", "10", "--save_every", str(SAVE_EVERY)]
    return str(example_job("mnist-ps-strategy", tmp_path, command=command, bootstrap=BOOTSTRAP,
                           restart={"max_failures": 10, "window_seconds": 600}))


def checkpoints(tmp_path) -> list[int]:
    return sorted(int(p.name[len("ckpt-"):-len(".index")]) for p in (tmp_path / "shared" / "ckpt").glob("ckpt-*.index"))


@pytest.mark.timeout(300)
def test_chief_and_ps_sigkilled_together_recover_and_the_job_completes(tmp_path, local_job):
    job = local_job(pss_job(tmp_path))
    job.wait(lambda: job.max_step() > 300 and checkpoints(tmp_path), 180, "step > 300 and a checkpoint", 0.05)
    reached, saved = job.max_step(), checkpoints(tmp_path)[-1]
    killed_at = time.monotonic()
    assert job.cluster.kill_task(f"/{job.name}/chief-0", "KILL")
    assert job.cluster.kill_task(f"/{job.name}/ps-0", "KILL")

    status = job.wait_state(240)
    assert status["state"] == L.SUCCEEDED, status
    assert status["finalStep"] >= TARGET
    restored = [int(m.group(1)) for t, n, s, x in list(job.lines)
                if t > killed_at and n == "chief-0" and (m := RESTORED.search(x))]
    assert restored, job.text("chief-0")[-3000:]
    # resumed from the checkpoint saved before the kill, or a later one: never more than one interval back
    assert restored[0] >= saved and restored[0] >= reached - SAVE_EVERY - 10, (saved, reached, restored)
    after = [s for t, n, s in job.steps(since=killed_at + 1.0, task="chief-0")]
    assert after and min(after) >= saved, (saved, after[:5])
    # the workers followed the relaunched leader and restarted with the new chief and ps addresses
    for worker in ("worker-0", "worker-1"):
        text = job.text(worker)
        assert "peer chief-0 moved" in text and "peer ps-0 moved" in text, text[-3000:]
