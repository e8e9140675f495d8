"""`marathon-tf local clean`: removes the folders of ended local runs, never a running one (its
runner's lock, a live logdir lock, or output written within a minute says it runs), never the web
UI build; `--dry-run` lists exactly what it would remove; `--older-than` keeps recent ones."""

import json
import os
import subprocess
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
    serve = _run_dir(home, "serve", age=0)  # no runner lock (an older marathon-tf), output just now
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
        assert sorted(p.name for p in home.iterdir()) == ["running-20260112-000000", "serve",
                                                          "training-20260112-000000", "ui"]
    finally:
        for lock in locks:
            lock.release()
    # once their runners let go (and a minute after the last output), they are ended runs too
    assert sorted(r.path.name for r in localstate.runs(home, now=time.time() + 120) if not r.running) == [
        "running-20260112-000000", "serve", "training-20260112-000000"]


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
