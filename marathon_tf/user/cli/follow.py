"""Following a job from the command line, as ``deploy``, ``scale --wait`` and ``status --watch`` do: its
progress line on stderr, waiting for its end (Ctrl-C leaves it running), and its outcome as the command's
error (a job that ended Failed or NotPlaced: exit 1 or 4).
"""

from __future__ import annotations

from marathon_tf.contract.errors import Interrupted

__all__ = ["follow_job", "progress_printer", "raise_for_outcome"]


def raise_for_outcome(final) -> None:
    """A job that ended Failed or NotPlaced is the command's error (exit 1 or 4, from its class); its
    outcome line was printed already."""
    error = final.error() if final is not None else None
    if error is not None:
        error.shown = True
        raise error


def progress_printer():
    """A callback printing a job's progress line on stderr when it changed (:class:`output.ProgressPrinter`)."""
    from marathon_tf.user import output

    return output.ProgressPrinter()


def follow_job(marathon, job: str, deployment_id: str | None, *, wait: bool, timeout: float | None,
               decide: bool = True):
    """Follow the deployment, then the job, with a progress line on stderr (:meth:`Marathon.wait`).
    Ctrl-C leaves it running. ``decide`` (deploy, scale): a task that can never start fails the job."""
    from marathon_tf.user import output

    if not wait:
        output.info(f"follow it with: marathon-tf status {job} --watch")
        return None
    try:
        final = marathon.wait(job, deployment_id=deployment_id, timeout=timeout, on_progress=progress_printer(),
                              decide=decide)
    except KeyboardInterrupt:
        output.info(f"stopped watching; the job keeps running. Watch again with: marathon-tf status {job} --watch")
        raise Interrupted("interrupted") from None
    output.info(f"job {job}: {final.state}" + (f" ({final.reason})" if final.reason else ""))
    return final
