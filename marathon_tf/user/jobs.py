"""What the verbs do, on top of the Marathon client: what this Marathon refuses of a job, the PUT of
its group, finding jobs, scale, delete (the checkpoint they have the job save first, as ``checkpoint`` does:
:mod:`marathon_tf.user.saveround`). Returns plain data; never prints (the CLI does). A job's status is
:mod:`marathon_tf.user.status`; the deploy use case (render once, admission once, put, follow) is
:mod:`marathon_tf.user.pipeline`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from marathon_tf.contract import labels as L
from marathon_tf.contract import naming, spread, taskauth, timeline
from marathon_tf.contract.errors import (
    MarathonError,
    MarathonNotFound,
    MarathonTFError,
    SpecError,
    Timeout,
    UsageError,
)
from marathon_tf.marathon import versions
from marathon_tf.marathon.client import Client
from marathon_tf.marathon.jobstate import job_state
from marathon_tf.marathon.model import App, job_apps, parse_apps
from marathon_tf.user import apart
from marathon_tf.user.render import LABEL_PREFIX, SPEC_LABEL, check_version, render_group
from marathon_tf.user.saveround import SAVE_TIMEOUT, SCALE_SAVE_TIMEOUT, deciding_task
from marathon_tf.user.spec import MAX_COUNT, JobSpec, load_dict, with_counts
from marathon_tf.user.spec.hints import closest
from marathon_tf.user.status import job_status

__all__ = [
    "DeployResult", "check_deployable", "marathon_capabilities", "put", "keep_placement", "find_jobs",
    "resolve_job", "deployed_spec",
    "parse_scale_args", "ScalePlan", "plan_scale", "scale", "delete",
]


@dataclass
class DeployResult:
    job: str
    group_id: str
    deployment_id: str | None = None
    version: str | None = None
    plan: dict[str, Any] | None = None  # dry run: Marathon's {"steps": [...]}
    group: dict[str, Any] = field(default_factory=dict)
    admission: str | None = None  # the capacity check: the job does not fit what is free now (it waits)
    admission_note: str | None = None  # why the capacity was not checked (the master cannot be read)
    saved: dict[str, Any] | None = None  # scale: the checkpoint saved before the PUT (save_round)
    save_note: str | None = None  # scale: why none was saved first

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"job": self.job, "groupId": self.group_id}
        if self.plan is not None:
            out["plan"] = self.plan
        else:
            out["deploymentId"] = self.deployment_id
            out["version"] = self.version
        return out


def check_fetch_paths(client: Client, spec: JobSpec) -> None:
    """Paths of this machine in ``fetch`` (``train.py``) work only when the tasks run here: a Mesos
    agent's fetcher would look for ``file:///home/…`` on the agent."""
    mine = [(i, f) for i, f in enumerate(spec.fetch) if f.client_path]
    if not mine or client.is_local():
        return
    i, f = mine[0]
    raise UsageError(f"{spec.source}: fetch[{i}] is a file of this machine ({f.uri}); the Mesos agents of "
                     f"{client.url} would look for it on their own disks",
                     hint="put it where the agents can fetch it (http(s)://, hdfs://, s3://, or into the image) and "
                          "name that URI; a file:///… URI is sent as it is (for storage every agent mounts); "
                          "on this machine use `marathon-tf local serve` or `deploy --local`")


def check_volume_paths(client: Client, spec: JobSpec) -> None:
    """A relative volume ``host_path`` (the examples' ``ckpt``) is kept per run by the local runner; Mesos
    puts it in each task's own sandbox (a relative ``Volume.host_path`` is relative to the container's work
    directory), so on a cluster no task would see another's checkpoints and a relaunched task would start from
    an empty one. Refused, like a local fetch path."""
    relative = [(i, v) for i, v in enumerate(spec.volumes) if not v.host_path.startswith("/")]
    if not relative or client.is_local():
        return
    i, v = relative[0]
    raise UsageError(f"{spec.source}: volumes[{i}].host_path {v.host_path!r} is relative: on {client.url} every "
                     f"task would get its own empty copy in its sandbox (no shared checkpoints, none kept "
                     f"across a relaunch)",
                     hint="set an absolute path of storage every agent mounts (NFS, …), e.g. "
                          f"/mnt/shared/{spec.name}/{v.host_path}")


def check_gpu_feature(client: Client, spec: JobSpec, source: str) -> None:
    """GPU apps get 422 unless Marathon runs with ``--enable_features gpu_resources``; its ``/v2/info`` lists
    the enabled ones in ``marathon_config.features`` (1.4 – 1.11). Refused before anything is sent; nothing is
    said when Marathon does not list its features."""
    asked = [r for r, n in spec.counts().items() if spec.role(r).gpus]
    if not asked:
        return
    features = marathon_capabilities(client).features  # the /v2/info its version came from: read once
    if features is None or "gpu_resources" in features:
        return
    role = asked[0]
    raise UsageError(f"{source}: roles.{role}.gpus is {spec.role(role).gpus}, but Marathon at {client.url} runs "
                     f"without the gpu_resources feature (its features: {', '.join(features) or 'none'}); it "
                     f"would refuse the job",
                     hint="start Marathon with --enable_features gpu_resources, or run the job with gpus 0")


def marathon_capabilities(client: Any) -> versions.Capabilities:
    """What the client's Marathon allows, from its ``/v2/info`` version (read once per client:
    :meth:`~marathon_tf.marathon.client.Client.capabilities`); the newest's when it cannot be told."""
    get = getattr(client, "capabilities", None)
    if callable(get):
        return get()
    try:  # a stand-in client with info() only
        return versions.from_info(client.info())
    except Timeout:
        raise
    except (MarathonError, AttributeError):
        return versions.Capabilities()


def check_deployable(client: Client, spec: JobSpec) -> None:
    """What this Marathon refuses of the job, said before anything is sent (or removed): what its version
    cannot run (:func:`marathon_tf.user.render.check_version`: a container network on 1.4, …), then the
    paths and features below."""
    check_version(spec, marathon_capabilities(client), where=f"at {client.url}")
    check_fetch_paths(client, spec)
    check_volume_paths(client, spec)
    check_gpu_feature(client, spec, spec.source)


def keep_placement(group: dict[str, Any], current: Mapping[str, Any] | None) -> dict[str, Any]:
    """``group`` with, for each app Marathon runs as rendered (its ``marathon-tf/digest`` is the one the
    new rendering would carry), the constraints and placement label Marathon has now: what the job's
    leader wrote there (:mod:`marathon_tf.contract.spread`) is kept, so an unchanged app is not
    restarted by a PUT of the whole group (``scale``, a changed job deployed again)."""
    from marathon_tf.marathon.marker import digest

    have = {(a.id or "").rstrip("/"): a for a in parse_apps((current or {}).get("apps") or [])}
    apps = []
    for app in group.get("apps") or []:  # as rendered: ours
        now = have.get(str(app.get("id", "")).rstrip("/"))
        if now is not None and now.labels.get(L.DIGEST) == digest(app) and spread.LABEL in now.labels:
            labels = {k: v for k, v in (app.get("labels") or {}).items() if k != spread.LABEL}
            labels[spread.LABEL] = now.labels[spread.LABEL]
            app = {**app, "constraints": [list(c) for c in now.constraints], "labels": labels}
        apps.append(app)
    return {**group, "apps": apps} if group.get("apps") is not None else group


def put(client: Client, job: str, group: dict[str, Any], *, force: bool = False, dry_run: bool = False,
        current: Mapping[str, Any] | None = None) -> DeployResult:
    """PUT a rendered group: creating it, or updating it without restarting unchanged tasks (``current``:
    the job's group as Marathon has it, whose placement is kept: :func:`keep_placement`). Every app gets the
    job's key (:func:`marathon_tf.contract.taskauth.with_key`): only its tasks and its owner steer it."""
    group = keep_placement(taskauth.with_key(group, taskauth.owners_job_key(naming.group_id(job))), current)
    if dry_run:
        return DeployResult(job=job, group_id=group["id"], plan=client.put_group(group, force=force, dry_run=True),
                           group=group)
    caps = marathon_capabilities(client)
    sent, later = group, list[dict[str, Any]]()
    if caps.deployment_locks_relaunch:  # 1.4 - 1.7: what may wait is deployed apart (user/apart.py)
        there = current if current is not None else apart.existing(client, group["id"])
        sent, later = apart.split(group, there, caps)
    body = client.put_group(sent, force=force)
    apart.send(client, later, force=force)
    return DeployResult(job=job, group_id=group["id"], deployment_id=body.get("deploymentId"),
                        version=body.get("version"), group=group)


# ----------------------------------------------------------------------------- finding jobs


def find_jobs(client: Client) -> dict[str, list[App]]:
    """marathon-tf jobs on this Marathon: job name → its apps (found by label)."""
    jobs: dict[str, list[App]] = {}
    for app in parse_apps(client.list_apps(label=LABEL_PREFIX + "job")):
        job = app.labels.get(LABEL_PREFIX + "job")
        if job:
            jobs.setdefault(job, []).append(app)
    return dict(sorted(jobs.items()))


def resolve_job(client: Client, job: str | None, verb: str = "status") -> str:
    """The job named, or the only marathon-tf job on Marathon."""
    if job:
        return job.strip("/")
    jobs = find_jobs(client)
    if not jobs:
        raise UsageError(f"no marathon-tf job found on {client.url}",
                         hint="deploy one with: marathon-tf deploy job.json")
    if len(jobs) > 1:
        raise UsageError(f"several marathon-tf jobs on {client.url}: {', '.join(jobs)}",
                         hint=f"name one: marathon-tf {verb} {next(iter(jobs))} …")
    return next(iter(jobs))


def deployed_spec(client: Client, job: str) -> tuple[JobSpec, dict[str, Any]]:
    """The job spec a job was deployed with (kept in worker-0's label), and its group."""
    try:
        group = client.get_group(naming.group_id(job))
    except MarathonNotFound:
        raise UsageError(f"job {job!r} does not exist on {client.url}") from None
    apps = job_apps(group)
    anchor = apps.get("worker-0")
    raw = anchor.labels.get(SPEC_LABEL) if anchor is not None else None
    if not raw:
        raise UsageError(f"group {naming.group_id(job)} was not deployed by marathon-tf "
                         f"(no {SPEC_LABEL} label on worker-0)")
    try:
        return load_dict(json.loads(raw), source=f"{naming.group_id(job)} ({SPEC_LABEL})"), group
    except (ValueError, SpecError) as e:
        raise UsageError(f"the job spec stored on {naming.group_id(job)} cannot be read: {e}") from None


# ----------------------------------------------------------------------------- scale

#: Role names as the job file spells them (``worker=8``), and their plurals as aliases (``workers=8``).
ROLE_ALIASES = {**{r: r for r in naming.ROLES}, **{r + "s": r for r in naming.ROLES}}
_SCALE_ARG = re.compile(r"^(?P<role>[a-z]+)=(?:(?P<lo>[0-9]{1,6})\.\.(?P<hi>[0-9]{1,6})"
                        r"|(?P<sign>[+-]?)(?P<n>[0-9]{1,6}))$")
#: A change of an elastic count's bounds (``worker=2..6``): the sign of :func:`parse_scale_args`.
BOUNDS = ".."


def parse_scale_args(args: list[str]) -> dict[str, tuple[str, Any]]:
    """``["worker=8", "ps=+1"]`` → ``{"worker": ("=", 8), "ps": ("+", 1)}`` (``workers=8`` too); an elastic
    count's new bounds ``worker=2..6`` → ``("..", (2, 6))``; checked before any request."""
    if not args:
        raise UsageError("nothing to scale: give ROLE=N, e.g. worker=8")
    out: dict[str, tuple[str, Any]] = {}
    for arg in args:
        m = _SCALE_ARG.fullmatch(arg)
        if not m:
            raise UsageError(f"{arg!r}: expected ROLE=N (e.g. worker=8, ps=2, worker=+2; worker=2..6: an elastic "
                             f"count's bounds)")
        role = ROLE_ALIASES.get(m.group("role"))
        if role is None:
            guess = closest(m.group("role"), ROLE_ALIASES)
            raise UsageError(f"{arg!r}: unknown role {m.group('role')!r}"
                             + (f"; did you mean {ROLE_ALIASES[guess]}?" if guess else "")
                             + f" (roles: {', '.join(naming.ROLES)}; a plural such as workers is taken too)")
        if role in out:
            raise UsageError(f"{arg!r}: {role} is given twice")
        if m.group("lo") is not None:
            lo, hi = int(m.group("lo")), int(m.group("hi"))
            if not 1 <= lo <= hi or hi > MAX_COUNT:
                raise UsageError(f"{arg!r}: bounds MIN..MAX with 1 <= MIN <= MAX <= {MAX_COUNT}")
            out[role] = (BOUNDS, (lo, hi))
            continue
        n = int(m.group("n"))
        if n > MAX_COUNT:
            raise UsageError(f"{arg!r}: at most {MAX_COUNT} tasks per role")
        out[role] = (m.group("sign") or "=", n)
    return out


def apply_scale(spec: JobSpec, changes: Mapping[str, tuple[str, Any]]) -> JobSpec:
    counts: dict[str, int | tuple[int, int]] = {}
    for role, (sign, n) in changes.items():
        if sign == BOUNDS:
            counts[role] = n
            continue
        cur = spec.role(role).count
        count = n if sign == "=" else cur + n if sign == "+" else cur - n
        if count < 0:
            raise UsageError(f"{role}: {cur} - {n} would be negative")
        counts[role] = count
    try:
        return with_counts(spec, counts)
    except SpecError as e:
        raise UsageError(f"cannot scale to {counts}: {e.lines()[0].split(': ', 1)[-1]}") from None


@dataclass
class ScalePlan:
    start: list[str]
    stop: list[str]
    restart: list[str]
    unchanged: list[str]

    def to_dict(self) -> dict[str, list[str]]:
        return {"start": self.start, "stop": self.stop, "restart": self.restart, "unchanged": self.unchanged}


_COMPARED = ("cmd", "env", "cpus", "mem", "disk", "gpus", "container", "constraints", "fetch", "portDefinitions")


def plan_scale(current_group: dict[str, Any], new_group: dict[str, Any]) -> ScalePlan:
    """Which tasks start, stop and restart when ``new_group`` replaces ``current_group``."""
    old, new = job_apps(current_group), job_apps(new_group)
    start = [t for t in new if t not in old]
    stop = [t for t in old if t not in new]
    restart: list[str] = []
    unchanged: list[str] = []
    for t in new:
        if t in old:
            changed = any(old[t].get(k) != new[t].get(k) for k in _COMPARED if k in new[t])
            (restart if changed else unchanged).append(t)
    return ScalePlan(start, stop, restart, unchanged)


def elastic_target(spec: JobSpec, changes: Mapping[str, tuple[str, Any]],
                   apps: Mapping[str, Mapping[str, Any]]) -> dict[str, int] | None:
    """``scale worker=5`` of a running elastic job: its target size (``{role: n}``), not a new job file: the
    role's apps ``role-0`` … ``role-(n-1)`` run or wait as standbys, the others are set to 0 instances (no
    configuration changes, nothing restarts but the job's size, docs/elastic.md). None when ``changes`` are
    not that (bounds, fixed roles). UsageError for a target outside the role's bounds."""
    targets = {}
    for role, (sign, n) in changes.items():
        r = spec.role(role)
        if sign == BOUNDS or r.min_count is None:
            return None
        current = sum(1 for name, a in apps.items() if name.startswith(f"{role}-") and App.parse(a).instances)
        target = n if sign == "=" else current + n if sign == "+" else current - n
        if not r.min_count <= target <= r.count:
            raise UsageError(f"{role}={target} is outside the job's elastic bounds {r.count_text}",
                             hint=f"change the bounds with: marathon-tf scale {spec.name} {role}="
                                  f"{min(target, r.min_count)}..{max(target, r.count)}")
        targets[role] = target
    return targets


def _scale_target(client: Client, job: str, targets: Mapping[str, int], current: dict[str, Any], *,
                  dry_run: bool) -> tuple[ScalePlan, DeployResult | None]:
    """Set the elastic roles' apps to their target's instances (one bulk PUT of ``instances`` only)."""
    apps = job_apps(current)
    start: list[str] = []
    stop: list[str] = []
    unchanged: list[str] = []
    updates: list[dict[str, Any]] = []
    for name, app in sorted(apps.items(), key=lambda a: naming.parse_task_name(a[0]) or ("", 0)):
        key = naming.parse_task_name(name)
        if key is None or key[0] not in targets:
            continue
        want = 1 if key[1] < targets[key[0]] else 0
        have = app.instances
        (unchanged if want == have else start if want else stop).append(name)
        if want != have:
            updates.append({"id": app.id, "instances": want})
    plan = ScalePlan(start, stop, [], unchanged)
    if not updates:
        return plan, None
    if dry_run:
        return plan, DeployResult(job=job, group_id=naming.group_id(job), plan={"steps": [
            {"actions": [{"action": "ScaleApplication", "app": u["id"]} for u in updates]}]})
    deployment = apart.update(client, updates, {(a.id or "").rstrip("/"): a for a in apps.values()},
                              marathon_capabilities(client), force=True)  # (1.4 - 1.7: standbys apart)
    return plan, DeployResult(job=job, group_id=naming.group_id(job), deployment_id=deployment)


def scale(client: Client, job: str, changes: Mapping[str, tuple[str, Any]], *, templates_dir: str | None = None,
          force: bool = False, dry_run: bool = False,
          wait_for_resources: bool = True, mesos: str | None = None) -> tuple[ScalePlan, DeployResult | None]:
    """Re-render with the new counts and PUT; ``(plan, None)`` when nothing would change.

    The plan compares our own renderings of the old and the new spec (Marathon's copy carries its
    defaults, which would make every task look changed). A finished job (its record says
    Succeeded or Failed), or one whose tasks report its ``progress.target_step`` reached, is not
    started again unless ``force``. ``mesos``: the Mesos master the user named (``--mesos``)."""
    spec, current = deployed_spec(client, job)
    targets = elastic_target(spec, changes, job_apps(current))
    if targets is not None and job_state(job_apps(current).values()) not in (L.JobState.SUCCEEDED,
                                                                              L.JobState.FAILED):
        return _scale_target(client, job, targets, current, dry_run=dry_run)  # a running elastic job's size
    new_spec = apply_scale(spec, changes)
    caps = marathon_capabilities(client)  # both rendered for this Marathon: only the counts differ
    check_version(new_spec, caps, where=f"at {client.url}")
    old_group = render_group(spec, templates_dir=templates_dir, marathon_version=caps)
    new_group = render_group(new_spec, templates_dir=templates_dir, marathon_version=caps)
    plan = plan_scale(old_group, new_group)
    state = job_state(job_apps(current).values())
    ended = state in (L.JobState.SUCCEEDED, L.JobState.FAILED)
    if ended and not force:
        raise UsageError(f"job {job} has ended ({state}): scaling it would start every task again",
                         hint=f"to run it again from its checkpoint: marathon-tf scale {job} … --force")
    if spec.target_step and not ended and not force:  # done training, its end not recorded yet
        step = job_status(client, job, mesos=mesos).step
        if isinstance(step, int) and step >= spec.target_step:
            raise UsageError(f"job {job} has reached its target step ({step} of {spec.target_step}): scaling "
                             f"it now would restart its programs for nothing",
                             hint=f"to scale it anyway: marathon-tf scale {job} … --force")
    if not ended and not (plan.start or plan.stop or plan.restart):
        return plan, None
    check_gpu_feature(client, new_spec, f"job {job}")
    if ended:  # everything starts again
        plan = ScalePlan(start=list(job_apps(new_group)), stop=[t for t in job_apps(old_group)
                                                                  if t not in job_apps(new_group)],
                         restart=[], unchanged=[])
    from marathon_tf.user import admission  # the tasks that start must fit (exit 2 / 4 before any PUT)

    verdict = admission.check(client, new_spec, wait=wait_for_resources, templates_dir=templates_dir,
                              # task names naming.task_name made (job_apps): they parse
                              starting=[cast(tuple[str, int], naming.parse_task_name(t)) for t in plan.start],
                              mesos=mesos)
    saved, note, saver = None, None, None
    if not dry_run and not ended and (plan.stop or plan.restart):  # the tasks that stop: the job's checkpoint first
        change = timeline.cluster_change(spec.counts(), new_spec.counts())  # "2 → 3 workers", as status says it
        try:
            saver = deciding_task(client, job)
            # held at that checkpoint until the PUT stops it (when the PUT stops the deciding task): every stopped
            # task's own round then finds the job saved and held there, and the scale costs one round, not two
            saved = saver.save(job, reason=f"marathon-tf scale ({change})", timeout=SCALE_SAVE_TIMEOUT,
                               hold=saver.task in {*plan.stop, *plan.restart})
        except MarathonTFError as e:  # (a program without the save hook: scaled as before, from its last checkpoint)
            note = e.message
    try:
        result = put(client, job, new_group, force=force, dry_run=dry_run, current=current)
    except BaseException:
        if saved is not None and saved.get("held") and saver is not None:
            saver.release(job, "the scale's PUT did not go through")
        raise
    result.admission, result.admission_note = verdict.shortfall, verdict.note
    result.saved, result.save_note = saved, note
    return plan, result


def delete(client: Client, job: str, *, force: bool = False, save: bool = False) -> dict[str, Any]:
    """Delete the job's group; ``save``: have it save a checkpoint first
    (:func:`~marathon_tf.user.saveround.save_round`; a job that cannot is not deleted: :class:`SaveFailed`). The
    answer has the checkpoint in ``saved``."""
    saver = deciding_task(client, job) if save else None
    # held at that checkpoint until the delete stops it: each task's own round at its stop finds it saved there
    saved = saver.save(job, reason="marathon-tf delete --save", timeout=SAVE_TIMEOUT, hold=True) if saver else None
    try:
        body = client.delete_group(naming.group_id(job), force=force)
    except BaseException as e:
        if saver is not None and saved is not None and saved.get("held"):
            saver.release(job, "the delete did not go through")
        if isinstance(e, MarathonNotFound):
            raise UsageError(f"job {job!r} does not exist on {client.url}") from None
        raise
    body = body if isinstance(body, dict) else {}
    return {**body, "saved": saved} if saved else body
