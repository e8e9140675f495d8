"""Save rounds in one task (task/saving): a real program that implements the documented hook (or not), its
round confirmed in the logdir, held or continued, joined, refused; the holds of the other trainers; which
planned stops ask for one; the stop after a round (task/restarts). No TensorFlow: the program writes the
checkpoint index TensorFlow would."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest
from polling import wait_for as poll

from marathon_tf.contract.phases import Phase
from marathon_tf.contract.plan import StopReason
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.task.machine import On, TaskMachine
from marathon_tf.task.saving import LET_GO, SaveResult, Saving, hold_limit, round_budget
from marathon_tf.task.status_server import TaskStatus
from marathon_tf.task.supervisor import Trainer
from marathon_tf.task.timeline import TaskEvents

#: A program with the save hook: a step every 20 ms; on SIGUSR1 it writes a checkpoint index at its step
#: into the logdir (argv[1]; "none": it only says it saved), says so and pauses itself.
HOOKED = r"""
import os, signal, sys, time
logdir, asked, step = sys.argv[1], {"save": False}, 0
signal.signal(signal.SIGUSR1, lambda *_: asked.update(save=True))
print("marathon-tf save-hook: ready", flush=True)
while True:
    step += 1
    print(f"step={step} loss=1.0", flush=True)
    time.sleep(0.02)
    if asked["save"]:
        asked["save"] = False
        if logdir != "none":
            with open(os.path.join(logdir, "checkpoint"), "w") as f:
                f.write(f'model_checkpoint_path: "model.ckpt-{step}"\n')
        print(f"marathon-tf save-hook: saved step={step} path={logdir}/model.ckpt-{step}", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
"""
#: HOOKED, holding by waiting (savehook.READY_WAIT): after its ``saved`` line it sleeps until SIGUSR2; argv[2]
#: "hold": it does not save (a tf1 non-chief worker): on SIGUSR1 it says ``held`` and waits the same way;
#: argv[3]: seconds per step.
WAITING = r"""
import os, signal, sys, time
logdir, role, pace = sys.argv[1], sys.argv[2], float(sys.argv[3])
asked, step = {"save": False, "go": False}, 0
signal.signal(signal.SIGUSR1, lambda *_: asked.update(save=True))
signal.signal(signal.SIGUSR2, lambda *_: asked.update(go=True))
print("marathon-tf save-hook: ready hold=wait", flush=True)
while True:
    step += 1
    print(f"step={step} loss=1.0", flush=True)
    time.sleep(pace)
    if asked["save"]:
        asked["save"] = asked["go"] = False
        if role == "hold":
            print(f"marathon-tf save-hook: held step={step}", flush=True)
        else:
            with open(os.path.join(logdir, "checkpoint"), "w") as f:
                f.write(f'model_checkpoint_path: "model.ckpt-{step}"\n')
            print(f"marathon-tf save-hook: saved step={step} path={logdir}/model.ckpt-{step}", flush=True)
        while not asked["go"]:
            time.sleep(0.01)
"""
PLAIN = "import time\nfor i in range(100000):\n    print(f'step={i} loss=1.0', flush=True)\n    time.sleep(0.02)\n"


class Program:
    """A Trainer of ``code`` whose output goes to a Saving and whose steps are kept."""

    def __init__(self, saving: Saving, code: str, *args: str):
        self.steps: list[int] = []
        self.trainer = Trainer([sys.executable, "-c", code, *args], {}, on_step=self.steps.append,
                               on_text=saving.on_text, stdout=_Sink(), stderr=_Sink())
        saving.program_started(self.trainer)
        self.trainer.start()
        saving.machine.fire(On.STARTED)  # as the bootstrap does once its program started

    def wait_steps(self, n: int, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.steps) < n:
            assert time.monotonic() < deadline, f"only {len(self.steps)} steps"
            time.sleep(0.02)

    def stop(self) -> int:
        return self.trainer.stop(2.0)


class _Sink:
    def write(self, data):
        return len(data)

    def flush(self):
        pass


def make(tmp_path, *, decider=True, style="tf1", task="worker-0", logdir=True, cluster=None, locate=lambda: None):
    role, index = task.rsplit("-", 1)
    ctx = TaskContext(job="j", role=role, index=int(index), cluster=cluster or {"ps": 1, "worker": 2},
                      style=style, logdir="ckpt", completion="all_workers" if style != "parameter_server" else "chief",
                      grace_seconds=30)
    status = TaskStatus(job="j", task=task, role=role, index=int(index))
    (tmp_path / "ckpt").mkdir(exist_ok=True)
    logs: list[str] = []
    saving = Saving(ctx, status, TaskEvents(task), str(tmp_path / "ckpt") if logdir else None, decider=decider,
                    machine=TaskMachine(status), locate=locate,
                    log=logs.append)
    saving.logs = logs
    return saving


@pytest.fixture
def programs():
    started: list[Program] = []
    yield started
    for p in started:
        p.trainer.resume()
        p.stop()


def test_a_round_saves_at_the_programs_next_step_confirms_it_in_the_logdir_and_lets_it_go_on(tmp_path, programs):
    saving = make(tmp_path)
    program = Program(saving, HOOKED, str(tmp_path / "ckpt"))
    programs.append(program)
    program.wait_steps(3)
    assert saving.status.light()["save_hook"] is True
    result = saving.save("marathon-tf checkpoint", hold=False, timeout=10)
    assert result.ok and result.path == f"ckpt/model.ckpt-{result.step}" and not result.held, result
    assert program.trainer.held is None and saving.status.light()["phase"] == Phase.RUNNING
    seen = len(program.steps)
    program.wait_steps(seen + 3)  # it trains on
    assert saving.status.light()["last_save"]["step"] == result.step
    kinds = [e["kind"] for e in saving.events.mine()]
    assert kinds == ["save_round", "saved"], kinds


def test_a_round_before_a_stop_keeps_the_program_held_and_a_stop_kills_it_at_once(tmp_path, programs):
    saving = make(tmp_path)
    program = Program(saving, HOOKED, str(tmp_path / "ckpt"))
    programs.append(program)
    program.wait_steps(3)
    result = saving.save("ps-0 is stopped", hold=True, timeout=10)
    assert result.ok and result.held and program.trainer.held == "self"
    assert saving.status.light()["phase"] == Phase.SAVING
    seen = len(program.steps)
    time.sleep(0.3)
    assert len(program.steps) == seen  # nothing trained after the checkpoint
    again = saving.save("worker-1 is stopped", hold=True, timeout=10)  # held at it since: the same
    assert again == result
    began = time.monotonic()
    assert program.trainer.stop(25.0) == 128 + signal.SIGKILL and time.monotonic() - began < 2


def test_a_held_program_continued_by_the_agents_kill_is_held_again_at_once(tmp_path, programs):
    """A real agent's kill ends its tree walk with SIGCONT to every process (stout's killtree; apache/mesos
    c1b42f7 3rdparty/stout/include/stout/os/posix/killtree.hpp): a program held for a round would train on
    past the checkpoint. The bootstrap's relay holds it again first (Saving.keep_held)."""
    saving = make(tmp_path)
    program = Program(saving, HOOKED, str(tmp_path / "ckpt"))
    programs.append(program)
    program.wait_steps(3)
    assert saving.save("ps-0 is stopped", hold=True, timeout=10).ok and program.trainer.held == "self"
    seen = len(program.steps)
    os.kill(program.trainer.pid, signal.SIGCONT)  # what the agent's killtree ends with
    saving.keep_held()
    time.sleep(0.5)
    assert program.trainer.paused() and len(program.steps) <= seen + 1, (seen, len(program.steps))


def test_a_program_that_holds_by_waiting_trains_no_step_past_its_checkpoint_through_the_agents_kill(
        tmp_path, programs):
    """The kill's SIGCONT (apache/mesos c1b42f7 3rdparty/stout/include/stout/os/posix/killtree.hpp: stop, signal,
    continue) ends a SIGSTOP, not a wait: a program that said ``ready hold=wait`` stays at its checkpoint with no
    relay at all, where one paused by SIGSTOP trains on until its bootstrap stops it again."""
    saving = make(tmp_path)
    program = Program(saving, WAITING, str(tmp_path / "ckpt"), "save", "0.02")
    programs.append(program)
    program.wait_steps(3)
    held = saving.save("ps-0 is stopped", hold=True, timeout=10)
    assert held.ok and program.trainer.held == "self" and saving.hook.waits, held
    assert poll(program.trainer.paused)  # paused as well (frozen, its servers answer no peer)
    seen = len(program.steps)
    os.kill(program.trainer.pid, signal.SIGCONT)  # what the agent's kill ends with; no keep_held here
    time.sleep(0.5)
    assert len(program.steps) == seen and held.step == program.steps[-1], (seen, program.steps[-3:], held)
    assert poll(lambda: program.trainer.paused() is False)  # continued, yet it waits
    assert saving.save("ps-0 is stopped", hold=True, timeout=10) == held  # held there since: no new round
    assert saving.release_held("the stop did not come")  # let go: SIGUSR2
    program.wait_steps(seen + 3)
    again = saving.save("marathon-tf checkpoint", hold=False, timeout=10)  # a round that does not hold: goes on
    assert again.ok and again.step > held.step and program.trainer.held is None, again
    program.wait_steps(len(program.steps) + 3)

    (tmp_path / "v1").mkdir()
    paused = make(tmp_path / "v1")  # the hook that pauses by SIGSTOP, contrasted
    sigstopped = Program(paused, HOOKED, str(tmp_path / "v1" / "ckpt"))
    programs.append(sigstopped)
    sigstopped.wait_steps(3)
    assert paused.save("ps-0 is stopped", hold=True, timeout=10).ok and not paused.hook.waits
    seen = len(sigstopped.steps)
    os.kill(sigstopped.trainer.pid, signal.SIGCONT)
    sigstopped.wait_steps(seen + 2)  # without the relay's keep_held it trains on


def test_another_tasks_hold_waits_at_the_programs_step_boundary_or_pauses_a_long_step(tmp_path, programs):
    """``POST /hold`` to a program that holds by waiting and does not save (a tf1 non-chief worker): it says ``held``
    at its step boundary and waits (a SIGCONT does not move it), and goes on at the release. One whose step is
    longer than HOLD_SELF is paused (SIGSTOP) instead; let go before its step boundary, it says ``held`` later
    with nothing holding it, and is sent RESUME at once."""
    from marathon_tf.task import saving as saving_module

    saving = make(tmp_path, decider=False, task="worker-1")
    program = Program(saving, WAITING, "none", "hold", "0.02")
    programs.append(program)
    program.wait_steps(3)
    code, body = saving.post_hold({}, {"job": "j", "reason": "worker-0's round", "seconds": 10})
    assert code == 200 and body["held"] and program.trainer.held == "outside" and poll(program.trainer.paused), body
    assert saving.hook.held_mark() == 1  # it said ``held`` at its step boundary
    seen = len(program.steps)
    os.kill(program.trainer.pid, signal.SIGCONT)
    time.sleep(0.3)
    assert len(program.steps) == seen and poll(lambda: program.trainer.paused() is False)
    assert saving.post_hold({}, {"job": "j", "release": True}) == (200, {"held": False})
    program.wait_steps(seen + 3)

    slow = make(tmp_path, decider=False, task="worker-1")
    long_steps = Program(slow, WAITING, "none", "hold", str(saving_module.HOLD_SELF + 1.0))
    programs.append(long_steps)
    long_steps.wait_steps(1)
    assert slow.post_hold({}, {"job": "j", "seconds": 10})[1]["held"] and poll(long_steps.trainer.paused)
    seen = len(long_steps.steps)
    assert slow.post_hold({}, {"job": "j", "release": True}) == (200, {"held": False})
    long_steps.wait_steps(seen + 2, timeout=3 * (saving_module.HOLD_SELF + 1.0) + 5)  # its late held line: RESUMEd
    assert any("said it holds at step" in m and "nothing held it" in m for m in slow.logs), slow.logs


def test_a_hold_that_comes_before_the_program_started_holds_its_start_until_the_round_lets_go(tmp_path):
    """A newcomer's bootstrap asked to hold while its program is not started yet (it was about to): it said
    "no training program runs", the round went on without it, and the program started during the round and trained
    past the checkpoint the round saved (the restore undid it: a CI-like run of the coordinator-kill test). Now
    the hold holds the next start: the program starts once the round lets go."""
    import threading

    follower = make(tmp_path, decider=False, task="worker-2")
    code, body = follower.post_hold({}, {"job": "j", "reason": "worker-0 is stopped", "seconds": 30})
    assert (code, body) == (200, {"held": True, "step": None})
    assert follower.post_hold({}, {"job": "j", "seconds": 30, "extend": True}) == (200, {"held": True})
    stop, started = threading.Event(), threading.Event()
    waiter = threading.Thread(target=lambda: (follower.start_hold.wait(stop), started.set()))
    waiter.start()
    assert not started.wait(0.3)
    assert follower.post_hold({}, {"job": "j", "release": True, "reason": LET_GO}) == (200, {"held": False})
    assert started.wait(5)
    waiter.join()
    assert any("before the training program started" in m for m in follower.logs), follower.logs
    assert any(m.endswith("the training program may start") for m in follower.logs), follower.logs


def test_a_held_round_whose_stop_does_not_come_is_let_go_at_the_owners_word_and_the_next_one_saves_anew(
        tmp_path, programs):
    """A scale or ``delete --save`` asks the deciding task for one round that holds the job at its checkpoint, so
    that the stopped tasks' own rounds find it saved there (one round per scale); when the owner's PUT or DELETE
    does not go through, ``POST /hold {"release": true}`` to the deciding task lets go of its program and of the
    trainers the round held, and a later round that holds saves again (it was trained past)."""
    saving = make(tmp_path)
    program = Program(saving, HOOKED, str(tmp_path / "ckpt"))
    programs.append(program)
    sent: list[tuple[list[str], dict]] = []

    def hold(urls, request):
        sent.append((sorted(urls), request.to_json()))
        return {t: {"held": not request.release} for t in urls}

    saving.peer_urls = lambda: {"worker-0": "http://127.0.0.1:1", "worker-1": "http://127.0.0.1:2",
                                "ps-0": "http://127.0.0.1:3"}
    saving._hold = hold
    program.wait_steps(3)
    assert saving.post_hold({}, {"job": "j", "release": True}) == (200, {"held": False})  # nothing held: nothing done
    first = saving.save("marathon-tf scale (2 → 3 workers)", hold=True, timeout=10)
    assert first.ok and first.held and program.trainer.held == "self", first
    assert [(urls, body.get("release")) for urls, body in sent][-2:] == [(["worker-1"], None), (["worker-1"], None)]
    assert saving.save("worker-1 is stopped", hold=True, timeout=10) == first  # the stop's round: the same checkpoint
    code, body = saving.post_hold({}, {"job": "j", "release": True, "reason": "the scale's PUT did not go through"})
    assert (code, body) == (200, {"held": False, "released": True})
    assert program.trainer.held is None and saving.machine.phase is Phase.RUNNING
    assert sent[-1] == (["worker-1"], {"job": "j", "release": True, "reason": "the scale's PUT did not go through"})
    assert any("the save round's hold is let go (the scale's PUT did not go through)" in m for m in saving.logs)
    seen = len(program.steps)
    program.wait_steps(seen + 3)  # it trains on
    second = saving.save("worker-1 is stopped", hold=True, timeout=10)  # trained past the first: saved anew
    assert second.ok and second.step > first.step, (first, second)
    assert [e["kind"] for e in saving.events.mine()].count("saved") == 2


def test_rounds_asked_together_are_one(tmp_path, programs):
    saving = make(tmp_path)
    program = Program(saving, HOOKED, str(tmp_path / "ckpt"))
    programs.append(program)
    program.wait_steps(3)
    results: list[SaveResult] = []
    threads = [threading.Thread(target=lambda: results.append(saving.save("s", hold=True, timeout=10)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({r.step for r in results}) == 1 and all(r.ok for r in results), results
    assert [e["kind"] for e in saving.events.mine()].count("saved") == 1


def test_a_program_without_the_hook_is_never_signalled_and_says_so_once(tmp_path, programs):
    saving = make(tmp_path)
    program = Program(saving, PLAIN)
    programs.append(program)
    program.wait_steps(3)
    saving.stepped()
    assert saving.status.light()["save_hook"] is None  # a step line may come before its ready line
    saving._first_step -= 10  # (it has stepped for a while)
    saving.stepped()
    saving.stepped()
    assert saving.status.light()["save_hook"] is False
    assert sum("declares no save hook" in line for line in saving.logs) == 1
    result = saving.save("marathon-tf checkpoint", hold=False, timeout=5)
    assert not result.ok and "worker-0's training program declares no save hook" in result.message
    program.wait_steps(len(program.steps) + 3)  # untouched: SIGUSR1 would have ended it


def test_a_program_that_has_not_had_its_chance_to_say_ready_is_starting_not_hookless(tmp_path, programs):
    """Issue 43, item 2: a save asked while the program is still starting (importing TensorFlow: no step yet)
    is answered "starting" (the asker may ask again), not "declares no save hook"."""
    saving = make(tmp_path)
    program = Program(saving, PLAIN)
    programs.append(program)
    early = saving.save("marathon-tf checkpoint", hold=False, timeout=5)
    assert not early.ok and early.starting and "is starting" in early.message, early
    assert "declares no save hook" not in early.message
    assert SaveResult.from_dict(early.to_dict()).starting is True
    program.wait_steps(3)
    saving.stepped()
    saving._first_step -= 10  # stepped for a while without saying ready: now it has no hook
    saving.stepped()
    late = saving.save("marathon-tf checkpoint", hold=False, timeout=5)
    assert not late.ok and not late.starting and "declares no save hook" in late.message


def test_a_save_the_logdir_does_not_show_fails_in_time_and_the_program_goes_on(tmp_path, programs):
    saving = make(tmp_path)
    program = Program(saving, HOOKED, "none")  # says it saved, writes nothing
    programs.append(program)
    program.wait_steps(3)
    began = time.monotonic()
    result = saving.save("check", hold=True, timeout=1.5)
    assert not result.ok and "shows no checkpoint written since the round began" in result.message, result
    assert time.monotonic() - began < 5 and program.trainer.held is None
    program.wait_steps(len(program.steps) + 3)
    assert [e["kind"] for e in saving.events.mine()][-1] == "save_failed"


#: A program with the save hook that answers at the end of a scheduled round of steps (a ParameterServerStrategy
#: coordinator's loop): asked, it saves only after argv[2] s more of steps, then says so and pauses itself.
LATE = r"""
import os, signal, sys, time
logdir, later, asked, step = sys.argv[1], float(sys.argv[2]), {"at": None}, 0
signal.signal(signal.SIGUSR1, lambda *_: asked.update(at=asked["at"] or time.monotonic()))
print("marathon-tf save-hook: ready", flush=True)
while True:
    step += 1
    print(f"step={step} loss=1.0", flush=True)
    time.sleep(0.02)
    if asked["at"] is not None and time.monotonic() - asked["at"] >= later:
        asked["at"] = None
        with open(os.path.join(logdir, "checkpoint"), "w") as f:
            f.write(f'model_checkpoint_path: "model.ckpt-{step}"\n')
        print(f"marathon-tf save-hook: saved step={step} path={logdir}/model.ckpt-{step}", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
"""


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_program_that_answers_after_its_round_timed_out_is_continued_and_the_late_checkpoint_said(
        tmp_path, programs):
    """Issue 44 item 2 / issue 47 item 4: ``checkpoint --timeout 1s`` on a ParameterServerStrategy job; the
    coordinator answered at the end of its scheduled round of steps, after the round had failed, paused
    itself as the hook says and stayed stopped (state T) for ever. A late self-pause is continued."""
    saving = make(tmp_path, style="parameter_server", task="chief-0",
                  cluster={"chief": 1, "ps": 1, "worker": 1})
    program = Program(saving, LATE, str(tmp_path / "ckpt"), "1.5")
    programs.append(program)
    program.wait_steps(3)
    result = saving.save("marathon-tf checkpoint", hold=False, timeout=0.5)
    assert not result.ok and program.trainer.held is None, result
    wait_for(lambda: saving.hook.mark() == 1, 10, "the program's late saved line")
    said = saving.hook.wait_saved(0, 0)
    assert said is not None
    wait_for(lambda: any(s > said.step + 5 for s in program.steps), 5,
             f"steps after the late save at {said.step} (stopped: {program.trainer.paused()})")
    assert not program.trainer.paused()
    assert "it may still save a checkpoint at its next step boundary" in result.message, result  # said truthfully
    assert saving.status.light()["last_save"]["step"] == said.step
    assert "said late, after its round had ended: marathon-tf checkpoint" in \
        saving.status.light()["last_save"]["reason"]
    assert any("saved a checkpoint late" in line and "goes on training" in line for line in saving.logs), saving.logs


def test_a_program_the_operator_stopped_stays_stopped_when_the_round_fails_and_goes_on_once_continued(
        tmp_path, programs):
    """The round continues only what it held: a deciding program stopped by someone else (an operator, a
    debugger) is left stopped when the round times out; continued by them, it answers the round's signal
    late, pauses itself, and is continued (nothing stays held)."""
    saving = make(tmp_path)
    program = Program(saving, HOOKED, str(tmp_path / "ckpt"))
    programs.append(program)
    program.wait_steps(3)
    os.kill(program.trainer.pid, signal.SIGSTOP)  # the operator
    wait_for(lambda: program.trainer.paused(), 5, "the operator's stop")
    result = saving.save("marathon-tf checkpoint", hold=False, timeout=0.5)
    assert not result.ok and "did not say it saved" in result.message, result
    time.sleep(1.0)
    assert program.trainer.paused(), "the round continued a program it had not stopped"
    seen = len(program.steps)
    os.kill(program.trainer.pid, signal.SIGCONT)  # the operator again: it saves now (asked), pauses itself
    wait_for(lambda: saving.hook.mark() == 1, 10, "the program's late saved line")
    program.wait_steps(seen + 10, timeout=5)
    assert not program.trainer.paused()


def test_a_round_that_breaks_off_lets_go_of_its_program(tmp_path, programs):
    """Whatever ends a round, what it held is let go: here the logdir's check raises after the program
    paused itself for the round."""
    saving = make(tmp_path)
    program = Program(saving, HOOKED, str(tmp_path / "ckpt"))
    programs.append(program)
    program.wait_steps(3)

    def broken(*_):
        raise OSError("the logdir cannot be read")
    saving._confirm = broken
    result = saving.save("marathon-tf checkpoint", hold=True, timeout=5)
    assert not result.ok and "the logdir cannot be read" in result.message, result
    seen = len(program.steps)
    program.wait_steps(seen + 5, timeout=5)
    assert program.trainer.held is None and saving.status.light()["phase"] == Phase.RUNNING


class _Session:
    """The deciding task's HTTP session towards the other trainers: each ``POST /hold`` recorded; a hold
    answered too late (the request timed out, the peer held all the same)."""

    def __init__(self):
        self.posts: list[tuple[str, dict]] = []

    def post(self, url, json, timeout, **kw):
        self.posts.append((url, json))
        if not json.get("release"):
            raise TimeoutError("read timed out")
        return type("R", (), {"status_code": 200, "json": lambda self: {"held": False}})()


def test_a_hold_answered_too_late_is_released_when_the_round_fails_and_lasts_no_longer_than_the_round(
        tmp_path, programs):
    saving = make(tmp_path, logdir=True)
    saving.fanout = session = _Session()
    saving.peer_urls = lambda: {"worker-1": "http://127.0.0.1:1", "ps-0": "http://127.0.0.1:2"}
    program = Program(saving, HOOKED, "none")  # says it saved, writes nothing: the round fails
    programs.append(program)
    program.wait_steps(3)
    result = saving.save("worker-1 is stopped", hold=True, timeout=1.0)
    assert not result.ok
    holds = [body for url, body in session.posts if not body.get("release")]
    assert [url for url, body in session.posts] == ["http://127.0.0.1:1/hold", "http://127.0.0.1:1/hold"]
    assert holds and holds[0]["seconds"] <= 1.0 + 4.0, holds  # bounded by the round's deadline
    assert session.posts[-1][1] == {"job": "j", "release": True, "reason": "it failed"}


class _Peer:
    """The session towards worker-1: every ``POST /hold`` is the follower's own ``post_hold``."""

    def __init__(self, follower: Saving):
        self.follower, self.posts = follower, []

    def post(self, url, json, timeout, **kw):
        self.posts.append(json)
        code, body = self.follower.post_hold({}, json)
        return type("R", (), {"status_code": code, "json": lambda self: body})()


class _SlowPeer(_Peer):
    """worker-1 on a loaded host: its first ``POST /hold`` gets no answer in time (and has not frozen it yet);
    asked again, it holds."""

    def post(self, url, json, timeout, **kw):
        if not json.get("release") and not [p for p in self.posts if not p.get("release")]:
            self.posts.append(json)
            raise TimeoutError("read timed out")
        return super().post(url, json, timeout, **kw)


def test_a_trainer_that_did_not_answer_its_hold_is_asked_again_before_the_save(tmp_path, programs):
    """A TF1 round saved after one try of ``POST /hold``: a worker whose answer did not come in time (a loaded
    host) froze only after the save, or not at all, and could step once past the checkpoint — one step trained
    twice across ``delete --save`` (a fresh-clone run, stop 48). Now it is asked again while the round has the
    time, and the save comes with it frozen."""
    follower = make(tmp_path, decider=False, task="worker-1")
    peer = Program(follower, PLAIN)
    programs.append(peer)
    saving = make(tmp_path)
    saving.fanout = session = _SlowPeer(follower)
    saving.peer_urls = lambda: {"worker-1": "http://127.0.0.1:1", "ps-0": "http://127.0.0.1:2"}
    program = Program(saving, HOOKED, str(tmp_path / "ckpt"))
    programs.append(program)
    program.wait_steps(3)
    peer.wait_steps(3)
    result = saving.save("worker-0 is stopped", hold=True, timeout=10)
    assert result.ok and result.held, result
    # asked twice, then (the round confirmed) its hold extended until the stop; never released
    assert [(p.get("release", False), p.get("extend", False)) for p in session.posts] == [
        (False, False), (False, False), (False, True)]
    assert peer.trainer.held == "outside"
    assert any("worker-1 did not answer the hold; asked again" in line for line in saving.logs), saving.logs
    assert any("asking the training program to save now; worker-1 held" in line for line in saving.logs)
    seen = len(peer.steps)
    time.sleep(0.3)
    assert len(peer.steps) == seen  # frozen since before the save


def test_a_relaunched_deciding_task_lets_go_of_what_its_predecessors_round_held_at_its_first_step(
        tmp_path, programs):
    """The deciding task stopped with grace (a resize under way): its round held worker-1 until the stop, and
    the relaunched one restored the checkpoint while worker-1 stayed held for the whole hold (60 s by default,
    seen end to end). Its first program that resumes the job's checkpoint lets go of every peer at its first
    step; a fresh start (no checkpoint) and a later program of the same task tell nobody."""
    follower = make(tmp_path, decider=False, task="worker-1")
    peer = Program(follower, PLAIN)
    programs.append(peer)
    peer.wait_steps(3)
    assert follower.post_hold({}, {"job": "j", "reason": "worker-0 is stopped", "seconds": 30})[1]["held"]
    assert peer.trainer.held == "outside"  # the predecessor's round, its stop come and gone
    fresh = make(tmp_path)  # a fresh job's deciding task: no checkpoint to resume
    fresh.fanout = _Peer(follower)
    fresh.peer_urls = lambda: {"worker-1": "http://127.0.0.1:1"}
    programs.append(Program(fresh, PLAIN))
    fresh.stepped()
    time.sleep(0.3)
    assert fresh.fanout.posts == [] and peer.trainer.held == "outside"
    saving = make(tmp_path)
    saving.status.update(resumed_from=916)  # (what the bootstrap's announce_resume says before the start)
    saving.fanout = session = _Peer(follower)
    saving.peer_urls = lambda: {"worker-1": "http://127.0.0.1:1"}
    programs.append(Program(saving, PLAIN))
    saving.stepped()
    wait_for(lambda: peer.trainer.held is None, 5, "worker-1 let go")
    peer.wait_steps(len(peer.steps) + 3)
    assert session.posts == [{"job": "j", "release": True, "reason": LET_GO}]
    assert any(f"the save round is over ({LET_GO})" in line for line in follower.logs), follower.logs
    saving.stepped()
    programs.append(Program(saving, PLAIN))  # its next program (an in-place restart)
    saving.stepped()
    time.sleep(0.3)
    assert len(session.posts) == 1


def test_a_hold_is_always_bounded_and_an_extension_never_holds_anew(tmp_path, programs):
    follower = make(tmp_path, decider=False, task="worker-1")
    program = Program(follower, PLAIN)
    programs.append(program)
    program.wait_steps(3)
    code, body = follower.post_hold({}, {"job": "j", "seconds": 0.6, "extend": True})
    assert (code, body["held"]) == (200, False) and program.trainer.held is None
    assert follower.post_hold({}, {"job": "j", "seconds": 0.6})[1]["held"]
    assert follower.post_hold({}, {"job": "j", "seconds": 1.5, "extend": True})[1]["held"]
    time.sleep(0.9)
    assert program.trainer.held == "outside"  # extended past the first 0.6 s
    wait_for(lambda: program.trainer.held is None, 3, "the hold's end")
    program.wait_steps(len(program.steps) + 3)


def test_no_program_no_round(tmp_path):
    saving = make(tmp_path)
    result = saving.save("check", hold=False, timeout=1)
    assert not result.ok and "no training program runs in worker-0 now" in result.message


def test_the_other_trainers_are_held_and_let_go(tmp_path, programs):
    """``POST /hold`` freezes a trainer where it is (a tf1 round before a stop); ``release`` lets it go."""
    follower = make(tmp_path, decider=False, task="worker-1")
    program = Program(follower, PLAIN)
    programs.append(program)
    program.wait_steps(3)
    assert follower.post_hold({}, {"job": "other"})[0] == 400
    code, body = follower.post_hold({"_client": "127.0.0.1"}, {"job": "j", "reason": "ps-0 is stopped"})
    assert (code, body["held"]) == (200, True) and program.trainer.held == "outside"
    assert follower.status.light()["phase"] == Phase.SAVING
    time.sleep(0.3)
    seen = len(program.steps)
    time.sleep(0.3)
    assert len(program.steps) == seen
    assert follower.post_hold({}, {"job": "j", "release": True}) == (200, {"held": False})
    program.wait_steps(seen + 3)


def test_which_planned_stops_ask_for_a_round(tmp_path):
    asked: list[tuple] = []

    def ask(saving):
        saving.ask = lambda reason, **kw: asked.append((reason, kw)) or SaveResult(True)
        return saving

    tf1 = ask(make(tmp_path, decider=False, task="ps-0"))
    assert tf1.before_stop(20.0).ok and asked[-1] == ("ps-0 is stopped", {"hold": True, "timeout": 20.0})
    assert tf1.before_stop(0.0) is None  # no grace left for one
    assert tf1.before_move(["ps-0"]) is None  # the variables went with it
    assert tf1.before_move(["worker-0"]) is None  # the saver itself: its new program has nothing newer
    assert tf1.before_move(["worker-1"]).ok and asked[-1][1] == {"hold": False, "timeout": 5.0,
                                                                 "exclude": ["worker-1"]}
    assert ask(make(tmp_path, style="multi_worker_mirrored", cluster={"worker": 2})).before_move(["worker-1"]) is None
    assert ask(make(tmp_path, task="worker-0", cluster={"worker": 1})).before_stop(20.0) is None  # alone: no job
    # a round that fails at the job's end (the deciding task's program is gone): said as the end, not a fault
    ended = make(tmp_path, decider=False, task="ps-0")
    ended.ask = lambda reason, **kw: SaveResult(False, "the deciding task did not answer: Connection reset")
    for why, said in ((StopReason.JOB_ENDED, "the job ended"), (StopReason.APP_REMOVED, "its app was removed")):
        assert ended.before_stop(20.0, lambda: why).message == f"{said}: nothing to save"
    for why in (StopReason.NEW_CONFIGURATION, None):  # a scale's round that failed is a fault to say
        assert ended.before_stop(20.0, lambda: why).message.startswith("the deciding task did not answer")
    assert ended.before_stop(20.0).message.startswith("the deciding task did not answer")
    assert ask(make(tmp_path, style="parameter_server", task="ps-0", decider=False,
                    cluster={"chief": 1, "ps": 1, "worker": 2})).before_move(["chief-0"]) is None


def test_a_round_takes_at_most_what_the_grace_leaves_and_holds_at_most_a_while():
    assert [round_budget(g) for g in (25.0, 7.5, 2.0, 0.0)] == [20.0, 3.75, 1.0, 0.0]
    assert hold_limit(5) == 30.0 and hold_limit(30) == 60.0


def test_a_follower_asks_the_deciding_task_and_says_why_when_it_cannot(tmp_path, httpserver):
    leader: list[str] = []  # the deciding task's address, once the follower knows it
    follower = make(tmp_path, decider=False, task="ps-0", locate=lambda: leader[-1] if leader else None)
    assert "address is not known" in follower.ask("x", hold=True, timeout=1).message
    httpserver.expect_request("/save", method="POST").respond_with_json(
        {"ok": True, "step": 12, "path": "ckpt/model.ckpt-12", "seconds": 0.1, "held": True})
    leader.append(httpserver.url_for("").split("//")[1].rstrip("/"))
    result = follower.ask("ps-0 is stopped", hold=True, timeout=5)
    assert result == SaveResult(True, step=12, path="ckpt/model.ckpt-12", seconds=0.1, held=True)
    assert httpserver.log[0][0].json == {"job": "j", "reason": "ps-0 is stopped", "hold": True, "timeout": 5,
                                         "exclude": []}
    leader.append("127.0.0.1:1")
    assert "did not answer" in follower.ask("x", hold=True, timeout=1).message


def test_a_relaunched_chief_waits_for_the_ps_to_take_its_new_address_before_its_program_starts():
    """The flaky preempted-chief test's cause: the relaunched chief's program restored the checkpoint onto
    the ps that was about to restart for the chief's new address (and trained on it, or failed)."""
    from marathon_tf.task.bootstrap import Bootstrap

    said = [{"peers": {"worker-0": "10.0.0.1:1111"}}] * 3  # then the new address, for ever

    class Client:
        def get_group(self, group_id, embed=()):
            return {"id": "/j", "apps": [{"id": "/j/ps-0", "portDefinitions": [{"name": "tf"}, {"name": "status"}],
                                          "tasks": [{"id": "t", "host": "10.0.0.3", "state": "TASK_RUNNING",
                                                     "ports": [1, 2], "startedAt": "2024-01-01T00:00:00.000Z"}]}]}

    class Control:
        client = Client()
        urls: list[str] = []
        placement = None
        extra_labels = None

        def get_json(self, url):
            self.urls.append(url)
            return said.pop(0) if said else {"peers": {"worker-0": "10.0.0.2:2222"}}

    ctx = TaskContext(job="j", role="worker", index=0, cluster={"ps": 1, "worker": 2}, completion="all_workers")
    control = Control()
    boot = Bootstrap(ctx, {}, ["true"], control=control)
    logs: list[str] = []
    boot.restarts.log = logs.append
    began = time.monotonic()
    boot.restarts.await_peers_took("worker-0", "10.0.0.2:2222", timeout=10)
    assert 0.75 <= time.monotonic() - began < 5 and set(control.urls) == {"http://10.0.0.3:2/status"}
    assert logs == ["waiting before the program starts for ps-0 (it holds an earlier address of worker-0, "
                    "10.0.0.1:1111)"]
    boot.restarts.await_peers_took("worker-0", "10.0.0.2:2222")  # (it found the peer fresh: no wait, nothing said)
    assert len(logs) == 1
    ps = Bootstrap(TaskContext(job="j", role="ps", index=0, cluster={"ps": 1, "worker": 2}), {}, ["true"],
                   control=control)
    ps.restarts.await_peers_took("ps-0", "x")  # a ps waits for nobody
    assert len(control.urls) == 5
    # an elastic worker (TF1 --elastic): the ps takes it from its session, and never restarts for its move
    said[:] = [{"peers": {"worker-0": "10.0.0.1:1111"}}] * 3
    ectx = TaskContext(job="j", role="worker", index=0, cluster={"ps": 1, "worker": 2}, completion="all_workers",
                       elastic={"worker": (2, 3)})
    elastic = Bootstrap(ectx, {}, ["true"], control=control)
    elastic.restarts.log = logs.append
    began = time.monotonic()
    elastic.restarts.await_peers_took("worker-0", "10.0.0.2:2222", timeout=10)
    assert time.monotonic() - began < 1 and len(control.urls) == 5 and len(logs) == 1


def test_a_new_multi_worker_mirrored_worker_waits_for_the_peers_a_scale_is_replacing():
    """``scale`` 2 -> 3 of the Keras MultiWorkerMirrored example, discovery through Mesos-DNS (which lists an
    old task until it is gone): worker-2 found worker-1's old task (its kill under way, the save round
    first) and started its program with that address, restarted a moment later (seen in a fresh-clone
    CI). A MWMS group's collectives are fixed at start: the new worker waits while a deployment replaces
    a peer's task (Marathon's task ``version`` older than the app's ``lastConfigChangeAt``:
    ``M@1.11:src/main/scala/mesosphere/marathon/raml/TaskConversion.scala``), or it has none running yet;
    no status is read (a group of hundreds would read N² of them)."""
    from marathon_tf.task.bootstrap import Bootstrap

    old = {"id": "w1", "host": "10.0.0.3", "state": "TASK_RUNNING", "ports": [1, 2],
           "version": "2024-01-01T00:00:00.000Z", "startedAt": "2024-01-01T00:00:00.000Z"}
    looks = []

    def app(name, tasks, deployments):
        return {"id": f"/j/{name}", "portDefinitions": [{"name": "tf"}, {"name": "status"}], "tasks": tasks,
                "versionInfo": {"lastConfigChangeAt": "2024-01-02T00:00:00.000Z"}, "deployments": deployments}

    class Client:
        def get_group(self, group_id, embed=()):
            looks.append(1)
            new = dict(old, id="w1b", version="2024-01-02T00:00:00.000Z", startedAt="2024-01-02T00:00:01.000Z")
            w1 = [old] if len(looks) <= 2 else [] if len(looks) <= 4 else [new]  # replaced, gone, relaunched
            w0 = [dict(old, id="w0", version="2024-01-02T00:00:00.000Z")]
            return {"id": "/j", "apps": [app("worker-0", w0, [{"id": "d"}]), app("worker-1", w1, [{"id": "d"}])]}

    class Control:
        client = Client()
        placement = None
        extra_labels = None

        def get_json(self, url):
            raise AssertionError("no status read for a MultiWorkerMirrored group")

    ctx = TaskContext(job="j", role="worker", index=2, cluster={"worker": 3}, style="multi_worker_mirrored")
    boot = Bootstrap(ctx, {}, ["true"], control=Control())
    logs: list[str] = []
    boot.restarts.log = logs.append
    assert boot.restarts.await_peers_took("worker-2", "10.0.0.4:3333", timeout=10) == {"worker-1"}  # replaced
    assert len(looks) == 5
    assert logs == ["waiting before the program starts for worker-1 (it restarts with the job's new configuration)"]


def test_a_new_worker_starts_with_the_new_address_of_a_peer_a_deployment_replaced(monkeypatch):
    """The same scale under load (a CI run with three xdist workers): the deployment had replaced worker-1's task
    when worker-2 looked, but the rendezvous still held the old task's address (Mesos-DNS lists it until its next
    refresh): worker-2's program started with it and was restarted 0.4 s later at the first watch. The first
    program now waits (bounded) for the replaced peer's new address; a peer that comes back where it was costs at
    most the bound, said in one line."""
    from marathon_tf.task import bootstrap as B

    ctx = TaskContext(job="j", role="worker", index=2, cluster={"worker": 3}, style="multi_worker_mirrored")
    boot = B.Bootstrap(ctx, {}, ["true"])
    old, new = "127.0.0.1:56135", "127.0.0.1:50915"
    boot.endpoints.update({("worker", 0): "127.0.0.1:1", ("worker", 1): old, ("worker", 2): "127.0.0.1:3"})
    answers = [{}, {}, {("worker", 1): new}]

    class View:
        def moved(self, current):
            assert current[("worker", 1)] == boot.endpoints[("worker", 1)]
            return answers.pop(0) if answers else {}

    boot.rendezvous, boot._backend = View(), object()  # type: ignore[assignment]
    rendered, logs = [], []
    monkeypatch.setattr(boot, "_render", lambda: rendered.append(dict(boot.endpoints)))
    monkeypatch.setattr(B, "_log", logs.append)
    boot._await_addresses(frozenset({"worker-1"}), timeout=5)
    assert boot.endpoints[("worker", 1)] == new and len(rendered) == 1 and not answers
    assert logs[0] == "waiting for the new address of worker-1 (its task was replaced; at most 5 s)"
    began = time.monotonic()  # back where it was: the bound, then the address the rendezvous has
    boot._await_addresses(frozenset({"worker-1"}), timeout=0.5)
    assert 0.5 <= time.monotonic() - began < 2 and boot.endpoints[("worker", 1)] == new
    assert logs[-1] == "no new address of worker-1 within 0.5 s: starting with the one the rendezvous has"
    logs.clear()
    boot._await_addresses(frozenset(), timeout=5)  # nothing replaced: one look, no wait
    assert logs == [] and len(rendered) == 1


def test_a_stopped_task_tells_the_keeper_only_after_its_save_round():
    """The keeper answers a ps's (or the deciding task's) stop with a group restart round, which restarts the
    deciding task's program: told while the round runs, it stopped that program mid-save ('save round failed:
    the training program exited', a fresh clone's PSS four-stop test under load). The report follows the round."""
    from types import SimpleNamespace

    from marathon_tf.task.jobpolicy import JobPolicy
    from marathon_tf.task.restarts import Restarter

    order: list[str] = []
    policy = JobPolicy.__new__(JobPolicy)
    policy.stopped = lambda *a, **k: order.append("told the keeper")  # type: ignore[method-assign]
    policy.planned = lambda: None  # type: ignore[method-assign]

    def before_stop(budget, planned):
        order.append("round began")
        time.sleep(0.3)  # the report, were it sent beside the round, would come now
        order.append("round ended")
        return SaveResult(True, step=7, path="logs/model.ckpt-7", held=True)

    trainer = SimpleNamespace(wait=lambda timeout=None: None, stop=lambda grace, sig: order.append("program stopped")
                              or -9)
    me = SimpleNamespace(ctx=SimpleNamespace(role="ps"), policy=policy, _generation=1, rounds=True, grace=10.0,
                         _signum=lambda: signal.SIGTERM, saving=SimpleNamespace(before_stop=before_stop),
                         clock=time.monotonic, log=lambda m: None, status=SimpleNamespace(update=lambda **k: None),
                         observer=SimpleNamespace(program_exited=lambda *a, **k: None))
    assert Restarter.stopped(me, trainer) == -9  # type: ignore[arg-type]
    assert order.index("told the keeper") > order.index("round ended")
