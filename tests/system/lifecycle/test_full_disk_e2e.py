"""Issue 46.1 end to end with real TensorFlow on the local runner: the logdir's filesystem fills (0 bytes free)
while a TF1 job trains, and room comes back 12 s later. The chief's own checkpoint fails on it; that is
infrastructure, not a failure of the program (the job's budget is 0 failures): the job waits for room, says
so in ``status``, answers ``checkpoint`` with the reason, and resumes from its last checkpoint to Succeeded.
The logdir is a real small filesystem (a tmpfs mounted for the test; skipped where mounting is not
permitted)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from marathon_tf.contract import labels as L
from marathon_tf.contract.errors import SaveFailed
from marathon_tf.task.logdir import NO_SPACE

pytestmark = [pytest.mark.tf]

BOOTSTRAP = f"{sys.executable} -m marathon_tf.bootstrap --watch-interval 2 --grace 10"
TARGET = 6000


@pytest.mark.timeout(600)
def test_tf1_a_full_logdir_at_a_checkpoint_is_waited_out_and_the_job_succeeds(tmp_path, local_job):
    from jobfiles import example_job

    from marathon_tf.user.api import Marathon

    shared = tmp_path / "shared"
    shared.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(shared)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode})")
    try:
        command = ["python3", "train.py", "--train_steps", str(TARGET), "--checkpoint_dir", "ckpt", "--log_every",
                   "50", "--save_checkpoint_steps", "300", "--step_sleep", "0.01"]
        job = local_job(str(example_job("linear-regression-tf1", tmp_path, command=command, bootstrap=BOOTSTRAP,
                                        progress={"target_step": TARGET},
                                        restart={"max_failures": 0, "window_seconds": 600})))
        job.wait(lambda: job.max_step() > 700, 300, "step > 700 (a checkpoint at 300 and 600)", 0.1)
        fd = os.open(shared / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)  # the disk fills (a runaway log)
        try:
            for size in (1 << 20, 4096, 1):
                try:
                    while True:
                        os.write(fd, b"\0" * size)
                except OSError:
                    pass
        finally:
            os.close(fd)

        def waiting():
            return [w for w in job.status().get("waits") or [] if "for room" in w]

        job.wait(waiting, 120, "status to say worker-0 waits for room", 0.5)
        full = time.monotonic()
        st = job.status()
        assert st["state"] == "Running" and waiting()[0].startswith("worker-0 waiting "), st.get("waits")
        assert NO_SPACE in waiting()[0], waiting()
        with pytest.raises(SaveFailed, match=f"could not save a checkpoint: {NO_SPACE}"):
            Marathon(client=job.client).job(job.name).checkpoint(timeout=30)  # answered, with the reason
        time.sleep(max(0.0, 12 - (time.monotonic() - full)))
        (shared / "filler").unlink()  # room comes back
        final = job.wait_state(300)
        assert final["state"] == L.SUCCEEDED, (final.get("reason"), job.text()[-3000:])
        assert final.get("failures", 0) == 0, final
        assert "room came back after" in job.text("worker-0")
        assert "marathon-tf bootstrap: resumed from checkpoint at step" in job.text("worker-0")
    finally:
        subprocess.run(["umount", "-l", str(shared)], check=False)
