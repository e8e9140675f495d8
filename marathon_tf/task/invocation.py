"""How a task's bootstrap is invoked: its command line (options, then the training command, run as
one shell string or exec'd as it is) and the addresses the task's environment gives it (Marathon's
``HOST``, ``PORT_<NAME>``/``PORT0``/``PORT1``). Pure: read by :mod:`marathon_tf.task.bootstrap` and by
the pre-warm pool (:mod:`marathon_tf.task.warmpool`), which needs the command without the bootstrap."""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence

from marathon_tf.contract.errors import UsageError
from marathon_tf.contract.taskenv import TaskContext

__all__ = ["USAGE", "DEFAULT_WATCH_INTERVAL", "parse_args", "shell_command", "own_address", "status_port"]

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


def own_address(ctx: TaskContext, environ: Mapping[str, str]) -> str:
    """This task's TF address: HOST (MESOS_CONTAINER_IP in container networking) and PORT_<TF>."""
    port = environ.get(f"PORT_{ctx.port_name.upper()}") or environ.get("PORT0")
    if not port:
        raise UsageError(f"neither PORT_{ctx.port_name.upper()} nor PORT0 is set: the app needs a port "
                         f"named {ctx.port_name!r}")
    host = environ.get("HOST") or socket.gethostname()
    if ctx.network == "container" and environ.get("MESOS_CONTAINER_IP"):
        host = environ["MESOS_CONTAINER_IP"]
    return f"{host}:{port}"


def status_port(ctx: TaskContext, environ: Mapping[str, str]) -> int | None:
    """The status endpoint's port: PORT_<STATUS> or PORT1; None when neither is set."""
    value = environ.get(f"PORT_{ctx.status_port_name.upper()}") or environ.get("PORT1")
    return int(value) if value else None
