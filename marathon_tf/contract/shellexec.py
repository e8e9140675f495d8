"""``exec`` a shell's command where it can: the program then *is* the shell's process.

``sh -c "python3 train.py"`` forks ``python3`` (dash does not exec the last command), so a
parent-death signal or a kill aimed at the shell's pid misses the program. :func:`exec_form`
prefixes ``exec`` when the command is one simple command; anything else is left as it is.
Pure (no I/O); used by the local launcher for ``cmd`` and by the bootstrap for shell commands.
"""

from __future__ import annotations

import shlex

__all__ = ["exec_form"]

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
