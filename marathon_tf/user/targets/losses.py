"""What of a job no export target carries: the Mesos- and Marathon-only keys, each as
``(job-file path, why)``. Pure.

A key is listed when the job sets it to something other than marathon-tf's default (a default is
marathon-tf's own choice, and docs/leaving-mesos.md says what becomes of each); keys a target
translates only in part (constraints, labels, volumes) are listed by the target itself.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import PurePosixPath
from urllib.parse import urlparse

from marathon_tf.user.spec import Admission, Discovery, JobSpec, Restart
from marathon_tf.user.spec.model import DEFAULT_PREWARM

__all__ = ["job_losses"]

_DISCOVERY = ("the pods find each other by their JobSet DNS names (network.enableDNSHostnames); "
              "Mesos-DNS and Marathon's tasks API are not asked")
_WHY = {
    "discovery.mode": _DISCOVERY,
    "discovery.domain": _DISCOVERY,
    "discovery.framework": _DISCOVERY,
    "discovery.nameserver": _DISCOVERY,
    "discovery.http_api": _DISCOVERY,
    "discovery.marathon_url": _DISCOVERY,
    "discovery.startup_timeout": "JobSet has no deadline for all pods to start (TensorFlow waits for its peers "
                                 "for ever); Kueue's waitForPodsReady is the cluster-side counterpart",
    "admission.timeout": "the all-or-nothing start is the scheduler's on Kubernetes (Kueue, or a gang scheduler)",
    "admission.retries": "the all-or-nothing start is the scheduler's on Kubernetes (Kueue, or a gang scheduler)",
    "admission.backoff_seconds": "the all-or-nothing start is the scheduler's on Kubernetes (Kueue, or a gang "
                                 "scheduler)",
    "restart.window_seconds": "JobSet counts restarts over the whole run (failurePolicy.maxRestarts, each role's "
                              "backoffLimit), not within a window",
    "restart.max_preemptions": "preemptions (DisruptionTarget, preemption exit codes) are never counted on "
                               "Kubernetes: there is no budget to exhaust",
    "restart.backoff_seconds": "the Job controller's own back-off (10 s doubling to 6 min) replaces Marathon's",
    "restart.backoff_factor": "the Job controller's own back-off (10 s doubling to 6 min) replaces Marathon's",
    "restart.max_launch_delay_seconds": "the Job controller's own back-off (10 s doubling to 6 min) replaces "
                                        "Marathon's",
    "restart.progress_timeout_seconds": "the progress watchdog is the bootstrap's, which does not run in the pod",
    "restart.first_step_timeout_seconds": "the progress watchdog is the bootstrap's, which does not run in the pod",
    "progress.target_step": "marathon-tf's status (step, ETA) reads the bootstrap, which does not run in the pod",
    "prewarm": "pre-warmed trainers are the bootstrap's, which does not run in the pod (the program starts the "
               "ordinary way)",
    "bootstrap": "the bootstrap does not run in the pod: TF_CONFIG and the flags are written into the manifest",
    "network.name": "a pod joins the cluster's one pod network; a named CNI network needs Multus or the like",
}


def _changed(value: object, default: object) -> list[str]:
    """The dataclass fields of ``value`` that differ from ``default``'s."""
    return [f.name for f in fields(value)  # type: ignore[arg-type]
            if getattr(value, f.name) != getattr(default, f.name)]


def job_losses(spec: JobSpec, *, workdir: str) -> list[tuple[str, str]]:
    """The keys of ``spec`` no target carries, in the job file's order, with the reason."""
    out: list[tuple[str, str]] = []
    for role, (low, high) in spec.elastic().items():  # (docs/elastic.md)
        out.append((f"roles.{role}.count", f"an elastic count ({low}..{high}) is marathon-tf's: the JobSet runs "
                                           f"{high} {role} pods, all of them needed to start (JobSet's replicas do "
                                           f"not change while it runs)"))
    for i, f in enumerate(spec.fetch):
        name = f.dest_path or PurePosixPath(urlparse(f.uri).path).name or f.uri
        shown = name if f.client_path else f.uri
        out.append((f"fetch[{i}]", f"the Mesos fetcher has no Kubernetes counterpart: put {shown!r} in the image "
                                   f"(the working directory is {workdir}) or on a volume"))
    out += [(f"discovery.{k}", _WHY[f"discovery.{k}"]) for k in _changed(spec.discovery, Discovery())]
    out += [(f"admission.{k}", _WHY[f"admission.{k}"]) for k in _changed(spec.admission, Admission())]
    restart_default = Restart()
    for k in ("window_seconds", "max_preemptions", "backoff_seconds", "backoff_factor", "max_launch_delay_seconds"):
        if getattr(spec.restart, k) != getattr(restart_default, k):
            out.append((f"restart.{k}", _WHY[f"restart.{k}"]))
    for k in ("progress_timeout_seconds", "first_step_timeout_seconds"):
        if getattr(spec.restart, k) is not None:
            out.append((f"restart.{k}", _WHY[f"restart.{k}"]))
    if spec.target_step is not None:
        out.append(("progress.target_step", _WHY["progress.target_step"]))
    if spec.prewarm and tuple(spec.prewarm) != DEFAULT_PREWARM:
        out.append(("prewarm", _WHY["prewarm"]))
    if spec.bootstrap != JobSpec.__dataclass_fields__["bootstrap"].default:
        out.append(("bootstrap", _WHY["bootstrap"]))
    if spec.network_name:
        out.append(("network.name", _WHY["network.name"]))
    return out
