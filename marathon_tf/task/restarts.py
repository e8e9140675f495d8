"""The bootstrap's restarts under the job's restart ledger (:mod:`marathon_tf.task.keeper`): what a
program's end was (failure, preemption, infrastructure death), the keeper's group restart rounds, the
in-place restart with its backoff, and the stop through the kill grace period.

:class:`JobRestarts` is a part of :class:`marathon_tf.task.bootstrap.Bootstrap` (a mixin: it uses the
bootstrap's status, observer, rendezvous and trainer); :func:`job_lifecycle` builds the job-aware
policy and control a task's bootstrap runs with. This module never imports TensorFlow.
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Mapping

from marathon_tf.contract import timeline as T
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.task.keeper import Keeper, Reporter
from marathon_tf.task.ledger import FAILURE, INFRASTRUCTURE, PREEMPTION, Ledger
from marathon_tf.task.lifecycle import (JobControl, JobPolicy, RestartBudget, client_from_env, decider_task,
                                        failures_path, is_decider)
from marathon_tf.task.supervisor import Outcome, Trainer
from marathon_tf.task.tflog import RESTARTED

__all__ = ["JobRestarts", "job_lifecycle", "program_grace", "STREAK_RESET", "SIGTERM_EXIT", "SIGTERM_WAIT"]

#: A run of the program that lasted this long (seconds) or made a step ends a streak of failures.
STREAK_RESET = 60.0
#: The exit code of a program that ended on SIGTERM (128 + 15): a preemption only after a SIGTERM.
SIGTERM_EXIT = 128 + signal.SIGTERM
#: Seconds a program's exit 143 waits for its bootstrap's own SIGTERM: a task's kill signals its whole
#: process tree (Mesos' executor), so the program's end may be seen just before the bootstrap's signal.
SIGTERM_WAIT = 1.0
#: A coordinator restarted because TensorFlow says a peer was restarted under it: at most this many
#: times in STREAK_RESET seconds, each after PEER_SETTLE seconds (the rest of that restart gets there).
PEER_RESTARTS, PEER_SETTLE, PEER_GRACE = 5, 1.0, 1.0


def _log(message: str) -> None:
    sys.stderr.write(f"marathon-tf bootstrap: {message}\n")
    sys.stderr.flush()


def program_grace(grace_seconds: float) -> float:
    """Seconds the program gets between SIGTERM and SIGKILL when the task is stopped: the app's
    ``taskKillGracePeriodSeconds`` less a margin for the bootstrap to report and exit before
    Mesos' own SIGKILL (30 -> 25, 10 -> 7.5, at least 1)."""
    return max(1.0, grace_seconds - min(5.0, grace_seconds / 4))


class JobRestarts:
    """The restart half of :class:`~marathon_tf.task.bootstrap.Bootstrap` (see the module's docstring)."""

    sigterm_wait = SIGTERM_WAIT

    def _wire_keeper(self) -> None:
        """The job's counts in this task's status and the record; the keeper's own entries as events."""
        if not isinstance(self.policy, JobPolicy):
            return
        policy, keeper = self.policy, self.policy.keeper
        if keeper is not None:
            keeper.on_change = self._show_counts
            keeper.on_entry = lambda e: self.observer.events.record(
                T.PREEMPTED if e.kind == PREEMPTION else T.TASK_FAILED, f"{e.task}: {e.reason}", task=e.task)
        elif self.control is not None:
            self.control.counts = lambda: {k: v for k, v in (policy.counts or {}).items()
                                           if k in ("failures", "max_failures", "window_seconds", "preemptions",
                                                    "max_preemptions")} or None

    def _wire_ledger(self) -> None:
        """Connect the job's restart ledger to the rendezvous: the keeper publishes its group restart
        rounds in the leader's view and reads its status updates; a reporter posts to the leader
        (the deciding task). Without a rendezvous leader there are no rounds (a group-scope
        failure then relaunches the task)."""
        rendezvous = getattr(self, "rendezvous", None)
        if not hasattr(rendezvous, "restart_round") or not isinstance(self.policy, JobPolicy):
            return
        self.policy.rounds = True
        keeper, reporter = self.policy.keeper, self.policy.reporter
        if keeper is not None and hasattr(rendezvous, "listeners"):
            keeper.on_round = rendezvous.view.set_round
            rendezvous.listeners.append(keeper.observe_events)
            keeper.peers(lambda: self._named(rendezvous.view.peers))
        elif keeper is None:
            self.policy.rounds = hasattr(rendezvous, "leader_address")
        if reporter is not None and hasattr(rendezvous, "leader_address"):
            reporter.locate = lambda: rendezvous.leader_address

    def _ended(self, trainer: Trainer, code: int, hung: str | None) -> "Trainer | int":
        """The program ended by itself (or hung): what it was, what the policy says, the next program
        (or the bootstrap's exit code)."""
        round_ = self._new_round()
        if round_ is not None:  # its group is restarting: its end is the round's consequence
            self.observer.program_exited(code, f"training program exited with {code} while the job's group "
                                               f"restarts ({round_.get('cause')})", failure=False)
            trainer = self._group_restart(trainer, round_)
            return trainer if trainer is not None else 128 + (self._signum or signal.SIGTERM)
        if code == SIGTERM_EXIT and not hung and trainer.killed_by is None and self._stop.wait(self.sigterm_wait):
            return self._stopped(trainer)  # the task was killed: the program's 143 came from that SIGTERM
        why = trainer.infrastructure() if not hung else None
        kind = INFRASTRUCTURE if why else PREEMPTION if not hung and self._preempted(trainer, code) else FAILURE
        tail = trainer.stderr_tail() + (f"\n{hung}" if hung else "")
        outcome = self.policy.decide(code, stderr_tail=tail, kind=kind, generation=self._round[1],
                                     killed_by=trainer.killed_by, why=why)
        self._show_counts()
        self.observer.program_exited(code, outcome.reason, failure=outcome.counted, kind=outcome.kind)
        if not outcome.restart:
            return self._finished(code, outcome)
        if outcome.group:
            round_ = outcome.round if (outcome.round or {}).get("generation", 0) > self._round[1] else \
                self._await_round(2.0)
            if round_ is not None:
                _log(f"{outcome.reason}")
                trainer = self._group_restart(trainer, round_)
                return trainer if trainer is not None else 128 + (self._signum or signal.SIGTERM)
        trainer = self._restart_in_place(code, outcome)
        return trainer if trainer is not None else 128 + (self._signum or signal.SIGTERM)

    def _preempted(self, trainer: Trainer, code: int) -> bool:
        """Whether an exit code the job names (``restart.preemption_exit_codes``) is a preemption: 143
        only when the program died of a SIGTERM the bootstrap did not send (the bootstrap's own SIGTERM
        is :meth:`_stopped`); a program that exits 143 by itself failed."""
        if code not in self.ctx.preemption_exit_codes:
            return False
        return code != SIGTERM_EXIT or trainer.killed_by == signal.SIGTERM

    def _show_counts(self) -> None:
        """The deciding task shows the job's restart counts in its status (``ledger``)."""
        keeper = getattr(self.policy, "keeper", None)
        if keeper is not None:
            self.status.update(ledger=keeper.ledger.summary())

    def _stopped(self, trainer: Trainer) -> int:
        """The bootstrap was told to stop (SIGTERM: the task is killed, with its grace period): the
        program gets the signal at once and the grace, while the keeper is told (it decides whether
        it was a preemption, not when marathon-tf asked: the job's end, a new app version)."""
        signum = self._signum or signal.SIGTERM
        name = signal.Signals(signum).name if signum in signal.Signals._value2member_map_ else str(signum)
        telling = None
        if isinstance(self.policy, JobPolicy) and self.ctx.role != "tensorboard":
            telling = threading.Thread(target=self.policy.stopped, args=(None, self._round[1], f"stopped by {name} "
                                       f"(its task was killed)"), daemon=True, name="ledger-report")
            telling.start()
        _log(f"stopped by {name}: the training program gets it now and {self.grace:g} s to save and exit")
        code = trainer.stop(self.grace, signum)
        self.status.update(exit_code=code)
        _log(f"stopped by signal {signum}; training program exited with {code}")
        if telling is not None:
            telling.join(timeout=3.0)
        return code

    def _current_round(self) -> tuple[str | None, int]:
        restart_round = getattr(getattr(self, "rendezvous", None), "restart_round", None)
        if restart_round is None:
            return (None, 0)
        leader, round_ = restart_round()
        return leader, int((round_ or {}).get("generation") or 0)

    def _new_round(self) -> dict | None:
        """A group restart round newer than the one this program runs in (None: none); a new
        leader's rounds are taken as they are (its relaunch moved it: the spec is rewritten anyway)."""
        restart_round = getattr(getattr(self, "rendezvous", None), "restart_round", None)
        if restart_round is None:
            return None
        leader, round_ = restart_round()
        if leader != self._round[0]:
            self._round = (leader, int((round_ or {}).get("generation") or 0))
            return None
        if round_ and int(round_.get("generation") or 0) > self._round[1]:
            return round_
        return None

    def _await_round(self, seconds: float) -> dict | None:
        end = self.clock() + seconds
        while self.clock() < end and not self._stop.is_set():
            round_ = self._new_round()
            if round_ is not None:
                return round_
            self._stop.wait(0.05)
        return None

    def _group_restart(self, trainer: Trainer, round_: dict) -> Trainer | None:
        """Stop the program (SIGTERM, the round's grace) if it runs, then start it again in place
        after the round's delay, once every peer is there (None: stopped meanwhile)."""
        generation = int(round_.get("generation") or 0)
        cause = round_.get("cause") or "a member ended"
        if trainer.wait(timeout=0) is None:
            grace = min(self.grace, float(round_.get("grace") or self.grace))
            code = trainer.stop(grace)
            self.observer.program_exited(code, f"stopped for the job's group restart ({cause}; exit {code})",
                                         failure=False)
        self._round = (self._round[0], generation)
        delay = float(round_.get("delay") or 0)
        _log(f"the job's group restarts ({cause}, round {generation})"
             + (f"; restarting in {delay:g} s" if delay else ""))
        self.status.update(phase="running", last_error=f"the job's group restarts ({cause})")
        if delay and self._stop.wait(delay):
            return None
        return self._settle_and_start()

    def _peer_restarted_under(self) -> str | None:
        """The peer TensorFlow says was restarted under this program, when this program is a
        ParameterServerStrategy coordinator (the chief of a ``parameter_server`` job): it holds the
        peer's old incarnation and never takes it back (TF_RUNTIME.md: a ps + chief restarted while
        the old workers still reconnect "often failed"). At most :data:`PEER_RESTARTS` times in
        :data:`STREAK_RESET` s: past that the ordinary watchdog and failure handling apply."""
        if self.ctx.style != "parameter_server" or self.ctx.role != "chief":
            return None
        said = sorted(task for task, (_, why, _) in self.observer.tflog.signals().items() if why == RESTARTED)
        if not said:
            return None
        self._peer_restarts = [t for t in self._peer_restarts if self.clock() - t < STREAK_RESET]
        return said[0] if len(self._peer_restarts) < PEER_RESTARTS else None

    def _restart_for_restarted_peer(self, trainer: Trainer, peer: str) -> Trainer | None:
        """Stop the coordinator (SIGTERM, then SIGKILL after at most :data:`PEER_GRACE` s: it may save
        what it trained with the other workers, but a round of steps stuck on the restarted peer never
        ends) and start it again in place, once the peers are settled: a consequence of the peer's
        restart, never counted (None: stopped meanwhile)."""
        self._peer_restarts.append(self.clock())
        _log(f"TensorFlow says {peer} was restarted under the training program (it keeps {peer}'s old "
             f"incarnation and cannot take it back): restarting the program in place")
        code = trainer.stop(min(self.grace, PEER_GRACE))
        self.observer.program_exited(code, f"stopped: {peer} was restarted under it (exit {code})", failure=False)
        if self._stop.wait(PEER_SETTLE):  # the other peers of the same restart get there too
            return None
        return self._settle_and_start()

    def _restart_in_place(self, code: int, outcome: Outcome) -> Trainer | None:
        """Restart the program at the same host:port (None: stopped meanwhile): at once after a
        preemption, an infrastructure death or a first failure; after 1, 2, 4 ... s when it keeps
        failing (a run without a step that lasted less than :data:`STREAK_RESET` s)."""
        delay = 0.0
        if outcome.kind == FAILURE and outcome.counted:
            quick = self.clock() - self._run_started < STREAK_RESET and not self._stepped
            self._streak = self._streak + 1 if quick else 1
            first, cap = self.restart_backoff
            delay = 0.0 if self._streak <= 1 else min(cap, first * 2 ** (self._streak - 2))
        self.status.update(phase="running", exit_code=code, last_error=outcome.reason)
        _log(f"{outcome.reason}" + (f"; restarting in {delay:g} s" if delay else ""))
        if delay and self._stop.wait(delay):
            return None
        return self._settle_and_start()

    def _settle_and_start(self) -> Trainer | None:
        """Look the peers up once (a peer that moved meanwhile is in the new spec; one that is down is
        waited for: a restart with its stale address would hang), then start the program again."""
        me, peers = self._members()
        if peers and self._backend is not None and hasattr(self, "rendezvous"):
            try:
                moved = self.rendezvous.settle({p: self.endpoints[p] for p in peers}, self.ctx.startup_timeout)
            except Exception as e:  # a failing lookup must not stop the restart
                _log(f"could not re-check the peers before the restart: {e}")
                moved = {}
            if moved is None:
                return None
            if moved:
                self.endpoints.update(moved)
                self._render()
        restarts = self.status.add_restart()
        _log(f"restarting the training program in place (restart {restarts})")
        return self._start_trainer()


def job_lifecycle(ctx: TaskContext, environ: Mapping[str, str]) -> dict:
    """The job-aware ``policy`` and ``control`` for a task (see :mod:`marathon_tf.task.lifecycle`): the
    deciding task keeps the job's restart ledger (:class:`~marathon_tf.task.keeper.Keeper`), the
    others report to it (:class:`~marathon_tf.task.keeper.Reporter`, pointed at the rendezvous
    leader once it is known)."""
    n, window = ctx.restart_budget
    path = failures_path(ctx, environ)
    client = client_from_env(ctx, environ)
    control = JobControl(ctx, client, log=_log) if client is not None else None
    keeper = reporter = None
    if ctx.role != "tensorboard":
        if control is not None and is_decider(ctx):
            keeper = Keeper(ctx, Ledger(ctx.restart_budget, ctx.preemption_budget), client=client, path=path, log=_log)
            control.keeper = keeper
        elif not is_decider(ctx):
            reporter = Reporter(ctx, lambda: None)
    _log(f"restart budget: {n} failure(s) in {window:g} s and {ctx.preemption_budget[0]} preemption(s), job-wide ("
         + ("kept here" if keeper else f"kept by {decider_task(ctx.completion)}")
         + (f"; also in {path}" if path else "")
         + ")")
    budget = RestartBudget(n, window, task=ctx.task, path=path)
    return {"policy": JobPolicy(ctx, budget, environ, keeper=keeper, reporter=reporter), "control": control}
