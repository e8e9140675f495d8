"""The ``marathon-tf`` command. Parses arguments, calls the Python API (:mod:`marathon_tf.user.api`),
prints. The connection options (``--marathon``, the credentials, TLS, ``--max-response``) are one
decorator whose values go to ``ctx.obj``, from which the API object is built once per command.

Exit codes, each on its error class (:mod:`marathon_tf.contract.errors`; commands only raise, and
:class:`_Group` turns an error into its lines and its code, in one place): 0 ok, 1 runtime failure
(a job that failed: ``JobFailed``), 2 usage or spec error (a task that fits on no agent included),
3 timed out while still in progress, 4 not placed (``NotPlaced``: the cluster has no room for every
task: refused with --no-wait-for-resources, or released at the admission deadline with no attempt
left), 128 + the signal's number when stopped (``Interrupted``: 130 for Ctrl-C). Heavy modules are
imported inside the commands so that ``marathon-tf --help`` starts fast and TensorFlow is never
imported here.

Over 600 lines: every command's options and help are declared here, as this is the one module
besides ``output`` that parses arguments and prints; what the commands do is in the API.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from marathon_tf import __version__
from marathon_tf.contract.errors import Interrupted, MarathonTFError, UsageError
from marathon_tf.user import local_options
from marathon_tf.user.cli_local import local
from marathon_tf.user.cli_params import CTX, DURATION, output_opt

__all__ = ["main", "cli"]



class _Group(click.Group):
    """The one place errors become exit codes: each error class carries its own (``exit_code``,
    :mod:`marathon_tf.contract.errors`), and its lines and hint are printed on stderr (unless the
    command said it already: ``shown``). Ctrl-C outside ``deploy --local`` is :class:`Interrupted`."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MarathonTFError as e:
            if not e.shown:
                from marathon_tf.user import output

                output.error(e.lines(), e.hint)
            ctx.exit(e.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(Interrupted.exit_code)


class _Connection:
    """A verb's connection options (``ctx.obj``: each option's callback puts its value here), and
    the API's :class:`~marathon_tf.user.api.Marathon` built from them, once (:meth:`marathon`)."""

    def __init__(self) -> None:
        self.options: dict[str, Any] = {}
        self.max_response: int | None = None
        self._marathon: Any = None

    def marathon(self, *, limit: float | None = None, mesos: str | None = None):
        """The API object for this Marathon; every request is over within ``limit`` seconds from now
        (None: each request within its own deadline only); ``mesos``: the master read for the cluster's
        capacity."""
        if self._marathon is None:
            from marathon_tf.user import output
            from marathon_tf.user.api import Marathon, connect

            o = self.options
            if o.get("insecure"):
                output.warn("TLS verification is off (--insecure): the connection to Marathon can be intercepted")
            client = connect(o.get("url"), user=o.get("user"), password=o.get("password"), token=o.get("token"),
                             ca_bundle=o.get("ca_bundle"), insecure=bool(o.get("insecure")),
                             max_bytes=self.max_response)
            client.limit(limit)
            self._marathon = Marathon(client=client, mesos=mesos)
        return self._marathon


def _remember(name: str):
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        ctx.ensure_object(_Connection).options[name] = value

    return callback


def _max_response(ctx, param, value):
    connection = ctx.ensure_object(_Connection)
    if value is None:
        return None
    from marathon_tf.marathon.transport import parse_size

    try:
        connection.max_response = parse_size(value)
    except ValueError as e:
        raise click.BadParameter(str(e), ctx, param) from None
    return None


def _connection_options(f):
    """--marathon and credentials, each fed by an environment variable, for every verb that talks to
    Marathon: their values go to ``ctx.obj`` (a :class:`_Connection`), which the verb gets first."""
    opts = [
        click.option("--marathon", envvar="MARATHON_URL", show_envvar=True, metavar="URL[,URL…]",
                     expose_value=False, callback=_remember("url"),
                     help="Marathon base URL; a comma-separated list fails over to the next on errors."),
        click.option("--user", envvar="MARATHON_USER", show_envvar=True, expose_value=False,
                     callback=_remember("user"), help="HTTP basic auth user."),
        click.option("--password", envvar="MARATHON_PASSWORD", show_envvar=True, expose_value=False,
                     callback=_remember("password"),
                     help="HTTP basic auth password (prefer the environment variable)."),
        click.option("--token", envvar="MARATHON_TOKEN", show_envvar=True, expose_value=False,
                     callback=_remember("token"), help="DC/OS token, sent as 'Authorization: token=…'."),
        click.option("--ca-bundle", envvar="MARATHON_CA_BUNDLE", show_envvar=True, type=click.Path(dir_okay=False),
                     expose_value=False, callback=_remember("ca_bundle"),
                     help="CA bundle to verify Marathon's TLS certificate."),
        click.option("--insecure", is_flag=True, expose_value=False, callback=_remember("insecure"),
                     help="Do not verify TLS certificates (not recommended)."),
        click.option("--max-response", envvar="MARATHON_TF_MAX_RESPONSE", show_envvar=True, metavar="SIZE",
                     expose_value=False, callback=_max_response,
                     help="Refuse a Marathon answer larger than this, e.g. 64M (default 32M)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return click.pass_obj(f)


#: How long a verb that does not wait for a job may take at most, unless ``--timeout`` says otherwise.
VERB_LIMIT = 120.0


_verb_timeout_opt = click.option("--timeout", type=DURATION, default=None, metavar="DURATION",
                                 help=f"Give up after this long (exit 3); default {VERB_LIMIT:g}s.")

_mesos_opt = click.option("--mesos", "mesos_url", envvar="MESOS_URL", show_envvar=True, metavar="URL",
                          help="The Mesos master, read for the cluster's capacity (default: the one Marathon's "
                               "/v2/info names; skipped with a note when it cannot be read).")
_resources_opt = click.option("--wait-for-resources/--no-wait-for-resources", "wait_for_resources", default=True,
                              show_default=True,
                              help="A job that does not fit what the cluster has free now waits (up to "
                                   "admission.timeout), or is refused (exit 4, nothing sent).")
_templates_opt = click.option("--templates", "templates_dir", type=click.Path(file_okay=False, exists=True),
                              envvar="MARATHON_TF_TEMPLATES", show_envvar=True,
                              help="Directory of Jinja templates overriding app_templates/.")


@click.group(cls=_Group, context_settings=CTX)
@click.version_option(__version__, prog_name="marathon-tf")
@click.option("-v", "--verbose", count=True, help="Show each request to Marathon and each retry on stderr.")
@click.option("-q", "--quiet", is_flag=True, help="Only data on stdout and errors on stderr: no progress lines.")
def cli(verbose: int, quiet: bool) -> None:
    """Run distributed TensorFlow on Apache Mesos through Marathon.

    \b
    marathon-tf deploy job.json --local       run a job on this machine
    marathon-tf deploy job.json               run it on Marathon (MARATHON_URL)
    marathon-tf status JOB / scale JOB worker=8 / logs JOB / delete JOB

    \b
    Shell completion, e.g. in ~/.bashrc (zsh: zsh_source, fish: fish_source):
      eval "$(_MARATHON_TF_COMPLETE=bash_source marathon-tf)"
    """
    from marathon_tf.user import output

    output.set_verbosity(-1 if quiet else verbose)


# ---------------------------------------------------------------------------- offline verbs


@cli.command(context_settings=CTX)
@click.argument("job_file", type=click.Path(dir_okay=True))
@_templates_opt
@click.option("--pretty/--compact", default=None,
              help="indented JSON / one compact line (default: indented on a terminal, compact otherwise)")
@click.option("--marathon-version", "marathon_version", metavar="VERSION", default=None,
              help="Render for this Marathon (e.g. 1.4.3; default: the newest, 1.11): what its version accepts, "
                   "and exit 2 for what it cannot run. deploy and scale use the version Marathon's /v2/info says.")
def render(job_file: str, templates_dir: str | None, pretty: bool | None, marathon_version: str | None) -> None:
    """Print the Marathon app group JOB_FILE renders to (no network)."""
    from marathon_tf.user import output
    from marathon_tf.user.api import Job

    job = Job.from_file(job_file)
    if sys.stdout.isatty() if pretty is None else pretty:
        output.emit_json(job.render(templates_dir, marathon_version=marathon_version))
    else:  # for programs: one compact line, stamped as text (no dict per app to build and serialise)
        click.echo(job.render_json(templates_dir, marathon_version=marathon_version))


@cli.command(context_settings=CTX)
@click.argument("job_file", type=click.Path(dir_okay=True))
@output_opt
def validate(job_file: str, fmt: str) -> None:
    """Check JOB_FILE; print a summary, or every problem with its field, all at once (exit 2).
    Warns (stderr, exit 0) about what will likely fail at run time, e.g. Keras 3 under a multi-worker
    strategy."""
    from marathon_tf.user import output
    from marathon_tf.user.api import Job

    job = Job.from_file(job_file)
    summary = job.summary()
    for line in summary["warnings"]:
        output.warn(line)
    if fmt == "json":
        output.emit_json(summary)
    else:
        roles = ", ".join(f"{job.spec.role(r).count_text} {r}" for r in summary["counts"])
        click.echo(f"{job_file}: ok — job {job.name} ({job.spec.style}): {roles}; {summary['apps']} Marathon apps")
        for line in summary["placement"]:  # what the constraints mean: across tasks, or per app
            click.echo(f"  placement: {line}")
        for role, e in (summary.get("elastic") or {}).items():
            click.echo(f"  elastic {role} {e['min']}..{e['max']}: starts with {e['min']} placed; {e['limits']}")


@cli.command(context_settings=CTX)
@click.argument("job_file", type=click.Path(dir_okay=True))
@click.option("--to", "target", type=click.Choice(["jobset"]), default="jobset", show_default=True,
              help="Target: a Kubernetes JobSet (jobset.x-k8s.io/v1alpha2, JobSet v0.12+).")
@click.option("-o", "--output", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True,
              help="Manifest format.")
@click.option("--strict", is_flag=True, help="Exit 2 if any key of the job does not translate.")
@click.option("--name", default=None, help="The JobSet's name (default: the job's, / and . as -).")
@click.option("-n", "--namespace", default=None, help="metadata.namespace (default: kubectl's current).")
@click.option("--image", default=None, help="Image for roles the job gives none.")
@click.option("--volume", "volumes", multiple=True, metavar="PATH=SOURCE",
              help="A job volume (container_path or host_path) as pvc:CLAIM, hostPath:/ABS/PATH or emptyDir; "
                   "repeatable.")
@click.option("--workdir", default="/workspace", show_default=True, help="Container working directory.")
@_templates_opt
def export(job_file: str, target: str, fmt: str, strict: bool, name: str | None, namespace: str | None,
           image: str | None, volumes: tuple[str, ...], workdir: str, templates_dir: str | None) -> None:
    """Print JOB_FILE as a manifest for another orchestrator: a Kubernetes JobSet. Nothing is sent.
    Keys that do not translate are listed on stderr and in the manifest (docs/leaving-mesos.md)."""
    from marathon_tf.contract.errors import UsageError
    from marathon_tf.user import output
    from marathon_tf.user.api import Job

    mapped: dict[str, str] = {}
    for item in volumes:
        path, sep, source = item.partition("=")
        if not sep or not path or not source:
            raise UsageError(f"--volume {item!r}: expected PATH=SOURCE (pvc:CLAIM, hostPath:/ABS/PATH or emptyDir)")
        mapped[path] = source
    result = Job.from_file(job_file).export(target, fmt=fmt, strict=strict, name=name, namespace=namespace,
                                            image=image, volumes=mapped, workdir=workdir,
                                            templates_dir=templates_dir)
    for line in result.lines:
        output.warn(line)
    click.echo(result.text, nl=not result.text.endswith("\n"))


@cli.command(context_settings=CTX)
def schema() -> None:
    """Print the job spec as JSON Schema (for editors)."""
    from marathon_tf.user import output
    from marathon_tf.user.spec import json_schema

    output.emit_json(json_schema())


# ---------------------------------------------------------------------------- deploy


@cli.command(context_settings=CTX)
@click.argument("job_file", type=click.Path(dir_okay=True))
@_connection_options
@click.option("--local", is_flag=True, help="Run the job on this machine (a built-in Marathon + Mesos-DNS).")
@click.option("--wait/--detach", default=True, show_default=True,
              help="Follow the deployment and the job to its end, or return once Marathon accepted it.")
@click.option("--timeout", type=DURATION, default=None,
              help="Give up waiting after this long, e.g. 600, 90s, 5m, 2h (exit 3; the job keeps running); "
                   f"with --detach, the bound of the whole command (default {VERB_LIMIT:g}s).")
@click.option("--force", is_flag=True, help="Override a deployment that locks the job's apps.")
@click.option("--dry-run", is_flag=True, help="Render, and show Marathon's plan (?dryRun=true); deploy nothing.")
@_templates_opt
@output_opt
@click.option("--resume/--fresh", default=None,
              help="For a job that has ended (or, on `local serve`, left its volumes): go on from its checkpoints, "
                   "or remove the local runner's volumes first and start from scratch. Asked for, not guessed.")
@_mesos_opt
@_resources_opt
@click.option("--admission-timeout", type=DURATION, default=None, envvar="MARATHON_TF_ADMISSION_TIMEOUT",
              show_envvar=True, help="Override the job file's admission.timeout: every task placed by then, "
                                     "else the job holds nothing (exit 4 once no attempt is left).")
@local_options.cluster_options(local_options.DEPLOY_DNS_REFRESH, prefix="(--local) ")
@click.pass_context
def deploy(ctx, connection, job_file, local, wait, timeout, force, dry_run, templates_dir, fmt, resume, mesos_url,
           wait_for_resources, admission_timeout, **cluster) -> None:
    """Deploy JOB_FILE as a Marathon group (PUT: re-running it changes only what changed; a job that
    already runs this way is left alone: `no change`). Before anything is sent the cluster's capacity
    is read: a task that fits on no agent is refused (exit 2); a job that does not fit what is free
    now waits for room until its admission deadline, then holds nothing (NotPlaced, exit 4)."""
    from marathon_tf.user import output
    from marathon_tf.user.api import Job

    if not local and local_options.given(ctx):
        raise UsageError(f"{', '.join(local_options.given(ctx))}: only with --local (they shape the local cluster)")
    job = Job.from_file(job_file)  # a bad job file stops here: nothing is sent
    for line in job.warnings:
        output.warn(line)
    if local:
        return _deploy_local(job, templates_dir=templates_dir, timeout=timeout, fmt=fmt, detach=not wait,
                             dry_run=dry_run, cluster=local_options.to_cluster(**cluster),
                             wait_for_resources=wait_for_resources, admission_timeout=admission_timeout)
    if dry_run and not connection.options.get("url"):
        if mesos_url:  # a task no agent of that master can hold: exit 2 here too
            verdict = job.check_capacity(mesos_url, templates_dir=templates_dir, admission_timeout=admission_timeout)
            _say_admission(verdict.shortfall, verdict.note)
        output.info("dry run without a Marathon (--marathon / MARATHON_URL): the rendered group follows")
        output.emit_json(job.render(templates_dir))
        return
    marathon = connection.marathon(limit=None if wait else timeout or VERB_LIMIT, mesos=mesos_url)
    dep = marathon.deploy(job, resume=resume, force=force, dry_run=dry_run, templates_dir=templates_dir,
                          wait_for_resources=wait_for_resources, admission_timeout=admission_timeout).deployment
    _say_admission(dep.admission, dep.admission_note)
    if dry_run:
        if fmt == "json":
            output.emit_json(dep.to_dict())
        else:
            if dep.tasks is not None:
                click.echo(output.scale_plan_text(dep.tasks))
            click.echo(output.plan_text(dep.plan or {}))
        return
    if dep.note:
        output.warn(dep.note)
    if dep.changed and dep.tasks is not None:  # a running job changed: what happens to its tasks
        for line in output.scale_plan_text(dep.tasks).splitlines():
            output.info(f"{job.name}: {line}")
    if dep.changed:
        output.info(f"deployed {dep.group_id} on {marathon.url}: deployment {dep.deployment_id}")
    else:
        output.info(f"no change: {job.name} already runs as {job_file} renders it on {marathon.url}; nothing was sent")
    final = _follow(marathon, job.name, dep.deployment_id if dep.changed else None, wait=wait, timeout=timeout)
    if fmt == "json":
        output.emit_json({**dep.to_dict(), **({"status": final.to_dict()} if final else {})})
    _raise_for_outcome(final)


def _raise_for_outcome(final) -> None:
    """A job that ended Failed or NotPlaced is the command's error (exit 1 or 4, from its class); its
    outcome line was printed already."""
    error = final.error() if final is not None else None
    if error is not None:
        error.shown = True
        raise error


def _say_admission(shortfall: str | None, note: str | None = None) -> None:
    """What the capacity check said before the job was sent (stderr): a shortfall, or why it was skipped."""
    from marathon_tf.user import output

    if note:
        output.info(note)
    if shortfall:
        output.warn(f"{shortfall}; it waits for room until its admission deadline (--no-wait-for-resources refuses it)")


def _progress_printer():
    """A callback printing a job's progress line on stderr when it changed (:class:`output.ProgressPrinter`)."""
    from marathon_tf.user import output

    return output.ProgressPrinter()


def _deploy_local(job, *, templates_dir, timeout, fmt, detach, dry_run, cluster, wait_for_resources=True,
                  admission_timeout=None) -> None:
    """Run the job on this machine; task output is streamed as ``[worker-1] …``."""
    from marathon_tf.user import announce, localrun, output

    localrun.check_local_options(detach)
    asked = localrun.unenforced(job.spec)
    if asked and not cluster["agent_resources"]:
        output.warn(f"{', '.join(asked)}: {localrun.LOCAL_RESOURCES}")
    if dry_run:
        output.emit_json(job.render(templates_dir))
        return
    out_err = fmt == "json"  # keep stdout for the JSON result

    def task_line(line) -> None:
        click.echo(f"[{line.task}] {line.text}", err=out_err or line.stream == "stderr")

    def deployed(dep) -> None:
        output.info(f"local Marathon {dep.marathon_url} (Mesos-DNS {dep.mesos_dns}): deployed {dep.group_id}, "
                    f"deployment {dep.deployment_id}")
        _say_admission(dep.admission, dep.admission_note)
        output.info(announce.scrape_hint(dep.marathon_url))

    progress = announce.announcing(_progress_printer(), output.info)  # + metrics URLs, TensorBoard, once
    run = job.run_local(templates_dir=templates_dir, timeout=timeout, on_output=task_line,
                        on_progress=lambda st: progress(st.to_dict()), on_deployed=deployed,
                        cluster=cluster, wait_for_resources=wait_for_resources, admission_timeout=admission_timeout,
                        on_stopping=lambda n, grace: output.info(output.stopping_line(n, grace)))
    status = run.status.to_dict()
    steps = status.get("finalStep", status.get("step"))
    output.info(f"job {job.name}: {run.state} in {run.seconds:.1f} s"
                + (f", step {steps}" if steps is not None else "")
                + (f" ({status['reason']})" if status.get("reason") else "")
                + f"; task sandboxes in {run.state_dir}"
                + (f"; logdir {run.logdir_path}" if run.logdir_path else ""))
    if fmt == "json":
        output.emit_json(run.to_dict())
    _raise_for_outcome(run.status)


def _follow(marathon, job: str, deployment_id: str | None, *, wait: bool, timeout: float | None,
            decide: bool = True):
    """Follow the deployment, then the job, with a progress line on stderr (:meth:`Marathon.wait`).
    Ctrl-C leaves it running. ``decide`` (deploy, scale): a task that can never start fails the job."""
    from marathon_tf.user import output

    if not wait:
        output.info(f"follow it with: marathon-tf status {job} --watch")
        return None
    try:
        final = marathon.wait(job, deployment_id=deployment_id, timeout=timeout, on_progress=_progress_printer(),
                              decide=decide)
    except KeyboardInterrupt:
        output.info(f"stopped watching; the job keeps running. Watch again with: marathon-tf status {job} --watch")
        raise Interrupted("interrupted") from None
    output.info(f"job {job}: {final.state}" + (f" ({final.reason})" if final.reason else ""))
    return final


# ---------------------------------------------------------------------------- scale / status / list / delete


@cli.command(context_settings=CTX)
@click.argument("args", nargs=-1, required=True, metavar="[JOB] ROLE=N…")
@click.option("--job", hidden=True, help="The job to scale (same as the JOB argument).")
@_connection_options
@click.option("--force", is_flag=True,
              help="Override a deployment that locks the job's apps; start a job that has ended (or reached "
                   "its target step) again.")
@click.option("--dry-run", is_flag=True, help="Show Marathon's plan and which tasks would restart.")
@click.option("--wait/--detach", default=False, show_default=True, help="Wait for the deployment to finish.")
@click.option("--timeout", type=DURATION, default=None,
              help=f"How long to wait, e.g. 90, 90s, 5m (exit 3 past it); with --detach, the bound of the whole "
                   f"command (default {VERB_LIMIT:g}s).")
@_mesos_opt
@_resources_opt
@_templates_opt
@output_opt
def scale(connection, args, job, force, dry_run, wait, timeout, mesos_url, wait_for_resources, templates_dir,
          fmt) -> None:
    """Change role counts, e.g. `marathon-tf scale mnist worker=8` (or ps=2, worker=+2, worker=-1),
    roles named as in the job file; plurals (workers=8) are taken as aliases. JOB may be left out
    when Marathon runs only one marathon-tf job.

    Every task gets the rewritten cluster spec and the job resumes from its
    checkpoint; scaling down stops the highest indices. An elastic job (docs/elastic.md):
    worker=5 sets its target size within its bounds (nothing restarts but what its size
    change restarts), worker=2..6 changes the bounds (every task restarts, as above).
    """
    from marathon_tf.user import output
    from marathon_tf.user.api import ROLE_NAMES, parse_scale

    args = list(args)
    if args and "=" not in args[0] and (len(args) > 1 or args[0] not in ROLE_NAMES):
        if job and job != args[0]:
            raise UsageError(f"two jobs named: {args[0]} and --job {job}")
        job = args.pop(0)
    parsed = parse_scale(args)  # checked before any request
    marathon = connection.marathon(limit=None if wait else timeout or VERB_LIMIT, mesos=mesos_url)
    result = marathon.scale(job, *args, templates_dir=templates_dir, force=force, dry_run=dry_run,
                            wait_for_resources=wait_for_resources)
    _say_admission(result.admission, result.admission_note)
    if result.saved or result.save_note:
        output.info(output.saved_first(result.saved, result.save_note))
    if fmt == "json":
        output.emit_json(result.to_dict())
    elif not result.changed:
        click.echo(output.scale_no_change(result, parsed))
    else:
        click.echo(output.scale_plan_text(result.to_dict()["tasks"]))
        if dry_run:
            click.echo(output.plan_text(result.plan or {}))
    if result.changed and not dry_run:
        output.info(f"scaling {result.group_id}: deployment {result.deployment_id}")
        if wait:
            marathon.wait_deployment(result.job, result.deployment_id, timeout=timeout,
                                     on_progress=_progress_printer())


@cli.command(context_settings=CTX)
@click.argument("job", required=False)
@_connection_options
@click.option("--watch", "follow", is_flag=True,
              help="Follow the job until it ends (Ctrl-C to stop); exit 0 Succeeded, 1 Failed, 4 NotPlaced.")
@click.option("-o", "--output", "fmt", type=click.Choice(["text", "wide", "json"]), default="text",
              show_default=True, help="text fits 80 columns; wide adds health, phase, rate and task ids.")
@click.option("--timeline", is_flag=True,
              help="Add the timeline: the start's phases and every recovery (cause, restart, training again).")
@click.option("--timeout", type=DURATION, default=None, metavar="DURATION",
              help=f"Give up after this long (exit 3); default {VERB_LIMIT:g}s, with --watch none.")
@_mesos_opt
def status(connection, job, follow, fmt, timeline, timeout, mesos_url) -> None:
    """Show a job: state, progress (step S/T, steps/s, ETA), logdir, tasks waiting for a peer,
    stragglers, and per task its state, host:port, step, restarts, age and last failure. A job that
    waits to be placed: per role how many tasks are placed and why the rest wait, and its admission
    deadline; past it the job is released (NotPlaced), and a Queued one whose next attempt is due is
    submitted again."""
    from marathon_tf.user import output

    marathon = connection.marathon(limit=None if follow else timeout or VERB_LIMIT, mesos=mesos_url)
    name = marathon.resolve(job)
    if follow:
        st = _follow(marathon, name, None, wait=True, timeout=timeout, decide=False)
        st = st.updated(timeline=marathon.timeline(name, st)) if timeline else st
    else:
        st = marathon.status(name, timeline=timeline)
    shown = st.to_dict()
    if fmt == "json":
        output.emit_json(shown)
    else:
        output.status_table(shown, wide=fmt == "wide")
        if timeline:
            click.echo("\n" + output.timeline_text(shown["timeline"]))
    if follow:
        _raise_for_outcome(st)


@cli.command(context_settings=CTX)
@click.argument("job", required=False)
@_connection_options
@output_opt
@_verb_timeout_opt
def events(connection, job, fmt, timeout) -> None:
    """What happened to JOB, in time order (like kubectl describe): its start, every failure with
    its whole message, hangs, restarts, preemptions, scale, placement waits, the end."""
    from marathon_tf.user import output

    found = connection.marathon(limit=timeout or VERB_LIMIT).events(job)
    if fmt == "json":
        output.emit_json(found)
    else:
        click.echo(output.events_text(found["events"], found["omitted"]))


@cli.command("list", context_settings=CTX)
@_connection_options
@output_opt
@_verb_timeout_opt
def list_jobs(connection, fmt, timeout) -> None:
    """List the marathon-tf jobs on Marathon."""
    from marathon_tf.user import output

    rows = [row.to_dict() for row in connection.marathon(limit=timeout or VERB_LIMIT).jobs()]
    if fmt == "json":
        output.emit_json(rows)
    else:
        output.jobs_table(rows)


@cli.command(context_settings=CTX)
@click.argument("job")
@_connection_options
@click.option("--force", is_flag=True, help="Delete even while a deployment holds the job.")
@output_opt
@click.option("--purge", is_flag=True,
              help="Also remove the job's volumes (its checkpoints), once its tasks stopped: local jobs only "
                   "(`local serve`); a cluster's are on the agents.")
@click.option("--save", is_flag=True,
              help="Have the job save a checkpoint first (as `marathon-tf checkpoint`), to resume from with "
                   "`deploy --resume`; a job that cannot is not deleted (exit 1, with why).")
@_verb_timeout_opt
def delete(connection, job, force, fmt, purge, save, timeout) -> None:
    """Delete JOB: stop all its tasks and remove its group (and, with --purge, its local volumes)."""
    from marathon_tf.user import output

    if save and purge:
        raise UsageError("--save and --purge: a checkpoint saved first would be removed with the volumes; give one")
    body = connection.marathon(limit=timeout or VERB_LIMIT).delete(job, force=force, purge=purge, save=save)
    if body.get("saved"):
        output.info(output.saved_first(body["saved"], None))
    if fmt == "json":
        output.emit_json(body)
    else:
        click.echo(f"deleted {job}" + (f" (deployment {body.get('deploymentId')})" if body.get("deploymentId") else "")
                   + (f"; removed {body['purged']}" if body.get("purged") else "; it had no volumes" if purge else ""))


@cli.command(context_settings=CTX)
@click.argument("job", required=False)
@_connection_options
@output_opt
@click.option("--timeout", type=DURATION, default=None, metavar="DURATION",
              help="How long the save may take (default 120s); past it, exit 1 and the job goes on (its "
                   "program, already asked, may still save at its next step boundary: status shows it).")
def checkpoint(connection, job, fmt, timeout) -> None:
    """Have JOB save a checkpoint now, without stopping it: its deciding task asks its program through
    the save hook (docs/restarts.md) and confirms the checkpoint in the logdir. Prints the step and the
    path; exit 1 with the reason when the job cannot (its program has no save hook, none runs now).
    The request carries the job's key, derived from your owner key in the state home: on the local
    runner only you and the job's own tasks can steer it (docs/architecture.md)."""
    from marathon_tf.user import output

    marathon = connection.marathon(limit=None)
    saved = marathon.checkpoint(job, timeout=timeout)
    if fmt == "json":
        output.emit_json(saved.to_dict())
    else:
        click.echo(output.checkpoint_text(saved))


@cli.command(context_settings=CTX)
@click.argument("job")
@click.argument("task", required=False)
@_connection_options
@click.option("-f", "--follow", "follow_", is_flag=True,
              help="Keep printing new output, also of relaunched tasks, until the job ends (exit 0).")
@click.option("-p", "--previous", is_flag=True,
              help="The task's instance before the current (or last) one: a restarted or earlier run.")
@click.option("--stream", type=click.Choice(["stdout", "stderr", "both"]), default="both", show_default=True,
              help="Which of the task's files; both are printed on stdout.")
@click.option("--tail", "tail_lines", type=click.IntRange(min=-1), default=-1, metavar="N",
              help="Only the last N lines of each stream of each task (default: all): with --stream both, up "
                   "to N of stdout then N of stderr, as the Python API's logs(tail=N).")
@click.option("--since", type=DURATION, default=None, metavar="DURATION",
              help="Only task instances (sandboxes) that wrote output within DURATION (90s, 10m, 2h): Mesos "
                   "keeps no time per line, so whole instances are chosen; add --tail for their last lines.")
@click.option("--agent-port", type=click.IntRange(1, 65535), default=5051, show_default=True,
              envvar="MESOS_AGENT_PORT", show_envvar=True, help="The Mesos agents' HTTP port.")
@click.option("--agent-url", default=None, help="Read from this agent URL instead of <task host>:<agent port>.")
@click.option("--timeout", type=DURATION, default=None, metavar="DURATION",
              help=f"Give up after this long (exit 3); default {VERB_LIMIT:g}s, with -f none.")
def logs(connection, job, task, follow_, previous, stream, tail_lines, since, agent_port, agent_url, timeout) -> None:
    """Print a job's task output (TASK like worker-1; all tasks if left out), read from the
    Mesos agents' sandboxes (and from the local runner's), also after the task ended.

    Every line is printed on stdout as `[worker-1] …`; errors go to stderr (exit 1: a task or instance
    that has no output to read; exit 2: a job or task that does not exist, conflicting options).
    A task's stdout comes before its stderr (two files without times: see the note it prints).
    """
    from marathon_tf.user import output

    if since is not None and previous:
        raise UsageError("--since and --previous choose instances in two ways: give one of them")
    marathon = connection.marathon(limit=None if follow_ else timeout or VERB_LIMIT)
    first: dict[str, str] = {}  # task -> the stream it printed first
    noted = False
    try:
        for line in marathon.logs(job, task, stream=stream, tail=None if tail_lines < 0 else tail_lines,
                                  follow=follow_, previous=previous, since=since, agent_port=agent_port,
                                  agent_url=agent_url):
            if not noted and first.setdefault(line.task, line.stream) != line.stream:
                noted = True
                output.info(output.TWO_FILES)
            click.echo(f"[{line.task}] {line.text}")
    except KeyboardInterrupt:
        return


# ---------------------------------------------------------------------------- in the container / locally


@cli.command(context_settings={**CTX, "ignore_unknown_options": True, "allow_interspersed_args": False,
                               "help_option_names": []})
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def bootstrap(command) -> None:
    """(In each task) find the peers, write the cluster spec, run COMMAND.

    Usage: marathon-tf bootstrap -- python3 train.py …   (see the README)
    """
    from marathon_tf.task import bootstrap as boot

    args = list(command)  # click has eaten a leading "--", and only that one
    if not args:
        args = ["--help"]
    elif args[0] not in ("--watch-interval", "--grace", "-h", "--help"):
        args = ["--", *args]
    sys.exit(boot.main(args))


cli.add_command(local)


def main(argv: list[str] | None = None) -> None:
    """The ``marathon-tf`` command: every error a command raises ends it with its class's exit code
    (handled once, in :class:`_Group`)."""
    cli.main(args=argv, prog_name="marathon-tf")


if __name__ == "__main__":  # pragma: no cover
    main()
