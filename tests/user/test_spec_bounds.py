"""Inputs with bounds (user/spec/): a job file is a regular file of at most 1 MiB; a logdir never leaves the
sandbox (``..`` refused); environment and command sizes within what a task can start with, what Marathon
can store and what marathon-tf reads back — each refused in one line naming the field, exit 2."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest
from click.testing import CliRunner
from user_helpers import minimal

from marathon_tf.contract.errors import SpecError
from marathon_tf.marathon import transport
from marathon_tf.user.cli import cli
from marathon_tf.user.spec import load_dict

MAX_JOB_FILE = 2 ** 20  # docs/job-file.md (user/spec/load.py MAX_JOB_FILE)
#: Linux's MAX_ARG_STRLEN, PAGE_SIZE * 32 (torvalds/linux include/uapi/linux/binfmts.h; user/spec/fields.py
#: MAX_ARG_BYTES).
MAX_ARG_BYTES = 32 * 4096


def _validate_in_a_box(path: str) -> subprocess.CompletedProcess:
    """``marathon-tf validate PATH`` in a process of at most 1 GiB of memory and 30 s (an unbounded read
    fails there instead of taking the machine)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    return subprocess.run([sys.executable, "-m", "marathon_tf.cli", "validate", path], capture_output=True,
                          text=True, timeout=30, preexec_fn=limit)


@pytest.mark.parametrize("kind", ["device", "pipe"])
def test_a_device_or_a_pipe_is_refused_in_one_line(tmp_path, kind):
    """``validate /dev/zero`` read without end (MemoryError under a memory limit); a named pipe waited for
    a writer forever."""
    path = "/dev/zero" if kind == "device" else str(tmp_path / "fifo")
    if kind == "pipe":
        os.mkfifo(path)
    try:
        done = _validate_in_a_box(path)
    except subprocess.TimeoutExpired:
        pytest.fail(f"validate {path} did not return in 30 s")
    assert done.returncode == 2, done.stderr[-500:]
    assert done.stderr.splitlines() == [f"error: {path}: is not a regular file (a device, a pipe, a socket), "
                                        "not a job file"]


def test_a_job_file_over_the_cap_is_refused_in_one_line(write_job):
    """A valid job padded past 1 MiB (the old code read and accepted it, however large)."""
    text = json.dumps(minimal())
    f = write_job(text[:-1] + " " * (MAX_JOB_FILE - len(text) + 1) + "}")
    assert f.stat().st_size == MAX_JOB_FILE + 1
    r = CliRunner().invoke(cli, ["validate", str(f)])
    assert r.exit_code == 2, r.output
    assert r.stderr.splitlines() == [f"error: {f}: is larger than 1 MiB, the most a job file may be "
                                     "(docs/job-file.md); put large data in a file the job fetches"]
    exact = write_job(text[:-1] + " " * (MAX_JOB_FILE - len(text)) + "}", name="exact.json")
    assert exact.stat().st_size == MAX_JOB_FILE
    assert CliRunner().invoke(cli, ["validate", str(exact)]).exit_code == 0


@pytest.mark.parametrize("logdir", ["../../../etc", "ckpt/../../x", "/data/../etc", ".."])
def test_a_logdir_with_dotdot_is_refused_naming_the_field(write_job, logdir):
    r = CliRunner().invoke(cli, ["validate", str(write_job(minimal(logdir=logdir)))])
    assert r.exit_code == 2, r.output
    assert "logdir: must not contain '..': the logdir stays inside the task's sandbox" in r.stderr, r.stderr


@pytest.mark.parametrize("logdir", ["ckpt", "ckpt/run..1", "/data/logs", "./ckpt"])
def test_a_logdir_inside_the_sandbox_or_a_volume_is_taken(write_job, logdir):
    r = CliRunner().invoke(cli, ["validate", str(write_job(minimal(logdir=logdir)))])
    assert r.exit_code == 0, r.output


def test_an_env_value_too_large_for_a_task_is_refused_naming_it(write_job):
    """A 200 KB value (the file is within its cap) passed validate; a task could not be started with it."""
    big = "x" * 200_000
    r = CliRunner().invoke(cli, ["validate", str(write_job(minimal(roles={"ps": {"count": 1}, "worker": {
        "count": 2, "env": {"BIG": big}}})))])
    assert r.exit_code == 2, r.output
    assert "roles.worker.env.BIG: is 195 KiB: one environment variable of a task is at most 128 KiB" in r.stderr
    with pytest.raises(SpecError, match=r"env\.BIG: is 9\.54 MiB"):  # the 10 MB, through the Python API
        load_dict(minimal(env={"BIG": "x" * 10_000_000}))
    edge = "x" * (MAX_ARG_BYTES - len("BIG=") - 1)  # exactly MAX_ARG_STRLEN with its NUL
    assert load_dict(minimal(env={"BIG": edge})).env["BIG"] == edge
    with pytest.raises(SpecError, match=r"env\.BIG: is 128 KiB"):
        load_dict(minimal(env={"BIG": edge + "x"}))


def test_a_command_argument_too_large_is_refused_naming_it():
    with pytest.raises(SpecError, match=r"command: item 2 is 195 KiB: one argument of a task's command"):
        load_dict(minimal(command=["python3", "train.py", "y" * 200_000]))


def test_a_task_or_a_job_too_large_for_marathon_or_our_answer_limit_is_refused():
    """Each variable within its cap, but a task's together over 1 MiB; a job's tasks together over 16 MiB
    (the group answer would pass the 32 MiB answer limit: 'answer is larger than the 32 MiB limit')."""
    many = {f"V{i}": "x" * 120_000 for i in range(9)}
    with pytest.raises(SpecError, match=r"env: the ps tasks' environment and command are 1\.03 MiB; a task's are at "
                                        r"most 1 MiB"):
        load_dict(minimal(env=many))
    four = {f"V{i}": "x" * 120_000 for i in range(4)}
    with pytest.raises(SpecError, match=r"env: the job's tasks carry 18\.77 MiB of environment and command "
                                        r"together; a job's are at most 16 MiB"):
        load_dict(minimal(env=four, roles={"ps": {"count": 1}, "worker": {"count": 40}}))
    assert load_dict(minimal(env=four, roles={"ps": {"count": 1}, "worker": {"count": 30}}))


def test_the_caps_agree_with_each_other_and_the_answer_limit():
    from marathon_tf.user.spec import fields, load

    assert (load.MAX_JOB_FILE, fields.MAX_ARG_BYTES) == (MAX_JOB_FILE, MAX_ARG_BYTES)
    MAX_JOB_BYTES, MAX_TASK_BYTES = fields.MAX_JOB_BYTES, fields.MAX_TASK_BYTES
    assert MAX_JOB_BYTES * 2 <= transport.DEFAULT_MAX_BYTES
    assert MAX_ARG_BYTES < MAX_TASK_BYTES < MAX_JOB_BYTES
