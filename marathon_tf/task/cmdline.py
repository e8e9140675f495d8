"""The bootstrap's command line: ``marathon-tf bootstrap [--watch-interval S] [--grace S] -- COMMAND...``
(its usage, its options, whether the command is one shell string). Pure; used by
:mod:`marathon_tf.task.bootstrap` (which re-exports these names) and the pre-warm pool."""

from __future__ import annotations

from typing import Sequence

from marathon_tf.contract.errors import UsageError

__all__ = ["USAGE", "parse_args", "shell_command", "SHELL_CHARS", "DEFAULT_WATCH_INTERVAL"]

SHELL_CHARS = set(" \t\n;&|<>()$`\\\"'*?[]#")
DEFAULT_WATCH_INTERVAL = 20.0

USAGE = """\
Usage: marathon-tf bootstrap [--watch-interval S] [--grace S] -- COMMAND...
       python -m marathon_tf.bootstrap [options] -- COMMAND...

What runs inside every Marathon task of a marathon-tf job (the rendered app's cmd): finds every
peer's host:port (Mesos-DNS or Marathon), writes the cluster spec (TF_CONFIG and/or flags), runs
COMMAND and supervises it, serves /health and /status on the task's status port, and records the
job's end. One argument after -- with spaces or shell syntax runs through /bin/sh -c.

Options:
  --watch-interval S  mean seconds between looks for peers that moved (default 20)
  --grace S           seconds the program gets between SIGTERM and SIGKILL (default: the app's
                      taskKillGracePeriodSeconds, MTF_GRACE_SECONDS, less a margin: 30 -> 25)
  -h, --help          show this message

Settings come from the task's environment: MTF_* (set by the rendered app), HOST, PORT_TF/PORT0,
PORT_STATUS/PORT1, MESOS_SANDBOX. Outside a task it has nothing to do.
"""


def parse_args(argv: Sequence[str]) -> tuple[dict[str, float], list[str]]:
    """``[--watch-interval S] [--grace S] -- cmd...`` -> (options, command)."""
    options: dict = {"watch_interval": DEFAULT_WATCH_INTERVAL, "grace": None}
    args = list(argv)
    if "--" in args:
        cut = args.index("--")
        head, command = args[:cut], args[cut + 1:]
    else:
        head, command = [], args
        while command[:1] and command[0] in ("--watch-interval", "--grace"):
            head, command = head + command[:2], command[2:]
    it = iter(head)
    for flag in it:
        key = flag.lstrip("-").replace("-", "_")
        if key not in options:  # (grace None: from the task's environment)
            raise UsageError(f"unknown bootstrap option {flag!r} (put the training command after '--')")
        try:
            options[key] = float(next(it))
        except (StopIteration, ValueError):
            raise UsageError(f"{flag} needs a number of seconds") from None
    if not command:
        raise UsageError("no training command: use 'marathon-tf bootstrap -- python3 train.py ...'")
    return options, command


def shell_command(command: Sequence[str]) -> bool:
    """Whether the command is one shell string (exactly one argument with spaces/shell syntax)."""
    return len(command) == 1 and any(ch in SHELL_CHARS for ch in command[0])
