"""How a shell runs a command and reports its end (pure: no I/O).

* ``exec`` where it can: the program then *is* the shell's process. ``sh -c "python3 train.py"``
  forks ``python3`` (dash does not exec the last command), so a parent-death signal or a kill aimed
  at the shell's pid misses the program. :func:`exec_form` prefixes ``exec`` when the command is
  one simple command; anything else is left as it is. Used by the local launcher for ``cmd`` and
  by the bootstrap for shell commands.
* The exit code of a process killed by a signal, as a shell (and Mesos, and Marathon) reports it:
  128 + the signal's number (:func:`signal_exit`: SIGTERM 143, SIGKILL 137, SIGINT 130);
  :func:`exit_status` turns a ``subprocess`` return code into it; :func:`signal_name` names one.
"""

from __future__ import annotations

import shlex
import signal

__all__ = ["exec_form", "signal_exit", "exit_status", "signal_name"]


def signal_exit(signum: int) -> int:
    """The exit code of a process that ended on signal ``signum``: 128 + its number (SIGTERM: 143)."""
    return 128 + int(signum)


def exit_status(returncode: int) -> int:
    """A ``subprocess`` return code as a shell reports it: killed by signal N (``-N``) -> 128 + N."""
    return signal_exit(-returncode) if returncode < 0 else returncode


def signal_name(signum: int) -> str:
    """``SIGTERM`` for 15; ``signal 99`` for a number that names no signal."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"

_SHELL_WORDS = {"if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
                "{", "}", "!", "exec", "cd", "export", "set", "unset", "trap", "eval", ".", "source", "ulimit",
                "umask", "wait", "read", "shift", "return", "exit", "local", "alias", "function"}


def exec_form(cmd: str) -> str:
    """``exec <cmd>`` when ``cmd`` is one simple command (so the shell is replaced by it and the
    parent-death signal applies to the program itself); ``cmd`` unchanged otherwise (lists,
    pipelines, redirections, substitutions, variable assignments, builtins, several lines)."""
    if "\n" in cmd or "`" in cmd or "$(" in cmd:
        return cmd
    try:
        lexer = shlex.shlex(cmd, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return cmd
    if not tokens or tokens[0] in _SHELL_WORDS or "=" in tokens[0].split("/")[0]:
        return cmd
    if any(t and all(c in "();<>|&" for c in t) for t in tokens):
        return cmd
    return f"exec {cmd}"
