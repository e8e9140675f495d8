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

import os
import re
import signal
import time

import pytest
from test_elastic_e2e import task_status
from test_save_e2e import (
    BOOTSTRAP,
    TF1_READY,
    checkpoints,
    highest_step_before_restart,
    resumed,
    rounds,
)

from marathon_tf.contract import labels as L
from marathon_tf.task.saving import LET_GO

pytestmark = [pytest.mark.tf]

COORDINATOR = "worker-0"
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
    job.wait(lambda: task_status(job, COORDINATOR).get("phase") == "saving", 30, "the coordinator's round under way",
             0.01)
    assert job.cluster.kill_task(f"/{job.name}/{COORDINATOR}", "TERM")
    said = job.wait(lambda: rounds(job, COORDINATOR)[before:] or None, 60, "the round's checkpoint", 0.05)

    def own_log() -> list[str]:
        return [x for t, n, s, x in list(job.lines) if n == COORDINATOR and s == "stderr" and t > began]

    def first(log: list[str], *words: str) -> int | None:
        return next((i for i, x in enumerate(log) if all(w in x for w in words)), None)

    # in the coordinator's own log (one stream, in order): its stop came before the round it joined was confirmed.
    # Both lines are waited for: the bootstrap confirms the checkpoint in the logdir only after its program said it
    # saved (a loaded machine printed the confirmation after the program's line had been read)
    log = job.wait(lambda: (lambda log: log if first(log, "stopped by SIGTERM: a save round first") is not None and
                            first(log, "checkpoint at step", "confirmed in the logdir") is not None else None)(
        own_log()), 30, "the coordinator's stop and the round's confirmation in its log", 0.05)
    stopped = first(log, "stopped by SIGTERM: a save round first")
    confirmed = first(log, "checkpoint at step", "confirmed in the logdir")
    assert stopped is not None and confirmed is not None and stopped < confirmed, log
    killed = time.monotonic()
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
    """ps-0's training program SIGKILLed (its bootstrap lives: a ps failure restarts the job's group): the keeper
    on the coordinator opens a group restart round and worker-1 stops its program for it; before worker-1 trains
    again, the coordinator's task is SIGKILLed too (no grace: nothing of the round is handed over). The
    relaunched coordinator leads again from the ledger in the logdir, worker-1 reads the plan it writes, and the
    job ends Succeeded from its last checkpoint with both failures counted (the coordinator's own end, which no
    bootstrap could report, is read in Marathon's ``lastTaskFailure`` by its relaunch)."""
    from e2e_helpers import trainer_pid

    job = local_job(tf1_job(tmp_path, target=2400, save_every=100, max_failures=5))
    job.wait(lambda: job.max_step() > 800 and checkpoints(tmp_path), 240, "step > 800 and a checkpoint", 0.05)
    began = time.monotonic()
    os.kill(job.wait(lambda: trainer_pid(job.cluster.state_dir, "ps-0"), 10, "ps-0's program"), signal.SIGKILL)
    seen = job.wait(lambda: seen_after(job, "worker-1", GROUP_ROUND, began), 60, "worker-1 in the group round", 0.01)
    assert job.cluster.kill_task(f"/{job.name}/{COORDINATOR}", "KILL")
    killed = time.monotonic()
    assert not job.steps(since=seen, task="worker-1"), job.text()[-3000:]  # it had not trained again yet
    job.wait(lambda: seen_after(job, COORDINATOR, LEADING, killed), 120, "the relaunched coordinator leading")
    job.wait(lambda: job.steps(since=killed, task="worker-1"), 180, "worker-1 training again")
    final = job.wait_state(300)
    assert final["state"] == L.SUCCEEDED, (final.get("reason"), job.text()[-4000:])
    assert final["finalStep"] >= 2400
    # ps-0's program's, and the coordinator's own end, which its relaunch reads in Marathon's lastTaskFailure at once
    assert (final.get("restartBudget") or {}).get("failures") == 2, (final.get("restartBudget"), job.text()[-3000:])


@pytest.mark.timeout(600)
def test_the_coordinator_stopped_in_the_middle_of_a_resize_round_trains_nothing_twice_and_the_job_grows(
        tmp_path, sized_cluster, job_on):
    """An elastic TF1 job (workers 2..3) formed at 2 with its standby waiting for room; the blocker deleted, the
    standby is placed and the coordinator has published the job's new size, but the newcomer has not trained
    yet, when the coordinator's task is stopped with grace. Its stop saves first (0 steps trained twice);
    relaunched, it leads again, reads the membership from what runs, and the job ends Succeeded at 3 workers with
    no failure counted."""
    from test_elastic_e2e import blocker, decider_view, elastic_job, size_is, worker_task

    from marathon_tf.user import jobs

    block = job_on(sized_cluster, blocker(tmp_path))
    block.wait(lambda: worker_task(block, "worker-0"), 60, "the blocker running")
    target = 6000
    # (the coordinator's program sleeps 3 s before its session restores a checkpoint: a newcomer that started
    # meanwhile would train those seconds on the ps, and the restore would undo it)
    job = job_on(sized_cluster, elastic_job(
        tmp_path, "linear-regression-tf1", ["python3", "train.py", "--train_steps", str(target), "--checkpoint_dir",
                                            "ckpt", "--log_every", "10", "--elastic", "--save_checkpoint_steps",
                                            "100000", "--restore_sleep", "3"], target))
    job.wait(lambda: size_is(job, COORDINATOR, 2), 180, "the job formed with 2 workers")
    job.wait(lambda: job.max_step() > 500, 120, "training with 2 workers")
    before = len(rounds(job, COORDINATOR))
    jobs.delete(block.client, "blocker")
    view = job.wait(lambda: (lambda v: v if v.get("size") == 3 else None)(decider_view(job, COORDINATOR)), 60,
                    "the resize published", 0.02)
    newcomer = next(w for w in view["members"] if w not in ("worker-0", "worker-1"))
    began = time.monotonic()
    assert sized_cluster.kill_task(f"/{job.name}/{COORDINATOR}", "TERM")
    assert not job.steps(task=newcomer), job.text(newcomer)  # the newcomer had not trained yet: mid-resize
    job.wait(lambda: resumed(job, began, TF1_READY, COORDINATOR), 240, "the coordinator restored the checkpoint", 0.1)
    said = rounds(job, COORDINATOR)[before:]
    assert len(said) == 1 and resumed(job, began, TF1_READY, COORDINATOR)[0] == said[0], (said, job.text()[-3000:])
    assert highest_step_before_restart(job, began) <= said[0], (said, job.text()[-3000:])  # 0 steps again
    # nor did anyone train past the round's step before the relaunched coordinator's program restored it (its
    # session's first line: what a newcomer trained before the restore would be undone, and trained again)
    restored = job.wait(lambda: seen_after(job, COORDINATOR, "session ready at global step", began), 60,
                        "the relaunched coordinator's session")
    # (less half a second: the tailer reads the tasks' files one after the other every 0.1 s, and a held worker's
    # first step after the let-go can be read just before the coordinator's line that came first; what a newcomer
    # trains while the restore sleeps comes up to 3 s before it)
    early = [(round(t - began, 1), n, s) for t, n, s in job.steps(began) if t < restored - 0.5 and s > said[0]]
    assert early == [], (said, early[:5], job.text()[-3000:])
    if seen_after(job, "worker-1", "held for the job's save round", began):
        # held until the stop, worker-1 trains again once the relaunched coordinator's program is back, not at its
        # hold's end (60 s: every run before stop 54)
        job.wait(lambda: seen_after(job, "worker-1", LET_GO, began), 30, "worker-1 let go by the new coordinator")
    job.wait(lambda: seen_after(job, COORDINATOR, LEADING, began), 120, "the relaunched coordinator leading")
    job.wait(lambda: size_is(job, COORDINATOR, 3), 120, "the job grown to 3 workers under the relaunched coordinator")
    final = job.wait_state(420)
    assert final["state"] == L.SUCCEEDED, final.get("reason")
    assert (final.get("restartBudget") or {}).get("failures", 0) == 0, final.get("restartBudget")
