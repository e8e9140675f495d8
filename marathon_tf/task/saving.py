"""Save rounds: the deciding task has its program save a checkpoint now, on request and before every
planned stop, so that nothing is trained twice.

The program's side is one documented hook (:mod:`marathon_tf.contract.savehook`: it says ``ready``,
saves at its next step boundary on SIGUSR1, says ``saved step=N path=P`` and pauses itself). A round
(the task's phase :attr:`~marathon_tf.contract.phases.Phase.SAVING`):

1. **Who asks.** The deciding task (``chief-0``, else ``worker-0``: the program that saves in every
   style) runs every round; its owner and tasks ask it with ``POST /save`` on its status port: ``marathon-tf
   checkpoint`` and ``JobHandle.checkpoint()``, ``scale`` and ``delete --save`` before they change
   anything (:mod:`marathon_tf.user.jobs`), and every member's bootstrap before it stops its
   program for a planned reason: a kill with grace (SIGTERM: an operator, a drain, ``scale``,
   ``delete``, the admission deadline's release) and a restart for a peer that moved (unless that
   peer took the variables with it: a ps, or the deciding task itself). Rounds asked while one is
   under way join it.
2. **Held.** Before a stop, the round *holds* the job's training: the saver stays paused after its
   save, and in a ``tf1`` job (asynchronous workers) every other chief and worker is frozen first
   (``POST /hold`` to their bootstraps: SIGSTOP; one that does not answer is asked again while the round has
   the time; one whose program does not run holds its next start: :mod:`marathon_tf.task.restoring`) — so the
   checkpoint is the job's last trained state.
   A held program is released by its own stop or restart (it is killed: continued, it would train or
   save past the checkpoint to be restored), or after :func:`hold_limit` s when no stop came. The
   other trainers are held until the round's deadline; only a confirmed round extends their hold.
3. **Confirmed.** The deciding task sends its program SIGUSR1, waits for its ``saved`` line, then
   until the logdir shows that checkpoint (:func:`marathon_tf.task.checkpoints.newest_checkpoint`,
   written since the round began), and answers ``{"ok", "step", "path", "seconds"}``.
4. **Too short, or no hook.** A round gets at most :func:`round_budget` of the program's grace (the
   rest is left for the program's own SIGTERM handling); a program without the hook, or one that did
   not save in time, is answered at once with why (``SaveResult.message``), and the stop goes on as
   before: SIGTERM and the whole grace. After a confirmed round a stopping program that is held is
   killed at once, any other (a ps: it holds nothing to save) gets SIGTERM and at most
   :data:`AFTER_SAVE_GRACE` s.
5. **Nothing stays held.** Every way out of a round (confirmed, timed out, the program gone, an error)
   lets go of what that round held, and only that: a program stopped by someone else (an operator's
   SIGSTOP) stays stopped; every other trainer asked to hold is released, an answer that came too late
   included. A program that answers after its round gave up (a ParameterServerStrategy coordinator
   saves at the end of the round of steps it scheduled) pauses itself as the hook says: it is
   continued at once, and that late checkpoint is said (the task's log, ``last_save``).

:class:`Saving` is composed into the bootstrap of every task (``boot.saving``). This module never
imports TensorFlow.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from marathon_tf.contract import naming, savehook
from marathon_tf.contract import timeline as T
from marathon_tf.contract.plan import StopReason
from marathon_tf.contract.taskapi import HOLD, SAVE, HoldRequest, SaveRequest, SaveResult, TaskApiError, TaskClient
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.marathon import transport
from marathon_tf.task.checkpoints import newest_checkpoint
from marathon_tf.task.hooklines import SaveHook
from marathon_tf.task.machine import On, TaskMachine
from marathon_tf.task.policy import decider_task
from marathon_tf.task.restoring import StartHold, hold_limit
from marathon_tf.task.status_server import TaskStatus
from marathon_tf.task.supervisor import Trainer
from marathon_tf.task.timeline import TaskEvents

__all__ = ["SaveHook", "SaveResult", "Saving", "SAVE_PATH", "HOLD_PATH", "AFTER_SAVE_GRACE", "MOVE_BUDGET",
           "round_budget", "hold_limit", "LET_GO"]

SAVE_PATH, HOLD_PATH = SAVE.path, HOLD.path
#: Seconds a program gets between SIGTERM and SIGKILL once the round saved its checkpoint.
AFTER_SAVE_GRACE = 2.0
#: Seconds a round before a restart for a moved peer may take.
MOVE_BUDGET = 5.0
#: Seconds a ``POST /hold`` may take.
HOLD_TIMEOUT = 2.0
#: Times a trainer that did not answer its ``POST /hold`` is asked again before the save (while the round has
#: the time: a hold is idempotent, and one that lands after the save would let it train past the checkpoint).
HOLD_RETRIES = 2
#: Seconds a program that said it saved has to pause itself before its bootstrap pauses it.
SELF_PAUSE = 2.0
#: Seconds a program that holds by waiting (savehook.READY_WAIT) has to reach its step boundary and say ``held``
#: when another task's round holds it; one that does not (a long step) is paused (SIGSTOP) instead.
HOLD_SELF = 1.0
#: Seconds a program steps before one that never said ``ready`` is taken for one without the hook.
READY_WITHIN = 5.0
#: Why a relaunched deciding task lets go of the programs its predecessor's round held (:meth:`Saving.stepped`).
LET_GO = "the deciding task's program is back at the job's checkpoint"


def round_budget(grace: float) -> float:
    """Seconds of a stopping program's grace a save round may take: the grace less what the program
    keeps for its own SIGTERM handling (half of it, at most 5 s): 25 -> 20, 7.5 -> 3.75, 2 -> 1."""
    return max(0.0, grace - min(grace / 2, 5.0))


class _Asked:
    """What one round did to the programs, so that every way out of it lets go of exactly that: its own
    program (``mark``: the hook's count when it was asked; ``taken``: the round took its answer) and the
    other trainers it asked to hold (``tried``) and that said they are (``held``)."""

    def __init__(self, trainer: Trainer, reason: str):
        self.trainer, self.reason = trainer, reason
        self.mark: int | None = None
        self.taken = False
        self.tried: list[str] = []
        self.held: list[str] = []


class _Round:
    def __init__(self, hold: bool):
        self.hold = hold
        self.result: SaveResult | None = None
        self.done = threading.Event()


class Saving:
    """A task's part in save rounds (see the module). ``decider``: this task runs them; ``logdir``:
    the job's logdir in this sandbox (where the round confirms the checkpoint); ``locate() -> "host:port"``
    of the deciding task's status endpoint (a follower's rendezvous leader), ``peer_urls() -> {task: status
    base URL}`` (the deciding task's view of the job), ``space()``: why the logdir has no room now. Who may
    ask for a round or a hold is the status server's one check (:mod:`marathon_tf.contract.taskauth`)."""

    def __init__(self, ctx: TaskContext, status: TaskStatus, events: TaskEvents, logdir: str | None, *,
                 decider: bool, log: Callable[[str], None] = lambda m: None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 session: Any = None, machine: TaskMachine,
                 locate: Callable[[], str | None] = lambda: None,
                 peer_urls: Callable[[], Mapping[str, str]] = lambda: {},
                 space: Callable[[], str | None] = lambda: None):
        self.ctx, self.status, self.events, self.logdir, self.decider = ctx, status, events, logdir, decider
        self.machine = machine
        self.log, self.clock, self.wall = log, clock, wall
        self.hook = SaveHook()
        self.trainer: Trainer | None = None
        self.locate, self.peer_urls = locate, peer_urls
        #: why the job's logdir has no room now, or None (marathon_tf.task.logdir.space_problem)
        self.space = space
        self._session = session
        self.fanout = session if session is not None else transport.fanout_session()  # a round's holds: to all
        self._lock = threading.Lock()
        self._current: _Round | None = None
        self._last: SaveResult | None = None
        self._held_peers: list[str] = []  # the other trainers the last round that holds holds (release_held)
        self._holding = False  # a hold asked of this program waits for its ``held`` line (one said otherwise is late)
        self._holds = 0  # generation of this task's hold (a later hold or a release ends an earlier timer)
        self._waiting = False  # a round waits for its program's ``saved`` line (one said otherwise is late)
        self._handled = 0  # the hook's count of ``saved`` lines up to the last one a round took or continued
        self._unanswered: str | None = None  # the reason of the last round that ended before its program answered
        self._said_no_hook = False
        self._first_step: float | None = None
        self._starts, self._let_go_at_step = 0, False  # programs started here; a relaunch's first is to let go
        self.start_hold = StartHold(log=log, clock=clock)  # a round's hold that came while no program ran
        status.update(save_hook=None)

    @property
    def session(self) -> Any:
        if self._session is None:
            self._session = transport.session()
        return self._session

    # -- the program ------------------------------------------------------------------------------
    def program_started(self, trainer: Trainer) -> None:
        """A program starts. The deciding task's first one that resumes the job's checkpoint (a relaunch's) tells every
        peer, at its first step, that its predecessor's round is over (else held to :func:`hold_limit`)."""
        self.trainer = trainer
        self._first_step = None
        self.hook.reset()
        self._starts += 1
        if self.decider and self._starts == 1 and self.status.light().get("resumed_from") is not None:
            self._let_go_at_step = True

    def on_text(self, text: str) -> None:
        said = self.hook.feed(text)
        if said is not None and not self.status.light().get("save_hook"):
            self.status.update(save_hook=True)
        if isinstance(said, savehook.Saved):
            with self._lock:
                count = self.hook.mark()
                late = not self._waiting and count > self._handled
                reason, self._unanswered = (self._unanswered, None) if late else (None, self._unanswered)
                if late:
                    self._handled = count
            trainer = self.trainer
            if late and trainer is not None:
                self._late(trainer, said, reason)
        elif isinstance(said, savehook.Held):
            trainer = self.trainer
            with self._lock:
                late = not self._holding and trainer is not None and trainer.held is None
            if late and trainer is not None:  # asked, paused from outside and let go before its step boundary
                self.log(f"the training program said it holds at step {said.step} when nothing held it: it goes on")
                trainer.send(savehook.RESUME)

    def stepped(self) -> None:
        """The program made a step: one that has stepped for :data:`READY_WITHIN` s without saying ``ready``
        has no hook (said once; a later ``ready`` still counts); a relaunch's lets go (:meth:`program_started`)."""
        if self._let_go_at_step:
            self._let_go_at_step = False
            release = HoldRequest(self.ctx.job, LET_GO, release=True)
            threading.Thread(target=self._hold, args=(self.peer_urls(), release), daemon=True, name="let-go").start()
        if self.hook.ready or self.status.light().get("save_hook") is not None:
            return
        now = self.clock()
        if self._first_step is None:
            self._first_step = now
        if now - self._first_step >= READY_WITHIN:
            self.status.update(save_hook=False)
            if self.decider and not self._said_no_hook:
                self._said_no_hook = True
                self.log(f"the training program declares no save hook (it never printed {savehook.READY!r}): "
                         f"planned stops cannot have it save first (docs/restarts.md)")

    # -- the deciding task: rounds ---------------------------------------------------------------------
    def save(self, reason: str, *, hold: bool, timeout: float, exclude: Sequence[str] = ()) -> SaveResult:
        """Run a round (or join the one under way); ``hold``: keep the job's training paused after it
        (a stop follows); ``exclude``: tasks not to hold (those a restart will not reach)."""
        deadline = self.clock() + timeout
        while True:
            with self._lock:
                current, mine = self._current, False
                trainer, last = self.trainer, self._last
                if current is None:
                    if hold and last is not None and last.ok and last.held and trainer is not None \
                            and trainer.held == "self":
                        return last  # held at that checkpoint since: nothing was trained after it
                    current = self._current = _Round(hold)
                    mine = True
            if mine:
                result = SaveResult(False, "the round failed")
                try:
                    result = self._run(reason, hold, deadline, exclude)
                finally:
                    with self._lock:
                        self._current, self._last = None, result
                    current.result = result
                    current.done.set()
                return result
            if not current.done.wait(max(0.0, deadline - self.clock())) or current.result is None:
                return SaveResult(False, f"the save round under way did not end within {timeout:g} s")
            if not current.result.ok or current.result.held or not hold:
                return current.result

    def _run(self, reason: str, hold: bool, deadline: float, exclude: Sequence[str]) -> SaveResult:
        began, began_wall = self.clock(), self.wall()
        trainer = self.trainer
        full = self.space() if self.logdir else None
        if full:  # a checkpoint cannot be written: said at once (the program waits for room, or will fail on it)
            return SaveResult(False, f"{full}: no checkpoint can be saved now")
        if trainer is None or trainer.proc is None or trainer.proc.poll() is not None:
            return SaveResult(False, f"no training program runs in {self.ctx.task} now (it is starting or "
                                     f"restarting): nothing to save", starting=True)
        if not self.hook.ready and self.status.light().get("save_hook") is not False:
            # it has not had its chance yet: no step for READY_WITHIN s (still importing TensorFlow, say)
            return SaveResult(False, f"{self.ctx.task}'s training program is starting: it has not said yet whether "
                                     f"it can save (no {savehook.READY!r} line, and no step for "
                                     f"{READY_WITHIN:g} s)", starting=True)
        if not self.hook.ready:
            return SaveResult(False, f"{self.ctx.task}'s training program declares no save hook (it never printed "
                                     f"{savehook.READY!r}; docs/restarts.md)")
        self.events.record(T.SAVE_ROUND, f"save round: {reason}", reason=reason, hold=hold)
        self.machine.fire(On.SAVE)
        asked = _Asked(trainer, reason)
        try:
            return self._steps(asked, reason, hold, deadline, exclude, began, began_wall)
        except Exception as e:  # noqa: BLE001 - whatever broke the round, what it held is let go
            return self._failed(f"the round broke off: {type(e).__name__}: {e}"[:300], asked)
        finally:
            self._closed(asked)

    def _steps(self, asked: _Asked, reason: str, hold: bool, deadline: float, exclude: Sequence[str],
               began: float, began_wall: float) -> SaveResult:
        trainer = asked.trainer
        if hold and self.ctx.style == "tf1":
            self._hold_others(asked, reason, exclude, deadline)
        with self._lock:
            asked.mark = self.hook.mark()
            self._waiting, self._unanswered = True, None
        self.log(f"save round ({reason}): asking the training program to save now"
                 + (f"; {', '.join(asked.held)} held" if asked.held else ""))
        trainer.send(savehook.SIGNAL)
        saved = None
        while saved is None and self.clock() < deadline and trainer.proc is not None and trainer.proc.poll() is None:
            saved = self.hook.wait_saved(asked.mark, min(0.1, max(0.0, deadline - self.clock())))
        if saved is None:
            if trainer.proc is not None and trainer.proc.poll() is not None:
                why = "the training program exited"
            else:
                why = (f"the training program did not say it saved within {self.clock() - began:.1f} s (it was "
                       f"asked, so it may still save a checkpoint at its next step boundary; it then trains on)")
            full = self.space() if self.logdir else None
            why = f"{full}: {why}" if full else why
            return self._failed(why, asked)
        with self._lock:
            asked.taken = True
            self._handled = max(self._handled, self.hook.mark())  # this round's answer: not a late one
        self._await_pause(trainer)
        found = self._confirm(saved, began_wall, deadline)
        if isinstance(found, str):
            return self._failed(found, asked)
        step, path = found
        seconds = round(self.clock() - began, 3)
        if hold:
            self._expire(trainer, "self", hold_limit(self.ctx.grace_seconds))
            with self._lock:
                self._held_peers = list(asked.held)
            if asked.held:  # held for the round (bounded by its deadline): now until the stop
                self._hold({t: u for t, u in self.peer_urls().items() if t in asked.held},
                           HoldRequest(self.ctx.job, reason, hold_limit(self.ctx.grace_seconds), extend=True))
        else:
            self._resume(trainer)
            self.machine.fire(On.SAVE_ENDED)
        self.events.record(T.SAVED, f"checkpoint at step {step} saved in {seconds:.2f} s: {path}"
                           + ("; training held until the stop" if hold else ""), step=step, path=path,
                           seconds=seconds)
        self.status.update(last_save={"step": step, "path": path, "at": round(self.wall(), 3), "reason": reason})
        self.log(f"save round ({reason}): checkpoint at step {step} confirmed in the logdir ({path}) after "
                 f"{seconds:.2f} s" + ("; training stays held until the stop" if hold else ""))
        return SaveResult(True, step=step, path=path, seconds=seconds, held=hold)

    def release_held(self, why: str) -> bool:
        """The stop the last round held the job for will not come (its owner's ``scale`` or ``delete --save`` did
        not go through): its programs go on now, not at their hold's end, and the next round that holds saves
        anew. Whether there was such a hold."""
        with self._lock:
            last, trainer = self._last, self.trainer
            if self._current is not None or last is None or not last.held or trainer is None or trainer.held != "self":
                return False
            self._last = replace(last, held=False)
            self._holds += 1  # its hold's timer ends with it
            peers, self._held_peers = self._held_peers, []
        self._let_go(trainer)
        self._release(peers, why)
        self.machine.fire(On.SAVE_ENDED)
        self.log(f"the save round's hold is let go ({why}): the training program goes on")
        return True

    def _closed(self, asked: _Asked) -> None:
        """The round is over, whichever way: a ``saved`` line its program said that the round did not take
        (it came after the round gave up) is a late answer (:meth:`_late`), and so is any said from now on."""
        with self._lock:
            self._waiting = False
            count = self.hook.mark()
            unanswered = asked.mark is not None and not asked.taken
            late = unanswered and count > (asked.mark or 0) and count > self._handled
            self._unanswered = asked.reason if unanswered and not late else None
            if late:
                self._handled = count
        if late:
            self._late(asked.trainer, self.hook.last(), asked.reason)

    def _late(self, trainer: Trainer, saved: savehook.Saved | None, reason: str | None) -> None:
        """The program said it saved when no round waited for it (it answered after its round had ended): it
        pauses itself, as the hook says, and nothing will stop or continue it. Continue it (once it is
        paused, for at most :data:`SELF_PAUSE` s) and say what it wrote."""
        step = saved.step if saved is not None else None
        what = f"step {step}" + (f", {saved.path}" if saved is not None and saved.path else "")
        self.log(f"the training program saved a checkpoint late ({what}), after the save round"
                 + (f" ({reason})" if reason else "") + " had ended: it goes on training")
        self.status.update(last_save={"step": step, "path": saved.path if saved is not None else None,
                                      "at": round(self.wall(), 3),
                                      "reason": f"said late, after its round had ended: {reason}" if reason
                                      else "said when no round waited for it"})

        def go_on() -> None:
            if self.hook.waits:  # it waits for RESUME, which no one else will send
                if self.trainer is trainer and trainer.held is None:
                    trainer.send(savehook.RESUME)
                return
            end = self.clock() + SELF_PAUSE
            while self.clock() < end and trainer.held is None and trainer.paused() is False \
                    and trainer.proc is not None and trainer.proc.poll() is None:
                time.sleep(0.01)
            if trainer.paused() is None:  # (no /proc to read: its pause comes right after the line)
                time.sleep(0.2)
            if self.trainer is trainer and trainer.held is None and trainer.paused() is not False:
                trainer.send(signal.SIGCONT)
        threading.Thread(target=go_on, daemon=True, name="save-late").start()

    def _confirm(self, saved: savehook.Saved, since: float, deadline: float) -> tuple[int, str] | str:
        """(step, path) of the checkpoint the logdir shows at ``saved``'s step, written since the round
        began; or why not."""
        if not self.logdir:
            return saved.step, saved.path or "?"  # no logdir to look in: the program's word
        base = os.path.dirname(os.path.abspath(self.logdir))
        while True:
            found = newest_checkpoint(self.logdir)
            if found is not None and found.written >= since - 1.0 and (found.step is None or found.step >= saved.step):
                path = os.path.relpath(found.path, base) if found.path else saved.path or "?"
                return (found.step if found.step is not None else saved.step), path
            if self.clock() >= deadline:
                newest = f"its newest is at step {found.step}" if found is not None else "it has none"
                return (f"the program said it saved step {saved.step}, but the logdir {self.ctx.logdir} shows no "
                        f"checkpoint written since the round began ({newest})")
            time.sleep(0.05)

    def _await_pause(self, trainer: Trainer) -> None:
        """The program said it saved: it pauses itself (the hook); one that does not within
        :data:`SELF_PAUSE` s is paused here. (Paused here first, a program about to pause itself would
        do so once continued, and stay stopped.) One that holds by waiting (savehook.READY_WAIT) waits from its
        ``saved`` line on, and is paused here as well: frozen, its TensorFlow servers answer no peer either (a
        newcomer of an elastic job that registers with it waits for its restart instead of being refused), and a
        kill's SIGCONT, which ends the pause, leaves it waiting."""
        if self.hook.waits:
            trainer.hold("self")
            return
        end = self.clock() + SELF_PAUSE
        while trainer.paused() is False and self.clock() < end and trainer.proc is not None \
                and trainer.proc.poll() is None:
            time.sleep(0.01)
        trainer.hold("self", pause=not trainer.paused())

    def _resume(self, trainer: Trainer) -> None:
        """Continue a program the round held, and again if it stopped itself late (after a pause here). A
        program the round did not hold is left as it is: one stopped by someone else stays stopped."""
        if trainer.held is None:
            return
        self._let_go(trainer)
        end = self.clock() + 0.5
        while self.clock() < end and trainer.held is None:
            if trainer.paused():
                trainer.send(signal.SIGCONT)
            time.sleep(0.05)

    def _let_go(self, trainer: Trainer) -> None:
        """A held program goes on: continued (SIGCONT) and, when it holds by waiting, sent RESUME."""
        if trainer.held is None:
            return
        trainer.resume()
        if self.hook.waits:
            trainer.send(savehook.RESUME)

    def _failed(self, why: str, asked: _Asked) -> SaveResult:
        self._resume(asked.trainer)
        self._release(asked.tried, "it failed")
        self.machine.fire(On.SAVE_ENDED)
        self.events.record(T.SAVE_FAILED, f"save round failed: {why}")
        self.log(f"save round failed: {why}")
        return SaveResult(False, why)

    def _hold_others(self, asked: _Asked, reason: str, exclude: Sequence[str], deadline: float) -> None:
        """Freeze every other chief and worker (``POST /hold``) until the round's deadline (a confirmed round
        holds them longer: until the stop); ``asked.held``: the ones that said they are held, ``asked.tried``:
        every one asked (an answer that came too late still holds: each is let go when the round fails)."""
        urls = {t: u for t, u in self.peer_urls().items() if t != self.ctx.task and t not in exclude
                and (naming.parse_task_name(t) or ("",))[0] in ("chief", "worker")}
        asked.tried = sorted(urls)
        seconds = round(max(0.0, deadline - self.clock()) + 2 * HOLD_TIMEOUT, 3)
        request = HoldRequest(self.ctx.job, reason, min(seconds, hold_limit(self.ctx.grace_seconds)))
        answers = self._hold(urls, request)
        for _ in range(HOLD_RETRIES):  # one that did not answer (a loaded host) may freeze only after the save
            silent = {t: u for t, u in urls.items() if answers.get(t) is None}
            if not silent or deadline - self.clock() < 2 * HOLD_TIMEOUT:
                break
            self.log(f"save round ({reason}): {', '.join(sorted(silent))} did not answer the hold; asked again")
            answers.update(self._hold(silent, request))
        asked.held = sorted(t for t, a in answers.items() if (a or {}).get("held"))

    def _release(self, held: Sequence[str], why: str = "") -> None:
        names = set(held)  # (a round over 10,000 workers: one look-up each)
        urls = {t: u for t, u in self.peer_urls().items() if t in names}
        self._hold(urls, HoldRequest(self.ctx.job, why, release=True))

    def _hold(self, urls: Mapping[str, str], request: HoldRequest) -> dict[str, dict[str, Any] | None]:
        """``POST /hold`` to every task of ``urls`` at once: their answers (None: no answer, or not 200)."""
        replies = TaskClient(self.fanout).hold(urls, request, timeout=HOLD_TIMEOUT)
        return {t: r.json() if r is not None and r.ok else None for t, r in replies.items()}

    def _expire(self, trainer: Trainer, how: str, seconds: float) -> None:
        """Let a held program go on after ``seconds`` when nothing stopped or restarted it meanwhile."""
        with self._lock:
            self._holds += 1
            generation = self._holds

        def release() -> None:
            time.sleep(seconds)
            if self._holds == generation and self.trainer is trainer and trainer.held == how:
                self.log(f"no stop came within {seconds:g} s of the save round: the training program goes on")
                self._let_go(trainer)
                self.machine.fire(On.SAVE_ENDED)
        threading.Thread(target=release, daemon=True, name="hold-limit").start()

    # -- HTTP -----------------------------------------------------------------------------------------
    def post_save(self, query: Mapping[str, str], body: Any) -> tuple[int, dict[str, Any]]:
        """``POST /save`` ``{"job", "reason", "hold", "timeout", "exclude"}`` (the deciding task): 200 with
        the round's answer (``ok`` true), 409 with why not."""
        if not isinstance(body, dict) or body.get("job") != self.ctx.job:
            return 400, {"ok": False, "message": f"not a save request for job {self.ctx.job!r}"}
        try:
            request = SaveRequest.from_json(body)
        except TaskApiError as e:
            return 400, {"ok": False, "message": str(e)}
        result = self.save(request.reason, hold=request.hold, timeout=request.timeout, exclude=request.exclude)
        return (200 if result.ok else 409), result.to_dict()

    def post_hold(self, query: Mapping[str, str], body: Any) -> tuple[int, dict[str, Any]]:
        """``POST /hold`` ``{"job", "seconds"}`` or ``{"job", "release": true}`` (from the deciding task):
        freeze this task's program for the round under way (for ``seconds``, at most :func:`hold_limit`), or
        let it go on; ``{"job", "seconds", "extend": true}``: the round confirmed its checkpoint, a program
        still held stays so for ``seconds`` from now (one no longer held is not held again)."""
        if not isinstance(body, dict) or body.get("job") != self.ctx.job:
            return 400, {"held": False, "message": f"not a hold for job {self.ctx.job!r}"}
        request = HoldRequest.from_json(body)
        trainer = self.trainer
        if request.release:
            if self.decider and self.release_held(request.reason or "the stop it was for did not come"):
                return 200, {"held": False, "released": True}
            why = request.reason or "its stop did not come"
            self.start_hold.release(why)
            if trainer is not None and trainer.held == "outside":
                self._let_go(trainer)
                self.machine.fire(On.SAVE_ENDED)
                self.log(f"the save round is over ({why}): the training program goes on")
            return 200, {"held": False}
        seconds = request.seconds or hold_limit(self.ctx.grace_seconds)
        seconds = min(max(seconds, 0.5), hold_limit(self.ctx.grace_seconds))  # a hold is always bounded
        if trainer is None or trainer.proc is None or trainer.proc.poll() is not None:
            return 200, self.start_hold.hold(request.reason or "a planned stop", seconds, extend=request.extend)
        if request.extend:  # the round confirmed its checkpoint: held until the stop (never held anew)
            if trainer.held == "outside":
                self._expire(trainer, "outside", seconds)
            return 200, {"held": trainer.held == "outside"}
        if trainer.held is None:
            self._hold_program(trainer)
            self.machine.fire(On.HELD)
            self.log(f"held for the job's save round ({request.reason or 'a planned stop'})")
            self._expire(trainer, "outside", seconds)
        return 200, {"held": True, "step": self.status.light().get("step")}

    def _hold_program(self, trainer: Trainer) -> None:
        """Hold this program for another task's round: one that holds by waiting is asked (SIGUSR1) and holds at
        its step boundary (its ``held`` line, within :data:`HOLD_SELF` s), then is paused there too (SIGSTOP: a
        kill's SIGCONT leaves it waiting); any other, or one whose step is longer, is paused where it is."""
        if self.hook.waits:
            with self._lock:
                self._holding, mark = True, self.hook.held_mark()
            try:
                trainer.send(savehook.SIGNAL)
                self.hook.wait_held(mark, HOLD_SELF)
            finally:
                with self._lock:
                    self._holding = False
        trainer.hold("outside")

    def keep_held(self) -> None:
        """The task is being stopped: a program held for a round stays held. A real agent's kill stops,
        signals and then *continues* every process of the task's tree (SIGSTOP, SIGTERM, SIGCONT, as
        :mod:`marathon_tf.local.proctree` plays it), so a held program, which ignores the SIGTERM,
        would train past the checkpoint to be restored until its bootstrap ends it. Called at once from
        the bootstrap's signal relay, before the stop's round."""
        trainer = self.trainer
        if trainer is not None and trainer.held is not None:
            trainer.send(signal.SIGSTOP)

    # -- a member's planned stop ------------------------------------------------------------------------
    def ask(self, reason: str, *, hold: bool, timeout: float, exclude: Sequence[str] = ()) -> SaveResult:
        """A round from the deciding task: run here, or asked of it."""
        if self.decider:
            return self.save(reason, hold=hold, timeout=timeout, exclude=exclude)
        address = self.locate()
        if not address:
            return SaveResult(False, "the deciding task's address is not known")
        reply = TaskClient(self.session).save(address, SaveRequest(self.ctx.job, reason, hold, timeout, tuple(exclude)),
                                              timeout=timeout + 2.0)
        if reply.code is None or reply.body is None:  # refused, reset, timed out, not JSON: the deciding task is away
            why = transport.short(reply.error) if reply.error is not None else f"HTTP {reply.code}, not JSON"
            return SaveResult(False, f"the deciding task did not answer: {why}")
        return SaveResult.from_dict(reply.body)

    def members_save(self) -> bool:
        """This task takes part in rounds (a cluster member with peers; not tensorboard)."""
        return self.ctx.role != "tensorboard" and len(self.ctx.members()) > 1

    def before_stop(self, budget: float, planned: Callable[[], StopReason | None] | None = None) -> SaveResult | None:
        """The task is stopped (SIGTERM) with ``budget`` s for a round: the job's checkpoint first. A round that
        fails while ``planned()`` (:func:`marathon_tf.task.keeper.asked_for`) says the job ended or its app was
        removed had nothing to do: the deciding task's program has ended already (asked after the round, so a
        stop that is not one of those costs no look at Marathon)."""
        if not self.members_save() or budget <= 0:
            return None
        result = self.ask(f"{self.ctx.task} is stopped", hold=True, timeout=budget)
        if not result.ok and planned is not None:
            why = planned()
            if why is not None and why.final:
                return SaveResult(False, f"{why.text}: nothing to save")
        return result

    def before_move(self, moved: Sequence[str]) -> SaveResult | None:
        """Peers ``moved``: the job restarts with the new spec; save first, unless nothing is left to save
        (a ps or the deciding task moved: the job's variables or its saver's state went with it; in a
        ``multi_worker_mirrored`` group a member's loss broke the collective the save needs)."""
        decider = decider_task(self.ctx.completion)
        if not self.members_save() or self.ctx.style == "multi_worker_mirrored" or \
                any(t == decider or t.startswith("ps-") for t in moved):
            return None
        return self.ask(f"{', '.join(moved)} moved: the job restarts with the new cluster spec", hold=False,
                        timeout=MOVE_BUDGET, exclude=moved)

