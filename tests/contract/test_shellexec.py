"""exec_form: a simple command replaces its shell; anything else is left to the shell."""

import subprocess
import time
from pathlib import Path

import pytest

from marathon_tf.contract.shellexec import exec_form


@pytest.mark.parametrize("cmd", [
    "marathon-tf bootstrap -- python3 train.py --x 1",
    'tensorboard --logdir /x --port "$PORT_HTTP" --bind_all',
    'python -c "import x; y"',
    "sleep 2 # comment",
])
def test_simple_commands_are_execd(cmd):
    assert exec_form(cmd) == f"exec {cmd}"


@pytest.mark.parametrize("cmd", [
    "cd x && y", "a; b", "a&&b", "X=1 y", "a | b", "a > f", "x 2>&1", "echo $(date)", "echo `date`",
    "a &", "if true; then a; fi", "exec a", "a\nb", "trap '' TERM", "", "'unbalanced",
])
def test_anything_else_is_left_alone(cmd):
    assert exec_form(cmd) == cmd


def test_the_shell_is_replaced_by_the_program():
    proc = subprocess.Popen(["/bin/sh", "-c", exec_form("sleep 30")])
    try:
        time.sleep(0.3)
        assert Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")[0] == b"sleep"
    finally:
        proc.kill()
        proc.wait()
