"""``marathon-tf bootstrap``, the one verb that runs inside each Marathon task: it hands its arguments to the
task side's bootstrap (:mod:`marathon_tf.task.bootstrap`), which finds the peers, writes the cluster spec and
runs the program.
"""

from __future__ import annotations

import sys

import click

from marathon_tf.user.cli.params import CTX

__all__ = ["bootstrap"]


@click.command(context_settings={**CTX, "ignore_unknown_options": True, "allow_interspersed_args": False,
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
