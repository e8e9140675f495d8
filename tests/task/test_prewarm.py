"""Pre-warmed trainers: a program run in a pre-warmed interpreter behaves as ``python script.py``.

Each case runs the same probe program twice, the ordinary way (supervisor.popen) and through a
Prewarmer, and compares what the program saw and did. The pre-warmed module is a tiny marker
module (``mtf_marker``, on PYTHONPATH), not TensorFlow, so the tests stay fast; the examples'
e2e tests run TensorFlow itself pre-warmed.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from polling import alive
from task_helpers import FakeBackend, task_env, wait_for

from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.task.bootstrap import Bootstrap
from marathon_tf.task.policy import Action, Decision, ExitPolicy
from marathon_tf.task.prewarm import Prewarmer, PythonCommand, python_command
from marathon_tf.task.supervisor import Trainer, popen

PROBE = textwrap.dedent("""\
    import json, os, re, sys
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "file": globals().get("__file__"),
                      "name": __name__, "spec": re.sub(" at 0x[0-9a-f]+", "", repr(__spec__)),
                      "loader": type(__loader__).__name__,
                      "cached": globals().get("__cached__", "<none>"), "package": __package__,
                      "cwd": os.getcwd(), "tf_config": os.environ.get("TF_CONFIG"), "stdin": sys.stdin.read(),
                      "main_is_me": sys.modules["__main__"].__dict__ is globals(),
                      "executable": sys.executable, "flags": list(sys.flags),
                      "unbuffered": os.environ.get("PYTHONUNBUFFERED")}), flush=True)
    print("warm=%s" % ("mtf_marker" in sys.modules), file=sys.stderr, flush=True)
    if what == "raise":
        def inner():
            raise ValueError("boom")
        inner()
    if what == "exit-code":
        sys.exit(3)
    if what == "exit-message":
        sys.exit("bye")
    if what == "interrupt":
        raise KeyboardInterrupt
    if what == "sleep":
        import time
        print("step=1", flush=True)
        time.sleep(60)
    """)


@pytest.fixture
def program(tmp_path):
    """A work dir with the probe as ``prog/probe.py``, a package ``pkg`` (``-m pkg.main``) and
    the marker module on PYTHONPATH; returns (env, cwd)."""
    (tmp_path / "prog").mkdir()
    (tmp_path / "prog" / "probe.py").write_text(PROBE)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "main.py").write_text(PROBE)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "mtf_marker.py").write_text("import time\ntime.sleep(0.2)\n")
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    env.update(PYTHONPATH=str(tmp_path / "lib"), PYTHONUNBUFFERED="1")
    return env, str(tmp_path)


def finish(proc: subprocess.Popen, timeout: float = 60) -> tuple[int, str, str]:
    out, err = [], []
    readers = [threading.Thread(target=lambda p=p, acc=acc: acc.append(p.read()), daemon=True)
               for p, acc in ((proc.stdout, out), (proc.stderr, err))]
    for t in readers:
        t.start()
    proc.wait(timeout)
    for t in readers:
        t.join(10)
    return proc.returncode, out[0].decode(), err[0].decode()


def both(argv, env, cwd, *, tf_config='{"cluster": {}}'):
    """(ordinary, pre-warmed) results of the same command; the second also says how it started."""
    run_env = dict(env, TF_CONFIG=tf_config) if tf_config else dict(env)
    plain = finish(popen(argv, run_env, cwd))
    warmer = Prewarmer(argv, ["mtf_marker"], env, cwd=cwd).start()
    try:
        wait_for(lambda: warmer.waiting is not None, 30, what="a pre-warmed interpreter")
        warm = finish(warmer.spawn(argv, run_env, cwd))
        assert warmer.last.forked.wait(10)
        return plain, warm, warmer.last.started
    finally:
        warmer.close()


def facts(result):
    code, out, err = result
    return code, json.loads(out.splitlines()[0]) if out.strip() else None, err


@pytest.mark.parametrize("how", ["script", "module"])
def test_a_program_sees_what_python_would_give_it(program, how):
    env, cwd = program
    argv = ([sys.executable, "prog/probe.py", "--flag", "x y"] if how == "script"
            else [sys.executable, "-m", "pkg.main", "--flag", "x y"])
    plain, warm, started = both(argv, env, cwd)
    assert started == {"started": "in_place", "reason": None}
    (pc, pfacts, perr), (wc, wfacts, werr) = facts(plain), facts(warm)
    assert pc == wc == 0
    assert wfacts == pfacts
    assert wfacts["tf_config"] == '{"cluster": {}}' and wfacts["name"] == "__main__"
    assert perr.strip() == "warm=False" and werr.strip() == "warm=True"  # imported before it started


def test_the_environment_is_what_a_fresh_interpreter_sees_also_in_the_c_locale(program, tmp_path):
    """Without LANG, Python itself sets LC_CTYPE at start-up (PEP 538): the server compares the
    environment it was *given* with the order's, and the program gets what a fresh interpreter has."""
    env, cwd = program
    env = {k: v for k, v in env.items() if k != "LANG"}
    (tmp_path / "prog" / "env.py").write_text("import json, os\nprint(json.dumps(dict(os.environ)))\n")
    plain, warm, started = both([sys.executable, "prog/env.py"], env, cwd)
    assert started == {"started": "in_place", "reason": None}
    assert json.loads(warm[1]) == json.loads(plain[1])


@pytest.mark.parametrize("what, code", [("exit-code", 3), ("exit-message", 1), ("raise", 1), ("interrupt", 130)])
def test_exit_codes_and_tracebacks_are_python_s(program, what, code):
    env, cwd = program
    plain, warm, started = both([sys.executable, "prog/probe.py", what], env, cwd)
    assert started["started"] == "in_place"
    from marathon_tf.contract.shellexec import exit_status

    assert exit_status(plain[0]) == exit_status(warm[0]) == code
    assert plain[1] == warm[1]
    assert warm[2].replace("warm=True", "warm=False") == plain[2]  # the same traceback, line for line


def test_a_syntax_error_reads_like_python_s(program):
    env, cwd = program
    (__import__("pathlib").Path(cwd) / "prog" / "bad.py").write_text("x = (\n")
    plain, warm, _ = both([sys.executable, "prog/bad.py"], env, cwd)
    assert plain[0] == warm[0] == 1 and plain[2] == warm[2] and "SyntaxError" in warm[2]


def test_what_cannot_run_in_place_starts_the_ordinary_way(program):
    env, cwd = program
    missing = [sys.executable, "prog/nope.py"]
    plain, warm, started = both(missing, env, cwd)
    assert started == {"started": "ordinary", "reason": "not a plain source file"}
    assert plain[0] == warm[0] == 2 and plain[2] == warm[2]  # python's own "can't open file" message
    changed = dict(env, PYTHONHASHSEED="7")  # read at interpreter start: cannot be changed later
    warmer = Prewarmer([sys.executable, "prog/probe.py"], ["mtf_marker"], env, cwd=cwd).start()
    try:
        wait_for(lambda: warmer.waiting is not None, 30, what="a pre-warmed interpreter")
        code, out, err = finish(warmer.spawn([sys.executable, "prog/probe.py"], changed, cwd))
        assert warmer.last.forked.wait(10)
        assert warmer.last.started["reason"] == "the environment differs from the pre-warmed one"
        assert code == 0 and err.strip() == "warm=False"
    finally:
        warmer.close()


def test_a_failed_prewarm_import_starts_the_ordinary_way(program):
    env, cwd = program
    logs = []
    warmer = Prewarmer([sys.executable, "prog/probe.py"], ["no_such_module_mtf"], env, cwd=cwd,
                       log=logs.append).start()
    try:
        wait_for(lambda: warmer.waiting is not None, 30, what="a pre-warmed interpreter")
        code, out, err = finish(warmer.spawn([sys.executable, "prog/probe.py"], env, cwd))
        assert warmer.last.forked.wait(10)
        assert code == 0 and warmer.last.started["reason"] == "a pre-warm import failed"
        assert any("could not pre-import no_such_module_mtf" in line for line in logs)
    finally:
        warmer.close()


def test_the_trainer_stops_a_prewarmed_program_like_any_other(program):
    env, cwd = program
    warmer = Prewarmer([sys.executable, "prog/probe.py"], ["mtf_marker"], env, cwd=cwd).start()
    try:
        wait_for(lambda: warmer.waiting is not None, 30, what="a pre-warmed interpreter")
        steps, out = [], io.BytesIO()
        trainer = Trainer([sys.executable, "prog/probe.py", "sleep"], env, cwd=cwd, on_step=steps.append,
                          stdout=out, stderr=io.BytesIO(), spawn=warmer.spawn)
        trainer.start()
        wait_for(lambda: steps == [1], 30, what="step=1 through the pump")
        assert trainer.stop(grace=5) == 128 + signal.SIGTERM
        assert b'"argv": ["prog/probe.py", "sleep"]' in out.getvalue()
    finally:
        warmer.close()


def test_the_agents_sigterm_to_the_whole_tree_reaches_a_prewarmed_program_not_through_its_interpreters_death(
        program):
    """A real agent's kill SIGTERMs the task's whole process tree (Mesos's command executor, modelled in
    marathon_tf.local.proctree; apache/mesos c1b42f7 src/launcher/executor.cpp), the bootstrap's own pre-warmed
    interpreter included. It ignores SIGTERM (it ends with the bootstrap): had it died of it, every program it
    forked would have been SIGKILLed at once (their parent-death signal), no save round, no SIGTERM handler.
    Its programs get SIGTERM as any child would (the default: they die of it), a ps's ignores it."""
    env, cwd = program
    warmer = Prewarmer([sys.executable, "prog/probe.py"], ["mtf_marker"], env, cwd=cwd).start()
    try:
        wait_for(lambda: warmer.waiting is not None, 30, what="a pre-warmed interpreter")
        for ps in (False, True):
            steps: list[int] = []
            trainer = Trainer([sys.executable, "prog/probe.py", "sleep"], env, cwd=cwd, on_step=steps.append,
                              stdout=io.BytesIO(), stderr=io.BytesIO(), spawn=warmer.spawn, ignore_term=ps)
            trainer.start()
            wait_for(lambda: steps == [1], 30, what="step=1 through the pump")
            for pid in (warmer.server.proc.pid, trainer.pid):  # what killtree sends (SIGSTOP/SIGCONT aside)
                os.kill(pid, signal.SIGTERM)
            time.sleep(0.5)
            assert warmer.server.proc.poll() is None
            if ps:
                assert trainer.wait(timeout=0) is None  # it serves on: its bootstrap ends it after the round
                assert trainer.stop(grace=5) == 128 + signal.SIGTERM
            else:
                assert trainer.wait(timeout=10) == 128 + signal.SIGTERM and trainer.infrastructure() is None
            wait_for(lambda: warmer.waiting is not None, 30, what="the next pre-warmed fork")
    finally:
        warmer.close()


def test_a_program_killed_with_its_interpreter_is_an_infrastructure_death_named_by_the_kill(program):
    """Issue 24 (finding 7): the pre-warmed interpreter that forked a running program dies; the program
    goes with it. The trainer says so (what died, and how), so the policy does not count it as the
    program's failure and the reason is the kill, not a stderr line every run prints."""
    env, cwd = program
    warmer = Prewarmer([sys.executable, "prog/probe.py"], ["mtf_marker"], env, cwd=cwd).start()
    try:
        wait_for(lambda: warmer.waiting is not None, 30, what="a pre-warmed interpreter")
        steps = []
        trainer = Trainer([sys.executable, "prog/probe.py", "sleep"], env, cwd=cwd, on_step=steps.append,
                          stdout=io.BytesIO(), stderr=io.BytesIO(), spawn=warmer.spawn)
        trainer.start()
        wait_for(lambda: steps == [1], 30, what="step=1 through the pump")
        assert trainer.infrastructure() is None
        os.kill(warmer.server.proc.pid, signal.SIGKILL)
        code = trainer.wait(timeout=30)
        assert code == 128 + signal.SIGKILL, code
        why = trainer.infrastructure()
        assert why and f"pre-warmed interpreter that forked it (pid {warmer.server.proc.pid}) died of SIGKILL" in why
    finally:
        warmer.close()


def test_a_program_that_ends_by_itself_under_a_prewarmed_interpreter_is_no_infrastructure_death(program):
    env, cwd = program
    warmer = Prewarmer([sys.executable, "prog/probe.py"], ["mtf_marker"], env, cwd=cwd).start()
    try:
        wait_for(lambda: warmer.waiting is not None, 30, what="a pre-warmed interpreter")
        trainer = Trainer([sys.executable, "prog/probe.py", "exit-code"], env, cwd=cwd, stdout=io.BytesIO(),
                          stderr=io.BytesIO(), spawn=warmer.spawn)
        trainer.start()
        assert trainer.wait(timeout=30) == 3 and trainer.infrastructure() is None
    finally:
        warmer.close()


def test_a_prewarmed_interpreter_dies_with_its_bootstrap(program, tmp_path):
    """PR_SET_PDEATHSIG: SIGKILL the process that holds the Prewarmer; its interpreter goes too."""
    env, cwd = program
    holder = textwrap.dedent(f"""\
        import sys, time
        sys.path[:0] = {sys.path!r}
        from marathon_tf.task.prewarm import Prewarmer
        w = Prewarmer([sys.executable, "prog/probe.py"], ["mtf_marker"], {env!r}, cwd={cwd!r}).start()
        while w.waiting is None:
            time.sleep(0.05)
        print(w.waiting.pid, flush=True)
        time.sleep(120)
        """)
    _killing_the_holder_kills(holder, cwd, "the orphaned pre-warmed interpreter")


def _killing_the_holder_kills(holder: str, cwd: str, what: str) -> None:
    """Run ``holder`` (it prints a pid, then sleeps) as a process of its own, SIGKILL it: that pid dies too."""
    proc = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, cwd=cwd)
    try:
        pid = int(proc.stdout.readline())
        os.kill(pid, 0)
        proc.kill()
        proc.wait(10)
        wait_for(lambda: not alive(pid), 10, what=f"{what} to die")
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("argv, expected", [
    (["python3", "train.py", "--steps", "3"], PythonCommand("python3", ())),
    (["/usr/bin/python3.11", "-u", "-W", "ignore", "-m", "pkg.main"], PythonCommand("/usr/bin/python3.11",
                                                                                     ("-u", "-W", "ignore"))),
    (["python", "-mpkg"], PythonCommand("python", ())),
    (["python3", "-c", "print(1)"], None),
    (["python3", "-I", "train.py"], None),
    (["python3", "-"], None),
    (["python3"], None),
    (["python3", "-m"], None),
    (["bash", "train.py"], None),
    (["pythonista", "train.py"], None),
])
def test_which_commands_are_python_programs(argv, expected):
    assert python_command(argv) == expected


@pytest.mark.parametrize("cmd, expected", [
    ("marathon-tf bootstrap -- python3 train.py --steps 3", ["python3", "train.py", "--steps", "3"]),
    ("/venv/bin/marathon-tf bootstrap --grace 5 -- python3 train.py", ["python3", "train.py"]),
    # the README's other form of the same bootstrap: its tasks share the server too (they imported TensorFlow
    # each in their own interpreter, the lifecycle tests' jobs included)
    ("/venv/bin/python3 -m marathon_tf.bootstrap --watch-interval 2 --grace 5 -- python3 train.py",
     ["python3", "train.py"]),
    ("python3 -u -X dev -m marathon_tf.bootstrap -- python3 -m trainer", ["python3", "-m", "trainer"]),
    ("python3 -mmarathon_tf.bootstrap -- python3 train.py", ["python3", "train.py"]),
    ("python3 -m marathon_tf.bootstrap -- 'python3 train.py && echo done'", None),  # a shell string: sh runs it
    ("python3 -m marathon_tf.bootstrapper -- python3 train.py", None),
    ("python3 -m other -m marathon_tf.bootstrap -- python3 train.py", None),
    ("python3 marathon_tf/bootstrap.py -- python3 train.py", None),
    ("python3 -m marathon_tf.bootstrap", None),
    ("marathon-tf deploy -- python3 train.py", None),
    ("sh -c 'marathon-tf bootstrap -- python3 train.py'", None),
])
def test_which_apps_run_a_program_through_the_bootstrap(cmd, expected):
    from marathon_tf.task.warmpool import bootstrap_command

    assert bootstrap_command({"cmd": cmd}) == expected
    assert bootstrap_command({"args": shlex.split(cmd)}) == expected  # the same as the app's args


class RestartOnce(ExitPolicy):
    """Restart in place after the first failure; then behave as usual."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def decide(self, code, *, stderr_tail="", **what):
        self.calls += 1
        if self.calls == 1 and code != 0:
            return Decision(Action.RESTART, code, "first run failed")
        return super().decide(code, stderr_tail=stderr_tail)


RESTARTING = textwrap.dedent("""\
    import os, sys
    marker = os.path.join(os.environ["MESOS_SANDBOX"], "ran-once")
    print("pid=%d warm=%s step=5" % (os.getpid(), "mtf_marker" in sys.modules), flush=True)
    print("TFC=" + os.environ.get("TF_CONFIG", "<unset>"), flush=True)
    if not os.path.exists(marker):
        open(marker, "w").close()
        sys.exit(7)
    """)


def test_the_bootstrap_runs_prewarmed_and_restarts_in_a_fork_of_the_same_server(tmp_path, program, capsys):
    """The first run and the in-place restart are both forks of the bootstrap's pre-warmed
    interpreter, with TF_CONFIG and flags as usual."""
    env, _ = program
    (tmp_path / "train.py").write_text(RESTARTING)
    cluster = {"ps": 1, "worker": 2}
    task = task_env("worker", 1, cluster, sandbox=str(tmp_path), tf_port=2002, spec_style="both",
                    prewarm=("mtf_marker",))
    task["PYTHONPATH"] = env["PYTHONPATH"]
    peers = {("ps", 0): "10.0.0.1:2000", ("worker", 0): "10.0.0.2:2001"}
    out, err = io.BytesIO(), io.BytesIO()
    boot = Bootstrap(TaskContext.from_env(task), task, [sys.executable, "train.py", "--x"], backend=FakeBackend(peers),
                     policy=RestartOnce(), restart_backoff=(0.5, 0.5), stdout=out, stderr=err, tick=0.05)
    result = []
    thread = threading.Thread(target=lambda: result.append(boot.run()), daemon=True)
    thread.start()
    try:
        wait_for(lambda: boot.status.snapshot()["phase"] == "succeeded", 60, what="the restarted run to succeed")
        lines = out.getvalue().decode().splitlines()
        runs = [line for line in lines if line.startswith("pid=")]
        assert len(runs) == 2 and all("warm=True" in r for r in runs), (lines, err.getvalue().decode())
        assert runs[0].split()[0] != runs[1].split()[0]
        tfc = [json.loads(line[4:]) for line in lines if line.startswith("TFC=")]
        assert tfc[0] == tfc[1] and tfc[0]["task"] == {"type": "worker", "index": 1}
        log = capsys.readouterr().err  # the bootstrap's own log lines
        assert log.count("runs in the pre-warmed interpreter") == 2, log
        assert log.count("started training program") == 2, log  # one line a start (ci run 20 had two)
        assert boot.status.snapshot()["step"] == 5 and boot.prewarmer.waiting is None  # closed once finished
    finally:
        boot.request_stop()
        thread.join(30)
    assert result == [0]


def test_prewarm_off_or_not_python_means_no_prewarmer(tmp_path):
    task = task_env("worker", 0, {"worker": 1}, sandbox=str(tmp_path), prewarm=())
    assert Bootstrap(TaskContext.from_env(task), task, [sys.executable, "train.py"]).prewarmer is None
    task = task_env("worker", 0, {"worker": 1}, sandbox=str(tmp_path))
    assert Bootstrap(TaskContext.from_env(task), task, ["sh", "-c", "python3 train.py"]).prewarmer is None
    assert Bootstrap(TaskContext.from_env(task), task, ["python3 train.py && echo"]).prewarmer is None
    boot = Bootstrap(TaskContext.from_env(task), task, ["python3", "train.py"])
    assert boot.prewarmer is not None and boot.prewarmer.modules == ["tensorflow"]
    boot.prewarmer.close()


def test_after_close_a_start_is_the_ordinary_one(program):
    env, cwd = program
    warmer = Prewarmer([sys.executable, "prog/probe.py"], ["mtf_marker"], env, cwd=cwd).start()
    warmer.close()
    code, out, err = finish(warmer.spawn([sys.executable, "prog/probe.py"], env, cwd))
    assert code == 0 and err.strip() == "warm=False" and warmer.waiting is None


def test_a_warning_when_the_program_and_the_server_come_close_to_the_task_s_memory(program, tmp_path):
    env, cwd = program
    (tmp_path / "lib" / "mtf_marker.py").write_text("BALLAST = bytearray(64 * 2**20)\n")  # 64 MiB, shared after fork
    logs = []
    warmer = Prewarmer([sys.executable, "prog/probe.py"], ["mtf_marker"], env, cwd=cwd, log=logs.append,
                       mem_limit_mib=70).start()  # the program alone (> 64 MiB) is more than 90 % of 70 MiB
    try:
        wait_for(lambda: warmer.waiting is not None, 30, what="a pre-warmed interpreter")
        trainer = Trainer([sys.executable, "prog/probe.py", "sleep"], env, cwd=cwd, stdout=io.BytesIO(),
                          stderr=io.BytesIO(), spawn=warmer.spawn, on_step=lambda s: warmer.note_step())
        trainer.start()
        line = wait_for(lambda: [m for m in logs if m.startswith("warning: the program")], 30, what="the warning")[0]
        assert "raise mem or set \"prewarm\": false" in line and "70 MiB" in line
        assert trainer.proc.poll() is None and warmer.waiting is not None  # a warning: nothing is stopped
        assert trainer.stop(grace=5) == 128 + signal.SIGTERM
    finally:
        warmer.close()


def test_every_start_is_a_fork_of_one_import(program, tmp_path):
    """The server imports once; the first start and every restart are forks of it (no second import)."""
    env, cwd = program
    log = tmp_path / "imports.log"
    (tmp_path / "lib" / "mtf_marker.py").write_text(f"open({str(log)!r}, 'a').write('imported\\n')\n")
    warmer = Prewarmer([sys.executable, "prog/probe.py"], ["mtf_marker"], env, cwd=cwd).start()
    try:
        wait_for(lambda: warmer.waiting is not None, 30, what="a pre-warmed interpreter")
        pids = set()
        for _ in range(3):
            child = warmer.spawn([sys.executable, "prog/probe.py"], env, cwd)
            code, out, err = finish(child)
            assert code == 0 and err.strip() == "warm=True" and child.started["started"] == "in_place"
            pids.add(child.pid)
        assert len(pids) == 3 and log.read_text() == "imported\n"
    finally:
        warmer.close()


def test_forked_programs_do_not_share_random_numbers(program, tmp_path):
    """Fresh interpreters seed ``random`` and NumPy's global generator from the OS; so do forked
    ones. NumPy 1.x's global generator does not reseed itself after a fork (2.x does): a stand-in
    ``numpy.random`` that behaves like 1.x (state drawn once at import, ``seed()`` redraws it)."""
    env, cwd = program
    (tmp_path / "lib" / "numpy").mkdir()
    (tmp_path / "lib" / "numpy" / "__init__.py").write_text("from . import random\n")
    (tmp_path / "lib" / "numpy" / "random.py").write_text(
        "import os\n_state = os.urandom(8).hex()\n"
        "def seed(value=None):\n    global _state\n    _state = os.urandom(8).hex()\n"
        "def random():\n    return _state\n")
    (tmp_path / "lib" / "mtf_marker.py").write_text("import random\nimport numpy\n")
    (tmp_path / "prog" / "draw.py").write_text(
        "import random, numpy\nprint(random.random(), numpy.random.random(), flush=True)\n")
    warmer = Prewarmer([sys.executable, "prog/draw.py"], ["mtf_marker"], env, cwd=cwd).start()
    try:
        draws = []
        for _ in range(3):
            child = warmer.spawn([sys.executable, "prog/draw.py"], env, cwd)
            code, out, _ = finish(child)
            assert code == 0 and child.started["started"] == "in_place", out
            draws.append(out.split())
        assert len({d[0] for d in draws}) == 3 and len({d[1] for d in draws}) == 3, draws
    finally:
        warmer.close()


def test_a_sigkill_before_the_server_is_ready_gives_up_on_the_start(program, tmp_path):
    """Stopping a program whose server is still importing: SIGTERM waits for the fork, SIGKILL cancels it."""
    env, cwd = program
    (tmp_path / "lib" / "mtf_marker.py").write_text("import time\ntime.sleep(30)\n")
    warmer = Prewarmer([sys.executable, "prog/probe.py"], ["mtf_marker"], env, cwd=cwd).start()
    try:
        wait_for(lambda: warmer.server is not None, 30, what="the server to start importing")
        server = warmer.server.proc
        trainer = Trainer([sys.executable, "prog/probe.py", "sleep"], env, cwd=cwd, stdout=io.BytesIO(),
                          stderr=io.BytesIO(), spawn=warmer.spawn)
        trainer.start()
        assert trainer.pid is None  # not forked yet
        assert trainer.stop(grace=0.5) == 128 + signal.SIGKILL
        wait_for(lambda: server.poll() is not None, 10, what="the bootstrap's server to be gone")
    finally:
        warmer.close()


def test_a_server_that_dies_before_it_forked_means_an_ordinary_start(program, tmp_path):
    """The server dies while it imports (OOM-killed, say) with a start waiting: the program starts
    the ordinary way on the same pipes, instead of being reported dead."""
    env, cwd = program
    (tmp_path / "lib" / "mtf_marker.py").write_text("import time\ntime.sleep(30)\n")
    logs = []
    warmer = Prewarmer([sys.executable, "prog/probe.py"], ["mtf_marker"], env, cwd=cwd, log=logs.append).start()
    try:
        wait_for(lambda: warmer.server is not None, 30, what="the server to start importing")
        steps, out = [], io.BytesIO()
        trainer = Trainer([sys.executable, "prog/probe.py", "sleep"], env, cwd=cwd, on_step=steps.append,
                          stdout=out, stderr=io.BytesIO(), spawn=warmer.spawn)
        trainer.start()
        assert trainer.pid is None  # waiting for the server
        os.killpg(warmer.server.proc.pid, signal.SIGKILL)
        wait_for(lambda: steps == [1], 30, what="the program started the ordinary way, through the pump")
        assert trainer.proc.started["started"] == "ordinary" and trainer.pid is not None
        assert any("the pre-warmed interpreter went away before it started the program" in m for m in logs), logs
        assert trainer.stop(grace=5) == 128 + signal.SIGTERM
    finally:
        warmer.close()


def _serving(tmp_path, env, linger=30.0):
    from marathon_tf.task.warmpool import WarmPool

    return WarmPool(tmp_path / "pool", linger=linger)


def _task(env, **extra):
    """A task's environment as the local runner gives it (its per-task variables differ)."""
    return {**env, "MTF_ROLE": "worker", "MTF_PREWARM": "mtf_marker", **extra}


def test_the_tasks_of_one_machine_share_one_server(program, tmp_path):
    """Two tasks (different per-task variables) get the same server; it imported once and runs
    both programs in place; a task whose environment differs otherwise gets its program started
    the ordinary way by it."""
    env, cwd = program
    log = tmp_path / "imports.log"
    (tmp_path / "lib" / "mtf_marker.py").write_text(f"open({str(log)!r}, 'a').write('imported\\n')\n")
    app = {"cmd": f"marathon-tf bootstrap -- {sys.executable} prog/probe.py"}
    pool = _serving(tmp_path, env)
    try:
        first = pool.socket_for(app, _task(env, MTF_INDEX="0", PORT0="2000", MESOS_TASK_ID="a"))
        second = pool.socket_for(app, _task(env, MTF_INDEX="1", PORT0="2001", MESOS_TASK_ID="b", PWD="/x"))
        assert first and first == second
        assert pool.socket_for({"cmd": "marathon-tf bootstrap -- 'python3 train.py && echo'"}, _task(env)) is None
        assert pool.socket_for(app, _task(env, MTF_PREWARM="false")) is None
        results = []
        for i, extra in enumerate(({"MTF_INDEX": "0"}, {"MTF_INDEX": "1"}, {"MTF_INDEX": "2", "OMP_NUM_THREADS": "1"})):
            task = _task(env, MESOS_TASK_ID=f"t{i}", **extra, **{"MTF_PREWARM_SOCKET": first})
            warmer = Prewarmer([sys.executable, "prog/probe.py"], ["mtf_marker"], task, cwd=cwd).start()
            try:
                child = warmer.spawn([sys.executable, "prog/probe.py"], dict(task, TF_CONFIG="{}"), cwd)
                code, out, err = finish(child)
                results.append((code, err.strip(), child.started, json.loads(out.splitlines()[0])["tf_config"]))
                assert warmer.waiting is None  # no server of its own
            finally:
                warmer.close()
        assert results[0] == results[1] == (0, "warm=True", {"started": "in_place", "reason": None}, "{}")
        assert results[2] == (0, "warm=False", {"started": "ordinary",
                                                "reason": "the environment differs from the pre-warmed one"}, "{}")
        assert log.read_text() == "imported\n"
    finally:
        pool.close()


def test_a_task_that_goes_away_takes_its_program_from_the_shared_server(program, tmp_path):
    """The shared server outlives a task; the task's program does not (its connection closed)."""
    env, cwd = program
    app = {"cmd": f"marathon-tf bootstrap -- {sys.executable} prog/probe.py"}
    pool = _serving(tmp_path, env)
    try:
        path = pool.socket_for(app, _task(env))
        task = _task(env, MTF_PREWARM_SOCKET=path)
        holder = textwrap.dedent(f"""\
            import sys, time
            sys.path[:0] = {sys.path!r}
            from marathon_tf.task.prewarm import Prewarmer
            w = Prewarmer([sys.executable, "prog/probe.py"], ["mtf_marker"], {task!r}, cwd={cwd!r}).start()
            child = w.spawn([sys.executable, "prog/probe.py", "sleep"], {task!r}, {cwd!r})
            child.forked.wait(30)
            print(child.pid, flush=True)
            time.sleep(120)
            """)
        _killing_the_holder_kills(holder, cwd, "the program of a task that went away")
        server = next(iter(pool._servers.values())).proc
        assert server.poll() is None  # still there for the other tasks
    finally:
        pool.close()


def test_a_bootstrap_stopped_while_discovering_leaves_no_pre_warmed_interpreter(tmp_path, program):
    env, _ = program
    task = task_env("worker", 0, {"ps": 1, "worker": 1}, sandbox=str(tmp_path), prewarm=("mtf_marker",))
    task["PYTHONPATH"] = env["PYTHONPATH"]
    boot = Bootstrap(TaskContext.from_env(task), task, [sys.executable, "train.py"], backend=FakeBackend({}),
                     stdout=io.BytesIO(), stderr=io.BytesIO(), tick=0.05)
    result = []
    thread = threading.Thread(target=lambda: result.append(boot.run()), daemon=True)
    thread.start()
    wait_for(lambda: boot.prewarmer.waiting is not None, 30, what="the interpreter pre-warming while discovering")
    pid = boot.prewarmer.waiting.pid
    boot.request_stop(signal.SIGTERM)
    thread.join(30)
    assert result == [128 + signal.SIGTERM]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped
