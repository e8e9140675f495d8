"""The Python API: submit, watch and change jobs from a notebook, a scheduler or a service.

::

    from marathon_tf import Job, Marathon, LocalCluster

    job = Job.from_file("examples/linear-regression-tf1/job.json")   # validated; job.warnings
    with LocalCluster() as cluster:              # a local Marathon + Mesos-DNS (or Marathon(url, token=…))
        run = cluster.deploy(job)                # -> JobHandle
        status = run.wait(timeout=600)           # -> JobStatus, state "Succeeded"
        for line in run.logs(tail=3):            # LogLine(task, stream, text)
            print(line.task, line.text)

Everything returned is a typed view of what the CLI prints with ``-o json``
(:mod:`marathon_tf.user.results`); every error is one of :mod:`marathon_tf.contract.errors`
(``SpecError`` for a bad job, ``MarathonError`` and its kinds for Marathon's answers, ``Timeout``,
``JobFailed``, ``NotPlaced``), with the message and hint the CLI prints. Nothing here prints. The
``marathon-tf`` command is a thin layer over this module (:mod:`marathon_tf.user.cli`): CLI → API →
the use cases (:mod:`.pipeline`: deploy and follow; :mod:`.status`: a job's status; :mod:`.jobs`:
find, scale, delete; :mod:`.history`: events; :mod:`.logs`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from marathon_tf.contract import naming
from marathon_tf.contract.errors import UsageError
from marathon_tf.user.results import Checkpoint, Deployment, JobStatus, JobSummary, LocalRunResult, LogLine, ScaleResult
from marathon_tf.user.spec import JobSpec

if TYPE_CHECKING:
    from marathon_tf.user.targets import ExportResult

__all__ = ["Job", "Marathon", "LocalCluster", "JobHandle", "connect", "parse_scale", "ROLE_NAMES"]

Progress = Callable[[JobStatus], None]


class Job:
    """A validated job file. ``Job.from_file("job.json")``, ``Job.from_dict({...})``; ``spec`` is the
    immutable :class:`~marathon_tf.user.spec.JobSpec`, ``warnings`` what will likely fail at run time."""

    def __init__(self, spec: JobSpec):
        self.spec = spec

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> Job:
        """Read and validate a job file (every problem at once: :class:`SpecError`)."""
        from marathon_tf.user.spec import load_job

        return cls(load_job(path))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, base_dir: str | os.PathLike | None = None,
                  source: str = "job.json") -> Job:
        """Validate a job given as a dict; relative ``fetch`` paths are relative to ``base_dir``."""
        from marathon_tf.user.spec import load_dict

        return cls(load_dict(dict(data), source=source, base_dir=Path(base_dir).resolve() if base_dir else None))

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def warnings(self) -> list[str]:
        from marathon_tf.user.spec.lint import warnings

        return warnings(self.spec)

    def summary(self) -> dict[str, Any]:
        """What ``marathon-tf validate -o json`` prints (``placement``: what the job's constraints mean,
        across tasks or per app: :func:`marathon_tf.user.render.placement_lines`; ``elastic``: what an elastic
        count does in this style, docs/elastic.md)."""
        from marathon_tf.user.render import placement_lines
        from marathon_tf.user.spec.model import ELASTIC_LIMITS

        out: dict[str, Any] = {"file": self.spec.source, "valid": True, "name": self.name, "style": self.spec.style,
                               "counts": self.spec.counts(), "apps": len(self.spec.tasks()), "warnings": self.warnings,
                               "placement": placement_lines(self.spec)}
        elastic = self.spec.elastic()
        if elastic:
            out["elastic"] = {r: {"min": lo, "max": hi, "limits": ELASTIC_LIMITS[self.spec.style]}
                              for r, (lo, hi) in elastic.items()}
        return out

    def render(self, templates_dir: str | None = None, *, marathon_version: str | None = None) -> dict[str, Any]:
        """The Marathon app group this job deploys as (``marathon-tf render``), for the Marathon of
        ``marathon_version`` (``"1.4.3"``; None: the newest, 1.11 — deploy and scale use the version their
        Marathon's ``/v2/info`` says). A job that version cannot run is
        :class:`~marathon_tf.user.render.VersionRefused` (a ``UsageError``, exit 2); an unreadable version
        is a ``UsageError``."""
        from marathon_tf.user.render import render_group

        return render_group(self.spec, templates_dir=templates_dir, marathon_version=_version(marathon_version))

    def render_json(self, templates_dir: str | None = None, *, marathon_version: str | None = None) -> str:
        """The same group as one compact JSON line with sorted keys (``marathon-tf render`` to a program)."""
        from marathon_tf.user.render import render_group_json

        return render_group_json(self.spec, templates_dir=templates_dir, marathon_version=_version(marathon_version))

    def export(self, target: str = "jobset", *, fmt: str = "yaml", strict: bool = False,
               **options: Any) -> ExportResult:
        """The same job as another orchestrator's manifest (``marathon-tf export --to jobset``): a
        Kubernetes JobSet. ``result.text`` is the manifest, ``result.untranslatable`` the job-file keys
        it does not carry; ``strict`` raises :class:`~marathon_tf.user.targets.Untranslatable` (exit 2)
        instead. ``options``: ``name``, ``namespace``, ``image``, ``volumes``, ``workdir``,
        ``templates_dir`` (:func:`marathon_tf.user.targets.export`; docs/leaving-mesos.md)."""
        from marathon_tf.user.targets import export

        return export(self.spec, target, fmt=fmt, strict=strict, **options)

    def to_dict(self) -> dict[str, Any]:
        """The normalized job file."""
        return self.spec.to_dict()

    def run_local(self, *, timeout: float | None = None, state_dir: str | os.PathLike | None = None,
                  on_output: Callable[[LogLine], None] = lambda line: None, on_progress: Progress = lambda s: None,
                  on_deployed: Callable[[Deployment], None] = lambda d: None,
                  templates_dir: str | None = None, cluster: dict[str, Any] | None = None,
                  wait_for_resources: bool = True,
                  on_stopping: Callable[[int, float], None] = lambda tasks, grace: None,
                  admission_timeout: float | None = None) -> LocalRunResult:
        """Run the job to its end on this machine, as ``deploy --local`` does: a fresh local cluster,
        stopped when the job ends (also on Ctrl-C), or when it was not placed (``NotPlaced``: the
        agents given with ``agent_resources`` cannot hold it; a task that fits on none is refused with
        :class:`UsageError` before the job is sent). ``on_output`` gets every line of every task.
        ``cluster``: the local cluster's options (:class:`~marathon_tf.local.LocalCluster`'s: ``agents``,
        ``agent_resources``, ``agent_attributes``, ``features``, ``dns_refresh``, ``dns_ttl`` …).
        On Ctrl-C (or SIGTERM/SIGHUP) ``on_stopping(tasks, longest grace in s)`` is called before the
        tasks are stopped with their grace; a second one kills them at once. ``admission_timeout``:
        as :meth:`Marathon.deploy`'s. The result's ``error()`` is the error its end is (exit code on
        its class), None when it succeeded."""
        from marathon_tf.user import admission, localrun

        def deployed(deployment: Deployment, cluster) -> None:
            on_deployed(replace(deployment, mesos_dns=cluster.mesos_dns))

        run = localrun.run(admission.effective(self.spec, admission_timeout), templates_dir=templates_dir,
                           timeout=timeout, state_dir=Path(state_dir) if state_dir else None,
                           emit_task_line=lambda task, stream, text: on_output(LogLine(task, stream, text)),
                           progress=on_progress, on_deployed=deployed,
                           cluster_options=cluster, wait_for_resources=wait_for_resources, stopping=on_stopping)
        return LocalRunResult(job=self.name, state=run.state, seconds=run.seconds, state_dir=str(run.state_dir),
                              status=run.status, logdir_path=run.logdir)

    def check_capacity(self, mesos: str, *, templates_dir: str | None = None,
                       admission_timeout: float | None = None):
        """The admission check against the Mesos master at ``mesos`` alone, nothing sent (``deploy
        --dry-run`` without a Marathon): :class:`UsageError` for a task that fits on no agent; the
        verdict (:class:`marathon_tf.user.admission.Verdict`: ``shortfall``, ``note``) otherwise."""
        from marathon_tf.user import admission

        return admission.check(None, admission.effective(self.spec, admission_timeout), mesos=mesos,
                               templates_dir=templates_dir)

    def __repr__(self) -> str:
        return f"Job({self.name!r}, style={self.spec.style!r}, counts={self.spec.counts()!r})"


def connect(url: str | None = None, *, user: str | None = None, password: str | None = None,
            token: str | None = None, ca_bundle: str | None = None, insecure: bool = False,
            max_bytes: int | None = None):
    """A Marathon REST client for ``url`` (a comma-separated list fails over; default ``MARATHON_URL``,
    then the config file), credentials from the arguments, the environment or the config file. One
    unreachable Marathon fails at once (503 and 409 locks are retried). ``max_bytes``: the largest
    answer read (default ``MARATHON_TF_MAX_RESPONSE``, else 32 MiB)."""
    from marathon_tf.marathon.client import CLI_TIMEOUT, Client, RetryPolicy
    from marathon_tf.user import config

    endpoint = config.resolve(url=url, user=user, password=password, token=token, ca_bundle=ca_bundle,
                              insecure=insecure)
    if insecure:
        from marathon_tf.marathon import transport

        transport.quiet_insecure()
    return Client(endpoint.urls, user=endpoint.user, password=endpoint.password, token=endpoint.token,
                  verify=endpoint.verify, timeout=CLI_TIMEOUT, retry=RetryPolicy(connection_errors=False),
                  max_bytes=max_bytes)


def _version(text: str | None) -> Any:
    """``--marathon-version`` / ``marathon_version=`` checked: a Marathon version, or None."""
    if text is None:
        return None
    from marathon_tf.marathon.versions import parse_version

    version = parse_version(text)
    if version is None:
        raise UsageError(f"--marathon-version {text!r}: not a Marathon version (e.g. 1.4.3, 1.7, 1.11.24)",
                         hint="the version Marathon's /v2/info says (its \"version\")")
    return version


class Marathon:
    """A Marathon (1.4–1.11) that runs marathon-tf jobs: ``Marathon("http://m:8080", token=…)``, or
    ``Marathon()`` for ``MARATHON_URL`` and the config file. ``client`` may be given instead.
    ``mesos``: the Mesos master's URL (default ``MESOS_URL``, else the one Marathon names), read for the
    cluster's capacity before a deploy or scale and for the numbers of a waiting job."""

    def __init__(self, url: str | None = None, *, user: str | None = None, password: str | None = None,
                 token: str | None = None, ca_bundle: str | None = None, insecure: bool = False,
                 client: Any = None, mesos: str | None = None):
        self._client = client if client is not None else (
            connect(url, user=user, password=password, token=token, ca_bundle=ca_bundle, insecure=insecure))
        self.mesos = mesos or os.environ.get("MESOS_URL") or None

    @property
    def client(self):
        """The REST client (:class:`marathon_tf.marathon.client.Client`)."""
        return self._client

    @property
    def url(self) -> str:
        return self.client.url

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    # -- jobs -----------------------------------------------------------------------------------
    def jobs(self) -> list[JobSummary]:
        """The marathon-tf jobs on this Marathon (``marathon-tf list``)."""
        from marathon_tf.marathon.jobstate import job_state
        from marathon_tf.user import jobs

        return [JobSummary(name, len(apps), sum(a.tasks_running for a in apps), job_state(apps).value)
                for name, apps in jobs.find_jobs(self.client).items()]

    def resolve(self, job: str | None = None, verb: str = "status") -> str:
        """The job named, or the only marathon-tf job on this Marathon (else :class:`UsageError`)."""
        from marathon_tf.user import jobs

        return jobs.resolve_job(self.client, job, verb=verb)

    def job(self, name: str) -> JobHandle:
        return JobHandle(self, name.strip("/"))

    def deploy(self, job: Job | JobSpec, *, resume: bool | None = None, force: bool = False,
               dry_run: bool = False, templates_dir: str | None = None, wait_for_resources: bool = True,
               admission_timeout: float | None = None) -> JobHandle:
        """Deploy (PUT) the job's group: creates it, or changes only what changed. A job running
        exactly so is left alone (``deployment.changed`` False). A job that has ended (or, on the local
        runner, left its volumes) is deployed again only with ``resume=True`` (from its checkpoints)
        or ``resume=False`` (its local volumes removed first); else :class:`UsageError`.

        Admission (:mod:`marathon_tf.user.admission`), before anything is sent: a task that fits on
        no agent raises :class:`UsageError`; a job that does not fit what is free now is said in
        ``deployment.admission`` and waits (``wait_for_resources=False``: :class:`NotPlaced`).
        ``admission_timeout`` (default ``MARATHON_TF_ADMISSION_TIMEOUT``, else the job file's).
        The whole use case: :func:`marathon_tf.user.pipeline.deploy` (the group rendered once,
        admission checked once)."""
        from marathon_tf.user import admission, pipeline

        spec = admission.effective(job.spec if isinstance(job, Job) else job, admission_timeout)
        deployment = pipeline.deploy(self.client, spec, resume=resume, force=force, dry_run=dry_run, mesos=self.mesos,
                                     templates_dir=templates_dir, wait_for_resources=wait_for_resources)
        return JobHandle(self, spec.name, deployment)

    def status(self, job: str | None = None, *, drive: bool = True, timeline: bool = False) -> JobStatus:
        """The job's state, progress and tasks (``marathon-tf status -o json``). ``drive``: a starting
        job past its admission deadline is released, a ``Queued`` one whose next attempt is due is
        submitted again (:mod:`marathon_tf.user.release`; then the status after it is returned).
        ``timeline``: with its ``timeline`` (``status --timeline``: the start's phases, every recovery)."""
        from marathon_tf.user import release
        from marathon_tf.user.status import job_status

        name = self.resolve(job)
        status = job_status(self.client, name, mesos=self.mesos)
        if drive and release.drive(self.client, name, status.to_dict(), mesos=self.mesos):
            status = job_status(self.client, name, mesos=self.mesos)
        return status.updated(timeline=self.timeline(name, status)) if timeline else status

    def timeline(self, job: str, status: JobStatus) -> dict[str, Any]:
        """The job's timeline (``status --timeline``): the start's phases and every recovery, from its
        events (:mod:`marathon_tf.user.history`; ``status``: the job's status now)."""
        from marathon_tf.user import history

        return history.status_timeline(history.job_events(self.client, job.strip("/"), status.to_dict()))

    def events(self, job: str | None = None) -> dict[str, Any]:
        """What happened to the job, in time order (``marathon-tf events -o json``): ``{"job", "events":
        [{"time", "task", "reason", "message", …}], "omitted", "source"}``."""
        from marathon_tf.user import history
        from marathon_tf.user.status import job_status

        name = self.resolve(job, verb="events")
        found = history.job_events(self.client, name, job_status(self.client, name, mesos=self.mesos).to_dict())
        return {"job": name, **found, "events": history.events_rows(found["events"])}

    def wait(self, job: str | None = None, *, deployment_id: str | None = None,
             timeout: float | None = None, on_progress: Progress = lambda s: None, decide: bool = True,
             check: bool = False, admit: bool = True) -> JobStatus:
        """Follow the deployment, then the job, until its record says Succeeded, Failed or NotPlaced;
        raises :class:`~marathon_tf.contract.errors.Timeout` after ``timeout`` seconds (the job keeps
        running) and, with ``check``, :class:`~marathon_tf.contract.errors.JobFailed` when it failed
        (:class:`~marathon_tf.contract.errors.NotPlaced` when it was not placed; both carry the final
        status: ``error.status``; :meth:`JobStatus.error`).
        ``decide``: a task that can never start (its command cannot be executed, its URIs cannot be
        fetched…) fails the job, as the deciding task does. ``admit``: past the admission deadline the
        job is released, and submitted again when its next attempt is due (:mod:`marathon_tf.user.release`).
        The one wait loop: :func:`marathon_tf.user.pipeline.follow`."""
        from marathon_tf.user import pipeline

        name = self.resolve(job)
        final = pipeline.follow(self.client, name, deployment_id=deployment_id, timeout=timeout, mesos=self.mesos,
                                on_progress=on_progress, decide=decide, admit=admit)
        error = final.error() if check else None
        if error is not None:
            raise error
        return final

    def wait_deployment(self, job: str, deployment_id: str, *, timeout: float | None = None,
                        on_progress: Progress = lambda s: None) -> JobStatus:
        """Until the deployment is done (every task it starts running and healthy; ``scale --wait``):
        the job's status then. :class:`~marathon_tf.contract.errors.Timeout` after ``timeout`` s."""
        from marathon_tf.user import watch

        return watch.wait_deployment(self.client, deployment_id, job.strip("/"), timeout=timeout, mesos=self.mesos,
                                     on_progress=on_progress)

    def scale(self, job: str | None = None, *changes: str, force: bool = False, dry_run: bool = False,
              templates_dir: str | None = None, wait_for_resources: bool = True,
              **counts: int | str) -> ScaleResult:
        """Change role counts: ``scale("mnist", worker=8)``, ``scale("mnist", ps="+1")`` or
        ``scale("mnist", "worker=8")`` (checked before any request). Of an elastic job (docs/elastic.md)
        ``worker=5`` sets its target size within its bounds (nothing is re-rendered: the apps past it are set to
        0 instances, the others run or wait as standbys) and ``worker="2..6"`` changes its bounds (a new job
        file: every task restarts from the checkpoint, as a fixed job's scale). A job that has ended starts again
        only with ``force``. The tasks that start are checked against the cluster first, as a
        deploy's (:meth:`deploy`): ``admission`` says a shortfall."""
        from marathon_tf.user import jobs

        args = list(changes) + [f"{role}={n}" for role, n in counts.items()]
        parsed = jobs.parse_scale_args(args)
        name = self.resolve(job, verb="scale")
        plan, result = jobs.scale(self.client, name, parsed, templates_dir=templates_dir, force=force,
                                  dry_run=dry_run, wait_for_resources=wait_for_resources, mesos=self.mesos)
        tasks: dict[str, Any] = {k: tuple(v) for k, v in plan.to_dict().items()}
        if result is None:
            return ScaleResult(job=name, changed=False, **tasks)
        return ScaleResult(job=name, changed=True, deployment_id=result.deployment_id, plan=result.plan,
                           group_id=result.group_id, version=result.version, admission=result.admission,
                           admission_note=result.admission_note, saved=result.saved, save_note=result.save_note,
                           **tasks)

    def checkpoint(self, job: str | None = None, *, timeout: float | None = None) -> Checkpoint:
        """Have the job save a checkpoint now, without stopping it (``marathon-tf checkpoint``): its
        deciding task asks its program through the save hook (docs/restarts.md) and confirms the
        checkpoint in the logdir. :class:`~marathon_tf.contract.errors.SaveFailed` with the reason when
        it cannot (its program has no save hook, none runs now, not within ``timeout`` s)."""
        from marathon_tf.marathon.jobstate import stored_spec
        from marathon_tf.marathon.model import job_apps
        from marathon_tf.user import localstate

        name = self.resolve(job, verb="checkpoint")
        from marathon_tf.user.saveround import SAVE_TIMEOUT, save_round

        saved = save_round(self.client, name, timeout=timeout or SAVE_TIMEOUT)
        spec = stored_spec(job_apps(self.client.get_group(naming.group_id(name))).values())
        where = localstate.deployed_logdir(spec, localstate.work_dir(self.client), name) if spec.get("logdir") else None
        return Checkpoint(job=name, task=saved["task"], step=saved.get("step"), path=saved.get("path"),
                          seconds=float(saved.get("seconds") or 0.0), logdir_path=where)

    def logs(self, job: str, task: str | None = None, *, stream: str = "both", tail: int | None = None,
             follow: bool = False, previous: bool = False, since: float | None = None, agent_port: int = 5051,
             agent_url: str | None = None) -> Iterator[LogLine]:
        """The tasks' output, line by line, read from the Mesos agents' sandboxes (also after the
        tasks ended). ``since``: seconds; ``follow`` keeps going until the job ends.

        A task's stdout and stderr are two files without a time per line (as Mesos keeps them), so
        they are not interleaved: a task's stdout lines come first, then its stderr's (each
        :class:`LogLine` says its ``stream``). ``tail``: the last N lines *of each stream* of each
        task, as ``marathon-tf logs --tail N`` does: with ``stream="both"`` up to 2N lines a task
        (``logs("worker-0", tail=3)`` gives up to 3 of stdout and 3 of stderr; ``stream="stdout"``
        for the program's last 3 lines alone)."""
        from marathon_tf.user import logs as tasklogs

        if since is not None and previous:
            raise UsageError("since and previous choose instances in two ways: give one of them")
        streams = ("stdout", "stderr") if stream == "both" else (stream,)
        for name, which, text in tasklogs.follow(self.client, job.strip("/"), task, streams, tail=tail,
                                                 follow_=follow, previous=previous, agent_port=agent_port,
                                                 agent_url=agent_url,
                                                 since=None if since is None else time.time() - since):
            for line in text.splitlines():
                yield LogLine(name, which, line)

    def delete(self, job: str, *, force: bool = False, purge: bool = False, save: bool = False) -> dict[str, Any]:
        """Stop every task of the job and remove its group. ``purge``: also remove its volumes, which
        only the local runner keeps where marathon-tf can reach them (a cluster's are refused before
        anything is deleted). ``save``: have the job save a checkpoint first (:meth:`checkpoint`; ``saved``
        in the answer), to resume from with ``deploy(resume=True)``; a job that cannot is not deleted
        (:class:`~marathon_tf.contract.errors.SaveFailed`)."""
        from marathon_tf.user import jobs, localstate

        name = job.strip("/")
        work = localstate.work_dir(self.client) if purge else None
        if purge and work is None:
            raise UsageError(f"--purge: the volumes of {name} are on {self.url}'s agents, which marathon-tf "
                             f"cannot reach from here; nothing was deleted",
                             hint="delete without --purge, and remove the volume's host_path on the agents")
        body = jobs.delete(self.client, name, force=force, save=save)
        if purge and work is not None:  # (purge: a work dir, else refused above)
            from marathon_tf.user import redeploy

            removed = redeploy.purge_deleted(self.client, name, work, body.get("deploymentId"))
            body = {**body, "purged": str(removed) if removed else None}
        return body


def parse_scale(args: list[str] | tuple[str, ...]) -> dict[str, tuple[str, Any]]:
    """``["worker=8", "ps=+1"]`` → ``{"worker": ("=", 8), "ps": ("+", 1)}`` (``workers=8`` too; an elastic
    count's bounds ``worker=2..6`` → ``("..", (2, 6))``), checked before any request (:class:`UsageError`)."""
    from marathon_tf.user import jobs

    return jobs.parse_scale_args(list(args))


#: The role names ``scale`` takes: as the job file spells them (``worker``), and their plurals.
ROLE_NAMES = frozenset(naming.ROLES) | {r + "s" for r in naming.ROLES}


class JobHandle:
    """One job on one Marathon: what ``Marathon.deploy`` and ``Marathon.job(name)`` return.
    ``deployment`` is what the deploy did (None for ``Marathon.job``)."""

    def __init__(self, marathon: Marathon, name: str, deployment: Deployment | None = None):
        self.marathon, self.name, self.deployment = marathon, name, deployment

    def __repr__(self) -> str:
        return f"JobHandle({self.name!r} on {self.marathon.url!r})"

    def status(self) -> JobStatus:
        return self.marathon.status(self.name)

    def wait(self, timeout: float | None = None, *, on_progress: Progress = lambda s: None,
             check: bool = False) -> JobStatus:
        """Until the job has ended (see :meth:`Marathon.wait`); follows this handle's deployment first."""
        dep = self.deployment
        return self.marathon.wait(self.name, deployment_id=dep.deployment_id if dep and dep.changed else None,
                                  timeout=timeout, on_progress=on_progress, check=check)

    def logs(self, task: str | None = None, **options: Any) -> list[LogLine]:
        """Every line the job's tasks (or one) wrote so far (see :meth:`Marathon.logs` for options: ``tail``
        counts per stream, stdout's lines before stderr's)."""
        return list(self.marathon.logs(self.name, task, **options))

    def scale(self, *changes: str, **counts: int | str) -> ScaleResult:
        return self.marathon.scale(self.name, *changes, **cast("dict[str, Any]", counts))  # role=N, passed on

    def checkpoint(self, *, timeout: float | None = None) -> Checkpoint:
        """Save a checkpoint now (see :meth:`Marathon.checkpoint`)."""
        return self.marathon.checkpoint(self.name, timeout=timeout)

    def delete(self, *, force: bool = False, purge: bool = False, save: bool = False) -> dict[str, Any]:
        return self.marathon.delete(self.name, force=force, purge=purge, save=save)


class LocalCluster(Marathon):
    """A single-machine Marathon + Mesos-DNS (what ``marathon-tf local serve`` runs), for the same API:
    ``with LocalCluster() as cluster: cluster.deploy(job).wait()``. Its tasks are processes of this
    machine; everything stops with it. ``state_dir``: where sandboxes and volumes go (default a new
    ``<state home>/local-<time>-<random>``, kept for its logs and checkpoints; ``marathon-tf local clean``
    removes it). Ports 0 pick free ones. ``cluster``: more of the local cluster's options
    (:class:`marathon_tf.local.LocalCluster`'s: ``agents``, ``agent_resources``, ``agent_attributes``,
    ``features``, ``marathon_instances``, ``dns_refresh``, ``dns_ttl`` …); a bad one raises ValueError."""

    mesos = None  # its Mesos master is the one its Marathon names (``/v2/info``)

    def __init__(self, state_dir: str | os.PathLike | None = None, *, port: int = 0, host: str = "127.0.0.1",
                 dns_port: int = 0, dns_http_port: int = 0, ui_dir: str | os.PathLike | None = None,
                 **cluster: Any):
        import tempfile

        from marathon_tf.user.config import state_home

        if state_dir is None:  # unique, also for two clusters started within one second
            state_home().mkdir(parents=True, exist_ok=True)
            state_dir = tempfile.mkdtemp(prefix=time.strftime("local-%Y%m%d-%H%M%S-"), dir=state_home())
        self.state_dir = Path(state_dir).absolute()
        from marathon_tf.user.local_options import DEPLOY_DNS_REFRESH

        self._options = dict(host=host, marathon_port=port, dns_port=dns_port, dns_http_port=dns_http_port,
                             ui_dir=ui_dir, dns_refresh=DEPLOY_DNS_REFRESH, **cluster)
        self._cluster: Any = None
        self._lock: Any = None
        self._client = None

    @property
    def client(self):
        if self._client is None:
            raise UsageError("the local cluster is not started: use `with LocalCluster() as cluster:` or start()")
        return self._client

    @property
    def mesos_dns(self) -> str:
        return self._cluster.mesos_dns if self._cluster else ""

    def start(self) -> LocalCluster:
        """Start the servers; returns once they listen (:class:`UsageError` for a busy port)."""
        if self._cluster is not None:
            return self
        from marathon_tf.local.ports import PortInUse
        from marathon_tf.marathon.client import Client, RetryPolicy
        from marathon_tf.user import localstate
        from marathon_tf.user.localrun import local_cluster

        self._lock = localstate.hold(self.state_dir, "LocalCluster")
        try:
            cluster = local_cluster(state_dir=self.state_dir, **self._options)
            cluster.start()
        except PortInUse as e:
            self._lock.release()
            raise UsageError(*e.describe()[:1], hint=e.describe()[1]) from None
        except BaseException:
            self._lock.release()
            raise
        self._cluster = cluster
        self._client = Client(cluster.marathon_url, retry=RetryPolicy(attempts=5, budget=30, initial=0.2, max_wait=2))
        return self

    def stop(self) -> None:
        """Stop every task (with its grace period) and the servers."""
        if self._cluster is not None:
            try:
                self._cluster.stop()
            finally:
                self._cluster = self._client = None
                self._lock.release()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"LocalCluster({self._cluster.marathon_url if self._cluster else 'stopped'!r}, {str(self.state_dir)!r})"
