"""Issue 46.1: a full disk during a job is weathered, not fatal. A program that fails because the logdir's
filesystem is full is infrastructure (not counted against the restart budget), its bootstrap waits for room
(``status`` says so; bounded: the job fails with one line if none comes) and the program starts again from
its last checkpoint; a save round asked meanwhile is answered 409 with the reason. Before the first start a
full logdir is still a refusal. On a real small filesystem (a tmpfs mounted for the test; skipped where
mounting is not permitted)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest
from task_helpers import FakeBackend, task_env, wait_for

from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.task.bootstrap import Bootstrap
from marathon_tf.task.budget import RestartBudget
from marathon_tf.task.jobpolicy import JobPolicy
from marathon_tf.task.logdir import NO_SPACE, logdir_problem, space_problem
from marathon_tf.task.machine import TaskMachine
from marathon_tf.task.saving import SAVE_PATH, Saving
from marathon_tf.task.status_server import StatusServer, TaskStatus
from marathon_tf.task.supervisor import Trainer
from marathon_tf.task.timeline import TaskEvents

#: A program that trains to argv[2] steps, writing a checkpoint (20 kB of data, then its index) every 5 steps
#: into the logdir (argv[1]), and resumes from the index it finds there; a write that fails kills it (exit 1).
TRAINER = r"""
import os, re, sys, time
logdir, target, step = sys.argv[1], int(sys.argv[2]), 0
index = os.path.join(logdir, "checkpoint")
if os.path.exists(index):
    step = int(re.search(r"model\.ckpt-(\d+)", open(index).read()).group(1))
    print(f"resumed from step {step}", flush=True)
while step < target:
    step += 1
    print(f"step={step} loss=1.0", flush=True)
    if step % 5 == 0:
        data = os.path.join(logdir, f"model.ckpt-{step}.data-00000-of-00001")
        try:
            with open(data + ".tmp", "wb") as f:
                f.write(b"x" * 20000)
        except OSError:
            os.unlink(data + ".tmp")  # (as TensorFlow removes its temporary files)
            raise
        os.replace(data + ".tmp", data)
        with open(index + ".tmp", "w") as f:
            f.write(f'model_checkpoint_path: "model.ckpt-{step}"\n')
        os.replace(index + ".tmp", index)
    time.sleep(0.05)
"""


@pytest.fixture
def small_fs(tmp_path):
    """A 1 MiB tmpfs: a filesystem the test can fill and free."""
    mount = tmp_path / "fs"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}): the full-disk tests "
                    f"need a small real filesystem")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(fs) -> None:
    """Fill the filesystem to its last byte (what a runaway log does)."""
    fd = os.open(fs / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (65536, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    assert os.statvfs(fs).f_bavail == 0


class Run:
    """The deciding task of a one-worker job (its policy with a budget of no failure at all: a counted
    failure fails the job), running in a thread."""

    def __init__(self, tmp_path, logdir, target: int, space_wait: float):
        tmp_path.mkdir(exist_ok=True)
        env = task_env("worker", 0, {"worker": 1}, sandbox=str(tmp_path), logdir=str(logdir), style="tf1")
        env["MTF_RENDEZVOUS"] = "direct"
        ctx = TaskContext.from_env(env)
        policy = JobPolicy(ctx, RestartBudget(0, 600.0, task=ctx.task), env)
        self.out, self.err = io.BytesIO(), io.BytesIO()
        self.boot = Bootstrap(ctx, env, [sys.executable, "-c", TRAINER, str(logdir), str(target)],
                              backend=FakeBackend({}), policy=policy, stdout=self.out, stderr=self.err, tick=0.05)
        self.boot.restarts.space_wait, self.boot.restarts.space_poll = space_wait, 0.1
        self.thread = threading.Thread(target=self.boot.run, daemon=True)
        self.thread.start()

    def status(self) -> dict:
        return self.boot.status.snapshot()

    def printed(self) -> str:
        return self.out.getvalue().decode()

    def save(self) -> tuple[int, dict]:
        """``POST /save`` as ``marathon-tf checkpoint`` asks it."""
        body = json.dumps({"job": self.boot.ctx.job, "reason": "checkpoint", "timeout": 10}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.boot.server.port}/save", body,
                                         {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=15) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def stop(self) -> None:
        self.boot.request_stop()
        self.thread.join(15)
        assert not self.thread.is_alive()


@pytest.fixture
def runs():
    started: list[Run] = []

    def start(*args, **kw) -> Run:
        started.append(Run(*args, **kw))
        return started[-1]

    yield start
    for run in started:
        run.stop()


def _failed_or_waiting(run: Run) -> bool:
    st = run.status()
    return st["phase"] == "failed" or bool(st.get("waiting_for_space"))


def test_a_full_logdir_is_waited_out_and_the_program_resumes_from_its_last_checkpoint(tmp_path, small_fs, runs,
                                                                                      capsys):
    """Before: the program failed at its save, ``is not writable: No space left on device`` was permanent and the
    job ended Failed at its first failure; a save round asked meanwhile got no answer that said why."""
    logdir = small_fs / "ckpt"
    run = runs(tmp_path, logdir, target=30, space_wait=60.0)
    wait_for(lambda: (run.status()["step"] or 0) >= 7, 30, what="a checkpoint at step 5")
    fill(small_fs)
    wait_for(lambda: _failed_or_waiting(run), 30, what="the save at step 10 to fail")
    st = run.status()
    assert st["phase"] == "running", st["last_error"]  # not Failed: the job goes on
    assert st["waiting_for_space"]["why"].startswith(f"{NO_SPACE} (logdir {logdir}: 0 bytes free)")
    assert st["waiting_for_space"]["limit"] == 60.0
    assert st["last_error"].startswith(f"training program exited with 1: {NO_SPACE} (logdir {logdir}") and \
        "(not counted: infrastructure)" in st["last_error"]
    # the save route answers, with the reason (it dropped the connection before)
    code, answer = run.save()
    assert code == 409 and answer["ok"] is False and answer["message"].startswith(NO_SPACE), answer
    wait_for(lambda: run.status()["waiting_for_space"]["seconds"] >= 1.0, 10, what="a second of waiting")
    assert run.status()["restarts"] == 0  # nothing started while the disk is full
    (small_fs / "filler").unlink()  # space comes back (a log rotated)
    wait_for(lambda: run.status()["phase"] == "succeeded", 30, what="the job to finish")
    st = run.status()
    assert st["waiting_for_space"] is None and st["restarts"] == 1 and st["step"] == 30
    assert "resumed from step 5" in run.printed()  # its last checkpoint, nothing lost
    assert run.boot.policy.budget.count() == 0  # not counted against the budget (max_failures 0 would fail it)
    assert not list(logdir.glob("*.tmp"))
    said = capsys.readouterr().err
    assert "(not counted: infrastructure); restarting it in place from the last checkpoint once there is room: " \
           "waiting for room (at most 60 s)" in said
    assert "once there is room; room came back after " in said


def test_no_room_within_the_bound_fails_the_job_with_one_line(tmp_path, small_fs, runs):
    logdir = small_fs / "ckpt"
    run = runs(tmp_path, logdir, target=1000, space_wait=1.5)
    wait_for(lambda: (run.status()["step"] or 0) >= 7, 30, what="a checkpoint at step 5")
    fill(small_fs)
    wait_for(lambda: run.status()["phase"] == "failed", 30, what="the job to fail")
    st = run.status()
    assert st["last_error"] == (f"worker-0 failed (exit 1): {NO_SPACE} (logdir {logdir}: 0 bytes free), and no "
                                f"room came within 1.5 s")
    assert st["waiting_for_space"] is None and st["restarts"] == 0


def test_what_a_full_logdir_is_and_that_it_is_still_a_refusal_before_the_first_start(tmp_path, small_fs):
    ctx = TaskContext(job="j", role="worker", index=0, cluster={"worker": 1}, logdir=str(small_fs))
    assert space_problem(ctx, {}) is None
    (small_fs / "model.ckpt-5.data-00000-of-00001").write_bytes(b"x" * 300_000)
    (small_fs / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-5"\n')
    with open(small_fs / "filler", "wb") as f:
        f.write(b"\0" * 600_000)  # room left, but less than the newest checkpoint takes
    assert space_problem(ctx, {}) is None  # a program that did not say it ran out of space: not a matter of room
    said = space_problem(ctx, {}, "OSError: [Errno 28] No space left on device")
    assert said is not None and said.startswith(f"{NO_SPACE} (logdir {small_fs}: ") and \
        said.endswith("its newest checkpoint takes 300000)")
    # a wait for room lasts until the next checkpoint fits (else the program would fail on it again at once)
    assert space_problem(ctx, {}, checkpoint_room=True) == said
    fill(small_fs)
    assert space_problem(ctx, {}) == f"{NO_SPACE} (logdir {small_fs}: 0 bytes free)"
    # before the first start (the bootstrap's check, `deploy --local`'s lock) it stays a refusal, as it was
    assert logdir_problem(ctx, {}) == f"logdir {small_fs} is not writable: No space left on device"
    (small_fs / "filler").unlink()
    assert space_problem(ctx, {}) is None and logdir_problem(ctx, {}) is None


def test_a_relaunched_task_waits_for_room_where_its_job_has_a_checkpoint_a_new_job_is_refused(tmp_path, small_fs,
                                                                                             runs):
    """The `scale` and the ps's SIGTERM of the issue relaunch tasks while the disk is full: a task that starts
    then, where its job has a checkpoint to resume from, waits for room (it failed the job at once before); a
    logdir without one (the job's first start) is still refused at once."""
    resumed, new = small_fs / "ckpt", small_fs / "new"
    resumed.mkdir()
    new.mkdir()
    (resumed / "model.ckpt-5.data-00000-of-00001").write_bytes(b"x" * 20000)
    (resumed / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-5"\n')
    fill(small_fs)
    first = runs(tmp_path / "a", new, target=12, space_wait=60.0)
    wait_for(lambda: first.status()["phase"] == "failed", 30, what="the new job's refusal")
    assert first.status()["last_error"] == f"worker-0: logdir {new} is not writable: No space left on device"
    again = runs(tmp_path / "b", resumed, target=12, space_wait=60.0)
    wait_for(lambda: _failed_or_waiting(again), 30, what="the relaunched task to wait (or fail)")
    st = again.status()
    assert st["phase"] == "discovering" and st["step"] is None, st["last_error"]  # nothing started
    assert st["waiting_for_space"]["why"] == f"{NO_SPACE} (logdir {resumed}: 0 bytes free)"
    assert st["last_error"] == (f"worker-0: {NO_SPACE} (logdir {resumed}: 0 bytes free): waiting for room before "
                                f"the training program starts from the job's last checkpoint")
    (small_fs / "filler").unlink()
    wait_for(lambda: again.status()["phase"] == "succeeded", 30, what="the job to finish")
    assert "resumed from step 5" in again.printed() and again.status()["waiting_for_space"] is None


#: A program with the save hook whose save, on SIGUSR1, writes 2 MB of checkpoint data into the logdir
#: (argv[1]): on a 1 MiB filesystem it fails half-written (a crash leaves the file) and the program exits 1.
BIG_SAVER = r"""
import os, signal, sys, time
logdir, asked, step = sys.argv[1], {"save": False}, 0
signal.signal(signal.SIGUSR1, lambda *_: asked.update(save=True))
print("marathon-tf save-hook: ready", flush=True)
while True:
    step += 1
    print(f"step={step} loss=1.0", flush=True)
    time.sleep(0.02)
    if asked["save"]:
        with open(os.path.join(logdir, f"model.ckpt-{step}.data-00000-of-00001"), "wb") as f:
            for _ in range(32):
                f.write(b"x" * 65536)
                f.flush()
"""


def test_a_save_round_whose_save_fills_the_disk_is_answered_409_with_the_reason(tmp_path, small_fs):
    """The issue's `marathon-tf checkpoint --timeout 30s`: the deciding task's save route answers (409, the
    reason first) when the program's save fails on a full disk."""
    logdir = small_fs / "ckpt"
    logdir.mkdir()
    ctx = TaskContext(job="j", role="worker", index=0, cluster={"worker": 1}, style="tf1", logdir=str(logdir),
                      grace_seconds=30)
    status = TaskStatus(job="j", task="worker-0", role="worker", index=0)
    saving = Saving(ctx, status, TaskEvents("worker-0"), str(logdir), decider=True, machine=TaskMachine(status),
                    space=lambda: space_problem(ctx, {}))
    steps: list[int] = []
    sink = io.BytesIO()
    trainer = Trainer([sys.executable, "-c", BIG_SAVER, str(logdir)], {}, on_step=steps.append,
                      on_text=saving.on_text, stdout=sink, stderr=sink)
    saving.program_started(trainer)
    trainer.start()
    server = StatusServer(status, "127.0.0.1", 0).start()
    server.add_post_route(SAVE_PATH, saving.post_save)
    try:
        wait_for(lambda: len(steps) >= 3 and saving.hook.ready, 20, what="the program's first steps")
        body = json.dumps({"job": "j", "reason": "marathon-tf checkpoint", "timeout": 30}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{server.port}{SAVE_PATH}", body,
                                         {"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=40)
        answer = json.loads(refused.value.read())
        assert refused.value.code == 409 and answer["ok"] is False
        assert answer["message"] == f"{NO_SPACE} (logdir {logdir}: 0 bytes free): the training program exited"
        assert trainer.wait(timeout=5) == 1
    finally:
        server.close()
        if trainer.wait(timeout=0) is None:
            trainer.stop(1.0)


def test_the_events_file_keeps_the_events_once_room_is_back(small_fs):
    """An event that met the full disk is left out of the job's events file; the later ones are kept (the
    task gave the file up for good at its first error before)."""
    path = small_fs / "events.jsonl"
    events = TaskEvents("worker-0", str(path))
    fill(small_fs)
    events.record("task_failed", "while the disk is full")
    assert path.read_text() == ""  # (created, nothing written)
    (small_fs / "filler").unlink()
    events.record("task_started", "after")
    assert [json.loads(line)["message"] for line in path.read_text().splitlines()] == ["after"]
    assert [e["message"] for e in events.mine()] == ["while the disk is full", "after"]
