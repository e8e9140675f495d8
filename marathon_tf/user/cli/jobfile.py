"""The verbs on the job file, offline (nothing is sent, no Marathon needed): ``render`` (the Marathon app group
it renders to), ``validate`` (a summary, or every problem at once), ``export`` (a manifest for another
orchestrator) and ``schema`` (the job spec as JSON Schema).
"""

from __future__ import annotations

import sys

import click

from marathon_tf.user.cli.params import CTX, output_opt, templates_opt

__all__ = ["render", "validate", "export", "schema"]


@click.command(context_settings=CTX)
@click.argument("job_file", type=click.Path(dir_okay=True))
@templates_opt
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


@click.command(context_settings=CTX)
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


@click.command(context_settings=CTX)
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
@templates_opt
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


@click.command(context_settings=CTX)
def schema() -> None:
    """Print the job spec as JSON Schema (for editors)."""
    from marathon_tf.user import output
    from marathon_tf.user.spec import json_schema

    output.emit_json(json_schema())
