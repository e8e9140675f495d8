"""How (job, role, index) becomes a Marathon id and a Mesos-DNS name.

This is the only module that knows the naming rules; everything else asks it.

* A job ``ml/mnist`` is the Marathon group ``/ml/mnist``.
* Its TF task ``worker`` #3 is the app ``/ml/mnist/worker-3`` (one app per task,
  ``instances: 1``, so a task keeps its identity and index across relaunches).
* Mesos-DNS names that app from Marathon's ``PathId.toHostname`` (the path
  reversed and joined by dots: ``worker-3.mnist.ml``) put through its RFC 1123
  label function (lower case, ``.`` and ``_`` to ``-``, cut at 63):
  ``worker-3-mnist-ml.marathon.mesos`` for the A record,
  ``_worker-3-mnist-ml._tcp.marathon.mesos`` for SRV (every port) and
  ``_tf._worker-3-mnist-ml._tcp.marathon.mesos`` for the port named ``tf``.
"""

from __future__ import annotations

import re

__all__ = [
    "ROLES",
    "CLUSTER_ROLES",
    "group_id",
    "task_name",
    "deciding_task",
    "app_id",
    "parse_task_name",
    "parse_app_id",
    "safe_path",
    "mesos_dns_label",
    "mesos_dns_legacy_name",
    "host_name",
    "srv_name",
    "job_name_problems",
    "MAX_DNS_LABEL",
]

#: Every role a job may have, in the order they are rendered and shown.
ROLES = ("chief", "ps", "worker", "evaluator", "tensorboard")
#: Roles that are members of the TensorFlow cluster spec.
CLUSTER_ROLES = ("chief", "ps", "worker")

MAX_DNS_LABEL = 63

# Marathon's PathId.ID_PATH_SEGMENT_PATTERN (1.4 - 1.11), without the relative
# segments "." and "..", which a job name may not use.
_SEGMENT = re.compile(r"^(([a-z0-9]|[a-z0-9][a-z0-9\-]*[a-z0-9])\.)*([a-z0-9]|[a-z0-9][a-z0-9\-]*[a-z0-9])$")
_RESERVED_LAST = {"restart", "tasks", "versions"}
_TASK = re.compile(r"^(chief|ps|worker|evaluator|tensorboard)-(0|[1-9][0-9]*)$")


def _segments(job: str) -> list[str]:
    return [s for s in job.strip("/").split("/")]


def group_id(job: str) -> str:
    """``ml/mnist`` -> ``/ml/mnist``."""
    return "/" + "/".join(_segments(job))


def task_name(role: str, index: int) -> str:
    return f"{role}-{int(index)}"


def deciding_task(completion: str) -> str:
    """The job's deciding task for its ``completion``: ``chief-0`` for ``chief``, else ``worker-0``. It
    decides the job's success, keeps its restart ledger, leads its rendezvous and runs its save rounds
    (:func:`marathon_tf.task.policy.decider_task`); the user's side asks it for a checkpoint."""
    return "chief-0" if completion == "chief" else "worker-0"


def app_id(job: str, role: str, index: int) -> str:
    return f"{group_id(job)}/{task_name(role, index)}"


def parse_task_name(name: str) -> tuple[str, int] | None:
    """``worker-3`` -> ``("worker", 3)``; anything else -> None."""
    m = _TASK.match(name)
    return (m.group(1), int(m.group(2))) if m else None


def parse_app_id(job: str, marathon_app_id: str) -> tuple[str, int] | None:
    """``/ml/mnist/worker-3`` (of job ``ml/mnist``) -> ``("worker", 3)``."""
    prefix = group_id(job) + "/"
    if not marathon_app_id.startswith(prefix):
        return None
    return parse_task_name(marathon_app_id[len(prefix):])


def safe_path(marathon_app_id: str) -> str:
    """Marathon's ``PathId.safePath``: ``/ml/mnist/worker-3`` -> ``ml_mnist_worker-3``
    (the first part of a Marathon task id)."""
    return "_".join(s for s in marathon_app_id.split("/") if s)


def _rfc1123(name: str, maxlen: int = MAX_DNS_LABEL) -> str:
    """Mesos-DNS ``labels.RFC1123``: map, trim leading '-', cut at maxlen, trim trailing '-'."""
    mapped = []
    for ch in name:
        if "A" <= ch <= "Z":
            mapped.append(ch.lower())
        elif "a" <= ch <= "z" or "0" <= ch <= "9":
            mapped.append(ch)
        elif ch in "-._":
            mapped.append("-")
    trim = "".join(mapped).lstrip("-")
    size = min(len(trim), maxlen)
    head = trim[:size].rstrip("-")
    if len(head) == size:
        return head
    tail = trim[size:].lstrip("-")
    return head + tail[: size - len(head)] if tail else head


def mesos_dns_legacy_name(marathon_app_id: str) -> str:
    """Marathon's ``PathId.toHostname``: ``/ml/mnist/worker-3`` -> ``worker-3.mnist.ml``."""
    return ".".join(reversed([s for s in marathon_app_id.split("/") if s]))


def mesos_dns_label(marathon_app_id: str) -> str:
    """The task label Mesos-DNS uses: ``/ml/mnist/worker-3`` -> ``worker-3-mnist-ml``."""
    return _rfc1123(mesos_dns_legacy_name(marathon_app_id))


def host_name(marathon_app_id: str, *, framework: str = "marathon", domain: str = "mesos") -> str:
    """The A record of a task: ``worker-3-mnist-ml.marathon.mesos.``"""
    return f"{mesos_dns_label(marathon_app_id)}.{framework}.{domain}."


def srv_name(marathon_app_id: str, *, port_name: str | None = None, protocol: str = "tcp",
             framework: str = "marathon", domain: str = "mesos") -> str:
    """The SRV record of a task's ports; with ``port_name`` only that named port:
    ``_tf._worker-3-mnist-ml._tcp.marathon.mesos.``"""
    base = f"_{mesos_dns_label(marathon_app_id)}._{protocol}.{framework}.{domain}."
    return f"_{port_name}.{base}" if port_name else base


def job_name_problems(job: str, longest_task: str = "worker-0") -> list[str]:
    """Why ``job`` cannot be a job name (empty list when it can).

    ``longest_task`` is the longest task name the job will have (for example
    ``worker-9999``): its Mesos-DNS label must fit in 63 characters uncut, or two
    tasks could end up with the same DNS name.
    """
    if not isinstance(job, str) or not job.strip("/"):
        return ["must not be empty"]
    problems = []
    if job.startswith("/") or job.endswith("/") or "//" in job:
        problems.append("must be a relative path like 'mnist' or 'ml/mnist' (no leading, trailing or double '/')")
    segments = [s for s in job.split("/") if s]
    for seg in segments:
        if not _SEGMENT.match(seg):
            problems.append(
                f"segment {seg!r} must be lowercase letters, digits and '-' (dots between labels allowed), "
                "not starting or ending with '-'")
    if segments and segments[-1] in _RESERVED_LAST:
        problems.append(f"must not end with the reserved word {segments[-1]!r}")
    if not problems:
        label = mesos_dns_label(group_id(job) + "/" + longest_task)
        natural = mesos_dns_legacy_name(group_id(job) + "/" + longest_task).replace(".", "-")
        if label != natural:
            problems.append(
                f"too long for Mesos-DNS: task {longest_task!r} would be named {natural!r} "
                f"({len(natural)} characters; the limit is {MAX_DNS_LABEL})")
    return problems
