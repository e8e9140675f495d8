"""Which members of a job restart when a program fails: the one rule the task side acts on
(:mod:`marathon_tf.task.policy`: the bootstrap restarts its program alone, or the keeper starts a round of
every member) and the Kubernetes export writes as JobSet failure policies
(:mod:`marathon_tf.user.targets.jobset`: a pod alone, or the whole JobSet). Pure.

What TensorFlow 2.21 can take back alone (docs/restarts.md): a chief, worker or evaluator of a ``tf1``,
``parameter_server`` or ``custom`` job. It cannot take back a ps (its variables and sessions are gone;
TF2's coordinator cannot recover from a lost ps) nor any member of a ``multi_worker_mirrored`` group: there
every member restarts.
"""

from __future__ import annotations

__all__ = ["UNEXECUTABLE_CODES", "group_scope"]

#: Exit codes that mean "the command could not be executed" (POSIX shells; the bootstrap uses them for its
#: own spawn errors too): permanent wherever the program runs, a restart cannot fix them.
UNEXECUTABLE_CODES = (126, 127)


def group_scope(style: str, role: str, members: int) -> bool:
    """Whether a failed ``role`` program needs every member of the job to restart (see the module): a ps,
    any member of a ``multi_worker_mirrored`` group. A job of one member has no group."""
    if members < 2:
        return False
    if style == "multi_worker_mirrored":
        return role in ("worker", "chief")
    return role == "ps"
