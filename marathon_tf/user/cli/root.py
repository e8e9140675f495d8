"""The ``marathon-tf`` group: its global options (``--version``, ``-v``, ``-q``), the one place an error
becomes its exit code (:class:`_Group`), every verb group's commands added to it, and :func:`main`.
"""

from __future__ import annotations

from typing import Any

import click

from marathon_tf import __version__
from marathon_tf.contract.errors import Interrupted, MarathonTFError
from marathon_tf.user.cli import change, in_task, jobfile, view
from marathon_tf.user.cli.local import local
from marathon_tf.user.cli.params import CTX

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


# the listing is by name (click sorts it), whichever module a verb is in
for _verb in (jobfile.render, jobfile.validate, jobfile.export, jobfile.schema,  # the job file, offline
              change.deploy, change.scale, change.checkpoint, change.delete,  # changing a job
              view.status, view.events, view.list_jobs, view.logs,  # looking at jobs
              in_task.bootstrap, local):  # in each task; the local cluster
    cli.add_command(_verb)


def main(argv: list[str] | None = None) -> None:
    """The ``marathon-tf`` command: every error a command raises ends it with its class's exit code
    (handled once, in :class:`_Group`)."""
    cli.main(args=argv, prog_name="marathon-tf")
