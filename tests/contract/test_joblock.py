"""One run of a job per logdir (marathon_tf.contract.joblock): the lock file, refusing a second run,
stale takeover, the same run keeping its own lock."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from marathon_tf.contract import joblock


def test_acquire_refuse_release(tmp_path):
    lock = joblock.acquire(str(tmp_path), "a")
    record = json.loads((tmp_path / ".marathon-tf/lock").read_text())
    assert record["job"] == "a" and record["pid"] == os.getpid() and record["host"] == socket.gethostname()
    with pytest.raises(joblock.LogdirLocked) as e:
        joblock.acquire(str(tmp_path), "b", "http://m b")
    assert e.value.message == (f"logdir {tmp_path} is in use by job a (host {socket.gethostname()}, "
                               f"pid {os.getpid()}, since {record['started']})")
    lock.release()
    assert not (tmp_path / ".marathon-tf/lock").exists()
    joblock.acquire(str(tmp_path), "b").release()


def test_a_dead_holder_or_an_old_heartbeat_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    joblock.acquire(str(tmp_path), "a", pid=dead.pid)  # a holder that is gone (same host)
    taken = joblock.acquire(str(tmp_path), "b")
    assert taken.owned and json.loads((tmp_path / ".marathon-tf/lock").read_text())["job"] == "b"
    other_host = {**taken.record, "host": "elsewhere", "pid": 1, "heartbeat": time.time() - joblock.STALE_AFTER - 1}
    (tmp_path / ".marathon-tf/lock").write_text(json.dumps(other_host))
    assert joblock.acquire(str(tmp_path), "c").owned  # no heartbeat for too long
    fresh = {**other_host, "heartbeat": time.time()}
    (tmp_path / ".marathon-tf/lock").write_text(json.dumps(fresh))
    with pytest.raises(joblock.LogdirLocked):
        joblock.acquire(str(tmp_path), "d")  # alive elsewhere (as far as we can tell)


def test_the_same_run_takes_its_own_lock_over_or_leaves_a_live_holder(tmp_path):
    runner = joblock.acquire(str(tmp_path), "j", "http://127.0.0.1:1 j")
    boot = joblock.acquire(str(tmp_path), "j", "http://127.0.0.1:1 j")
    assert not boot.owned  # the live runner keeps it
    boot.release()
    assert (tmp_path / ".marathon-tf/lock").exists()
    relaunched = {**runner.record, "host": "old-host", "pid": 1, "heartbeat": time.time()}
    (tmp_path / ".marathon-tf/lock").write_text(json.dumps(relaunched))
    again = joblock.acquire(str(tmp_path), "j", "http://127.0.0.1:1 j", pid=os.getppid())  # the relaunched task
    assert again.owned and json.loads((tmp_path / ".marathon-tf/lock").read_text())["host"] == socket.gethostname()
    runner.release()  # not the holder any more: leaves the file alone
    assert (tmp_path / ".marathon-tf/lock").exists()
