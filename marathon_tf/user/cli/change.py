"""The verbs that change a job on Marathon: ``deploy`` (also ``--local``, on this machine), ``scale``,
``checkpoint`` (have it save one now) and ``delete``. Before a job is sent the cluster's capacity is read;
what the job does after is followed with :mod:`marathon_tf.user.cli.follow`.
"""

from __future__ import annotations

import click

from marathon_tf.contract.errors import UsageError
from marathon_tf.user import local_options
from marathon_tf.user.cli.follow import follow_job, progress_printer, raise_for_outcome
from marathon_tf.user.cli.params import (
    CTX,
    DURATION,
    VERB_LIMIT,
    connection_options,
    mesos_opt,
    output_opt,
    resources_opt,
    templates_opt,
    verb_timeout_opt,
)

__all__ = ["deploy", "scale", "checkpoint", "delete"]


@click.command(context_settings=CTX)
@click.argument("job_file", type=click.Path(dir_okay=True))
@connection_options
@click.option("--local", is_flag=True, help="Run the job on this machine (a built-in Marathon + Mesos-DNS).")
@click.option("--wait/--detach", default=True, show_default=True,
              help="Follow the deployment and the job to its end, or return once Marathon accepted it.")
@click.option("--timeout", type=DURATION, default=None,
              help="Give up waiting after this long, e.g. 600, 90s, 5m, 2h (exit 3; the job keeps running); "
                   f"with --detach, the bound of the whole command (default {VERB_LIMIT:g}s).")
@click.option("--force", is_flag=True, help="Override a deployment that locks the job's apps.")
@click.option("--dry-run", is_flag=True, help="Render, and show Marathon's plan (?dryRun=true); deploy nothing.")
@templates_opt
@output_opt
@click.option("--resume/--fresh", default=None,
              help="For a job that has ended (or, on `local serve`, left its volumes): go on from its checkpoints, "
                   "or remove the local runner's volumes first and start from scratch. Asked for, not guessed.")
@mesos_opt
@resources_opt
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
    final = follow_job(marathon, job.name, dep.deployment_id if dep.changed else None, wait=wait, timeout=timeout)
    if fmt == "json":
        output.emit_json({**dep.to_dict(), **({"status": final.to_dict()} if final else {})})
    raise_for_outcome(final)


def _say_admission(shortfall: str | None, note: str | None = None) -> None:
    """What the capacity check said before the job was sent (stderr): a shortfall, or why it was skipped."""
    from marathon_tf.user import output

    if note:
        output.info(note)
    if shortfall:
        output.warn(f"{shortfall}; it waits for room until its admission deadline (--no-wait-for-resources refuses it)")


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

    progress = announce.announcing(progress_printer(), output.info)  # + metrics URLs, TensorBoard, once
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
    raise_for_outcome(run.status)


@click.command(context_settings=CTX)
@click.argument("args", nargs=-1, required=True, metavar="[JOB] ROLE=N…")
@click.option("--job", hidden=True, help="The job to scale (same as the JOB argument).")
@connection_options
@click.option("--force", is_flag=True,
              help="Override a deployment that locks the job's apps; start a job that has ended (or reached "
                   "its target step) again.")
@click.option("--dry-run", is_flag=True, help="Show Marathon's plan and which tasks would restart.")
@click.option("--wait/--detach", default=False, show_default=True, help="Wait for the deployment to finish.")
@click.option("--timeout", type=DURATION, default=None,
              help=f"How long to wait, e.g. 90, 90s, 5m (exit 3 past it); with --detach, the bound of the whole "
                   f"command (default {VERB_LIMIT:g}s).")
@mesos_opt
@resources_opt
@templates_opt
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
                                     on_progress=progress_printer())


@click.command(context_settings=CTX)
@click.argument("job")
@connection_options
@click.option("--force", is_flag=True, help="Delete even while a deployment holds the job.")
@output_opt
@click.option("--purge", is_flag=True,
              help="Also remove the job's volumes (its checkpoints), once its tasks stopped: local jobs only "
                   "(`local serve`); a cluster's are on the agents.")
@click.option("--save", is_flag=True,
              help="Have the job save a checkpoint first (as `marathon-tf checkpoint`), to resume from with "
                   "`deploy --resume`; a job that cannot is not deleted (exit 1, with why).")
@verb_timeout_opt
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


@click.command(context_settings=CTX)
@click.argument("job", required=False)
@connection_options
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
