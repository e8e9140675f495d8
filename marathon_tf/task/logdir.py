"""The job's logdir as a task sees it: where it is, whether it is usable, the files marathon-tf keeps there.

The logdir (``MTF_LOGDIR``, a volume's container path or an absolute path; relative paths are inside
the sandbox) holds the program's checkpoints and, in ``.marathon-tf/``, what marathon-tf keeps for
the job across its tasks' relaunches: the restart budget's ``failures.jsonl``
(:mod:`marathon_tf.task.budget`), the events (:mod:`marathon_tf.task.timeline`) and the lock of one
run per logdir (:mod:`marathon_tf.contract.joblock`). A logdir that is not a usable directory fails
the job at once (:func:`logdir_problem`: at the start and after every failure), with one line.

A logdir whose filesystem is full (:func:`space_problem`) is different once the job runs: a full disk
is an infrastructure fault that usually passes (a log rotated, a cleaner ran), so a program that failed
on it is not counted against the job's budget; it starts again from its last checkpoint when there is
room (:meth:`marathon_tf.task.restarts.Restarter.await_space`, bounded), and a save round asked
meanwhile is answered with why. Before the first start a full logdir is still a refusal.
"""

from __future__ import annotations

import errno
import glob
import os
import re
from collections.abc import Callable, Mapping

from marathon_tf.contract import joblock
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.task.checkpoints import Checkpoint, newest_checkpoint
from marathon_tf.task.status_server import TaskStatus
from marathon_tf.task.timeline import EVENTS_FILE

__all__ = ["logdir_path", "failures_path", "events_path", "logdir_problem", "lock_logdir", "FAILURES_FILE",
           "NO_SPACE", "space_problem", "free_bytes", "announce_resume", "resume_point"]

FAILURES_FILE = os.path.join(".marathon-tf", "failures.jsonl")
#: What a save round, the task's status and the job's reasons say of a full logdir (the one wording).
NO_SPACE = "no space left on the logdir's filesystem"
#: Errors of a full filesystem (or of a full quota on it).
_FULL = (errno.ENOSPC, errno.EDQUOT)
#: A program's stderr that says it ran out of space (Python's OSError, TensorFlow's own words).
_SAID_FULL = re.compile(r"No space left on device|Disk quota exceeded|\[Errno (28|122)\]|ENOSPC|EDQUOT")


def logdir_path(ctx: TaskContext, environ: Mapping[str, str]) -> str | None:
    """The job's logdir as a local path for this task (relative paths are inside the sandbox);
    None without a logdir or for a URL (``gs://…``)."""
    if not ctx.logdir or "://" in ctx.logdir:
        return None
    base = environ.get("MESOS_SANDBOX") or os.getcwd()
    return ctx.logdir if os.path.isabs(ctx.logdir) else os.path.join(base, ctx.logdir)


def failures_path(ctx: TaskContext, environ: Mapping[str, str]) -> str | None:
    """``<logdir>/.marathon-tf/failures.jsonl`` when the job's logdir (relative paths are inside
    the sandbox) is a directory this task can write; else None (the budget is per task)."""
    logdir = logdir_path(ctx, environ)
    if logdir is None:
        return None
    if not (os.path.isdir(logdir) and os.access(logdir, os.W_OK | os.X_OK)):
        return None
    path = os.path.join(logdir, FAILURES_FILE)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    except OSError:
        return None
    return path


def events_path(ctx: TaskContext, environ: Mapping[str, str]) -> str | None:
    """``<logdir>/.marathon-tf/events.jsonl`` when the job's logdir is a local directory this task
    can write (the restart budget's rule, :func:`failures_path`)."""
    failures = failures_path(ctx, environ)
    return os.path.join(os.path.dirname(os.path.dirname(failures)), EVENTS_FILE) if failures else None


def logdir_problem(ctx: TaskContext, environ: Mapping[str, str]) -> str | None:
    """Why the job's logdir is unusable (one line), or None: it must be (or be creatable as) a
    directory this task can create files in. Only local paths are checked (not ``gs://`` etc.);
    relative ones are inside the sandbox (a volume's container path)."""
    logdir = logdir_path(ctx, environ)
    if logdir is None:
        return None
    shown = ctx.logdir if ctx.logdir == logdir else f"{ctx.logdir} ({os.path.realpath(logdir)})"
    if os.path.islink(logdir) and not os.path.exists(logdir):
        return f"logdir {shown} is gone: the volume's host path does not exist any more"
    if os.path.exists(logdir) and not os.path.isdir(logdir):
        return f"logdir {shown} is not a directory"
    try:
        os.makedirs(logdir, exist_ok=True)
    except OSError as e:
        return f"logdir {shown} cannot be created: {e.strerror or e}"
    probe = os.path.join(logdir, f".marathon-tf-write-test.{os.getpid()}")
    try:
        with open(probe, "w") as f:
            f.write("ok")
        os.unlink(probe)
    except OSError as e:
        return f"logdir {shown} is not writable: {e.strerror or e}"
    return None


def free_bytes(path: str) -> int | None:
    """Bytes an unprivileged writer may still use on ``path``'s filesystem (None: it cannot be read)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _checkpoint_bytes(logdir: str) -> int:
    """Bytes the newest checkpoint's files take (what the program's next save needs again); 0 without one."""
    found = newest_checkpoint(logdir)
    if found is None or not found.path:
        return 0
    total = 0
    for name in glob.glob(glob.escape(found.path) + ".*"):
        try:
            total += os.stat(name).st_size
        except OSError:
            continue
    return total


def space_problem(ctx: TaskContext, environ: Mapping[str, str], stderr_tail: str = "", *,
                  checkpoint_room: bool = False) -> str | None:
    """Why the job's logdir has no room (one line, starting with :data:`NO_SPACE`), or None: a file
    cannot be written there for want of space (``ENOSPC``/``EDQUOT``), or — when the program's
    ``stderr_tail`` says it ran out of space, and with ``checkpoint_room`` (room for the program's next
    save: what a wait for room waits for) — there is less free than its newest checkpoint takes.
    Only an existing local logdir is looked at (anything else is :func:`logdir_problem`'s)."""
    logdir = logdir_path(ctx, environ)
    if logdir is None or not os.path.isdir(logdir):
        return None
    shown = ctx.logdir if ctx.logdir == logdir else f"{ctx.logdir} ({os.path.realpath(logdir)})"
    free = free_bytes(logdir)
    probe = os.path.join(logdir, f".marathon-tf-space-test.{os.getpid()}")
    try:
        try:
            with open(probe, "w") as f:
                f.write("ok")
        finally:
            if os.path.lexists(probe):
                os.unlink(probe)
    except OSError as e:
        if e.errno in _FULL:
            return f"{NO_SPACE} (logdir {shown}: {free if free is not None else '?'} bytes free)"
        return None  # not a matter of space: logdir_problem says what it is
    if (checkpoint_room or (stderr_tail and _SAID_FULL.search(stderr_tail))) and free is not None:
        need = _checkpoint_bytes(logdir)
        if free < need:
            return f"{NO_SPACE} (logdir {shown}: {free} bytes free, its newest checkpoint takes {need})"
    return None


def lock_logdir(ctx: TaskContext, environ: Mapping[str, str]) -> tuple[joblock.Lock | None, str | None]:
    """Take the logdir's lock (one run of a job per logdir, :mod:`marathon_tf.contract.joblock`), kept
    alive until released: (the lock, None), or (None, why not in one line); (None, None) without a
    local logdir."""
    path = logdir_path(ctx, environ)
    if path is None:
        return None, None
    try:
        lock = joblock.acquire(path, ctx.job, joblock.run_id(ctx.marathon_url, ctx.job))
    except joblock.LogdirLocked as e:
        return None, e.message
    except OSError as e:
        return None, f"cannot lock the logdir {ctx.logdir}: {e.strerror or e}"
    lock.keep_alive()
    return lock, None


def resume_point(ctx: TaskContext, environ: Mapping[str, str]) -> Checkpoint | None:
    """The checkpoint in the job's logdir that a chief's or worker's program will resume from (None: none)."""
    if not ctx.logdir or ctx.role not in ("chief", "worker"):
        return None
    return newest_checkpoint(os.path.join(environ.get("MESOS_SANDBOX") or os.getcwd(), ctx.logdir))


def announce_resume(ctx: TaskContext, environ: Mapping[str, str], status: TaskStatus,
                    log: Callable[[str], None]) -> Checkpoint | None:
    """Say when the program will find a checkpoint in the logdir to resume from (a chief or worker); it."""
    found = resume_point(ctx, environ)
    if found is None:
        return None
    keras = None if found.epoch is None else f"epoch {found.epoch + 1}" + (
        f", batch {found.batch + 1}" if found.batch is not None else "")  # as Keras counts them
    if found.step is not None:
        log(f"resumed from checkpoint at step {found.step} (in {ctx.logdir}"
            + (f": the Keras backup of {keras})" if keras else ")"))
        status.update(resumed_from=found.step)
    else:
        log(f"resumed from the Keras backup ({keras}; in {ctx.logdir})")
    return found
