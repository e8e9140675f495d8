"""A killed task's process tree, signalled as Mesos's command executor signals it (local/proctree), and the
local runner's kill that uses it (local/launcher): the training program gets its task's SIGTERM with its
bootstrap, however it left the task's process group or session.

Modelled on apache/mesos c1b42f7: ``src/launcher/executor.cpp`` (``os::killtree(pid, SIGTERM, true, true)``,
``escalated``: the same with SIGKILL) and ``3rdparty/stout/include/stout/os/posix/killtree.hpp`` (the walk:
children, then every process of a group or session met, never the group or session of the root's parent;
each process stopped before its children are listed, SIGCONT after the signal)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from marathon_tf.local.proctree import Proc, killtree, tree
from marathon_tf.task.supervisor import ignores_sigterm


def test_the_walk_follows_children_groups_and_sessions_but_not_the_roots_parents():
    table = {p.pid: p for p in [
        Proc(1, 0, 1, 1),            # init
        Proc(10, 1, 10, 10),         # the agent (the root's parent): its group and session are not followed
        Proc(11, 1, 10, 10),         # another process of the agent's group: not the task's
        Proc(20, 10, 20, 20),        # the task's command (root), its own session
        Proc(21, 20, 20, 20),        # a child in the root's group
        Proc(30, 21, 30, 30),        # a grandchild in a session of its own (a training program)
        Proc(31, 1, 30, 30),         # re-parented to init, still in that session: found through it
        Proc(40, 1, 40, 40),         # unrelated
        Proc(50, 99, 50, 50),        # an extra root (a program forked outside the tree)
        Proc(51, 50, 50, 50),
    ]}
    assert tree(20, table) == [20, 21, 30, 31]
    assert tree(20, table, extra=[50]) == [20, 50, 21, 51, 30, 31]
    # a root that is gone: the group and session it led
    gone = {k: v for k, v in table.items() if k != 20}
    assert tree(20, gone) == [21, 30, 31]
    assert tree(77, table) == []


TRAPS = r"""
import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: (open(sys.argv[1], "w").write("TERM"), os._exit(0)))
open(sys.argv[1] + ".ready", "w").close()
time.sleep(60)
"""


def _wait(path: Path, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end and not path.exists():
        time.sleep(0.02)
    return path.exists()


def test_killtree_reaches_a_program_in_a_session_of_its_own(tmp_path):
    """A program started with ``start_new_session`` (as the bootstrap starts one) by the task's command:
    killpg of the task's group misses it; Mesos's tree walk does not."""
    mark = tmp_path / "mark"
    starter = (f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {TRAPS!r}, {str(mark)!r}], "
               f"start_new_session=True); time.sleep(60)")
    root = subprocess.Popen([sys.executable, "-c", starter], start_new_session=True)
    try:
        assert _wait(Path(str(mark) + ".ready"))
        signalled = killtree(root.pid, signal.SIGTERM)
        assert root.pid in signalled and len(signalled) == 2
        assert _wait(mark) and mark.read_text() == "TERM"
        assert root.wait(10) == -signal.SIGTERM
    finally:
        killtree(root.pid, signal.SIGKILL)
        root.kill()
        root.wait()


def test_the_local_agents_kill_reaches_the_program_of_a_bootstrap_and_a_forked_one(tmp_path):
    """local/launcher's ``terminate``: the task's SIGTERM reaches a program in its own session (the
    bootstrap's start), and the program a pre-warmed interpreter forked for the task (its pid in the
    sandbox), as a real agent's reaches the bootstrap's child."""
    from marathon_tf.contract.taskenv import FORKED_PID_FILE
    from marathon_tf.local import reaper
    from marathon_tf.local.launcher import Launcher

    launcher = Launcher(tmp_path / "state")
    box = tmp_path / "box"
    box.mkdir()
    mark, forked_mark = tmp_path / "mark", tmp_path / "forked"
    env = {**os.environ, reaper.TOKEN_VAR: launcher.token}
    forked = subprocess.Popen([sys.executable, "-c", TRAPS, str(forked_mark)], start_new_session=True, env=env,
                              cwd=box)  # (a forked program works in its task's sandbox)
    (box / FORKED_PID_FILE).write_text(f"{forked.pid}\n")
    starter = (f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {TRAPS!r}, {str(mark)!r}], "
               f"start_new_session=True); time.sleep(60)")

    async def run() -> int | None:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", starter, start_new_session=True, env=env)
        launcher.live_groups.add(proc.pid)
        launcher.boxes[proc.pid] = box
        assert await asyncio.get_running_loop().run_in_executor(None, _wait, Path(str(mark) + ".ready"))
        assert await asyncio.get_running_loop().run_in_executor(None, _wait, Path(str(forked_mark) + ".ready"))
        await launcher.terminate(proc, 5.0)
        return proc.returncode

    other = tmp_path / "other"
    other.mkdir()
    try:
        launcher.boxes[1] = other  # a pid file naming a live carrier of the token that works elsewhere: not taken
        (other / FORKED_PID_FILE).write_text(f"{forked.pid}\n")
        assert launcher.forked_program(1) == []
        assert asyncio.run(run()) == -signal.SIGTERM
        assert _wait(mark) and mark.read_text() == "TERM"
        assert _wait(forked_mark) and forked_mark.read_text() == "TERM"
        assert forked.wait(10) == 0
    finally:
        forked.kill()
        forked.wait()
        launcher.kill_all_now()


IGNORES = r"""
import signal, sys, time
if sys.argv[1] == "handler":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))
print("up", flush=True)
time.sleep(60)
"""


def test_a_ps_program_starts_with_sigterm_ignored_and_its_stop_kills_it_at_once_unless_it_handles_sigterm(tmp_path):
    """task/supervisor: the agent's tree-wide SIGTERM does not end a ps's program before its bootstrap has seen
    the save round through (it keeps serving the variables the chief saves); then a program without a handler
    is killed at once (its default action), one with a handler of its own gets SIGTERM and its grace."""
    from marathon_tf.task.supervisor import Trainer

    for how, code in (("plain", 128 + signal.SIGTERM), ("handler", 7)):
        lines: list[str] = []
        trainer = Trainer([sys.executable, "-c", IGNORES, how], dict(os.environ), on_text=lines.append,
                          ignore_term=True, stdout=open(os.devnull, "wb"), stderr=open(os.devnull, "wb"))
        trainer.start()
        try:
            end = time.monotonic() + 20
            while time.monotonic() < end and not any("up" in line for line in lines):
                time.sleep(0.02)
            assert ignores_sigterm(trainer.proc.pid) is (how == "plain")
            if how == "plain":
                os.kill(trainer.proc.pid, signal.SIGTERM)  # what the agent sends the whole tree
                time.sleep(0.3)
                assert trainer.proc.poll() is None
            began = time.monotonic()
            assert trainer.stop(30.0) == code
            assert time.monotonic() - began < 10.0
        finally:
            if trainer.proc.poll() is None:
                trainer.proc.kill()
