"""``JobSpec`` → one Kubernetes JobSet (``jobset.x-k8s.io/v1alpha2``, JobSet v0.12), through the
templates in ``app_templates/jobset/``. Pure.

The shape (every field name from JobSet v0.12.0's API types, cited in tests/user/test_export_jobset.py):

* one ``replicatedJob`` per role with tasks, named after the role, ``replicas: 1``, an Indexed Job
  of ``count`` pods: pod *i* is task *i* (``JOB_COMPLETION_INDEX``), its host name
  ``<name>-<role>-0-<i>`` and, with ``network.enableDNSHostnames``, its address
  ``<name>-<role>-0-<i>.<subdomain>:2222`` (each pod has its own IP, so the TF port is fixed);
* **no bootstrap in the pod.** The cluster is known before anything starts, so ``TF_CONFIG`` (and,
  by ``cluster_spec``, the classic flags or the command's placeholders) is written into the manifest
  once per role, exactly as the bootstrap writes it (:mod:`marathon_tf.contract.cluster_spec`), with
  ``$(JOB_COMPLETION_INDEX)`` where the index goes: Kubernetes puts the pod's index there, no shell
  needed. Every ``$`` of the user's command and env is doubled, so Kubernetes passes them unchanged.
* completion → ``successPolicy``: ``chief`` and ``all_workers`` target the chief's or the workers'
  Job (which completes when all its pods exit 0); ``worker0`` also gives the workers' Job a
  ``successPolicy`` of index 0;
* the restart budget is the job's: ``failurePolicy.maxRestarts: restart.max_failures``. A member that
  needs the whole group (a ps; any member of multi_worker_mirrored: the task side's rule,
  :func:`marathon_tf.contract.restartscope.group_scope`) fails its Job at once (``backoffLimit: 0``) and the JobSet
  restarts, counted. A member TensorFlow takes back alone (chief, workers, evaluators of tf1 /
  parameter_server / custom) is a new pod of its index (``backoffLimit: restart.max_failures``, then
  the JobSet fails) only where that keeps the one budget (:func:`per_pod_budget`: one such role, none
  that restarts the group); otherwise it too restarts the JobSet, counted;
* job-wide rules (the job's ``constraints``) hold across the pods of every role that takes them, a
  role's own across its pods (:func:`_selector`);
* preemptions are never counted: ``podFailurePolicy`` ignores ``DisruptionTarget`` (eviction, node
  drain, preemption) and ``restart.preemption_exit_codes``, or, for a member that needs the whole
  group, fails its Job so that the JobSet restarts without counting (``RestartJobSetAndIgnoreMaxRestarts``,
  matched by the Job controller's failure message); ``restart.permanent_exit_codes``
  (and 126, 127) fail the JobSet;
* cpus / mem / disk / gpus → requests (cpu, memory, ephemeral-storage) and limits (memory,
  ``nvidia.com/gpu``); constraints → affinity (:func:`marathon_tf.user.targets.kube.scheduling`);
  volumes → hostPath, or a PersistentVolumeClaim; ``restart.grace_seconds`` →
  ``terminationGracePeriodSeconds``.
"""

from __future__ import annotations

import json
import math
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from marathon_tf import __version__
from marathon_tf.contract import cluster_spec, naming, spread
from marathon_tf.contract.errors import UsageError
from marathon_tf.contract.restartscope import UNEXECUTABLE_CODES, group_scope
from marathon_tf.user.render import RenderError, render_template, role_facts, template_environment
from marathon_tf.user.spec import JobSpec, Volume
from marathon_tf.user.targets import kube
from marathon_tf.user.targets.losses import job_losses

__all__ = ["JobSetOptions", "build", "jobset_name", "pod_host", "per_pod_budget", "API_VERSION", "MIN_KUBERNETES",
           "JOBSET_NAME_LABEL", "REPLICATED_JOB_LABEL", "TF_PORT", "TENSORBOARD_PORT", "INDEX_VAR",
           "UNTRANSLATABLE_ANNOTATION", "DEFAULT_WORKDIR"]

API_VERSION = "jobset.x-k8s.io/v1alpha2"
#: The oldest Kubernetes the export is for: JobSet v0.12 supports the latest three minors and is tested on
#: 1.32 - 1.34; what the manifest uses of ``batch/v1``
#: Job is older (``podFailurePolicy`` GA in 1.31, ``successPolicy`` beta and on by default in 1.31,
#: ``podReplacementPolicy`` beta and on by default in 1.29).
MIN_KUBERNETES = "1.32"
#: The labels JobSet v0.12 gives every pod.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
TF_PORT, TENSORBOARD_PORT = 2222, 6006
INDEX_VAR = "JOB_COMPLETION_INDEX"
#: the Job controller's annotation of a pod's completion index (``batch.kubernetes.io/job-completion-index``)
INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
UNTRANSLATABLE_ANNOTATION = "marathon-tf/untranslatable"
DEFAULT_WORKDIR = "/workspace"
#: etcd's default request limit (``--max-request-bytes``): the largest object a cluster stores
MAX_OBJECT_BYTES = 3 * 2 ** 19
_MAX_INT32 = 2 ** 31 - 1
_CONTAINER = "tensorflow"
#: the JobSet webhook adds a 5-character suffix to the longest pod name it checks (``-abcde``)
_POD_SUFFIX = 6


@dataclass(frozen=True)
class JobSetOptions:
    """What the job file cannot say about Kubernetes.

    ``name``: the JobSet's (default: the job's name, ``/`` and ``.`` as ``-``); ``namespace``:
    ``metadata.namespace`` (default: none, kubectl's current one); ``image``: for roles the job gives
    none; ``volumes``: a job volume (its ``container_path`` or ``host_path``) → ``pvc:CLAIM``,
    ``hostPath:/ABS/PATH`` or ``emptyDir``; ``workdir``: the container's working directory, the
    Mesos sandbox's stand-in (relative paths of the command and the volumes are under it)."""

    name: str | None = None
    namespace: str | None = None
    image: str | None = None
    volumes: Mapping[str, str] = field(default_factory=dict)
    workdir: str = DEFAULT_WORKDIR


def jobset_name(spec: JobSpec, options: JobSetOptions) -> str:
    """The JobSet's name, checked against what JobSet makes of it (job and pod names within 63)."""
    name = options.name or re.sub(r"[/.]", "-", spec.name.strip("/"))
    flag = "--name" if options.name else "the job's name"
    problem = kube.dns1035_label_problem(name)
    if problem:
        raise UsageError(f"JobSet name {name!r} ({flag}): {problem}",
                         hint="choose one with --name (an RFC 1035 label, e.g. 'mnist-1')")
    for role, count in spec.counts().items():
        longest = pod_host(name, role, count - 1)
        if len(longest) + _POD_SUFFIX > kube.MAX_LABEL:
            raise UsageError(
                f"JobSet name {name!r} ({flag}) is too long: role {role}'s pods are named {longest}-xxxxx "
                f"({len(longest) + _POD_SUFFIX} characters; Kubernetes allows {kube.MAX_LABEL})",
                hint=f"choose one of at most {len(name) - (len(longest) + _POD_SUFFIX - kube.MAX_LABEL)} "
                     f"characters with --name")
    return name


def pod_host(name: str, role: str, index: int) -> str:
    """Task (role, index)'s pod host name: JobSet's ``<jobset>-<replicatedJob>-<jobIndex>-<podIndex>``,
    job index 0."""
    return f"{name}-{role}-0-{int(index)}"


@dataclass
class _Job:
    """One export in the making: the facts every role shares, and what did not translate."""

    spec: JobSpec
    options: JobSetOptions
    name: str
    losses: list[tuple[str, str]]
    volumes: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[dict[str, Any]] = field(default_factory=list)
    #: a failed member a role takes back alone is a new pod of its index (:func:`per_pod_budget`)
    per_pod: bool = True

    @property
    def subdomain(self) -> str:
        return self.name

    def cluster(self) -> dict[str, list[str]]:
        endpoints = {(r, i): f"{pod_host(self.name, r, i)}.{self.subdomain}:{TF_PORT}"
                     for r in naming.CLUSTER_ROLES for i in range(self.spec.role(r).count)}
        return cluster_spec.build_cluster(self.spec.cluster_counts(), endpoints)


def _volume_source(option: str, volume: Volume, index: int) -> dict[str, Any]:
    kind, _, value = option.partition(":")
    read_only = volume.mode == "RO"
    if kind == "pvc" and kube.dns1123_subdomain_ok(value):
        return {"persistentVolumeClaim": {"claimName": value, **({"readOnly": True} if read_only else {})}}
    if kind == "hostPath" and value.startswith("/"):
        return {"hostPath": {"path": value, "type": "Directory"}}
    if option == "emptyDir":
        return {"emptyDir": {}}
    raise UsageError(f"--volume {volume.container_path}={option}: not one of pvc:CLAIM (a claim's name), "
                     f"hostPath:/ABSOLUTE/PATH, emptyDir", hint=f"volumes[{index}] of the job file")


def _volumes(job: _Job) -> None:
    spec, options = job.spec, job.options
    by_key: dict[str, int] = {}
    for i, v in enumerate(spec.volumes):
        by_key.setdefault(v.host_path, i)
    for i, v in enumerate(spec.volumes):
        by_key[v.container_path] = i
    for key in options.volumes:
        if key not in by_key:
            known = ", ".join(sorted({v.container_path for v in spec.volumes})) or "none"
            raise UsageError(f"--volume {key}=…: the job has no volume with that container_path or host_path "
                             f"(its volumes: {known})")
    chosen = {by_key[k]: src for k, src in options.volumes.items()}
    names: set[str] = set()
    for i, v in enumerate(spec.volumes):
        name = re.sub(r"[^a-z0-9]+", "-", v.container_path.lower()).strip("-")[:kube.MAX_LABEL].strip("-")
        if not name or name in names:
            name = f"volume-{i}"
        names.add(name)
        if i in chosen:
            source = _volume_source(chosen[i], v, i)
        elif v.host_path.startswith("/"):
            source = {"hostPath": {"path": v.host_path, "type": "Directory"}}
        else:
            claim = f"{job.name}-{re.sub(r'[^a-z0-9]+', '-', v.host_path.lower()).strip('-')}"[:253].strip("-")
            source = {"persistentVolumeClaim": {"claimName": claim, **({"readOnly": True} if v.mode == "RO" else {})}}
            job.losses.append((f"volumes[{i}].host_path", (
                f"{v.host_path!r} is kept per run by marathon-tf's local runner; the manifest mounts the "
                f"PersistentVolumeClaim {claim!r}: create it (ReadWriteMany), or name yours with "
                f"--volume {v.container_path}=pvc:NAME")))
        job.volumes.append({"name": name, **source})
        mount_path = posixpath.normpath(posixpath.join(job.options.workdir, v.container_path))
        job.mounts.append({"name": name, "mountPath": mount_path, **({"readOnly": True} if v.mode == "RO" else {})})


def _metadata(job: _Job) -> tuple[dict[str, str], dict[str, str]]:
    """The job's labels as the JobSet's labels, or annotations where only the key is a valid one."""
    labels: dict[str, str] = {}
    annotations = {"marathon-tf/job": job.spec.name, "marathon-tf/version": __version__}
    for key, value in job.spec.labels.items():
        if not kube.qualified_name_ok(key):
            job.losses.append((f"labels.{key}", "not a Kubernetes label or annotation key ([prefix/]name: letters, "
                                                "digits, '-', '_', '.', at most 63)"))
        elif kube.label_value_ok(value):
            labels[key] = value
        else:
            annotations[key] = value
    return labels, annotations


def _command(job: _Job, role: str, cluster: dict[str, list[str]]) -> list[str]:
    facts, spec = role_facts(job.spec, role), job.spec
    command = facts.command
    if role == "tensorboard" and command is None:
        return ["tensorboard", "--logdir", kube.literal(spec.logdir), "--port", str(TENSORBOARD_PORT), "--bind_all"]
    assert command is not None  # validated: every member role has a command
    shell = isinstance(command, str)
    argv = [kube.literal(a) for a in ([command] if isinstance(command, str) else command)]
    if role != "tensorboard":
        flags = cluster_spec.classic_flags(cluster, role, 0)
        flags["task_index"] = kube.var_ref(INDEX_VAR)
        argv = cluster_spec.apply_flags(argv, flags, shell=shell, append=spec.cluster_spec in ("flags", "both"))
    return ["/bin/sh", "-c", argv[0]] if shell else argv


def _tf_config(cluster: dict[str, list[str]], role: str) -> str:
    """The TF_CONFIG the bootstrap would export for every task of ``role``, the index a reference."""
    text = json.dumps(cluster_spec.tf_config(cluster, role, -1), sort_keys=True, separators=(",", ":"))
    marker = '"task":{"index":-1,'
    assert text.count(marker) == 1, text
    return text.replace(marker, '"task":{"index":' + kube.var_ref(INDEX_VAR) + ",")


def _env(job: _Job, role: str, cluster: dict[str, list[str]]) -> list[dict[str, Any]]:
    user = role_facts(job.spec, role).env
    env: list[dict[str, Any]] = []
    member = role != "tensorboard"
    if member and INDEX_VAR not in user:
        env.append({"name": INDEX_VAR, "valueFrom": {"fieldRef": {"fieldPath": INDEX_FIELD}}})
    env += [{"name": k, "value": kube.literal(v)} for k, v in sorted(user.items())]
    if member and "PYTHONUNBUFFERED" not in user:  # as the bootstrap does for its program
        env.append({"name": "PYTHONUNBUFFERED", "value": "1"})
    # a TF_CONFIG the job sets is kept, never overwritten (the bootstrap's rule)
    if member and job.spec.cluster_spec in ("tf_config", "both") and "TF_CONFIG" not in user:
        env.append({"name": "TF_CONFIG", "value": _tf_config(cluster, role)})
    return env


def _resources(job: _Job, role: str) -> dict[str, Any]:
    r = job.spec.role(role)
    requests = {"cpu": kube.cpu_quantity(r.cpus), "memory": kube.memory_quantity(r.mem)}
    limits: dict[str, Any] = {"memory": kube.memory_quantity(r.mem)}
    if r.disk:
        requests["ephemeral-storage"] = kube.memory_quantity(r.disk)
    if r.gpus:
        limits["nvidia.com/gpu"] = str(r.gpus)
    return {"requests": requests, "limits": limits}


def _permanent_codes(spec: JobSpec) -> list[int]:
    return sorted(set(spec.restart.permanent_exit_codes) | set(UNEXECUTABLE_CODES))


def _preemption_codes(spec: JobSpec) -> list[int]:
    return sorted(set(spec.restart.preemption_exit_codes) - set(_permanent_codes(spec)))


def _pod_failure_rules(spec: JobSpec, group: bool) -> list[dict[str, Any]]:
    """Preemptions ignored (a new pod of the index, uncounted), or, for a member that needs its group,
    the Job failed so that the JobSet restarts uncounted; permanent exit codes fail the Job."""
    on_preemption = "FailJob" if group else "Ignore"
    rules: list[dict[str, Any]] = [{"action": on_preemption, "onPodConditions": [{"type": "DisruptionTarget"}]},
             {"action": "FailJob", "onExitCodes": {"containerName": _CONTAINER, "operator": "In",
                                                   "values": _permanent_codes(spec)}}]
    if _preemption_codes(spec):
        rules.append({"action": on_preemption, "onExitCodes": {"containerName": _CONTAINER, "operator": "In",
                                                                "values": _preemption_codes(spec)}})
    return rules


def _failure_rules(spec: JobSpec, group: list[str], alone: list[str], per_pod: bool = True) -> list[dict[str, Any]]:
    """The JobSet's rules, first match wins; the Job failure messages matched are the Job controller's
    (``Pod <ns>/<pod> has condition DisruptionTarget matching FailJob rule at index <i>``, ``Container <c>
    for pod <ns>/<pod> failed with exit code <n> matching FailJob rule at index <i>``). A failure no rule
    matches restarts the JobSet, counted (JobSet's default action)."""
    def codes(values: list[int]) -> str:
        return f"failed with exit code ({'|'.join(map(str, values))}) matching FailJob rule"

    rules: list[dict[str, Any]] = []
    if group:
        patterns = ["has condition DisruptionTarget matching FailJob rule"]
        if _preemption_codes(spec):
            patterns.append(codes(_preemption_codes(spec)))
        rules.append({"name": "Preempted", "action": "RestartJobSetAndIgnoreMaxRestarts",
                      "onJobFailureReasons": ["PodFailurePolicy"], "onJobFailureMessagePatterns": patterns,
                      "targetReplicatedJobs": group})
    rules.append({"name": "PermanentExitCode", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"],
                  "onJobFailureMessagePatterns": [codes(_permanent_codes(spec))]})
    restarting = group if per_pod else group + alone  # (per_pod_budget: else every failure restarts it, counted)
    if restarting:
        rules.append({"name": "GroupRestart", "action": "RestartJobSet", "targetReplicatedJobs": restarting})
    if alone and per_pod:
        rules.append({"name": "RestartBudgetSpent", "action": "FailJobSet",
                      "onJobFailureReasons": ["BackoffLimitExceeded"], "targetReplicatedJobs": alone})
    return rules


def _success_policy(spec: JobSpec) -> dict[str, Any]:
    target = "chief" if spec.completion == "chief" else "worker"
    return {"operator": "All", "targetReplicatedJobs": [target]}


def _selector(job: _Job, role: str, job_wide: bool) -> dict[str, Any]:
    """The pods a role's rules are held across: with the job's constraints (``job_wide``), every pod of
    the roles that take the job's constraints (the job's placement scope on Marathon:
    :func:`marathon_tf.user.render.placement_scopes`); with its own, the role's pods. JobSet labels every
    pod with its JobSet's and its replicatedJob's name (``JobSetNameKey``, ``ReplicatedJobNameKey``)."""
    if not job_wide:
        return {"matchLabels": {JOBSET_NAME_LABEL: job.name, REPLICATED_JOB_LABEL: role}}
    roles = [r for r in naming.ROLES if job.spec.role(r).count and role_facts(job.spec, r).constraints_key
             == "constraints"]
    return {"matchLabels": {JOBSET_NAME_LABEL: job.name},
            "matchExpressions": [{"key": REPLICATED_JOB_LABEL, "operator": "In", "values": roles}]}


def per_pod_budget(group: list[str], alone: list[str]) -> bool:
    """Whether the job's restart budget stays the job's while a failed member of a role TensorFlow takes
    back alone is a new pod of its index (its Job's ``backoffLimit``): only with no role that restarts
    the group and at most one such role. Otherwise each role's ``backoffLimit`` would be a budget of its
    own, renewed at every JobSet restart (a JobSet restart recreates every Job); so every member's Job
    fails at its first ordinary failure and the JobSet restarts, counted against ``maxRestarts``: the
    job's ``max_failures`` (in JobSet v0.12 an unmatched failure is ``RestartJobSet``, which fails the
    JobSet once ``maxRestarts`` restarts were counted)."""
    return not group and len(alone) <= 1


def _role_context(job: _Job, role: str, cluster: dict[str, list[str]], group: bool) -> dict[str, Any]:
    spec = job.spec
    facts = role_facts(spec, role)
    image = facts.image or job.options.image
    if not image:
        raise UsageError(f"role {role} has no image: Kubernetes runs every pod in a container",
                         hint="set \"image\" in the job file (or the role's), or pass --image")
    selector = _selector(job, role, facts.constraints_key == "constraints")
    placement = kube.scheduling(facts.constraints, facts.constraints_key, selector)
    if facts.per_task:  # Marathon's per-app meaning: LIKE, IS … carry over; UNIQUE & co. meant nothing across tasks
        per_task = kube.scheduling([c for c in facts.per_task if not spread.relational(c)], facts.per_task_key,
                                   selector)
        placement.node_expressions += per_task.node_expressions
        placement.untranslated += per_task.untranslated
        placement.untranslated += [(f"{facts.per_task_key}[{i}]", f"{c[1]} per task compared each task with its "
                                    "own app's instances on Marathon: it constrained nothing across pods")
                                   for i, c in enumerate(facts.per_task) if spread.relational(c)]
    for loss in placement.untranslated:
        if loss not in job.losses:
            job.losses.append(loss)
    member = role != "tensorboard"
    return {
        "role": role,
        "count": spec.role(role).count,
        "backoff_limit": (0 if group or not job.per_pod else spec.restart.max_failures) if member else _MAX_INT32,
        "pod_failure_rules": _pod_failure_rules(spec, group) if member else None,
        "succeeded_indexes": "0" if role == "worker" and spec.completion == "worker0" else None,
        "restart_policy": "Never" if member else "OnFailure",
        "grace_seconds": int(math.ceil(spec.restart.grace_seconds)),
        "affinity": placement.affinity(),
        "spread": placement.spread,
        "volumes": job.volumes,
        "container_name": _CONTAINER if member else "tensorboard",
        "image": image,
        "command": _command(job, role, cluster),
        "workdir": job.options.workdir,
        "env": _env(job, role, cluster),
        "ports": [{"name": "tf" if member else "http", "containerPort": TF_PORT if member else TENSORBOARD_PORT,
                   "protocol": "TCP"}],
        "volume_mounts": job.mounts,
        "resources": _resources(job, role),
    }


def _check_options(options: JobSetOptions) -> None:
    if options.namespace is not None and not kube.dns1123_label_ok(options.namespace):
        raise UsageError(f"--namespace {options.namespace!r}: not a namespace name (lowercase letters, digits, "
                         "'-', at most 63)")
    if not options.workdir.startswith("/") or ".." in options.workdir.split("/"):
        raise UsageError(f"--workdir {options.workdir!r}: must be an absolute path without '..'")
    if options.image is not None and not options.image.strip():
        raise UsageError("--image: must not be empty")


def build(spec: JobSpec, options: JobSetOptions, *,
          templates_dir: str | None = None) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The JobSet as a dict, and what of the job it does not carry as (job-file path, why), sorted
    by path (also named in the manifest's ``marathon-tf/untranslatable`` annotation)."""
    _check_options(options)
    job = _Job(spec, options, jobset_name(spec, options), job_losses(spec, workdir=options.workdir))
    _volumes(job)
    labels, annotations = _metadata(job)
    cluster = job.cluster()
    members = sum(spec.cluster_counts().values())
    roles = [r for r in naming.ROLES if spec.role(r).count]
    group = [r for r in roles if r != "tensorboard" and group_scope(spec.style, r, members)]
    alone = [r for r in roles if r != "tensorboard" and r not in group]
    job.per_pod = per_pod_budget(group, alone)
    env = template_environment(templates_dir)
    replicated = []
    contexts = [_role_context(job, r, cluster, r in group) for r in roles]
    for context in contexts:
        rjob = render_template(env, "jobset/replicated_job.json.j2", context)
        if rjob.get("name") != context["role"]:
            raise RenderError(f"template jobset/replicated_job.json.j2 must keep the name {context['role']!r} "
                              f"(got {rjob.get('name')!r})")
        replicated.append(rjob)
    job.losses.sort(key=lambda loss: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", loss[0])])
    if job.losses:
        annotations[UNTRANSLATABLE_ANNOTATION] = json.dumps([p for p, _ in job.losses], ensure_ascii=False)
    manifest = render_template(env, "jobset/jobset.json.j2", {
        "name": job.name, "namespace": options.namespace, "labels": labels, "annotations": annotations,
        "subdomain": job.subdomain, "success_policy": _success_policy(spec),
        "max_restarts": spec.restart.max_failures, "failure_rules": _failure_rules(spec, group, alone, job.per_pod),
        "replicated_jobs": replicated,
    })
    if (manifest.get("apiVersion"), manifest.get("kind")) != (API_VERSION, "JobSet") \
            or (manifest.get("metadata") or {}).get("name") != job.name:
        raise RenderError(f"template jobset/jobset.json.j2 must make the JobSet {API_VERSION} named {job.name!r}")
    size = len(json.dumps(manifest, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_OBJECT_BYTES:
        raise UsageError(f"the JobSet would be {size / 2 ** 20:.1f} MiB: more than the "
                         f"{MAX_OBJECT_BYTES / 2 ** 20} MiB Kubernetes stores in one object (each role's "
                         "TF_CONFIG names every task of the job)",
                         hint="split the job, or give it fewer tasks")
    return manifest, job.losses
