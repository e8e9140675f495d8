"""`marathon-tf local clean`: removes the folders of ended local runs, never a running one (its
runner's lock, a live logdir lock, or output written within a minute says it runs), never the web
UI build; `--dry-run` lists exactly what it would remove; `--older-than` keeps recent ones."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

from click.testing import CliRunner

from marathon_tf.contract import joblock
from marathon_tf.user import localstate
from marathon_tf.user.cli import cli

DAY = 86400.0


def _run_dir(home, name, *, age, stdout="step=1\n"):
    box = home / name / "sandboxes" / f"{name}_worker-0.instance-1"
    box.mkdir(parents=True)
    for stream in ("stdout", "stderr"):
        (box / stream).write_text(stdout)
    (home / name / "volumes" / name / "ckpt").mkdir(parents=True)
    then = time.time() - age
    for path in [*box.iterdir(), box, box.parent, home / name]:
        os.utime(path, (then, then))
    return home / name


def _state_home(tmp_path):
    home = tmp_path / "state"
    old = _run_dir(home, "old-20260101-000000", age=8 * DAY)
    yesterday = _run_dir(home, "yesterday-20260110-000000", age=DAY)
    dead = _run_dir(home, "crashed-20260111-000000", age=2 * DAY)
    gone = subprocess.Popen(["true"])
    gone.wait()
    (dead / ".marathon-tf").mkdir()
    (dead / joblock.LOCK_FILE).write_text(json.dumps({"job": "crashed", "host": os.uname().nodename,
                                                      "pid": gone.pid, "heartbeat": time.time() - 3 * DAY}))
    running = _run_dir(home, "running-20260112-000000", age=3 * DAY)  # quiet, but its runner is alive
    lock = localstate.hold(running, "running")
    training = _run_dir(home, "training-20260112-000000", age=3 * DAY)  # a live logdir lock in its volume
    logdir_lock = joblock.acquire(str(training / "volumes" / "training-20260112-000000" / "ckpt"), "training")
    serve = _run_dir(home, "legacy-20260113-000000", age=0)  # no runner lock (an older marathon-tf), output just now
    (home / "ui").mkdir()
    (home / "ui" / "index.html").write_text("<html>")
    return home, {"old": old, "yesterday": yesterday, "dead": dead, "running": running, "training": training,
                  "serve": serve}, [lock, logdir_lock]


def test_dry_run_lists_exactly_the_ended_runs_and_clean_removes_only_them(tmp_path):
    home, runs, locks = _state_home(tmp_path)
    env = {"MARATHON_TF_STATE_DIR": str(home)}
    try:
        r = CliRunner().invoke(cli, ["local", "clean", "--dry-run"], env=env)
        assert r.exit_code == 0, r.output
        listed = sorted(line.split()[2] for line in r.stdout.splitlines())
        assert listed == sorted(str(runs[k]) for k in ("old", "yesterday", "dead"))
        assert all(line.startswith("would remove ") for line in r.stdout.splitlines())
        assert all(p.exists() for p in runs.values())  # a dry run removes nothing
        kept = r.stderr
        assert f"kept {runs['running']}: running, held by job running" in kept
        assert f"kept {runs['training']}: running, held by job training" in kept
        assert f"kept {runs['serve']}: running, a task wrote output" in kept

        r = CliRunner().invoke(cli, ["local", "clean", "--older-than", "7d", "-o", "json"], env=env)
        out = json.loads(r.stdout)
        assert [x["path"] for x in out["removed"]] == [str(runs["old"])] and not runs["old"].exists()
        assert runs["yesterday"].exists()  # ended, but idle for less than 7 days

        r = CliRunner().invoke(cli, ["local", "clean"], env=env)
        assert r.exit_code == 0
        assert sorted(line.split()[1] for line in r.stdout.splitlines()) == sorted(
            str(runs[k]) for k in ("dead", "yesterday"))
        assert sorted(p.name for p in home.iterdir()) == ["legacy-20260113-000000", "running-20260112-000000",
                                                          "training-20260112-000000", "ui"]
    finally:
        for lock in locks:
            lock.release()
    # once their runners let go (and a minute after the last output), they are ended runs too
    assert sorted(r.path.name for r in localstate.runs(home, now=time.time() + 120) if not r.running) == [
        "legacy-20260113-000000", "running-20260112-000000", "training-20260112-000000"]


def test_runs_of_one_job_started_in_the_same_second_get_folders_of_their_own(tmp_path, monkeypatch):
    """Issue 21: two `deploy --local` of one job file started in the same second shared one run folder."""
    import threading

    from marathon_tf.user import localrun

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setattr(localrun.time, "strftime", lambda fmt: "20261125-170000")
    made: list = []
    threads = [threading.Thread(target=lambda: made.append(localrun.default_state_dir("ml/job"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(made)) == 8 and all(p.is_dir() for p in made)
    assert sorted(p.name for p in made) == sorted(["ml-job-20261125-170000"]
                                                  + [f"ml-job-20261125-170000-{n}" for n in range(2, 9)])


def _serve_state(home, name="serve", *, age=0.0, jobs=("mnist",)):
    """A `local serve`'s state folder as it stops: the Marathon it remembers, each job's checkpoints in
    its volume, sandboxes with fresh output, and the runner's lock let go (only .marathon-tf/ stays)."""
    state = home / name
    groups = {"/": {}, **{f"/{job}": {} for job in jobs}}
    (state / ".marathon-tf").mkdir(parents=True)
    (state / ".marathon-tf" / "lock.guard").write_text("")
    (state / localstate.SERVE_STATE_FILE).write_text(json.dumps({"format": 1, "groups": groups, "apps": {}}))
    ckpts = []
    for job in jobs:
        box = state / "sandboxes" / f"{job}_worker-0.instance-1"
        box.mkdir(parents=True)
        (box / "stdout").write_text("[worker-0] done final_step=301\n")
        ckpt = state / "volumes" / job / "ckpt"
        ckpt.mkdir(parents=True)
        for f in ("checkpoint", "model.ckpt-301.index", "model.ckpt-301.data-00000-of-00001"):
            (ckpt / f).write_text("x")
            ckpts.append(ckpt / f)
    then = time.time() - age
    for path in [*state.rglob("*"), state]:
        os.utime(path, (then, then))
    return state, ckpts


def test_a_plain_local_clean_never_removes_a_checkpoint_under_a_serve_state(tmp_path):
    """Issue 32: a minute after `local serve` stopped, `local clean --dry-run` said `would remove
    …/marathon-tf/serve`, its remembered jobs and their checkpoints (`volumes/<job>/ckpt/model.ckpt-301…`),
    and a moment before it had called the stopped serve "running". A serve's state is stopped, kept by
    every plain `local clean`, and removed only by name (--serve-state)."""
    home = tmp_path / "state"
    just_stopped, fresh = _serve_state(home, "serve", jobs=("mnist", "big"))
    old, stale = _serve_state(home, "lab", age=30 * DAY, jobs=("lr",))  # `local serve --state-dir <home>/lab`, long ago
    ended = _run_dir(home, "lr-20260101-000000", age=0)  # a `deploy --local` that let go of its lock just now
    (ended / ".marathon-tf").mkdir()
    (ended / ".marathon-tf" / "lock.guard").write_text("")
    env = {"MARATHON_TF_STATE_DIR": str(home)}
    for args in (["--dry-run"], [], ["--older-than", "0s"], ["-o", "json"]):
        r = CliRunner().invoke(cli, ["local", "clean", *args], env=env)
        assert r.exit_code == 0, r.output
        removed = [x["path"] for x in json.loads(r.stdout)["removed"]] if "json" in args else r.stdout
        assert str(just_stopped) not in removed and str(old) not in removed, (args, r.stdout)
        assert all(p.exists() for p in fresh + stale), args
    assert not ended.exists()  # ended, not "running, a task wrote output 0 s ago"
    r = CliRunner().invoke(cli, ["local", "clean", "--dry-run"], env=env)
    assert "running" not in r.stderr, r.stderr  # a stopped serve is stopped, never running
    assert (f"kept {just_stopped}: a stopped local serve's state: remembers big, mnist (their volumes and "
            f"checkpoints); removed only when named: local clean --serve-state serve") in r.stderr
    assert {r_.path.name: r_.state for r_ in localstate.runs(home)} == {"serve": "stopped", "lab": "stopped"}

    # asked by name, with the flag that says so: that serve's state only
    r = CliRunner().invoke(cli, ["local", "clean", "--serve-state", "lab"], env=env)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"removed {old} (a stopped local serve's state, idle")
    assert not old.exists() and all(p.exists() for p in fresh)
    r = CliRunner().invoke(cli, ["local", "clean", "--serve-state", "lr-20260101-000000"], env=env)
    assert r.exit_code == 2 and "is not a local serve's state folder (those in" in r.output
    # a running serve is never removed, named or not
    lock = localstate.hold(just_stopped, "local serve")
    try:
        r = CliRunner().invoke(cli, ["local", "clean", "--serve-state", "serve"], env=env)
        assert r.exit_code == 0 and f"kept {just_stopped}: running, held by job local serve" in r.stderr
        assert all(p.exists() for p in fresh)
    finally:
        lock.release()
    r = CliRunner().invoke(cli, ["local", "clean", "--serve-state", str(just_stopped)], env=env)
    assert r.exit_code == 0 and not just_stopped.exists()


def test_the_serve_state_file_is_the_one_local_serve_writes():
    from marathon_tf.local.extras import persist

    assert localstate.SERVE_STATE_FILE == persist.STATE_FILE


_RUNNER = """
import sys, time
from pathlib import Path
from marathon_tf.user import localstate
lock = localstate.hold(Path(sys.argv[1]), "mnist")
print("held", flush=True)
time.sleep(600)
"""


def _runner(run):
    """A real runner process holding ``run``'s lock (as `deploy --local` does), keeping its heartbeat."""
    proc = subprocess.Popen([sys.executable, "-c", _RUNNER, str(run)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def _age_heartbeat(run, seconds):
    """The lock as its runner wrote it, its heartbeat ``seconds`` old (a stopped runner writes no new one)."""
    record = json.loads((run / joblock.LOCK_FILE).read_text())
    record["heartbeat"] = time.time() - seconds
    (run / joblock.LOCK_FILE).write_text(json.dumps(record))


def _clean(home):
    r = CliRunner().invoke(cli, ["local", "clean"], env={"MARATHON_TF_STATE_DIR": str(home)})
    assert r.exit_code == 0, r.output
    return r


def test_a_stopped_runner_s_run_is_never_removed(tmp_path):
    """Issue 44.3: the runner of a `deploy --local` SIGSTOPped (a suspended laptop) with its tasks training:
    75 s later `local clean` removed its run folder, checkpoints included. Its process exists (same pid, same
    start time), stopped: the run is kept, whatever the heartbeat says."""
    home = tmp_path / "state"
    run = _run_dir(home, "mnist-20261206-020000", age=0)
    ckpt = run / "volumes" / "mnist-20261206-020000" / "ckpt" / "model.ckpt-16032.index"
    ckpt.write_text("x")
    runner = _runner(run)
    try:
        runner.send_signal(signal.SIGSTOP)
        _age_heartbeat(run, 75)
        assert joblock.holder(str(run)) is None  # its lock is stale by heartbeat: what clean went by
        r = _clean(home)
        assert r.stdout == "" and ckpt.exists()
        assert f"kept {run}: running, held by job mnist (host {socket.gethostname()}, pid {runner.pid}" in r.stderr
        assert "whose process still exists (stopped?, no heartbeat for 75 s)" in r.stderr
        runner.send_signal(signal.SIGCONT)
    finally:
        runner.kill()
        runner.wait()
    # its runner gone, no process left in it: an ended run, removed
    assert _clean(home).stdout.split()[:2] == ["removed", str(run)] and not run.exists()


def test_a_run_whose_task_lives_is_never_removed_and_a_reused_pid_is_no_runner(tmp_path):
    """Issue 44.3: a run whose runner died but whose task process lives (its working directory the sandbox,
    its output the sandbox's stdout) is kept until that process ends; a lock whose pid now names another
    process (another start time) does not keep a run."""
    home = tmp_path / "state"
    run = _run_dir(home, "mnist-20261206-020000", age=0)
    box = next((run / "sandboxes").iterdir())
    runner = _runner(run)
    with open(box / "stdout", "ab") as out:
        task = subprocess.Popen(["sleep", "600"], cwd=box, stdout=out, stderr=subprocess.DEVNULL,
                                start_new_session=True)  # the runner's task, outliving it
    try:
        runner.kill()
        runner.wait()
        assert joblock.holder(str(run)) is None
        r = _clean(home)
        assert r.stdout == "" and run.exists()
        assert f"kept {run}: running, a live process uses it: pid {task.pid} (sleep)" in r.stderr
        task.send_signal(signal.SIGSTOP)  # stopped, it still uses it
        assert _clean(home).stdout == "" and run.exists()
    finally:
        task.kill()
        task.wait()
    # a live pid with another start time than the lock's is not its runner
    record = json.loads((run / joblock.LOCK_FILE).read_text())
    assert record["pid_start"].isdigit()
    (run / joblock.LOCK_FILE).write_text(json.dumps({**record, "pid": os.getpid(), "pid_start": "1",
                                                     "heartbeat": time.time() - 75}))
    assert _clean(home).stdout.split()[:2] == ["removed", str(run)] and not run.exists()
