"""Save rounds end to end with real TensorFlow on the local runner (issue 29): every planned stop has the
job save first, so the checkpoint restored is the round's and nothing is trained twice, whatever the
program's own checkpoint interval; ``checkpoint`` on the three examples; a program without the hook.

What each test asserts is a cause, not a timing: the round's ``saved`` line and its checkpoint in the
logdir, the step the restarted program restored (its own words), the highest global step any task
printed before it was stopped, the job's counts and state."""

from __future__ import annotations

import re
import sys
import time

import pytest

from marathon_tf.contract import labels as L

pytestmark = [pytest.mark.tf]

BOOTSTRAP = f"{sys.executable} -m marathon_tf.bootstrap --watch-interval 2 --grace 10"
SAVED = re.compile(r"marathon-tf save-hook: saved step=(\d+) path=(\S+)")
STEP = re.compile(r"\bstep=(\d+) loss=")
#: Far longer than any test runs: only the save rounds (and the end) write checkpoints.
RARE = 5000


def tf1_job(tmp_path, *, target: int = 20000, **changes) -> str:
    from jobfiles import example_job

    command = ["python3", "train.py", "--train_steps", str(target), "--checkpoint_dir", "ckpt", "--log_every", "10",
               "--save_checkpoint_steps", str(RARE)]
    return str(example_job("linear-regression-tf1", tmp_path, command=command, bootstrap=BOOTSTRAP,
                           progress={"target_step": target}, restart={"max_failures": 0, "window_seconds": 600},
                           **changes))


def pss_job(tmp_path, *, target: int = 4000, log_every: int = 10, **changes) -> str:
    from jobfiles import example_job

    command = ["python3", "train.py", "--train_steps", str(target), "--checkpoint_dir", "ckpt", "--log_every",
               str(log_every),
               "--save_every", str(RARE)]
    return str(example_job("mnist-ps-strategy", tmp_path, command=command, bootstrap=BOOTSTRAP,
                           progress={"target_step": target}, restart={"max_failures": 0, "window_seconds": 600},
                           **changes))


def keras_job(tmp_path, **changes) -> str:
    from jobfiles import example_job

    command = ["python3", "train.py", "--epochs", "20", "--steps_per_epoch", "40", "--checkpoint_dir", "ckpt",
               "--log_every", "10", "--backup_every", "100000"]
    return str(example_job("keras-multiworker", tmp_path, command=command, bootstrap=BOOTSTRAP,
                           progress={"target_step": 800}, restart={"max_failures": 0, "window_seconds": 600},
                           **changes))


def checkpoints(tmp_path) -> list[int]:
    return sorted(int(p.name[len("model.ckpt-"):-len(".index")])
                  for p in (tmp_path / "shared" / "ckpt").glob("model.ckpt-*.index"))


def rounds(job, task: str) -> list[int]:
    """The steps the program of ``task`` said it saved for a round, in order."""
    return [int(m.group(1)) for m in map(SAVED.search, (x for _, n, s, x in job.lines if n == task)) if m]


def resumed(job, since: float, pattern: str, task: str) -> list[int]:
    """The steps ``task``'s programs restored after ``since`` (their own words, ``pattern`` with one group)."""
    found = re.compile(pattern)
    return [int(m.group(1)) for t, n, s, x in list(job.lines) if t > since and n == task
            for m in [found.search(x)] if m]


def highest_step_before_restart(job, since: float) -> int:
    """The highest global step any program printed before the first one started again after ``since``
    (the programs of before are stopped or held by then: a restart comes seconds after the round)."""
    lines = list(job.lines)
    again = next(t for t, n, s, x in lines if t > since and ("marathon-tf bootstrap: started training program" in x
                                                             or "marathon-tf bootstrap: resumed from checkpoint" in x))
    return max(int(m.group(1)) for t, n, s, x in lines if t < again for m in [STEP.search(x) or SAVED.search(x)] if m)


#: What a restarted chief restored: TF1's from the newest checkpoint, which its bootstrap names just before it
#: starts it (the program's own "session ready at global step N" comes after its first run, when the other
#: workers may have trained on already); the PSS coordinator says it itself.
TF1_READY = r"marathon-tf bootstrap: resumed from checkpoint at step (\d+)"
PSS_READY = r"chief: restored .*ckpt-(\d+), global step"


def stop_and_resume(job, disrupt, *, saver: str, ready: str, after: int) -> int:
    """Train past ``after``, ``disrupt(job)``, then: the checkpoint the saver's restarted program restored
    is the round's; no global step printed before the restart is above it (0 steps trained again). The
    round's step."""
    job.wait(lambda: job.max_step() > after, 240, f"step > {after}", 0.05)
    began = time.monotonic()
    before = len(rounds(job, saver))
    disrupt(job)
    job.wait(lambda: resumed(job, began, ready, saver), 240, "the saver restored the checkpoint", 0.1)
    said = rounds(job, saver)
    assert len(said) == before + 1, (said[before:], job.text(saver)[-3000:])  # one round per planned stop
    back = resumed(job, began, ready, saver)
    assert back[0] == said[-1], (said, back, job.text()[-3000:])  # the checkpoint restored is the round's
    assert highest_step_before_restart(job, began) <= said[-1], (said, job.text()[-3000:])  # 0 steps again
    return said[-1]


def sigterm(app: str):
    return lambda j: j.cluster.kill_task(f"/{j.name}/{app}", "TERM")


def scale_to_3(saver: str):
    def scale(j):
        result = j.jobs.scale(j.client, j.name, {"worker": ("=", 3)})[1]
        assert result is not None and result.saved and result.saved["task"] == saver and result.saved["held"], result
    return scale


# One job per example serves four planned stops in a row (each its own round, restore and count): a SIGTERM
# to the saver's task, one to the ps task, a scale to 3 workers, `delete --save` then `deploy --resume`; the
# job then succeeds with no failure.

@pytest.mark.timeout(900)
def test_tf1_a_sigterm_to_the_chief_then_to_the_ps_a_scale_a_delete_save_each_save_first_and_train_nothing_twice(
        tmp_path, local_job):
    job = local_job(tf1_job(tmp_path, target=7000))  # (the program's own checkpoints: every RARE = 5,000 steps)
    stop_and_resume(job, sigterm("worker-0"), saver="worker-0", ready=TF1_READY, after=3000)
    step = stop_and_resume(job, sigterm("ps-0"), saver="worker-0", ready=TF1_READY, after=job.max_step() + 300)
    assert step in checkpoints(tmp_path) and step < RARE  # the round's own checkpoint, not the hook's
    stop_and_resume(job, scale_to_3("worker-0"), saver="worker-0", ready=TF1_READY, after=job.max_step() + 300)
    assert sorted(t["task"] for t in job.status()["tasks"] if t["role"] == "worker") == [
        "worker-0", "worker-1", "worker-2"]
    delete_save_and_resume(job, tmp_path, saver="worker-0", ready=TF1_READY, after=job.max_step() + 300)


@pytest.mark.timeout(900)
def test_pss_a_sigterm_to_the_chief_then_to_the_ps_a_scale_a_delete_save_each_save_first_and_train_nothing_twice(
        tmp_path, local_job):
    job = local_job(pss_job(tmp_path, target=3600))
    stop_and_resume(job, sigterm("chief-0"), saver="chief-0", ready=PSS_READY, after=1200)
    stop_and_resume(job, sigterm("ps-0"), saver="chief-0", ready=PSS_READY, after=job.max_step() + 300)
    stop_and_resume(job, scale_to_3("chief-0"), saver="chief-0", ready=PSS_READY, after=job.max_step() + 300)
    delete_save_and_resume(job, tmp_path, saver="chief-0", ready=PSS_READY, after=job.max_step() + 300)


# --- checkpoint ----------------------------------------------------------------------------------------


def ask_checkpoint(job):
    from marathon_tf.user.api import Marathon

    return Marathon(client=job.client).job(job.name).checkpoint(timeout=120)


@pytest.mark.timeout(400)
@pytest.mark.parametrize("example", ["tf1", "pss", "keras"])
def test_checkpoint_saves_now_says_the_step_and_the_path_and_the_job_goes_on(tmp_path, local_job, example):
    from marathon_tf.task.checkpoints import newest_checkpoint

    path = {"tf1": tf1_job, "pss": pss_job, "keras": keras_job}[example](tmp_path)
    job = local_job(path)
    saver = {"tf1": "worker-0", "pss": "chief-0", "keras": "worker-0"}[example]
    job.wait(lambda: job.max_step() > 100, 240, "step > 100", 0.05)
    saved = ask_checkpoint(job)
    assert (saved.job, saved.task) == (job.name, saver) and saved.step is not None and saved.step >= 100, saved
    assert saved.path and saved.path.startswith("ckpt/"), saved
    job.wait(lambda: rounds(job, saver), 30, "the program's saved line", 0.1)  # (read from its sandbox)
    assert rounds(job, saver) == [saved.step], job.text(saver)[-2000:]
    found = newest_checkpoint(tmp_path / "shared" / "ckpt")
    assert found is not None and found.step >= saved.step, (found, saved)
    # it goes on training (not held): a step after the save
    job.wait(lambda: any(s > saved.step for t, n, s in job.steps(task=saver)), 120, "a step after the save", 0.1)
    assert job.status()["state"] == "Running"


@pytest.mark.timeout(300)
def test_checkpoint_of_a_program_without_the_hook_says_so_and_exits_1(tmp_path, local_job):
    from marathon_tf.contract.errors import SaveFailed

    roles = {"ps": {"count": 1, "cpus": 0.1, "mem": 128,
                    "command": ["python3", "-c", "import time; time.sleep(600)"]},
             "worker": {"count": 2, "cpus": 0.1, "mem": 128, "command": [
                 "python3", "-c", "import time\nfor i in range(100000):\n print(f'step={i} loss=1.0', flush=True)\n"
                 " time.sleep(0.05)"]},
             "tensorboard": {"count": 0}}
    job = local_job(tf1_job(tmp_path, roles=roles))
    job.wait(lambda: job.max_step() > 20, 120, "step > 20", 0.1)
    job.wait(lambda: job.status().get("saveHook"), 60, "the status says whether it has the hook", 0.5)
    assert job.status()["saveHook"] == {"task": "worker-0", "declared": False}
    with pytest.raises(SaveFailed, match="worker-0's training program declares no save hook") as e:
        ask_checkpoint(job)
    assert e.value.exit_code == 1


@pytest.mark.timeout(400)
def test_a_checkpoint_that_times_out_before_the_coordinator_answers_leaves_it_training(tmp_path, local_job):
    """Issue 44 item 2 / issue 47 item 4: the coordinator answers SIGUSR1 only at the end of the round of steps
    it scheduled (400 here, seconds), so ``checkpoint --timeout 1s`` fails first; it then saved, paused itself
    as the hook says, and nothing continued it: chief-0 stayed stopped (state T) and the job never ended. Now
    its bootstrap continues it: it trains on past the late checkpoint, and the job succeeds, with no failure."""
    from marathon_tf.contract.errors import SaveFailed
    from marathon_tf.user.api import Marathon

    job = local_job(pss_job(tmp_path, target=4000, log_every=400))
    job.wait(lambda: job.max_step() >= 1, 240, "the first step", 0.1)
    job.wait(lambda: job.max_step() >= 400, 120, f"step >= 400 (steps: {job.steps(task='chief-0')[-5:]})", 0.1)
    failed = None
    for _ in range(6):  # (a signal that comes just before the end of a round of steps is answered in time)
        before = len(rounds(job, "chief-0"))
        try:
            Marathon(client=job.client).job(job.name).checkpoint(timeout=1)
        except SaveFailed as e:
            failed = e
            break
        job.wait(lambda: len(rounds(job, "chief-0")) > before, 30, "the round's saved line", 0.1)
    assert failed is not None, "every checkpoint was answered within 1 s"
    job.wait(lambda: len(rounds(job, "chief-0")) > before, 60, "the coordinator's late saved line", 0.1)
    late = rounds(job, "chief-0")[-1]
    job.wait(lambda: any(s > late for _, _, s in job.steps(task="chief-0")), 60,
             f"chief-0 stepping past its late save at step {late}", 0.2)
    assert "it may still save a checkpoint at its next step boundary" in str(failed), failed  # said truthfully
    status = job.wait_state(300)
    assert status["state"] == L.SUCCEEDED and status["failures"] == 0, (status.get("reason"), job.text()[-4000:])


def delete_save_and_resume(job, tmp_path, *, saver: str, ready: str, after: int):
    """``delete --save`` past ``after`` (the answer names the checkpoint), every task gone, then ``deploy
    --resume``: the checkpoint restored is the last round's, no global step printed before it above it,
    failures 0, Succeeded."""
    from marathon_tf.user import pipeline
    from marathon_tf.user.api import Marathon

    job.wait(lambda: job.max_step() > after, 240, f"step > {after}", 0.05)
    began = time.monotonic()
    before = len(rounds(job, saver))
    body = Marathon(client=job.client).delete(job.name, save=True)
    assert body["saved"]["task"] == saver and body["saved"]["step"] >= after and body["saved"]["held"], body
    job.wait(lambda: not job.client.list_apps() and not job.client.deployments(), 120, "the job deleted", 0.2)
    said = rounds(job, saver)
    # one round: held at its checkpoint, the stopped tasks' own rounds found the job saved there
    assert said[before:] == [body["saved"]["step"]], (said[before:], body)
    resumed_at = time.monotonic()
    pipeline.deploy(job.client, job.spec, resume=True)  # (its volume is shared storage: it finds its checkpoints)
    job.wait(lambda: resumed(job, resumed_at, ready, saver), 240, "the saver restored the checkpoint", 0.1)
    said = rounds(job, saver)
    assert resumed(job, resumed_at, ready, saver)[0] == said[-1], (said, job.text()[-3000:])
    assert highest_step_before_restart(job, began) <= said[-1], (said, job.text()[-3000:])
    status = job.wait_state(400)
    ledger = sorted((tmp_path / "shared").glob("**/.marathon-tf/failures.jsonl"))
    assert status["state"] == L.SUCCEEDED and status["failures"] == 0, (
        status.get("reason"), status.get("failures"), status.get("restartBudget"),
        [p.read_text() for p in ledger], job.text()[-6000:])


# --- goodput against a run whose truth is known ---------------------------------------------------------


@pytest.mark.timeout(600)
def test_goodput_splits_a_runs_lost_time_by_cause_within_a_second_of_the_truth(tmp_path, local_job):
    """Issue 29: TF1, its ps frozen for 5 s (the whole job stalls: its variables are there), then the chief's
    program killed (restarted in place from the checkpoint 100 steps apart at most): the record's goodput
    says ~5 s stalled, the recovery as the test saw it (the kill to the chief's next step) and the steps
    trained again at the rate trained before, each within 1 s; the start as the test saw it too."""
    import json
    import os
    import signal
    import urllib.request

    from e2e_helpers import trainer_pid
    from jobfiles import example_job

    from marathon_tf.contract.goodput import CAUSES

    command = ["python3", "train.py", "--train_steps", "3000", "--checkpoint_dir", "ckpt", "--log_every", "10",
               "--save_checkpoint_steps", "100"]
    deployed = time.monotonic()
    job = local_job(str(example_job("linear-regression-tf1", tmp_path, command=command, bootstrap=BOOTSTRAP,
                                    progress={"target_step": 3000},
                                    restart={"max_failures": 5, "window_seconds": 600})))
    job.wait(lambda: job.steps(task="worker-0"), 240, "worker-0's first step", 0.05)
    first = job.steps(task="worker-0")[0][0]
    job.wait(lambda: job.max_step() > 800, 240, "step > 800", 0.05)
    ps = trainer_pid(job.cluster.state_dir, "ps-0")
    os.kill(ps, signal.SIGSTOP)
    time.sleep(5.0)
    os.kill(ps, signal.SIGCONT)
    job.wait(lambda: job.max_step() > 1600, 240, "step > 1600", 0.05)
    url = next(t["metricsUrl"] for t in job.status()["tasks"] if t["task"] == "worker-0")

    def scraped() -> str:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read().decode()
    job.wait(lambda: 'cause="stalled"' in scraped(), 30, "the deciding task's metrics", 0.5)
    text = scraped()  # while the job runs: the deciding task's /metrics
    assert "marathon_tf_goodput_ratio{" in text and "marathon_tf_lost_seconds_total{" in text, text[-2000:]
    before = [(t, s) for t, n, s in job.steps(task="worker-0") if t > time.monotonic() - 8]
    rate = (before[-1][1] - before[0][1]) / (before[-1][0] - before[0][0])
    killed = time.monotonic()
    os.kill(trainer_pid(job.cluster.state_dir, "worker-0"), signal.SIGKILL)
    last = max(s for t, n, s in job.steps(task="worker-0") if t < killed)
    job.wait(lambda: job.steps(since=killed + 0.3, task="worker-0"), 240, "worker-0 trains again", 0.05)
    recovered = job.steps(since=killed + 0.3, task="worker-0")[0][0] - killed
    back = resumed(job, killed, TF1_READY, "worker-0")
    assert back, job.text("worker-0")[-2000:]
    status = job.wait_state(300)
    assert status["state"] == L.SUCCEEDED, status
    good = status["goodput"]
    lost = good["lostSeconds"]
    assert set(lost) == set(CAUSES), good
    assert abs(lost["stalled"] - 5.0) <= 1.0, good
    assert abs(lost["recovery"] - recovered) <= 1.0, (good, recovered)
    assert abs(lost["retrained"] - max(0, last - back[0]) / rate) <= 1.0, (good, last, back, rate)
    assert abs(lost["placement"] + lost["start"] - (first - deployed)) <= 1.0, (good, first - deployed)
    assert abs(good["ratio"] * good["wallSeconds"] - (good["wallSeconds"] - sum(lost.values()))) < 0.01, good
    # the record keeps it (the label), as status read it back
    labels = {k: v for a in job.client.list_apps() for k, v in (a.get("labels") or {}).items()}
    assert json.loads(labels[L.GOODPUT])["lostSeconds"] == lost
