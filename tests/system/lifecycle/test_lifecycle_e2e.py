"""End to end on the local runner with real TensorFlow: completion, failures, restarts, scaling.

Each job is the TF1 between-graph example (1 ps + 2 workers, flags, checkpoints in a shared
volume), deployed through ``pipeline.deploy`` (what ``marathon-tf deploy`` runs) on an in-process
LocalCluster; the tasks' output is read from their sandboxes as it appears. Step counts are small:
every TF process costs ~0.6 GiB and 3-7 s to start on this machine."""

import json
import os
import re
import signal
import sys
import time

import pytest
from e2e_helpers import trainer_pid

from marathon_tf.contract import labels as L

pytestmark = [pytest.mark.tf]

# `marathon-tf bootstrap` cannot pass bootstrap options yet (cli/in_task.py puts "--" before them): use the module.
BOOTSTRAP = f"{sys.executable} -m marathon_tf.bootstrap --watch-interval 2 --grace 5"


def linear_job(tmp_path, steps: int, *, save_every: int = 100, log_every: int = 20, prefix: tuple | list = (),
               **changes) -> str:
    from jobfiles import example_job

    command = [*prefix, "python3", "train.py", "--train_steps", str(steps), "--checkpoint_dir", "ckpt",
               "--log_every", str(log_every), "--save_checkpoint_steps", str(save_every)]
    return example_job("linear-regression-tf1", tmp_path, command=command, bootstrap=BOOTSTRAP, **changes)


@pytest.mark.timeout(150)
def test_a_finished_job_is_stopped_and_recorded_succeeded(tmp_path, local_job):
    job = local_job(linear_job(tmp_path, 400))
    status = job.wait_state(120)
    assert status["state"] == L.SUCCEEDED, status
    assert status["finalStep"] >= 400 and status.get("finishedAt")
    assert status["reason"] == "all 2 workers finished"
    time.sleep(3)  # nothing is relaunched
    status = job.status()
    assert status["state"] == L.SUCCEEDED
    assert all(t["instances"] == 0 and t["state"] == "stopped" for t in status["tasks"]), status["tasks"]
    apps = job.client.list_apps()
    assert apps and all(a["instances"] == 0 and a.get("tasksRunning", 0) == 0 for a in apps)
    assert all(L.SPEC in a["labels"] for a in apps if a["id"].endswith("worker-0"))  # the record kept the spec


FAILING = ["python3", "-c", "import sys; sys.stderr.write('boom: bad data\\n'); sys.exit(3)"]
SLEEPING_PS = ["python3", "-c", "import time; time.sleep(600)"]


def failing_job(tmp_path) -> str:
    roles = {"ps": {"count": 1, "cpus": 0.1, "mem": 128, "command": SLEEPING_PS},
             "worker": {"count": 2, "cpus": 0.1, "mem": 128, "command": FAILING},
             "tensorboard": {"count": 0}}
    return linear_job(tmp_path, 10, roles=roles, restart={"max_failures": 2, "window_seconds": 600})


@pytest.mark.timeout(90)
def test_an_always_failing_worker_exhausts_the_budget_and_fails_the_job(tmp_path, local_job):
    job = local_job(failing_job(tmp_path))
    status = job.wait_state(60)
    assert status["state"] == L.FAILED, status
    reason = status["reason"]
    # both workers fail at about the same time: the one that records the 3rd (or a racing 4th) failure decides
    assert re.match(r"the job's programs failed [34] times in 600 s, more than restart\.max_failures \(2\); "
                    r"last: worker-[01] exited with 3: ", reason), reason
    assert reason.endswith("boom: bad data"), reason
    job.wait(lambda: all(t["state"] == "stopped" for t in job.status()["tasks"]), 30, "every task stopped", 0.5)
    lines = (tmp_path / "shared" / "ckpt" / ".marathon-tf" / "failures.jsonl").read_text().splitlines()
    failures = [rec for rec in map(json.loads, lines) if rec["kind"] == "failure" and rec["counted"]]
    # job-wide: both workers' failures counted together, in the keeper's ledger; the failure that ends the
    # job is answered ATTRIBUTION (2 s) late (a preemption it may be the consequence of gets its time),
    # so the other worker may fail once or twice more meanwhile
    assert 3 <= len(failures) <= 6 and {rec["task"] for rec in failures} == {"worker-0", "worker-1"}, lines


@pytest.mark.timeout(120)
def test_deploy_local_exits_1_and_prints_the_reason(tmp_path):
    from e2e_helpers import deploy_local
    from leaks import processes_under

    r = deploy_local(__import__("pathlib").Path(failing_job(tmp_path)), tmp_path, timeout=100)
    assert r.returncode == 1, r.stderr[-3000:]
    assert re.search(r"job linear-regression: Failed in [0-9.]+ s \(the job's programs failed [34] times in 600 s, "
                     r"more than restart\.max_failures \(2\); last: worker-[01] exited with 3: boom: bad data\)",
                     r.stderr), r.stderr[-3000:]
    assert processes_under(tmp_path / "state") == []


def checkpoints(tmp_path) -> list[int]:
    """Global steps of the checkpoints saved so far in the job's shared checkpoint volume."""
    found = []
    for p in (tmp_path / "shared" / "ckpt").glob("model.ckpt-*.index"):
        found.append(int(p.name[len("model.ckpt-"):-len(".index")]))
    return sorted(found)


TARGET = 5000
SAVE_EVERY = 250
#: The TF1 example's first line of a (re)started worker's session, with the step it starts from.
RESTARTED = "session ready at global step"


def kill_mid_training(tmp_path, local_job, app: str, *, after_step: int = 1200, max_failures: int = 10):
    """Run the TF1 job, SIGKILL ``app``'s task once the step passed ``after_step``; returns
    (job, kill time, last checkpoint at the kill)."""
    job = local_job(linear_job(tmp_path, TARGET, save_every=SAVE_EVERY, log_every=50,
                               restart={"max_failures": max_failures, "window_seconds": 600}))
    job.wait(lambda: job.max_step() > after_step and checkpoints(tmp_path), 90, f"step > {after_step}", 0.05)
    saved = checkpoints(tmp_path)[-1]
    killed_at = time.monotonic()
    assert job.cluster.kill_task(f"/{job.name}/{app}", "KILL")
    return job, killed_at, saved


@pytest.mark.timeout(150)
@pytest.mark.stock_revive_interval
def test_a_killed_worker_is_relaunched_at_marathons_stock_revive_interval_and_the_job_completes(tmp_path, local_job):
    """The one end-to-end test on a cluster that revives offers at Marathon's stock interval (5 s; the others
    revive at once, ``tests/offers.py``): the killed worker is offered again only when the rate limiter
    lets its revive through, and the job completes all the same."""
    job, killed_at, _ = kill_mid_training(tmp_path, local_job, "worker-1")
    status = job.wait_state(120)
    assert status["state"] == L.SUCCEEDED, status
    assert status["finalStep"] >= TARGET
    assert len(job.steps(since=killed_at, task="worker-1")) > 0 or "done final_step" in job.text("worker-1")
    relaunched = [line for t, n, s, line in job.lines
                  if t > killed_at and n == "worker-1" and "done final_step" in line]
    assert relaunched, "the relaunched worker-1 did not finish"


@pytest.mark.timeout(150)
@pytest.mark.own_prewarm
def test_a_killed_ps_restarts_the_job_from_its_checkpoint(tmp_path, local_job):
    """Also the end-to-end test whose tasks pre-warm each their own interpreter, as on a cluster (the others share
    the local runner's pre-warm server, as ``deploy --local`` does): every program restarts in a new one."""
    job, killed_at, saved = kill_mid_training(tmp_path, local_job, "ps-0")
    status = job.wait_state(120)
    assert status["state"] == L.SUCCEEDED, status
    assert status["finalStep"] >= TARGET
    after = job.steps(since=killed_at, started=RESTARTED)
    assert after, "no step after the kill"
    assert min(s for _, _, s in after) >= saved, (saved, after[:10])
    ready = [line for t, n, s, line in job.lines if t > killed_at and RESTARTED in line]
    assert ready and all(int(x.split("global step ")[1].split("/")[0]) >= saved for x in ready), ready


@pytest.mark.timeout(300)
def test_one_restart_under_max_failures_1_is_one_failure_in_the_counts_and_the_events(tmp_path, local_job):
    """Issue 32: a job that restarted once showed `restarts 3/1 in 10m` and failed with `failed 3 times …
    more than restart.max_failures (1)`. The ParameterServerStrategy example with its ps' program killed
    once: the job's group restarts (the ps' failure, counted), the chief's program failing because its ps
    went away is the round's consequence. One restart is one failure: the job succeeds, the counts say
    1/1, and every chief's and worker's FirstStep comes after its ServerUp, once per run at most."""
    from jobfiles import example_job

    from marathon_tf.contract import timeline as T
    from marathon_tf.user.history import job_events

    command = ["python3", "train.py", "--train_steps", "600", "--checkpoint_dir", "ckpt", "--log_every", "20",
               "--save_every", "50"]
    job = local_job(str(example_job("mnist-ps-strategy", tmp_path, command=command, bootstrap=BOOTSTRAP,
                                    progress={"target_step": 600}, restart={"max_failures": 1, "window_seconds": 600})))
    job.wait(lambda: job.max_step() >= 100, 180, "step >= 100", 0.05)
    os.kill(trainer_pid(job.cluster.state_dir, "ps-0"), signal.SIGKILL)
    status = job.wait_state(240)
    assert status["state"] == L.SUCCEEDED, (status.get("reason"), job.text()[-3000:])
    assert (status["failures"], status["restartBudget"]["maxFailures"]) == (1, 1), status
    events = job_events(job.client, job.name, status)["events"]
    assert not any(e["kind"] == T.PROGRAM_EXITED and "failure 2 of" in e.get("message", "") for e in events), events
    # the members stopped for the group's restart: a planned restart, never a failure
    assert any(e["kind"] == T.RESTARTING and e.get("why") == "group" for e in events), events
    assert not any(e["kind"] == T.TASK_FAILED for e in events), events
    for task in ("chief-0", "worker-0", "worker-1"):
        mine = [e for e in events if e.get("task") == task]
        runs, server_up, firsts = 0, False, 0
        for e in mine:
            if e["kind"] == T.PROGRAM_STARTED:
                runs, server_up = runs + 1, False
            elif e["kind"] == T.SERVER_UP:
                server_up = True
            elif e["kind"] == T.FIRST_STEP:
                firsts += 1
                assert server_up, (task, [(x["kind"], x.get("message")) for x in mine])
        assert firsts <= runs, (task, mine)


@pytest.mark.timeout(150)
def test_scaling_workers_mid_training_resumes_from_the_checkpoint(tmp_path, local_job):
    from marathon_tf.contract import timeline as T
    from marathon_tf.user import jobs
    from marathon_tf.user.history import job_events

    # (its target step is the one it trains to: `scale` refuses a job past its progress.target_step);
    # a failure budget of 0: the scale's kills and restarts are marathon-tf's own, never a failure (issue 21)
    job = local_job(linear_job(tmp_path, TARGET, save_every=SAVE_EVERY, log_every=50,
                               progress={"target_step": TARGET}, restart={"max_failures": 0, "window_seconds": 600}))
    job.wait(lambda: job.max_step() > 1200 and checkpoints(tmp_path), 90, "step > 1200", 0.05)
    saved = checkpoints(tmp_path)[-1]
    scaled_at = time.monotonic()
    jobs.scale(job.client, job.name, {"worker": ("=", 3)})
    status = job.wait_state(120)
    assert status["state"] == L.SUCCEEDED, status
    assert status["finalStep"] >= TARGET and status["reason"] == "all 3 workers finished"
    assert status["failures"] == 0, status
    assert sorted(t["task"] for t in status["tasks"] if t["role"] == "worker") == ["worker-0", "worker-1", "worker-2"]
    ready = [line for t, n, s, line in job.lines if t > scaled_at and RESTARTED in line]
    assert any(line.startswith("worker:2 ") for line in ready), ready
    assert all(int(x.split("global step ")[1].split("/")[0]) >= saved for x in ready), (saved, ready)
    # issue 43.4: every task the new configuration stopped says so itself (its bootstrap's event), a planned
    # restart ("Restarting for scale (2 → 3 workers)"), not a ProgramExited 137 of a task stopped by SIGTERM
    events = job_events(job.client, job.name, status)["events"]
    scaled = {e.get("task") for e in events if e["kind"] == T.RESTARTING and e.get("why") == "scale"
              and e.get("message", "").startswith("training program stopped for scale (2 → 3 workers)")}
    assert {"ps-0", "worker-0", "worker-1"} <= scaled, [(e.get("task"), e["kind"], e.get("message")) for e in events]
    assert not any(e["kind"] == T.TASK_FAILED for e in events), events


#: The examples' own SIGTERM handling is what they do run without marathon-tf's save rounds: where its bootstrap
#: runs rounds (MTF_SAVE_ROUNDS=1) their chief leaves SIGTERM to it (contract/savehook; test_save_e2e.py
#: stops whole tasks). The tests of that handling run the program without the variable.
WITHOUT_ROUNDS = ["env", "-u", "MTF_SAVE_ROUNDS"]


def preempt(job, task: str) -> float:
    """SIGTERM to ``task``'s training program alone; when."""
    pid = trainer_pid(job.cluster.state_dir, task)
    stopped_at = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    return stopped_at


def preempted_example(tmp_path, local_job, example: str, command: list[str], task: str, target: int):
    """``example`` with a failure budget of 0, ``task``'s program preempted at step 60: (job, its end
    status, when). It must end Succeeded with no failure counted."""
    from jobfiles import example_job

    job = local_job(str(example_job(example, tmp_path, command=command, bootstrap=BOOTSTRAP,
                                    progress={"target_step": target},
                                    restart={"max_failures": 0, "window_seconds": 600})))
    job.wait(lambda: job.max_step() >= 60, 150, "step >= 60", 0.05)
    stopped_at = preempt(job, task)
    status = job.wait_state(180)
    assert status["state"] == L.SUCCEEDED, (status, job.text()[-4000:])
    assert status["failures"] == 0 and status["preemptions"] >= 1, status
    return job, status, stopped_at


@pytest.mark.timeout(150)
def test_a_preempted_chief_saves_a_checkpoint_and_resumes_from_it_without_spending_the_budget(tmp_path, local_job):
    """Issue 21: SIGTERM to the chief's program mid-run (the example's own handling, without save rounds:
    WITHOUT_ROUNDS) -> the example ends the step it is in, its CheckpointSaverHook saves at that step, it
    exits 42 -> restarted in place at once, resumes from that very step; the job succeeds with no failure
    counted (the budget is 0 here: before, the SIGTERM's 143 was a failure and the job Failed)."""
    job = local_job(linear_job(tmp_path, TARGET, save_every=100_000, log_every=50, prefix=WITHOUT_ROUNDS,
                               restart={"max_failures": 0, "window_seconds": 600}))
    job.wait(lambda: job.max_step() > 1200, 90, "step > 1200", 0.05)
    stopped_at = preempt(job, "worker-0")
    status = job.wait_state(120)
    assert status["state"] == L.SUCCEEDED, status
    assert status["failures"] == 0 and status["preemptions"] == 1, status
    said = re.search(r"preempted at step (\d+) \(signal 15\); checkpoint saved; exiting 42", job.text("worker-0"))
    assert said, job.text("worker-0")[-3000:]
    saved = int(said.group(1))
    # saved within the grace (the global step may have moved on by the hook's save: worker-1 trains on)
    assert any(saved <= c < TARGET for c in checkpoints(tmp_path)), (saved, checkpoints(tmp_path))
    ready = [line for t, n, s, line in job.lines if t > stopped_at and n == "worker-0"
             and RESTARTED in line]
    assert ready and int(ready[0].split("global step ")[1].split("/")[0]) >= saved, (saved, ready)


@pytest.mark.timeout(180)
def test_a_preempted_chief_task_is_relaunched_and_resumes_from_the_step_it_saved(tmp_path, local_job):
    """Issue 21, the whole task stopped from outside (SIGTERM to worker-0's process group, as a Mesos
    agent's drain or an operator's kill does through the kill grace period): its bootstrap has it save
    first (issue 29's save round: worker-1 held, the program's save hook) and stops it; Marathon relaunches
    the task (a new port: the group restarts with the new spec) and training resumes from that step. One
    preemption, no failure (the budget is 0).

    It failed in about 1 of 4 full runs (issue 29): the relaunched chief's program could start before the
    ps restarted for the chief's new address, restore the checkpoint onto that ps and lose it with it (its
    session recovered, or the program failed: counted, the job Failed). A relaunched chief now waits for
    the ps to take its new address (its bootstrap says so when it has to)."""
    job = local_job(linear_job(tmp_path, TARGET, save_every=100_000, log_every=50,
                               restart={"max_failures": 0, "window_seconds": 600}))
    job.wait(lambda: job.max_step() > 1200, 90, "step > 1200", 0.05)
    stopped_at = time.monotonic()
    assert job.cluster.kill_task(f"/{job.name}/worker-0", "TERM")
    status = job.wait_state(150)
    assert status["state"] == L.SUCCEEDED, (status.get("reason"), status.get("failures"), status.get("preemptions"),
                                           job.text("worker-0")[-3000:], job.text()[-3000:])
    assert status["failures"] == 0 and status["preemptions"] == 1, status
    said = re.search(r"marathon-tf save-hook: saved step=(\d+) path=", job.text("worker-0"))
    assert said, job.text("worker-0")[-3000:]
    saved = int(said.group(1))
    assert saved in checkpoints(tmp_path), (saved, checkpoints(tmp_path))
    restored = [int(m.group(1)) for t, n, s, x in job.lines if t > stopped_at and n == "worker-0"
                for m in [re.search(r"resumed from checkpoint at step (\d+)", x)] if m]
    assert restored[:1] == [saved], (saved, restored)
    ready = [line for t, n, s, line in job.lines if t > stopped_at and RESTARTED in line]
    assert ready and all(int(x.split("global step ")[1].split("/")[0]) >= saved for x in ready), (saved, ready)


@pytest.mark.timeout(240)
def test_a_preempted_keras_worker_has_every_worker_back_up_and_resume_without_spending_the_budget(tmp_path,
                                                                                                  local_job):
    """Issue 21, the Keras MultiWorkerMirrored example: SIGTERM to worker-1's program ->
    PreemptionCheckpointHandler has both workers save the backup at the same step and exit 42 -> the
    job's group restarts in place and resumes from that backup; no failure counted (budget 0)."""
    command = ["python3", "train.py", "--epochs", "10", "--steps_per_epoch", "40", "--checkpoint_dir", "ckpt",
               "--log_every", "10"]
    job, status, stopped_at = preempted_example(tmp_path, local_job, "keras-multiworker", command, "worker-1", 400)
    said = [re.search(r"preempted at step (\d+); backup saved; exiting 42", job.text(t)) for t in ("worker-0",
                                                                                                    "worker-1")]
    assert all(said), job.text()[-4000:]
    saved = {int(m.group(1)) for m in said}
    assert len(saved) == 1, saved  # every worker at the same step
    # The steps each worker printed after its own "preempted" line (a "step=" line printed just before the
    # SIGTERM can reach the test's reader after ``stopped_at`` on a loaded machine: seen, step 60 < 63).
    resumed = []
    for name in ("worker-0", "worker-1"):
        lines = [text for t, n, stream, text in job.lines if n == name and stream == "stdout"]
        after = next(i for i, text in enumerate(lines) if "backup saved; exiting 42" in text)
        resumed += [int(m.group(1)) for m in map(re.compile(r"\bstep=(\d+) loss=").search, lines[after + 1:]) if m]
    assert resumed and min(resumed) >= min(saved), (saved, resumed[:5])


@pytest.mark.timeout(240)
def test_a_preempted_parameter_server_coordinator_saves_and_resumes_without_spending_the_budget(tmp_path, local_job):
    """Issue 21, the ParameterServerStrategy example: SIGTERM to the chief's (coordinator's) program (its own
    handling, without save rounds: WITHOUT_ROUNDS) -> it saves at the step it reached and exits 42 ->
    restarted in place, it restores that step; no failure counted (budget 0)."""
    command = [*WITHOUT_ROUNDS, "python3", "train.py", "--train_steps", "400", "--checkpoint_dir", "ckpt",
               "--log_every", "20", "--save_every", "100000"]
    job, status, stopped_at = preempted_example(tmp_path, local_job, "mnist-ps-strategy", command, "chief-0", 400)
    assert status["preemptions"] == 1, status
    said = re.search(r"preempted at step (\d+) \(signal 15\); checkpoint saved; exiting 42", job.text("chief-0"))
    assert said, job.text("chief-0")[-4000:]
    # the steps of the restarted program: after the preempted one's last words (it finishes the round of
    # steps it scheduled after the SIGTERM, printing them, before it saves)
    lines = [x for t, n, s, x in job.lines if n == "chief-0" and s == "stdout"]  # one stream: in order
    after = lines[next(i for i, x in enumerate(lines) if said.group(0) in x) + 1:]
    resumed = [int(m.group(1)) for m in map(re.compile(r"\bstep=(\d+) ").search, after) if m]
    assert resumed and min(resumed) >= int(said.group(1)), (said.group(0), resumed[:5])


def scaled_example(tmp_path, local_job, example: str, command: list[str], target: int, scale_at: int,
                   timeout: float, checkpointed: bool = False):
    """``example`` with a failure budget of 0, scaled to 3 workers once it reached ``scale_at`` (and, with
    ``checkpointed``, wrote a checkpoint into its shared ``ckpt``: a step printed is not a step saved): (job,
    its end status). It must end Succeeded with 3 workers and no failure counted (the scale's kills and
    restarts are marathon-tf's own)."""
    from jobfiles import example_job

    job = local_job(str(example_job(example, tmp_path, command=command, bootstrap=BOOTSTRAP,
                                    progress={"target_step": target},
                                    restart={"max_failures": 0, "window_seconds": 600})))
    job.wait(lambda: job.max_step() >= scale_at, 150, f"step >= {scale_at}", 0.05)
    if checkpointed:
        job.wait(lambda: list((tmp_path / "shared" / "ckpt").glob("*.index")), 60, "a checkpoint", 0.05)
    job.jobs.scale(job.client, job.name, {"worker": ("=", 3)})
    status = job.wait_state(timeout)
    assert status["state"] == L.SUCCEEDED, (status, job.text()[-4000:])
    assert status["failures"] == 0, status
    assert sorted(t["task"] for t in status["tasks"] if t["role"] == "worker") == ["worker-0", "worker-1", "worker-2"]
    return job, status


@pytest.mark.timeout(240)
def test_scaling_a_parameter_server_job_counts_no_failure(tmp_path, local_job):
    """Issue 21, the ParameterServerStrategy example: ``scale worker=3`` mid-run restarts every task with
    the new spec (the chief from its checkpoint); the kills and restarts are marathon-tf's own and a
    worker restarted under the coordinator is its consequence: nothing is counted (the budget is 0),
    the job trains on with 3 workers and succeeds."""
    # 2,000 steps: at ~100 steps/s a job of 600 could reach its end before a loaded machine's `scale` reached
    # the chief (the stock kill and relaunch cycle), and end Succeeded with 2 workers (seen once in CI)
    command = ["python3", "train.py", "--train_steps", "2000", "--checkpoint_dir", "ckpt", "--log_every", "20",
               "--save_every", "100"]
    # (scaled once a checkpoint is there: the chief scaled at step 100 before its first save starts afresh, and
    # a save under way when the ps goes fails, both seen in a fresh-clone CI)
    job, _ = scaled_example(tmp_path, local_job, "mnist-ps-strategy", command, 2000, 100, 200, checkpointed=True)
    assert re.search(r"chief: restored \S+, global step \d+/2000, 3 workers", job.text("chief-0")), \
        job.text("chief-0")[-3000:]
    # The coordinator exits as soon as it has said it is done: TensorFlow's teardown of a coordinator scaled to
    # 3 workers kept its program alive 0.8 to 60 s past that line (CI runs; the example now skips it) while every
    # other task waited, training nothing. (When the tailer read the two lines: it reads every 0.1 s.)
    exited = job.wait(lambda: job.seen("chief-0", "training program exited with 0"), 30, "the chief's exit line")
    done = job.seen("chief-0", "done final_step=")
    assert done is not None and exited - done < 10, f"the coordinator exited {exited - (done or 0):.1f} s after " \
        "saying it was done"


@pytest.mark.timeout(300)
def test_scaling_a_keras_multi_worker_job_starts_the_new_worker_with_the_new_spec_only(tmp_path, local_job):
    """Issue 21: ``scale workers=3`` on the Keras MultiWorkerMirrored example started worker-2's program
    while workers 0 and 1 still ran with the 2-worker spec (TF: "Unexpected task registered with
    task_name=/job:worker/replica:0/task:2", TASK_FAILED, counted). A follower now takes nothing from a
    leader of another spec (tests/task/test_rendezvous.py: the local runner does not reproduce that race
    reliably, this test passed without it too): worker-2's program starts once, nothing fails."""
    command = ["python3", "train.py", "--epochs", "10", "--steps_per_epoch", "40", "--checkpoint_dir", "ckpt",
               "--log_every", "10", "--backup_every", "20"]
    job, status = scaled_example(tmp_path, local_job, "keras-multiworker", command, 400, 60, 240)
    assert sorted(t["task"] for t in status["tasks"]) == ["worker-0", "worker-1", "worker-2"]
    new = job.text("worker-2")
    assert "Unexpected task registered" not in new and not re.search(r"training program exited with [1-9]", new), \
        new[-3000:]
    assert new.count("started training program") == 1, new[-3000:]
