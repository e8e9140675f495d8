"""The coordinator's task killed in the middle of a round (issue 40), real TensorFlow on the local runner.

The deciding task (TF1's ``worker-0``) coordinates: it runs the job's save rounds and writes the job's plan
(the keeper's restart rounds, the counts, the verdict) that every other task follows. Killed while a round is
under way, the job must converge — its relaunch writes the plan again, the others read the plan as it is now —
and end Succeeded; a planned stop of it (a kill with grace) trains nothing twice.

What each test asserts is a cause: the round's lines in the coordinator's own log before the kill (so the kill
did land mid-round), the checkpoint the relaunched programs restored, the highest global step printed before
the restart, the relaunched coordinator leading the rendezvous, the job's counts and state.
"""

from __future__ import annotations

import re
import time

import pytest
from test_save_e2e import (
    BOOTSTRAP,
    SAVED,
    TF1_READY,
    checkpoints,
    highest_step_before_restart,
    resumed,
    rounds,
)

from marathon_tf.contract import labels as L

pytestmark = [pytest.mark.tf]

COORDINATOR = "worker-0"
ROUND_ASKED = "save round (ps-0 is stopped): asking the training program to save now"
LEADING = re.compile(r"leading the rendezvous of \d+ task")
GROUP_ROUND = re.compile(r"the job's group restarts \(.*round (\d+)\)")


def tf1_job(tmp_path, *, target: int, save_every: int, step_sleep: float = 0.0, max_failures: int = 0) -> str:
    """The TF1 example (1 ps, 2 workers); ``step_sleep``: seconds the coordinator's program sleeps after each
    step (a save round then waits that long for its step boundary: a round's middle that lasts)."""
    from jobfiles import example_job

    command = ["python3", "train.py", "--train_steps", str(target), "--checkpoint_dir", "ckpt", "--log_every", "10",
               "--save_checkpoint_steps", str(save_every)]
    if step_sleep:
        command += ["--step_sleep", str(step_sleep), "--step_sleep_task_index", "0"]
    return str(example_job("linear-regression-tf1", tmp_path, command=command, bootstrap=BOOTSTRAP,
                           progress={"target_step": target},
                           restart={"max_failures": max_failures, "window_seconds": 600}))


def seen_after(job, task: str, text: str | re.Pattern, since: float) -> float | None:
    """When ``task``'s first line after ``since`` that holds ``text`` was read (None: not yet)."""
    with job._lock:
        lines = list(job.lines)
    return next((t for t, n, _, x in lines if n == task and t > since
                 and (text.search(x) if isinstance(text, re.Pattern) else text in x)), None)


@pytest.mark.timeout(600)
def test_the_coordinator_stopped_in_the_middle_of_a_save_round_trains_nothing_twice_and_the_job_succeeds(
        tmp_path, local_job):
    """ps-0 stopped with grace: its bootstrap asks the coordinator for a held round; while the round waits for the
    coordinator's program at its step boundary (1 s steps), the coordinator's task is stopped too. Its own stop
    joins the round under way (one round, not two), the round's checkpoint is the one both relaunched programs
    restore, nothing printed before the restart is past it, and the relaunched coordinator leads again."""
    job = local_job(tf1_job(tmp_path, target=2600, save_every=100000, step_sleep=1.0))
    job.wait(lambda: job.max_step() > 1000, 240, "step > 1000", 0.05)
    began = time.monotonic()
    before = len(rounds(job, COORDINATOR))
    assert job.cluster.kill_task(f"/{job.name}/ps-0", "TERM")
    asked = job.wait(lambda: seen_after(job, COORDINATOR, ROUND_ASKED, began), 30, "the round under way", 0.01)
    assert job.cluster.kill_task(f"/{job.name}/{COORDINATOR}", "TERM")
    killed = time.monotonic()
    said = job.wait(lambda: rounds(job, COORDINATOR)[before:] or None, 60, "the round's checkpoint", 0.05)
    saved_at = seen_after(job, COORDINATOR, SAVED, began)
    assert saved_at is not None and asked <= killed < saved_at, (asked, killed, saved_at)  # the kill came mid-round
    job.wait(lambda: resumed(job, began, TF1_READY, COORDINATOR), 240, "the coordinator restored the checkpoint", 0.1)
    assert rounds(job, COORDINATOR)[before:] == said == [said[0]], rounds(job, COORDINATOR)[before:]  # one round
    assert resumed(job, began, TF1_READY, COORDINATOR)[0] == said[0] and said[0] in checkpoints(tmp_path)
    assert highest_step_before_restart(job, began) <= said[0], (said, job.text()[-3000:])  # 0 steps again
    job.wait(lambda: seen_after(job, COORDINATOR, LEADING, killed), 120, "the relaunched coordinator leading")
    final = job.wait_state(300)
    assert final["state"] == L.SUCCEEDED, final.get("reason")
    assert (final.get("restartBudget") or {}).get("failures", 0) == 0, final.get("restartBudget")


@pytest.mark.timeout(600)
def test_the_coordinator_killed_in_the_middle_of_a_group_restart_round_is_relaunched_and_the_job_converges(
        tmp_path, local_job):
    """ps-0 SIGKILLed: the keeper on the coordinator opens a group restart round and worker-1 stops its program
    for it; before worker-1 trains again, the coordinator's task is SIGKILLed too (no grace: nothing of the
    round is handed over). The relaunched coordinator leads again from the ledger in the logdir, worker-1 reads
    the plan it writes, and the job ends Succeeded from its last checkpoint with the two failures counted."""
    job = local_job(tf1_job(tmp_path, target=2400, save_every=100, max_failures=5))
    job.wait(lambda: job.max_step() > 800 and checkpoints(tmp_path), 240, "step > 800 and a checkpoint", 0.05)
    began = time.monotonic()
    assert job.cluster.kill_task(f"/{job.name}/ps-0", "KILL")
    job.wait(lambda: seen_after(job, "worker-1", GROUP_ROUND, began), 60, "worker-1 in the group restart round", 0.01)
    restarted = seen_after(job, "worker-1", "marathon-tf bootstrap: started training program", began)
    assert job.cluster.kill_task(f"/{job.name}/{COORDINATOR}", "KILL")
    killed = time.monotonic()
    assert restarted is None or restarted > killed - 0.2, (restarted, killed)  # it had not trained again yet
    job.wait(lambda: seen_after(job, COORDINATOR, LEADING, killed), 120, "the relaunched coordinator leading")
    job.wait(lambda: [t for t, _, s in job.steps(since=killed, task="worker-1")], 180, "worker-1 training again")
    final = job.wait_state(300)
    assert final["state"] == L.SUCCEEDED, final.get("reason")
    assert final["finalStep"] >= 2400
    assert (final.get("restartBudget") or {}).get("failures") == 2, final.get("restartBudget")
