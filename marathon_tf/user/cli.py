"""The ``marathon-tf`` command. Parses arguments, calls the modules, prints.

Exit codes: 0 ok, 1 runtime failure, 2 usage or spec error, 3 timed out while
still in progress, 130 interrupted. Heavy modules are imported inside the
commands so that ``marathon-tf --help`` starts fast and TensorFlow is never
imported here.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from marathon_tf import __version__
from marathon_tf.contract.errors import Interrupted, MarathonTFError, UsageError
from marathon_tf.user import local_options

__all__ = ["main", "cli"]

_CTX = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class _Group(click.Group):
    """Maps our exceptions to exit codes and one-line messages."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MarathonTFError as e:
            from marathon_tf.user import output

            output.error(e.lines(), e.hint)
            ctx.exit(e.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(Interrupted.exit_code)


def _marathon_options(f):
    """--marathon and credentials, each fed by an environment variable."""
    opts = [
        click.option("--marathon", "marathon_url", envvar="MARATHON_URL", show_envvar=True, metavar="URL[,URL…]",
                     help="Marathon base URL; a comma-separated list fails over to the next on errors."),
        click.option("--user", envvar="MARATHON_USER", show_envvar=True, help="HTTP basic auth user."),
        click.option("--password", envvar="MARATHON_PASSWORD", show_envvar=True,
                     help="HTTP basic auth password (prefer the environment variable)."),
        click.option("--token", envvar="MARATHON_TOKEN", show_envvar=True,
                     help="DC/OS token, sent as 'Authorization: token=…'."),
        click.option("--ca-bundle", envvar="MARATHON_CA_BUNDLE", show_envvar=True, type=click.Path(dir_okay=False),
                     help="CA bundle to verify Marathon's TLS certificate."),
        click.option("--insecure", is_flag=True, help="Do not verify TLS certificates (not recommended)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _client(marathon_url, user, password, token, ca_bundle, insecure):
    from marathon_tf.marathon.client import CLI_TIMEOUT, Client, RetryPolicy
    from marathon_tf.user import config, output

    endpoint = config.resolve(url=marathon_url, user=user, password=password, token=token,
                              ca_bundle=ca_bundle, insecure=insecure)
    if insecure:
        output.warn("TLS verification is off (--insecure): the connection to Marathon can be intercepted")
        import urllib3

        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    # A single unreachable Marathon fails at once (a list fails over; 503 and 409 locks are retried).
    return Client(endpoint.urls, user=endpoint.user, password=endpoint.password, token=endpoint.token,
                  verify=endpoint.verify, timeout=CLI_TIMEOUT, retry=RetryPolicy(connection_errors=False))


class _Duration(click.ParamType):
    """Seconds, or a duration with units: 90, 90s, 5m, 1h30m."""

    name = "DURATION"

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)):
            return float(value)
        from marathon_tf.contract.progress import parse_duration

        try:
            return parse_duration(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)


DURATION = _Duration()

_output_opt = click.option("-o", "--output", "fmt", type=click.Choice(["text", "json"]), default="text",
                           show_default=True, help="Output format on stdout.")
_templates_opt = click.option("--templates", "templates_dir", type=click.Path(file_okay=False, exists=True),
                              envvar="MARATHON_TF_TEMPLATES", show_envvar=True,
                              help="Directory of Jinja templates overriding app_templates/.")


@click.group(cls=_Group, context_settings=_CTX)
@click.version_option(__version__, prog_name="marathon-tf")
@click.option("-v", "--verbose", count=True, help="Show each request to Marathon and each retry on stderr.")
@click.option("-q", "--quiet", is_flag=True, help="Only data on stdout and errors on stderr: no progress lines.")
def cli(verbose: int, quiet: bool) -> None:
    """Run distributed TensorFlow on Apache Mesos through Marathon.

    \b
    marathon-tf deploy job.json --local       run a job on this machine
    marathon-tf deploy job.json               run it on Marathon (MARATHON_URL)
    marathon-tf status JOB / scale JOB workers=8 / logs JOB / delete JOB

    \b
    Shell completion, e.g. in ~/.bashrc (zsh: zsh_source, fish: fish_source):
      eval "$(_MARATHON_TF_COMPLETE=bash_source marathon-tf)"
    """
    from marathon_tf.user import output

    output.set_verbosity(-1 if quiet else verbose)


# ---------------------------------------------------------------------------- offline verbs


@cli.command(context_settings=_CTX)
@click.argument("job_file", type=click.Path(dir_okay=True))
@_templates_opt
@click.option("--pretty/--compact", default=None,
              help="indented JSON / one compact line (default: indented on a terminal, compact otherwise)")
def render(job_file: str, templates_dir: str | None, pretty: bool | None) -> None:
    """Print the Marathon app group JOB_FILE renders to (no network)."""
    from marathon_tf.user import output
    from marathon_tf.user.render import render_group, render_group_json
    from marathon_tf.user.spec import load_job

    spec = load_job(job_file)
    if sys.stdout.isatty() if pretty is None else pretty:
        output.emit_json(render_group(spec, templates_dir=templates_dir))
    else:  # for programs: one compact line, stamped as text (no dict per app to build and serialise)
        click.echo(render_group_json(spec, templates_dir=templates_dir))


@cli.command(context_settings=_CTX)
@click.argument("job_file", type=click.Path(dir_okay=True))
@_output_opt
def validate(job_file: str, fmt: str) -> None:
    """Check JOB_FILE; print a summary, or every problem with its field (exit 2)."""
    from marathon_tf.user import output
    from marathon_tf.user.spec import load_job

    spec = load_job(job_file)
    summary = {"file": job_file, "valid": True, "name": spec.name, "style": spec.style,
               "counts": spec.counts(), "apps": len(spec.tasks())}
    if fmt == "json":
        output.emit_json(summary)
    else:
        roles = ", ".join(f"{n} {r}" for r, n in spec.counts().items())
        click.echo(f"{job_file}: ok — job {spec.name} ({spec.style}): {roles}; {len(spec.tasks())} Marathon apps")


@cli.command(context_settings=_CTX)
def schema() -> None:
    """Print the job spec as JSON Schema (for editors)."""
    from marathon_tf.user import output
    from marathon_tf.user.spec import json_schema

    output.emit_json(json_schema())


# ---------------------------------------------------------------------------- deploy


@cli.command(context_settings=_CTX)
@click.argument("job_file", type=click.Path(dir_okay=True))
@_marathon_options
@click.option("--local", is_flag=True, help="Run the job on this machine (a built-in Marathon + Mesos-DNS).")
@click.option("--wait/--detach", default=True, show_default=True,
              help="Follow the deployment and the job to its end, or return once Marathon accepted it.")
@click.option("--timeout", type=DURATION, default=None,
              help="Give up waiting after this long, e.g. 600, 90s, 5m, 2h (exit 3; the job keeps running).")
@click.option("--force", is_flag=True, help="Override a deployment that locks the job's apps.")
@click.option("--dry-run", is_flag=True, help="Render, and show Marathon's plan (?dryRun=true); deploy nothing.")
@_templates_opt
@_output_opt
@local_options.cluster_options(local_options.DEPLOY_DNS_REFRESH, prefix="(--local) ")
@click.pass_context
def deploy(ctx, job_file, marathon_url, user, password, token, ca_bundle, insecure, local, wait, timeout, force,
           dry_run, templates_dir, fmt, **cluster) -> None:
    """Deploy JOB_FILE as a Marathon group (PUT: re-running it changes only what changed)."""
    from marathon_tf.user import jobs, output
    from marathon_tf.user.spec import load_job

    if not local and local_options.given(ctx):
        raise UsageError(f"{', '.join(local_options.given(ctx))}: only with --local (they shape the local cluster)")
    spec = load_job(job_file)  # a bad job file stops here: nothing is sent
    if local:
        sys.exit(_deploy_local(spec, templates_dir=templates_dir, timeout=timeout, fmt=fmt, detach=not wait,
                               dry_run=dry_run, cluster=local_options.to_cluster(**cluster)))
    if dry_run and not marathon_url:
        from marathon_tf.user.render import render_group

        output.info("dry run without a Marathon (--marathon / MARATHON_URL): the rendered group follows")
        output.emit_json(render_group(spec, templates_dir=templates_dir))
        return
    client = _client(marathon_url, user, password, token, ca_bundle, insecure)
    result = jobs.deploy(client, spec, templates_dir=templates_dir, force=force, dry_run=dry_run)
    if dry_run:
        if fmt == "json":
            output.emit_json(result.to_dict())
        else:
            click.echo(output.plan_text(result.plan or {}))
        return
    output.info(f"deployed {result.group_id} on {client.url}: deployment {result.deployment_id}")
    final = _follow(client, spec.name, result.deployment_id, wait=wait, timeout=timeout)
    if fmt == "json":
        output.emit_json({**result.to_dict(), **({"status": final} if final else {})})
    if final and final.get("state") == "Failed":
        sys.exit(1)


def _progress_printer():
    """A callback printing a job's progress line on stderr, only when it changed."""
    from marathon_tf.user import output

    last = [""]

    def show(status) -> None:
        line = output.progress_line(status)
        if line != last[0]:
            output.info(line)
            last[0] = line

    return show


def _deploy_local(spec, *, templates_dir, timeout, fmt, detach, dry_run, cluster) -> int:
    """Run the job on this machine; task output is streamed as ``[worker-1] …``."""
    from marathon_tf.user import localrun, output
    from marathon_tf.user.render import render_group

    localrun.check_local_options(detach)
    import os

    asked = [f"roles.{r}.gpus: {spec.roles[r].gpus:g}" for r in spec.counts() if spec.roles[r].gpus]
    asked += [f"roles.{r}.cpus: {spec.roles[r].cpus:g}" for r in spec.counts()
              if spec.roles[r].cpus > (os.cpu_count() or 1)]
    if asked and not cluster["agent_resources"]:
        output.warn(f"{', '.join(asked)}: {_LOCAL_RESOURCES}")
    if dry_run:
        output.emit_json(render_group(spec, templates_dir=templates_dir))
        return 0
    out_err = fmt == "json"  # keep stdout for the JSON result

    def task_line(task: str, stream: str, line: str) -> None:
        click.echo(f"[{task}] {line}", err=out_err or stream == "stderr")

    def deployed(result, cluster) -> None:
        output.info(f"local Marathon {cluster.marathon_url} (Mesos-DNS {cluster.mesos_dns}): "
                    f"deployed {result.group_id}, deployment {result.deployment_id}")

    run = localrun.run(spec, templates_dir=templates_dir, timeout=timeout, emit_task_line=task_line,
                       progress=_progress_printer(), on_deployed=deployed, cluster_options=cluster)
    steps = run.status.get("finalStep", run.status.get("step"))
    output.info(f"job {spec.name}: {run.state} in {run.seconds:.1f} s"
                + (f", step {steps}" if steps is not None else "")
                + (f" ({run.status['reason']})" if run.status.get("reason") else "")
                + f"; task sandboxes in {run.state_dir}")
    if fmt == "json":
        output.emit_json({"job": spec.name, "state": run.state, "seconds": round(run.seconds, 3),
                          "stateDir": str(run.state_dir), "status": run.status})
    return run.exit_code


#: How often a waiting deploy looks for a task that can never start (a group GET each time).
HOPELESS_EVERY = 10.0


def _follow(client, job: str, deployment_id: str | None, *, wait: bool, timeout: float | None,
            decide: bool = True):
    """Follow the deployment, then the job, with a progress line on stderr. Ctrl-C leaves it running.
    ``decide`` (deploy, scale): a task that can never start (its command cannot be executed, its
    URIs cannot be fetched…: :func:`marathon_tf.marathon.record.fail_if_hopeless`) fails the job, as the deciding task
    does, also when the deciding task itself is the one that cannot start."""
    import time

    from marathon_tf.user import output, watch

    if not wait:
        output.info(f"follow it with: marathon-tf status {job} --watch")
        return None
    from marathon_tf.contract.errors import MarathonError
    from marathon_tf.marathon.events import EventStream
    from marathon_tf.marathon.record import fail_if_hopeless

    start = time.monotonic()
    printer = _progress_printer()
    next_look = [start]

    def show(status) -> None:
        printer(status)
        # one extra group GET per HOPELESS_EVERY s, not per poll (as the deciding task's watch does)
        if decide and status.get("state") not in ("Succeeded", "Failed") and time.monotonic() >= next_look[0]:
            next_look[0] = time.monotonic() + HOPELESS_EVERY
            try:
                fail_if_hopeless(client, job, final_step=status.get("step"))
            except MarathonError:
                pass

    try:
        with EventStream(client) as stream:
            if deployment_id is not None:
                watch.wait_deployment(client, deployment_id, job, timeout=timeout, on_progress=show,
                                      stream=stream)
            left = None if timeout is None else max(0.0, timeout - (time.monotonic() - start))
            final = watch.wait_job(client, job, timeout=left, on_progress=show, stream=stream)
    except KeyboardInterrupt:
        output.info(f"stopped watching; the job keeps running. Watch again with: marathon-tf status {job} --watch")
        raise Interrupted("interrupted") from None
    output.info(f"job {job}: {final.get('state')}" + (f" ({final['reason']})" if final.get("reason") else ""))
    return final


# ---------------------------------------------------------------------------- scale / status / list / delete


@cli.command(context_settings=_CTX)
@click.argument("args", nargs=-1, required=True, metavar="[JOB] ROLE=N…")
@click.option("--job", hidden=True, help="The job to scale (same as the JOB argument).")
@_marathon_options
@click.option("--force", is_flag=True,
              help="Override a deployment that locks the job's apps; start a job that has ended again.")
@click.option("--dry-run", is_flag=True, help="Show Marathon's plan and which tasks would restart.")
@click.option("--wait/--detach", default=False, show_default=True, help="Wait for the deployment to finish.")
@click.option("--timeout", type=DURATION, default=None, help="How long to wait, e.g. 90, 90s, 5m (exit 3 past it).")
@_templates_opt
@_output_opt
def scale(args, job, marathon_url, user, password, token, ca_bundle, insecure, force, dry_run, wait, timeout,
          templates_dir, fmt) -> None:
    """Change role counts, e.g. `marathon-tf scale mnist workers=8` (or ps=2, workers=+2, workers=-1).
    JOB may be left out when Marathon runs only one marathon-tf job.

    Every task gets the rewritten cluster spec and the job resumes from its
    checkpoint; scaling down stops the highest indices.
    """
    from marathon_tf.user import jobs, output, watch

    args = list(args)
    if args and "=" not in args[0] and (len(args) > 1 or args[0] not in jobs.ROLE_ALIASES):
        if job and job != args[0]:
            raise UsageError(f"two jobs named: {args[0]} and --job {job}")
        job = args.pop(0)
    parsed = jobs.parse_scale_args(args)  # checked before any request
    client = _client(marathon_url, user, password, token, ca_bundle, insecure)
    name = jobs.resolve_job(client, job, verb="scale")
    plan, result = jobs.scale(client, name, parsed, templates_dir=templates_dir, force=force, dry_run=dry_run)
    if result is None:
        if fmt == "json":
            output.emit_json({"job": name, "changed": False, "tasks": plan.to_dict()})
        else:
            click.echo(f"no change: {name} already has {_counts_text(parsed, plan)}")
        return
    if fmt == "json":
        output.emit_json({**result.to_dict(), "changed": True, "tasks": plan.to_dict()})
    else:
        click.echo(output.scale_plan_text(plan.to_dict()))
        if dry_run:
            click.echo(output.plan_text(result.plan or {}))
    if not dry_run:
        output.info(f"scaling {result.group_id}: deployment {result.deployment_id}")
        if wait:
            watch.wait_deployment(client, result.deployment_id, name, timeout=timeout,
                                  on_progress=_progress_printer())


def _counts_text(parsed, plan) -> str:
    from marathon_tf.contract.naming import parse_task_name

    counts: dict[str, int] = {}
    for task in plan.unchanged:
        role = (parse_task_name(task) or ("?", 0))[0]
        counts[role] = counts.get(role, 0) + 1
    return ", ".join(f"{counts.get(role, 0)} {role}" for role in parsed)


@cli.command(context_settings=_CTX)
@click.argument("job", required=False)
@_marathon_options
@click.option("--watch", "follow", is_flag=True,
              help="Follow the job until it ends (Ctrl-C to stop); exit 0 Succeeded, 1 Failed.")
@click.option("-o", "--output", "fmt", type=click.Choice(["text", "wide", "json"]), default="text",
              show_default=True, help="text fits 80 columns; wide adds health, phase, rate and task ids.")
def status(job, marathon_url, user, password, token, ca_bundle, insecure, follow, fmt) -> None:
    """Show a job: state, progress (step S/T, steps/s, ETA), logdir, and per task its state,
    host:port, step, restarts, age and last failure."""
    from marathon_tf.user import jobs, output

    client = _client(marathon_url, user, password, token, ca_bundle, insecure)
    name = jobs.resolve_job(client, job)
    if follow:
        st = _follow(client, name, None, wait=True, timeout=None, decide=False)
    else:
        st = jobs.job_status(client, name)
    if fmt == "json":
        output.emit_json(st)
    else:
        output.status_table(st, wide=fmt == "wide")
    if follow and st.get("state") == "Failed":
        sys.exit(1)


@cli.command("list", context_settings=_CTX)
@_marathon_options
@_output_opt
def list_jobs(marathon_url, user, password, token, ca_bundle, insecure, fmt) -> None:
    """List the marathon-tf jobs on Marathon."""
    from marathon_tf.user import jobs, output

    client = _client(marathon_url, user, password, token, ca_bundle, insecure)
    rows = []
    for name, apps in jobs.find_jobs(client).items():
        states = {(a.get("labels") or {}).get(jobs.STATE_LABEL) for a in apps} - {None}
        rows.append({"job": name, "tasks": len(apps), "running": sum(a.get("tasksRunning", 0) for a in apps),
                     "state": states.pop() if len(states) == 1 else "Running" if any(
                         a.get("tasksRunning") for a in apps) else "Starting"})
    if fmt == "json":
        output.emit_json(rows)
    else:
        output.jobs_table(rows)


@cli.command(context_settings=_CTX)
@click.argument("job")
@_marathon_options
@click.option("--force", is_flag=True, help="Delete even while a deployment holds the job.")
@_output_opt
def delete(job, marathon_url, user, password, token, ca_bundle, insecure, force, fmt) -> None:
    """Delete JOB: stop all its tasks and remove its group."""
    from marathon_tf.user import jobs, output

    client = _client(marathon_url, user, password, token, ca_bundle, insecure)
    body = jobs.delete(client, job.strip("/"), force=force)
    if fmt == "json":
        output.emit_json(body or {})
    else:
        click.echo(f"deleted {job}" + (f" (deployment {body.get('deploymentId')})" if isinstance(body, dict) else ""))


@cli.command(context_settings=_CTX)
@click.argument("job")
@click.argument("task", required=False)
@_marathon_options
@click.option("-f", "--follow", "follow_", is_flag=True,
              help="Keep printing new output, also of relaunched tasks, until the job ends (exit 0).")
@click.option("-p", "--previous", is_flag=True,
              help="The task's instance before the current (or last) one: a restarted or earlier run.")
@click.option("--stream", type=click.Choice(["stdout", "stderr", "both"]), default="both", show_default=True,
              help="Which of the task's files; both are printed on stdout.")
@click.option("--tail", "tail_lines", type=click.IntRange(min=-1), default=-1, metavar="N",
              help="Only the last N lines of each log (default: all).")
@click.option("--since", type=DURATION, default=None, metavar="DURATION",
              help="Only task instances (sandboxes) that wrote output within DURATION (90s, 10m, 2h): Mesos "
                   "keeps no time per line, so whole instances are chosen; add --tail for their last lines.")
@click.option("--agent-port", type=click.IntRange(1, 65535), default=5051, show_default=True,
              envvar="MESOS_AGENT_PORT", show_envvar=True, help="The Mesos agents' HTTP port.")
@click.option("--agent-url", default=None, help="Read from this agent URL instead of <task host>:<agent port>.")
def logs(job, task, marathon_url, user, password, token, ca_bundle, insecure, follow_, previous, stream,
         tail_lines, since, agent_port, agent_url) -> None:
    """Print a job's task output (TASK like worker-1; all tasks if left out), read from the
    Mesos agents' sandboxes (and from the local runner's), also after the task ended.

    Every line is printed on stdout as `[worker-1] …`; errors go to stderr (exit 1).
    """
    import time

    from marathon_tf.user import logs as tasklogs

    if since is not None and previous:
        raise UsageError("--since and --previous choose instances in two ways: give one of them")
    client = _client(marathon_url, user, password, token, ca_bundle, insecure)
    streams = ("stdout", "stderr") if stream == "both" else (stream,)
    try:
        for name, which, text in tasklogs.follow(client, job.strip("/"), task, streams,
                                                 tail=None if tail_lines < 0 else tail_lines, follow_=follow_,
                                                 previous=previous, agent_port=agent_port, agent_url=agent_url,
                                                 since=None if since is None else time.time() - since):
            for line in text.splitlines():
                click.echo(f"[{name}] {line}")
    except KeyboardInterrupt:
        return


# ---------------------------------------------------------------------------- in the container / locally


@cli.command(context_settings={**_CTX, "ignore_unknown_options": True, "allow_interspersed_args": False,
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
    elif args[0] not in ("--watch-interval", "--grace"):
        args = ["--", *args]
    sys.exit(boot.main(args))


@cli.group(context_settings=_CTX)
def local() -> None:
    """The built-in single-machine Marathon + Mesos-DNS."""


@local.command("serve", context_settings=_CTX)
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="Marathon API port.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind (only loopback unless you say otherwise).")
@click.option("--dns-port", type=click.IntRange(0, 65535), default=8053, show_default=True,
              help="Mesos-DNS DNS port (UDP/TCP).")
@click.option("--dns-http-port", type=click.IntRange(0, 65535), default=8123, show_default=True,
              help="Mesos-DNS HTTP API port.")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None,
              help="Where task sandboxes and job volumes go (default: $MARATHON_TF_STATE_DIR/serve, else "
                   "$XDG_STATE_HOME/marathon-tf/serve, else ~/.local/state/marathon-tf/serve).")
@click.option("--auth", metavar="USER:PASSWORD|token=TOKEN|env", default=None,
              help="Require HTTP basic auth or a token (env: MARATHON_TOKEN or MARATHON_USER/MARATHON_PASSWORD). "
                   "Needed off loopback.")
@click.option("--allow-origin", "allow_origins", multiple=True, metavar="URL",
              help="Also accept browser requests from this origin (e.g. http://localhost:3000); repeatable.")
@click.option("--ui", "ui_dir", type=click.Path(file_okay=False, exists=True), default=None,
              help="Serve this Marathon web UI build (mesosphere/marathon-ui) at /ui/.")
@local_options.cluster_options(local_options.SERVE_DNS_REFRESH)
def local_serve(port, host, dns_port, dns_http_port, state_dir, auth, allow_origins, ui_dir, **cluster_args) -> None:
    """Keep a local Marathon running, so that MARATHON_URL=http://127.0.0.1:8080
    marathon-tf deploy/scale/status/logs/delete work against it across commands.

    Tasks run as processes of this machine: they find this runner's Marathon and Mesos-DNS
    whatever the job file's discovery says; cpus/mem/disk/gpus/ports are enforced only with
    --agent-resources (then a task that fits no agent waits, as on a cluster)."""
    from pathlib import Path

    from marathon_tf.contract.errors import UsageError
    from marathon_tf.local import serve
    from marathon_tf.local.cluster import PortInUse
    from marathon_tf.local.security import Security, parse_auth
    from marathon_tf.local.ui import check_ui_dir
    from marathon_tf.task.warmpool import WarmPool
    from marathon_tf.user import output
    from marathon_tf.user.config import state_home

    try:  # local/security.py: what local serve refuses, and why
        security = dict(auth=parse_auth(auth) if auth else None, allow_origins=allow_origins,
                        ui_dir=check_ui_dir(ui_dir) if ui_dir else None)
        cluster_args = local_options.to_cluster(**cluster_args)
        Security(host, allow_origins, security["auth"])
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if host not in ("127.0.0.1", "localhost", "::1"):
        output.warn(f"binding {host}: reachable from the network over plain HTTP (credentials are not encrypted)")

    def ready(cluster) -> None:
        output.info(f"Marathon API  {cluster.marathon_url}   (export MARATHON_URL={cluster.marathon_url})")
        output.info(f"Mesos-DNS     {cluster.mesos_dns} (DNS), {cluster.mesos_dns_http} (HTTP)")
        output.info(f"sandboxes     {cluster.state_dir}/sandboxes    — Ctrl-C stops everything")
        if ui_dir:
            output.info(f"web UI        {cluster.marathon_url}/ui/")
        if not cluster_args["agent_resources"]:
            output.warn(_LOCAL_RESOURCES)

    options = {"Marathon API": "--port", "Mesos-DNS": "--dns-port", "Mesos-DNS HTTP API": "--dns-http-port"}
    try:
        signum = serve(port=port, host=host, dns_port=dns_port, dns_http_port=dns_http_port,
                       state_dir=Path(state_dir).absolute() if state_dir else state_home() / "serve",
                       on_ready=ready, warm_pool=WarmPool, **security, **cluster_args)
    except ValueError as e:  # what the cluster refuses of its options (e.g. agents' addresses on this OS)
        raise UsageError(str(e)) from None
    except PortInUse as e:
        raise UsageError(f"{e.what} port {e.port} on {e.host} is already in use (another `local serve`?)",
                         hint=f"stop what holds it, or choose another port with {options[e.what]} PORT "
                              f"(0 picks a free one)") from None
    from marathon_tf.user.stopsignals import signal_name

    output.info(f"stopped by {signal_name(signum)}: every task was stopped")
    sys.exit(128 + signum)


_LOCAL_RESOURCES = ("the local runner does not enforce cpus, mem, disk or gpus: every task sees this machine's "
                    "CPUs, memory and devices (--agent-resources makes its agents finite)")


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="marathon-tf")


if __name__ == "__main__":  # pragma: no cover
    main()
