"""The bootstrap's restarts under the job's restart ledger (:mod:`marathon_tf.task.keeper`): what a
program's end was (failure, preemption, infrastructure death), the keeper's group restart rounds, the
in-place restart with its backoff, and the stop through the kill grace period.

:class:`Restarter` is composed into :class:`marathon_tf.task.bootstrap.Bootstrap` (``boot.restarts``):
it is told what the bootstrap sees (a program started, made a step, ended; the task is stopped) and
answers with what to do (a :class:`~marathon_tf.task.policy.Decision`; whether to start the program
again), talking to the job's policy, the task's status and events, and its rendezvous through the
typed interface :class:`marathon_tf.task.rendezvous.Rendezvous`. Starting the program is the
bootstrap's (its peers, its spec). This module never imports TensorFlow.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from marathon_tf.contract import naming
from marathon_tf.contract import timeline as T
from marathon_tf.contract.errors import MarathonError
from marathon_tf.contract.plan import PlannedStop, Round, RoundCause, RoundKind, StopReason
from marathon_tf.contract.shellexec import signal_exit, signal_name
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.marathon.jobstate import replaced
from marathon_tf.marathon.model import apps_by_id
from marathon_tf.marathon.record import GROUP_EMBEDS
from marathon_tf.marathon.tasks import newest_running, task_url
from marathon_tf.task.budget import BACKOFF, STREAK_RESET, backoff
from marathon_tf.task.jobcontrol import JobControl
from marathon_tf.task.jobpolicy import JobPolicy
from marathon_tf.task.ledger import FAILURE, INFRASTRUCTURE, PREEMPTION
from marathon_tf.task.logdir import NO_SPACE
from marathon_tf.task.machine import On, TaskMachine
from marathon_tf.task.observer import TaskObserver
from marathon_tf.task.policy import Action, Decision, ExitPolicy
from marathon_tf.task.rendezvous import LeaderRendezvous, Rendezvous
from marathon_tf.task.saving import AFTER_SAVE_GRACE, Saving, round_budget
from marathon_tf.task.status_server import TaskStatus
from marathon_tf.task.supervisor import Trainer
from marathon_tf.task.tflog import RESTARTED

__all__ = ["Restarter", "StopAsked", "program_grace", "SIGTERM_EXIT", "SIGTERM_WAIT", "SPACE_WAIT", "SPACE_POLL",
           "STOP_ASK_WAIT"]

#: The exit code of a program that ended on SIGTERM: a preemption only after a SIGTERM.
SIGTERM_EXIT = signal_exit(signal.SIGTERM)
#: Seconds a program's exit 143 waits for its bootstrap's own SIGTERM: a task's kill signals its whole
#: process tree (Mesos' executor), so the program's end may be seen just before the bootstrap's signal.
SIGTERM_WAIT = 1.0
#: A coordinator restarted because TensorFlow says a peer was restarted under it: at most this many
#: times in STREAK_RESET seconds, each after PEER_SETTLE seconds (the rest of that restart gets there).
PEER_RESTARTS, PEER_SETTLE, PEER_GRACE = 5, 1.0, 1.0
#: Seconds a relaunched task's first program waits at most for its peers to take its new address.
RELAUNCH_SETTLE = 60.0
#: Why a peer is waited for while a deployment replaces its task (:meth:`Restarter.await_peers_took`).
RELAUNCHING = "it restarts with the job's new configuration"
#: Seconds a stopped task waits at most, once its program has ended, for Marathon's word on why it was stopped
#: (:class:`StopAsked`, asked since the stop began: a new configuration's stop is a planned restart).
STOP_ASK_WAIT = 2.0
#: Seconds a program that failed on a full logdir waits at most for room before the job fails.
SPACE_WAIT = 600.0
#: Seconds between two looks at a full logdir's filesystem.
SPACE_POLL = 1.0


class StopAsked:
    """Marathon's word on this task's own stop (``JobPolicy.planned``: :func:`marathon_tf.task.keeper.stop_asked`):
    asked once per stop, in the background from its start (Marathon stores a change before it kills anything, so
    the answer is there from the first kill on and is ready when the program has ended), and read by the save round
    (:meth:`reason`) and by the program's stop event (:meth:`get`) alike: one ``GET`` of the task's app per stop.
    ``ask`` None: nothing to ask (no Marathon), the answer is None."""

    def __init__(self, ask: Callable[[], PlannedStop | None] | None):
        self._answer: PlannedStop | None = None
        self._done = threading.Event()
        if ask is None:
            self._done.set()
        else:
            threading.Thread(target=self._ask, args=(ask,), daemon=True, name="stop-asked").start()

    def _ask(self, ask: Callable[[], PlannedStop | None]) -> None:
        try:
            self._answer = ask()
        finally:
            self._done.set()

    def get(self, timeout: float | None = None) -> PlannedStop | None:
        """The answer, waited for at most ``timeout`` s (None: not there by then, or nothing planned)."""
        self._done.wait(timeout)
        return self._answer

    def reason(self) -> StopReason | None:
        """Why the stop is marathon-tf's doing (:meth:`marathon_tf.task.saving.Saving.before_stop`'s ``planned``)."""
        answer = self.get(STOP_ASK_WAIT * 2)
        return answer.reason if answer is not None else None


def program_grace(grace_seconds: float) -> float:
    """Seconds the program gets between SIGTERM and SIGKILL when the task is stopped: the app's
    ``taskKillGracePeriodSeconds`` less a margin for the bootstrap to report and exit before
    Mesos' own SIGKILL (30 -> 25, 10 -> 7.5, at least 1)."""
    return max(1.0, grace_seconds - min(5.0, grace_seconds / 4))


class Restarter:
    """The restart half of a task's bootstrap (see the module). ``stop``: set when the task is
    stopped, ``signum()``: by which signal; ``grace``: what a stopped program gets
    (:func:`program_grace`); ``restart_backoff``: (first, cap) of :func:`~marathon_tf.task.budget.backoff`."""

    sigterm_wait = SIGTERM_WAIT
    space_wait, space_poll = SPACE_WAIT, SPACE_POLL

    def __init__(self, ctx: TaskContext, policy: ExitPolicy, control: JobControl | None, status: TaskStatus,
                 observer: TaskObserver, stop: threading.Event, signum: Callable[[], int | None], *, grace: float,
                 restart_backoff: tuple[float, float] = BACKOFF, clock: Callable[[], float],
                 log: Callable[[str], None], machine: TaskMachine, saving: Saving | None = None,
                 space: Callable[[], str | None] = lambda: None):
        self.ctx, self.policy, self.control, self.status, self.observer = ctx, policy, control, status, observer
        self.machine = machine
        self._stop, self._signum, self.grace, self.restart_backoff = stop, signum, grace, restart_backoff
        self.clock, self.log = clock, log
        self.rendezvous: Rendezvous | None = None
        #: the task's part in save rounds: a planned stop asks for one first
        self.saving = saving
        #: the rendezvous leader and the round generation the program runs in
        self._leader: str | None = None
        self._generation = 0
        self._streak, self._run_started, self._stepped = 0, 0.0, False
        self._peer_restarts: list[float] = []  # when the coordinator was restarted for a peer's restart
        #: why the job's logdir has no room now, or None (marathon_tf.task.logdir.space_problem)
        self.space = space
        #: the task's rendezvous carries the job's rounds (:meth:`attach`): a group-scope end restarts the group
        self.rounds = False

    def record_counts(self) -> Mapping[str, Any] | None:
        """The job's restart counts for its record: the keeper's (this task keeps the ledger), else the last
        answer this task's reports got."""
        if not isinstance(self.policy, JobPolicy):
            return None
        if self.policy.keeper is not None:
            return self.policy.keeper.ledger.summary()
        return self.policy.counts.counts() if self.policy.counts is not None else None

    def attach(self, rendezvous: Rendezvous) -> None:
        """The task's rendezvous, once made: its plan carries the keeper's group restart rounds (the keeper
        publishes them through the leader's coordinator; a reporter posts to the leader, the deciding task).
        Without a rendezvous leader there are no rounds, nor for a leader without a keeper (no Marathon: nobody
        starts them): a group-scope failure then relaunches the task."""
        self.rendezvous = rendezvous
        keeper = self.policy.keeper if isinstance(self.policy, JobPolicy) else None
        self.rounds = rendezvous.carries_rounds and isinstance(self.policy, JobPolicy) and \
            (keeper is not None or not isinstance(rendezvous, LeaderRendezvous))

    def count_earlier(self) -> None:
        """A relaunched task's restarts so far: its failures in the job-wide record (each one was
        followed by a restart, in place or by Marathon)."""
        budget = self.policy.budget if isinstance(self.policy, JobPolicy) else None
        earlier = sum(1 for r in budget.shared() if r.get("task") == self.ctx.task) if budget is not None else 0
        if earlier:
            self.status.update(restarts=earlier, failures=earlier)

    # -- what the bootstrap tells ---------------------------------------------------------------------
    def begin(self) -> None:
        """The first program is about to start: the rounds published before it are not its to follow."""
        self._leader, self._generation = self._current_round()

    def await_peers_took(self, me: str, address: str, timeout: float = RELAUNCH_SETTLE) -> frozenset[str]:
        """Before this task's first program starts: every peer its program would lose state with, whose spec
        still holds another address for this task (it was relaunched elsewhere: the peer restarts with the
        rewritten spec once it sees the move), has taken this one (its ``/status`` ``peers``). A program
        started meanwhile loses what it builds on that peer when it restarts: a TF1 chief restores the
        checkpoint onto the ps and trains a few steps that are trained again (or fails, counted: the flaky
        preempted-chief test), a ParameterServerStrategy coordinator loses its variables on the ps and its
        functions on the workers. The ps for a chief or worker of a job with one; the ps and the workers
        for a ParameterServerStrategy coordinator; every other member of a MultiWorkerMirroredStrategy group,
        whose collectives are fixed at start: a member that does not name this task at this address yet
        runs an earlier cluster spec (a ``scale``'s new worker started beside peers about to restart is
        restarted with them). An elastic member does not wait for a ps to hold its address: the ps takes an
        elastic worker from the worker's session (TensorFlow's ClusterSpec propagation), not from its spec,
        and does not restart when one moves (:meth:`marathon_tf.task.bootstrap.Bootstrap._take_moves`): a
        relaunched deciding task waited the whole :data:`RELAUNCH_SETTLE` for it. Needs Marathon (to find the
        peers' status ports). The peers a deployment replaced meanwhile (their new tasks have new addresses, which
        the rendezvous may not show yet: :meth:`marathon_tf.task.bootstrap.Bootstrap._await_addresses`)."""
        mwms = self.ctx.style == "multi_worker_mirrored"
        held_address = not mwms and self.ctx.role not in self.ctx.elastic  # (a ps's own spec holds this task)
        roles = ("chief", "worker") if mwms else \
            ("ps", "worker") if self.ctx.style == "parameter_server" and self.ctx.role == "chief" else ("ps",)
        if self.control is None or self.ctx.role not in ("chief", "worker") or \
                not (mwms or self.ctx.cluster.get("ps")):
            return frozenset()
        deadline, stale_seen, relaunched = self.clock() + timeout, False, set()
        while not self._stop.is_set():
            stale = self._stale_peers(me, address, roles, read_status=held_address)
            relaunched |= {peer for peer, why in stale.items() if why == RELAUNCHING}
            if not stale:
                if stale_seen:  # they re-rendered: give their programs the moment they take to restart
                    self._stop.wait(0.5)
                return frozenset(relaunched)
            if not stale_seen:
                self.log("waiting before the program starts for "
                         + ", ".join(f"{peer} ({why})" for peer, why in stale.items()))
                stale_seen = True
            if self.clock() >= deadline:
                self.log(f"{', '.join(stale)} not settled within {timeout:g} s: starting anyway")
                return frozenset(relaunched)
            self._stop.wait(0.25)
        return frozenset()

    def _stale_peers(self, me: str, address: str, roles: tuple[str, ...], read_status: bool = True) -> dict[str, str]:
        """The peers of ``roles`` not settled for ``me`` at ``address``, with why: a deployment is replacing
        its task (launched with an earlier configuration, or none running yet: it restarts with the job's
        new cluster spec), or (``read_status``) its ``/status`` names another address for ``me``."""
        assert self.control is not None  # (await_peers_took)
        try:
            group = self.control.client.get_group(naming.group_id(self.ctx.job), embed=GROUP_EMBEDS)
        except MarathonError:
            return {}
        apps = apps_by_id(group)
        stale = {}
        for role in roles:
            if role in self.ctx.elastic:  # its members and standbys: the job's size (marathon_tf.task.elastic)
                continue
            for index in range(int(self.ctx.cluster.get(role, 0))):
                if (role, index) == (self.ctx.role, self.ctx.index):
                    continue
                name = naming.task_name(role, index)
                app = apps.get(naming.app_id(self.ctx.job, role, index))
                task = newest_running(app)
                if app is not None and app.deployments and (task is None or replaced(app, task)):
                    stale[name] = RELAUNCHING
                    continue
                url = task_url(app, task, self.ctx.status_port_name, "/status") \
                    if read_status and app and task is not None else None
                held = ((self.control.get_json(url) or {}).get("peers") or {}).get(me) if url else None
                if held and held != address:
                    stale[name] = f"it holds an earlier address of {me}, {held}"
        return stale

    def program_started(self) -> None:
        self._run_started, self._stepped = self.clock(), False

    def stepped(self) -> None:
        self._stepped = True

    def stop_code(self) -> int:
        """The bootstrap's exit code once it was stopped (128 + the signal)."""
        return signal_exit(self._signum() or signal.SIGTERM)

    # -- the keeper's rounds ---------------------------------------------------------------------------
    def _current_round(self) -> tuple[str | None, int]:
        """(the rendezvous leader, the generation of the last round it published)."""
        if self.rendezvous is None:
            return (None, 0)
        leader, round_ = self.rendezvous.restart_round()
        return leader, round_.generation if round_ is not None else 0

    def new_round(self) -> Round | None:
        """A group restart round newer than the one this program runs in (None: none); a new
        leader's rounds are taken as they are (its relaunch moved it: the spec is rewritten anyway)."""
        if self.rendezvous is None:
            return None
        leader, round_ = self.rendezvous.restart_round()
        if leader != self._leader:
            self._leader, self._generation = leader, round_.generation if round_ is not None else 0
            return None
        if round_ is not None and round_.generation > self._generation:
            if not round_.follows(self.ctx.task):
                self._generation = round_.generation
                return None  # an elastic job's size change that leaves this program running (marathon_tf.task.resize)
            return round_
        return None

    def _await_round(self, seconds: float) -> Round | None:
        end = self.clock() + seconds
        while self.clock() < end and not self._stop.is_set():
            round_ = self.new_round()
            if round_ is not None:
                return round_
            self._stop.wait(0.05)
        return None

    def stop_for_round(self, trainer: Trainer, round_: Round) -> bool:
        """The job's group restarts (or an elastic job's size changes): stop the program (SIGTERM, the round's
        grace) if it runs and wait the round's delay; whether to start it again (False: the task was stopped
        meanwhile)."""
        generation = round_.generation
        cause = round_.cause or "a member ended"
        resize = round_.kind is RoundKind.RESIZE  # an elastic job's size change (marathon_tf.task.resize)
        if trainer.wait(timeout=0) is None:
            grace = self.grace if round_.grace is None else min(self.grace, round_.grace)  # 0: now
            code = trainer.stop(grace)
            why = "resize" if resize else "preemption" if round_.reason is RoundCause.PREEMPTION else "group"
            self.observer.planned_restart(why, code, cause)
        self._generation = generation
        delay = round_.delay
        self.log(f"the job's {'size changes' if resize else 'group restarts'} ({cause}, round {generation})"
                 + (f"; restarting in {delay:g} s" if delay else ""))
        self.machine.fire(On.RESIZE if resize else On.RESTART,
                          last_error=f"the job's {'size changes' if resize else 'group restarts'} ({cause})")
        return not (delay and self._stop.wait(delay))

    # -- a program's end ------------------------------------------------------------------------------
    def ended(self, trainer: Trainer, code: int, hung: str | None) -> Decision | None:
        """The program ended by itself (or hung, and was stopped): what it was and what the policy
        says; None when it ended because the task is being stopped (its 143 came from the task's
        SIGTERM: the bootstrap stops, :meth:`stopped`)."""
        round_ = self.new_round()
        if round_ is not None:  # its group is restarting: its end is the round's consequence
            self.observer.program_exited(code, f"training program exited with {code} while the job's group "
                                               f"restarts ({round_.cause})", failure=False)
            return Decision(Action.GROUP_RESTART, code, kind=FAILURE, counted=False, round=round_)
        if code == SIGTERM_EXIT and not hung and trainer.killed_by is None and self._stop.wait(self.sigterm_wait):
            return None  # the task was killed: the program's 143 came from that SIGTERM
        why = trainer.infrastructure() if not hung else None
        kind = INFRASTRUCTURE if why else PREEMPTION if not hung and self._preempted(trainer, code) else FAILURE
        tail = trainer.stderr_tail() + (f"\n{hung}" if hung else "")
        # a hang on a frozen ps (the evidence names it): the ps is restarted with the job's group, not this
        # program alone (restarted in place, it would only wait for the frozen ps again)
        peer = self.observer.hung_on if hung else None
        decision = self.policy.decide(code, stderr_tail=tail, kind=kind, generation=self._generation,
                                      killed_by=trainer.killed_by, why=why, rounds=self.rounds,
                                      **({"peer": peer} if peer else {}))
        self.observer.program_exited(code, decision.reason, failure=decision.counted, kind=decision.kind)
        return decision

    def await_space(self, decision: Decision) -> Decision | None:
        """The program failed on a full logdir (``decision.space``): wait for room (:meth:`wait_for_room`),
        then go on as ``decision`` says — the program starts again and resumes from its last checkpoint.
        The job fails, with one line, if no room comes; None when the task was stopped meanwhile."""
        self.log(f"{decision.reason}: waiting for room (at most {self.space_wait:g} s)")
        waited = self.wait_for_room(decision.space or NO_SPACE, decision.reason, decision.exit_code)
        if waited is None:
            return None
        room, said = waited
        if not room:
            return Decision(Action.FAIL_JOB, decision.exit_code, f"{self.ctx.task} failed (exit {decision.exit_code}): "
                                                                 f"{said}", kind=INFRASTRUCTURE, counted=False)
        return replace(decision, reason=f"{decision.reason}; {said}")  # (the restart says so)

    def wait_for_room(self, why: str, reason: str | None, exit_code: int | None = None) -> tuple[bool, str] | None:
        """Wait until the logdir's filesystem has room again (:attr:`space`, looked at every :attr:`space_poll`
        s, at most :attr:`space_wait` s), ``status`` showing the wait (``waiting_for_space``, and ``reason``):
        ``(True, "room came back after N s")``, ``(False, "<why>, and no room came within N s")``, or None
        when the task was stopped meanwhile."""
        began = self.clock()
        try:
            while True:
                waited = self.clock() - began
                self.status.update(exit_code=exit_code, last_error=reason, waiting_for_space={
                    "why": why, "seconds": round(waited, 1), "limit": self.space_wait})
                if waited >= self.space_wait:
                    return False, f"{why}, and no room came within {self.space_wait:g} s"
                if self._stop.wait(min(self.space_poll, max(0.0, self.space_wait - waited))):
                    return None
                now = self.space()
                if now is None:
                    return True, f"room came back after {self.clock() - began:.0f} s"
                why = now
        finally:
            self.status.update(waiting_for_space=None)

    def _preempted(self, trainer: Trainer, code: int) -> bool:
        """Whether an exit code the job names (``restart.preemption_exit_codes``) is a preemption: 143
        only when the program died of a SIGTERM the bootstrap did not send (the bootstrap's own SIGTERM
        is :meth:`stopped`); a program that exits 143 by itself failed."""
        if code not in self.ctx.preemption_exit_codes:
            return False
        return code != SIGTERM_EXIT or trainer.killed_by == signal.SIGTERM

    def prepare(self, trainer: Trainer, decision: Decision) -> bool:
        """Get ready to start the program again as ``decision`` says (a restarting one): with its group
        once the keeper's round is there (the policy's round, or one that comes within 2 s), else in
        place after :meth:`_backoff`. Whether to start it (False: the task was stopped meanwhile)."""
        if decision.group:
            round_ = decision.round if decision.round is not None and decision.round.generation > self._generation \
                else self._await_round(2.0)
            if round_ is not None:
                if decision.reason:
                    self.log(decision.reason)
                return self.stop_for_round(trainer, round_)
        delay = self._backoff(decision)
        self.machine.fire(On.RESTART, exit_code=decision.exit_code, last_error=decision.reason)
        self.log(f"{decision.reason}" + (f"; restarting in {delay:g} s" if delay else ""))
        return not (delay and self._stop.wait(delay))

    def _backoff(self, decision: Decision) -> float:
        """Seconds before an in-place restart: none after a preemption, an infrastructure death or a
        first failure; :func:`~marathon_tf.task.budget.backoff` when it keeps failing (a run without
        a step that lasted less than :data:`~marathon_tf.task.budget.STREAK_RESET` s)."""
        if decision.kind != FAILURE or not decision.counted:
            return 0.0
        quick = self.clock() - self._run_started < STREAK_RESET and not self._stepped
        self._streak = self._streak + 1 if quick else 1
        return backoff(self._streak, *self.restart_backoff)

    # -- a peer restarted under a coordinator ------------------------------------------------------------
    def peer_restarted_under(self) -> str | None:
        """The peer TensorFlow says was restarted under this program, when this program is a
        ParameterServerStrategy coordinator (the chief of a ``parameter_server`` job): it holds the
        peer's old incarnation and never takes it back (TF_RUNTIME.md: a ps + chief restarted while
        the old workers still reconnect "often failed"). At most :data:`PEER_RESTARTS` times in
        :data:`~marathon_tf.task.budget.STREAK_RESET` s: past that the ordinary watchdog and failure
        handling apply."""
        if self.ctx.style != "parameter_server" or self.ctx.role != "chief":
            return None
        said = sorted(task for task, (_, why, _) in self.observer.tflog.signals().items() if why == RESTARTED)
        if not said:
            return None
        self._peer_restarts = [t for t in self._peer_restarts if self.clock() - t < STREAK_RESET]
        return said[0] if len(self._peer_restarts) < PEER_RESTARTS else None

    def stop_for_peer(self, trainer: Trainer, peer: str) -> bool:
        """Stop the coordinator (SIGTERM, then SIGKILL after at most :data:`PEER_GRACE` s: it may save
        what it trained with the other workers, but a round of steps stuck on the restarted peer never
        ends) to start it again in place once the peers are settled: a consequence of the peer's
        restart, never counted. Whether to start it (False: the task was stopped meanwhile)."""
        self._peer_restarts.append(self.clock())
        self.log(f"TensorFlow says {peer} was restarted under the training program (it keeps {peer}'s old "
                 f"incarnation and cannot take it back): restarting the program in place")
        code = trainer.stop(min(self.grace, PEER_GRACE))
        self.observer.planned_restart("peer_restarted", code, peer)
        return not self._stop.wait(PEER_SETTLE)  # the other peers of the same restart get there too

    # -- the task is stopped ------------------------------------------------------------------------------
    def stopped(self, trainer: Trainer) -> int:
        """The bootstrap was told to stop (SIGTERM: the task is killed, with its grace period): first a save
        round (:meth:`marathon_tf.task.saving.Saving.before_stop`: the deciding task has its program save
        while this task's program, a ps included, still serves), then the program gets the signal and
        the rest of the grace (at most :data:`~marathon_tf.task.saving.AFTER_SAVE_GRACE` s once the round
        saved), while the keeper is told — after the round, so that the group restart round it may open cannot stop
        the deciding task's program mid-save (it decides whether it was a preemption, not when marathon-tf
        asked: the job's end, a new app version). The program's end is an event: a planned restart
        (:data:`~marathon_tf.contract.timeline.RESTARTING`, ``scale`` with the change, ``2 → 3 workers``, or
        ``redeploy``) when Marathon says the task's app has a new configuration (:class:`StopAsked`), else the
        program's stop (the job's end, its app removed, an operator's kill, a drain). The program's exit code."""
        signum = self._signum() or signal.SIGTERM
        name = signal_name(signum)
        began = self.clock()
        asking = StopAsked(self.policy.planned if isinstance(self.policy, JobPolicy) else None)
        saved = None
        if self.saving is not None and signum == signal.SIGTERM and trainer.wait(timeout=0) is None:
            self.log(f"stopped by {name}: a save round first (at most {round_budget(self.grace):g} s of the "
                     f"{self.grace:g} s grace)")
            saved = self.saving.before_stop(round_budget(self.grace), asking.reason)
        telling = None
        if isinstance(self.policy, JobPolicy) and self.ctx.role != "tensorboard":
            # told after the round, beside the program's stop: the keeper's answer to a ps's or the deciding
            # task's stop is a group restart round, which would stop the deciding task's program mid-save
            telling = threading.Thread(target=self.policy.stopped, args=(None, self._generation, f"stopped by {name} "
                                       f"(its task was killed)"), kwargs={"rounds": self.rounds}, daemon=True,
                                       name="ledger-report")
            telling.start()
        left = max(0.0, self.grace - (self.clock() - began))
        if saved is not None and saved.ok:
            left = min(left, AFTER_SAVE_GRACE)
            self.log(f"stopped by {name}: the job's checkpoint at step {saved.step} is saved ({saved.path}); the "
                     f"training program gets it now and {left:.1f} s to exit")
        else:
            self.log(f"stopped by {name}: " + (f"no save round ({saved.message}); " if saved is not None else "")
                     + f"the training program gets it now and {left:.1f} s to save and exit")
        code = trainer.stop(left, signum)
        self.status.update(exit_code=code)
        asked = asking.get(STOP_ASK_WAIT)
        restart = asked.restart(self.ctx.cluster) if asked is not None else None
        if restart is not None:  # the job's new configuration restarts it (scale, a re-deploy): a planned restart
            why, change = restart
            self.observer.planned_restart(why, code, change)
        else:  # its end, its app removed, or nothing Marathon says (an operator's kill, a drain, a preemption)
            self.observer.program_exited(code, f"training program stopped: its task was stopped by {name}" + (
                f" (the job's checkpoint at step {saved.step} saved first)" if saved is not None and saved.ok else "")
                + f" (exit {code})", failure=False, kind="stopped")
        self.log(f"stopped by signal {signum}" + (f" ({T.planned_text(*restart)})" if restart is not None else "")
                 + f"; training program exited with {code}")
        if telling is not None:
            telling.join(timeout=3.0)
        return code
