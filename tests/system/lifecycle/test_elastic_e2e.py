"""Elastic jobs end to end with real TensorFlow on a local cluster sized so that only two workers fit
(issue 30, docs/elastic.md): the job starts with its minimum, a third worker is taken in when another
job's removal makes room (after a save: no global step trained again), a worker whose agent is killed is
let go while the job trains on (no failure counted), the agent back makes the job grow again, and the job
ends Succeeded. The same for the Keras MultiWorkerMirrored example; for TF1 a worker joins and leaves a
running job without stopping the others.

The cluster: agent 1 (127.0.0.1) holds the chief and the ps (constraints), agents 2-4 one worker each
(cpus 1); a blocker job holds agent 4 at first. What each test asserts is a cause (the membership the
deciding task publishes, the step the restarted coordinator restored, the job's counts); it prints the
times the issue names as limits, which benchmarks/bench_elastic.py measures on a quiet machine.
"""

from __future__ import annotations

import re
import sys
import time

import pytest

from marathon_tf.contract import labels as L

pytestmark = [pytest.mark.tf]

STEP = re.compile(r"\bstep=(\d+) loss=")
FIRST = re.compile(r"first_step_time=([0-9.]+)")
RESTORED = re.compile(r"restored \S+, global step (\d+)/")
ON_FIRST = [["hostname", "LIKE", "127.0.0.1"]]
ELSEWHERE = [["hostname", "UNLIKE", "127.0.0.1"]]
#: Bounds (seconds) within which a change must show while the suite runs beside it: the issue's 10 s limits
#: (a standby placed -> training at the new size; a worker lost -> at the smaller) are speed goals, measured on
#: a quiet machine by ``python -m benchmarks --only elastic`` (benchmarks/bench_elastic.py); here the figures are
#: printed, and a change that takes several times the goal is a fault (two real-TF elastic jobs side by side
#: on 2 cores took 11-12.5 s to grow, 2-4 s alone).
GROW_BOUND, SHRINK_BOUND = 60.0, 60.0


def blocker(tmp_path) -> str:
    """A job that holds agent 4's cpu (a worker that sleeps)."""
    import json

    path = tmp_path / "blocker.json"
    path.write_text(json.dumps({"name": "blocker", "style": "custom", "command": ["sleep", "100000"],
                                "roles": {"worker": {"count": 1, "cpus": 1, "mem": 256,
                                                     "constraints": [["hostname", "LIKE", "127.0.0.4"]]}}}))
    return str(path)


def elastic_job(tmp_path, example: str, command: list[str], target: int, **changes) -> str:
    from jobfiles import example_job

    roles = {"chief": {"count": 1, "cpus": 1, "mem": 1536, "constraints": ON_FIRST},
             "ps": {"count": 1, "cpus": 0.5, "mem": 1024, "constraints": ON_FIRST},
             "worker": {"count": {"min": 2, "max": 3}, "cpus": 1, "mem": 1536, "constraints": ELSEWHERE}}
    if example == "keras-multiworker":
        roles = {"worker": roles["worker"]}
    elif example == "linear-regression-tf1":  # (worker-0 is TF1's chief, on the worker agents)
        roles = {"ps": roles["ps"], "worker": roles["worker"]}
    # the default bootstrap (marathon-tf bootstrap): the local runner's shared pre-warmed interpreters, as on
    # local serve (a standby placed starts from an interpreter that imported TensorFlow already)
    return str(example_job(example, tmp_path, command=command, roles=roles,
                           progress={"target_step": target}, restart={"max_failures": 0, "window_seconds": 600},
                           **changes))


def task_status(job, task: str) -> dict:
    """``task``'s own ``/status`` (its newest running task), or {} when it does not answer."""
    from marathon_tf.marathon import transport
    from marathon_tf.marathon.tasks import newest_running, task_url

    app = job.client.get_app(f"/{job.name}/{task}")
    running = newest_running(app)
    url = task_url(app, running, "status", "/status") if running is not None else None
    return (transport.get_json(url, timeout=2.0) or {}) if url else {}


def decider_view(job, decider: str) -> dict:
    """The deciding task's ``elastic`` (its /status), or {}."""
    return task_status(job, decider).get("elastic") or {}


def worker_task(job, name: str) -> dict | None:
    tasks = job.client.request("GET", f"/v2/apps/{job.name}/{name}/tasks").body["tasks"]
    running = [t for t in tasks if t.get("state") == "TASK_RUNNING"]
    return running[0] if running else None


def wall(stamp: str) -> float:
    from marathon_tf.marathon.tasks import wall as parse

    value = parse(stamp)
    assert value is not None, stamp
    return value


def size_is(job, decider: str, n: int):
    view = decider_view(job, decider)
    return view if view.get("size") == n and not view.get("placedStandbys") else None


def lines_of(job, task: str, pattern: re.Pattern, since: float = 0.0) -> list[tuple[float, re.Match]]:
    with job._lock:
        lines = list(job.lines)
    return [(t, m) for t, n, _, x in lines if n == task and t >= since and (m := pattern.search(x))]


@pytest.mark.timeout(900)
def test_an_elastic_parameter_server_job_starts_at_its_minimum_grows_shrinks_and_succeeds(tmp_path, sized_cluster,
                                                                                         job_on):
    from marathon_tf.user import jobs

    block = job_on(sized_cluster, blocker(tmp_path))
    block.wait(lambda: worker_task(block, "worker-0"), 60, "the blocker running")
    # the sequence below ends near step 900 (a CI run: 17 s after the first step; 682 on a quiet machine): 3000
    # leaves it over 3 times that (8000 cost the test 135 s of CPU, 3000 55 s: one run each, one machine)
    target = 3000
    job = job_on(sized_cluster, elastic_job(
        tmp_path, "mnist-ps-strategy", ["python3", "train.py", "--train_steps", str(target), "--checkpoint_dir",
                                        "ckpt", "--log_every", "20", "--save_every", "100000"], target))
    # 1. starts with the two that fit and trains; the third waits as a standby, saying why
    view = job.wait(lambda: size_is(job, "chief-0", 2), 180, "the job formed with 2 workers")
    assert len(view["standbys"]) == 1 and view["members"], view
    job.wait(lambda: job.max_step() > 200, 120, "training with 2 workers")
    status = job.status()
    assert status["state"] == L.JobState.RUNNING.value, status["state"]
    assert status["elastic"]["size"] == 2 and len(status["elastic"]["standbys"]) == 1, status["elastic"]
    assert "standby" in status["elastic"].get("waiting", ""), status["elastic"]
    standby = status["elastic"]["standbys"][0]
    # 2. the blocker deleted: the standby is placed and taken in (after a save: nothing trained twice)
    before = job.max_step()
    grew_at = time.monotonic()
    jobs.delete(block.client, "blocker")
    view = job.wait(lambda: size_is(job, "chief-0", 3), 60, "the job grew to 3 workers")
    placed = wall(worker_task(job, standby)["stagedAt"])
    restored = job.wait(lambda: lines_of(job, "chief-0", RESTORED, grew_at), 60, "the coordinator restored")
    first = job.wait(lambda: lines_of(job, "chief-0", FIRST, grew_at), 60, "the first step at 3 workers")
    step_back = int(restored[-1][1].group(1))
    printed = max(int(m.group(1)) for t, m in lines_of(job, "chief-0", STEP) if t < restored[-1][0])
    assert step_back >= printed >= before, (step_back, printed, before)  # 0 global steps trained again
    grow_seconds = float(first[-1][1].group(1)) - placed
    print(f"grow: standby placed -> first step at 3 workers {grow_seconds:.1f} s", file=sys.stderr)
    assert grow_seconds <= GROW_BOUND, grow_seconds
    # 3. the agent of one worker killed: the job trains on with 2 (no restart, no failure counted)
    victim = worker_task(job, standby)
    killed = time.monotonic()
    assert sized_cluster.kill_agent(victim["host"]) == [victim["id"]]
    job.wait(lambda: size_is(job, "chief-0", 2), SHRINK_BOUND, "the job shrank to 2 workers")
    job.wait(lambda: lines_of(job, "chief-0", STEP, killed + 1.0), SHRINK_BOUND, "training on at 2 workers")
    assert not lines_of(job, "chief-0", RESTORED, killed), "the coordinator restarted for a shrink"
    # 4. the agent back: the job grows again
    sized_cluster.reconnect_agent(victim["host"])
    job.wait(lambda: size_is(job, "chief-0", 3), 90, "the job grew again to 3 workers")
    assert job.max_step() < target, "the job ended before the sequence did: raise the target"
    # 5. it ends Succeeded, no failure counted, its size changes in its events and record
    final = job.wait_state(600)
    assert final["state"] == L.SUCCEEDED, final.get("reason")
    budget = final.get("restartBudget") or {}
    assert budget.get("failures", 0) == 0, budget
    assert "grew 2" in (final.get("elastic") or {}).get("final", ""), final.get("elastic")
    from marathon_tf.user.history import job_events

    kinds = [e["kind"] for e in job_events(job.client, job.name, final)["events"]]
    assert kinds.count("grew") == 2 and kinds.count("shrank") == 1, kinds


KERAS_TRAINING = re.compile(r"training from global step (\d+)")


@pytest.mark.timeout(900)
def test_an_elastic_keras_multiworker_job_starts_at_its_minimum_grows_shrinks_and_succeeds(tmp_path, sized_cluster,
                                                                                          job_on):
    from marathon_tf.user import jobs

    block = job_on(sized_cluster, blocker(tmp_path))
    block.wait(lambda: worker_task(block, "worker-0"), 60, "the blocker running")
    # the sequence below ends near step 250 (a CI run: 26 s after the first step); 1000 leaves it 4 times that
    epochs, per_epoch = 25, 40
    job = job_on(sized_cluster, elastic_job(
        tmp_path, "keras-multiworker", ["python3", "train.py", "--epochs", str(epochs), "--steps_per_epoch",
                                        str(per_epoch), "--checkpoint_dir", "ckpt", "--log_every", "10",
                                        "--backup_every", "20", "--global_batch_size", "96"], epochs * per_epoch))
    # 1. starts with the two that fit (worker-0, the deciding task, among them) and trains
    view = job.wait(lambda: size_is(job, "worker-0", 2), 180, "the job formed with 2 workers")
    assert "worker-0" in view["members"] and len(view["standbys"]) == 1, view
    job.wait(lambda: job.max_step() >= 40, 180, "training with 2 workers")
    status = job.status()
    assert status["state"] == L.JobState.RUNNING.value and status["elastic"]["size"] == 2, status.get("elastic")
    standby = status["elastic"]["standbys"][0]
    # 2. the blocker deleted: the standby is taken in after a save; every worker restarts at 3 from it
    grew_at = time.monotonic()
    jobs.delete(block.client, "blocker")
    job.wait(lambda: size_is(job, "worker-0", 3), 90, "the job grew to 3 workers")
    placed = wall(worker_task(job, standby)["stagedAt"])
    resumed = job.wait(lambda: lines_of(job, "worker-0", KERAS_TRAINING, grew_at), 90, "worker-0 resumed")
    first = job.wait(lambda: lines_of(job, standby, FIRST, grew_at), 90, "the newcomer's first step")
    step_back = int(resumed[-1][1].group(1))
    printed = max(int(m.group(1)) for t, m in lines_of(job, "worker-0", STEP) if t < resumed[-1][0])
    assert step_back >= printed, (step_back, printed)  # 0 global steps trained again
    grow_seconds = float(first[-1][1].group(1)) - placed
    print(f"keras grow: standby placed -> its first step at 3 workers {grow_seconds:.1f} s", file=sys.stderr)
    assert grow_seconds <= GROW_BOUND, grow_seconds
    job.wait(lambda: lines_of(job, "worker-0", STEP, resumed[-1][0]), 60, "training at 3 workers")
    # 3. the agent of the newcomer killed: the others restart from the last backup at 2, nothing counted
    victim = worker_task(job, standby)
    killed = time.monotonic()
    assert sized_cluster.kill_agent(victim["host"]) == [victim["id"]]
    job.wait(lambda: size_is(job, "worker-0", 2), SHRINK_BOUND, "the job shrank to 2 workers")
    def stepped_at_2():  # a step of the program started again at 2 (not a late line of the one at 3)
        restarted = lines_of(job, "worker-0", KERAS_TRAINING, killed)
        return restarted and lines_of(job, "worker-0", STEP, restarted[0][0])
    again = job.wait(stepped_at_2, 60, "training on at 2 workers")
    shrink_seconds = again[0][0] - killed
    print(f"keras shrink: agent killed -> training at 2 workers {shrink_seconds:.1f} s", file=sys.stderr)
    assert again and shrink_seconds <= SHRINK_BOUND, shrink_seconds
    # 4. the agent back: the job grows again
    sized_cluster.reconnect_agent(victim["host"])
    job.wait(lambda: size_is(job, "worker-0", 3), 120, "the job grew again to 3 workers")
    assert job.max_step() < epochs * per_epoch, "the job ended before the sequence did: raise the epochs"
    # 5. it ends Succeeded with no failure counted
    final = job.wait_state(900)
    assert final["state"] == L.SUCCEEDED, final.get("reason")
    assert (final.get("restartBudget") or {}).get("failures", 0) == 0, final.get("restartBudget")
    assert "grew 2" in (final.get("elastic") or {}).get("final", ""), final.get("elastic")


STARTED = re.compile(r"marathon-tf bootstrap: started training program \(pid (\d+)\)")


def started_once(job, starts: dict[str, int]) -> None:
    """Each worker's program started as often as ``starts`` says; else what its bootstrap said, to tell why."""
    seen = {w: len(lines_of(job, w, STARTED)) for w in starts}
    if seen != starts:
        said = "\n".join(f"{t:.1f} [{n}] {x}" for t, n, _, x in list(job.lines)
                         if n in starts and seen[n] != starts[n] and "marathon-tf bootstrap:" in x)
        raise AssertionError(f"a worker's program started again: {seen}\n{said[-6000:]}")


@pytest.mark.timeout(600)
def test_a_tf1_worker_joins_and_leaves_a_running_elastic_job_without_stopping_the_others(tmp_path, sized_cluster,
                                                                                        job_on):
    """TF1 asynchronous between-graph training (``--elastic``: ClusterSpec propagation, docs/elastic.md): the
    standby placed when the blocker goes trains beside the two workers without their programs starting
    again; its agent killed, it is let go and the two train on, again without a restart; Succeeded, no
    failure counted."""
    from marathon_tf.user import jobs

    block = job_on(sized_cluster, blocker(tmp_path))
    block.wait(lambda: worker_task(block, "worker-0"), 60, "the blocker running")
    target = 8000  # (~200 steps a second on a loaded 2-core machine: the sequence ends near step 2,500)
    job = job_on(sized_cluster, elastic_job(
        tmp_path, "linear-regression-tf1", ["python3", "train.py", "--train_steps", str(target), "--checkpoint_dir",
                                            "ckpt", "--log_every", "50", "--elastic"], target))
    view = job.wait(lambda: size_is(job, "worker-0", 2), 180, "the job formed with 2 workers")
    assert len(view["standbys"]) == 1, view
    job.wait(lambda: job.max_step() > 500, 120, "training with 2 workers")
    standby = view["standbys"][0]
    starts = {"worker-0": 1, "worker-1": 1}  # (the job's own lines: its tailer reads no other job's sandboxes)
    started_once(job, starts)
    # 1. joins: the blocker deleted, the standby is placed and trains; the two others are not stopped
    grew_at, grew_wall = time.monotonic(), time.time()
    jobs.delete(block.client, "blocker")
    job.wait(lambda: size_is(job, "worker-0", 3), 60, "the job grew to 3 workers")
    placed = wall(worker_task(job, standby)["stagedAt"]) - grew_wall
    first = job.wait(lambda: lines_of(job, standby, STEP, grew_at), 60, "the newcomer's first step")
    join_seconds = first[0][0] - grew_at
    print(f"tf1 join: blocker deleted -> the newcomer placed {placed:.1f} s, its first step {join_seconds:.1f} s",
          file=sys.stderr)
    assert join_seconds - placed <= GROW_BOUND, (join_seconds, placed)
    job.wait(lambda: all(lines_of(job, w, STEP, first[0][0]) for w in ("worker-0", "worker-1")), 30,
             "the two others training beside it")
    started_once(job, starts)
    # 2. leaves: its agent killed, the two train on without a restart, nothing counted
    victim = worker_task(job, standby)
    killed = time.monotonic()
    assert sized_cluster.kill_agent(victim["host"]) == [victim["id"]]
    job.wait(lambda: size_is(job, "worker-0", 2), SHRINK_BOUND, "the job shrank to 2 workers")
    job.wait(lambda: all(lines_of(job, w, STEP, killed + 1.0) for w in ("worker-0", "worker-1")), SHRINK_BOUND,
             "the two training on")
    started_once(job, starts)
    assert job.max_step() < target, "the job ended before the sequence did: raise the target"
    final = job.wait_state(420)
    assert final["state"] == L.SUCCEEDED, final.get("reason")
    assert (final.get("restartBudget") or {}).get("failures", 0) == 0, final.get("restartBudget")
