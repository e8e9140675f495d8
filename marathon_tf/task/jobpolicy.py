"""The exit policy of a task of a job: each end of its program is recorded in the job's ledger, and the
decision (:mod:`marathon_tf.task.policy`) is taken on the job's counts.

``keeper`` (the deciding task, :class:`marathon_tf.task.keeper.Keeper`) or ``reporter`` (any other,
:class:`marathon_tf.task.keeper.Reporter`) records each end and answers with the job's counts
(:class:`~marathon_tf.task.ledger.Answer`); without an answer the task's own
:class:`~marathon_tf.task.budget.RestartBudget` counts. What the end was (its kind, the signal, what
died with it) is the bootstrap's to say (:mod:`marathon_tf.task.restarts`); what is permanent (a
permanent code, an unexecutable program, an unusable logdir, Keras 3's multi-worker failure) is
found here, and so is a logdir whose filesystem is full (:func:`~marathon_tf.task.logdir.space_problem`):
infrastructure, not counted, the program waits for room (:attr:`~marathon_tf.task.policy.Decision.space`).
This module never imports TensorFlow.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from marathon_tf.contract import keras3, naming
from marathon_tf.contract.plan import PlannedStop
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.task.budget import RestartBudget
from marathon_tf.task.keeper import Keeper, Reporter
from marathon_tf.task.ledger import FAILURE, INFRASTRUCTURE, PREEMPTION, Answer, Entry
from marathon_tf.task.logdir import logdir_problem, space_problem
from marathon_tf.task.policy import (
    GROUP,
    RELAUNCH,
    Action,
    Decision,
    Ending,
    ExitPolicy,
    cannot_run_program,
    decide,
    group_scope,
    is_decider,
    reason,
    restart_scope,
    tail_for_reason,
)

__all__ = ["JobPolicy"]


class JobPolicy(ExitPolicy):
    """:class:`~marathon_tf.task.policy.ExitPolicy` for a task of a job: :func:`~marathon_tf.task.policy.decide`
    on the job's counts (see the module).

    ``rounds`` (of :meth:`decide` and :meth:`stopped`): the task's rendezvous carries the keeper's group restart
    rounds (the restarter knows: :attr:`marathon_tf.task.restarts.Restarter.rounds`); without them a group-scope
    task is relaunched instead. ``decide`` records (a side effect) and returns the
    :class:`~marathon_tf.task.policy.Decision`;
    after a job-ending failure the task stays up and *healthy* (Marathon's health check must not
    kill and relaunch a parked task). ``counts``: the job's counts as the last answer said.
    """

    def __init__(self, ctx: TaskContext, budget: RestartBudget, environ: Mapping[str, str] | None = None, *,
                 keeper: Keeper | None = None, reporter: Reporter | None = None,
                 wall: Callable[[], float] = time.time, planned: Callable[[], PlannedStop | None] | None = None):
        super().__init__(ctx.permanent_exit_codes)
        self.ctx, self.budget, self.keeper, self.reporter, self.wall = ctx, budget, keeper, reporter, wall
        #: why this task's own stop is under way by marathon-tf's doing (its app removed, a new configuration
        #: with its cluster, the job's end: :func:`marathon_tf.task.keeper.stop_asked`), or None; None: not asked
        self.planned = planned
        self.environ = environ  # None: the logdir is not re-checked after a failure
        self.task_id = (environ or {}).get("MESOS_TASK_ID") or ""
        self.app_version = (environ or {}).get("MARATHON_APP_VERSION") or None
        self._seq = 0
        self.counts: Answer | None = None

    def entry(self, kind: str, code: int | None, reason: str, *, final: bool = False, peer: str = "") -> Entry:
        self._seq += 1
        return Entry(id=f"{self.task_id or self.ctx.task}#{self._seq}", task=self.ctx.task, kind=kind,
                     time=self.wall(), code=code, reason=reason[:2000], task_id=self.task_id, final=final, peer=peer)

    def _count(self, entry: Entry, generation: int | None, group: bool) -> Answer:
        """The job's counts after ``entry`` (the keeper's answer, or this task's own)."""
        answer = None
        if self.keeper is not None:
            answer = self.keeper.record(entry, generation=generation, group=group)
        elif self.reporter is not None:
            answer = self.reporter.report(entry, generation=generation, group=group)
        if answer is None:  # alone: this task's own count (and the logdir's file)
            answer = self.budget.take(entry, self.ctx.preemption_budget)
        self.counts = answer
        return answer

    def stopped(self, code: int | None, generation: int | None, reason: str, *, rounds: bool = False) -> None:
        """The bootstrap was stopped (SIGTERM) and stops its program: tell the keeper, which decides
        whether it was a preemption (not when marathon-tf asked: the job's end, a new app version)."""
        entry = self.entry(PREEMPTION, code, reason, final=True)
        group = group_scope(self.ctx.style, self.ctx.role, len(self.ctx.members())) and rounds
        if self.keeper is not None:
            self.keeper.stopped(entry, self.app_version, generation=generation, group=group)
        elif self.reporter is not None:
            self.reporter.report(entry, generation=generation, group=group, stopped=True,
                                 app_version=self.app_version)

    # ignore[override]: ExitPolicy.decide's **what stands for exactly these keywords (its docstring)
    def decide(self, code: int, *, stderr_tail: str = "", kind: str = FAILURE,  # type: ignore[override]
               generation: int | None = None, killed_by: int | None = None, why: str | None = None,
               peer: str | None = None, rounds: bool = False) -> Decision:
        """``kind``: what the bootstrap knows (``preemption``: a preemption exit code it did not
        cause; ``infrastructure``: ``why`` says what died); ``generation``: the restart round the
        program ran in; ``killed_by``: the signal that ended it; ``peer``: the peer whose frozen program
        this one hung on (a ps, :func:`marathon_tf.task.peers.frozen_ps`): where the job has rounds, the
        failure is counted once and the job's group restarts, that peer with it, instead of this program
        alone (it would only hang on the frozen peer again)."""
        ctx = self.ctx
        if code == 0 or ctx.role == "tensorboard":  # nothing to count
            action = decide(style=ctx.style, role=ctx.role, code=code, decider=is_decider(ctx),
                            completion=ctx.completion, permanent=False, failures=0, max_failures=0)
            return Decision(action, code, reason(action, Ending(ctx.task, code, killed_by=killed_by)))
        space = space_problem(ctx, self.environ, stderr_tail) if kind == FAILURE and self.environ is not None \
            else None
        if space:  # the disk is full: infrastructure that usually passes (not counted; waits for room)
            kind, why = INFRASTRUCTURE, space
        unusable = logdir_problem(ctx, self.environ) if kind == FAILURE and self.environ is not None else None
        unexecutable = kind == FAILURE and cannot_run_program(code, stderr_tail)
        keras = keras3.runtime_failure(stderr_tail) if kind == FAILURE else None  # no relaunch fixes it
        permanent = kind == FAILURE and (code in self.permanent_exit_codes or unexecutable or unusable is not None
                                         or keras is not None)
        ending = Ending(ctx.task, code, kind, killed_by, why, keras or tail_for_reason(stderr_tail), unusable,
                        unexecutable, permanent, space)
        scope = restart_scope(ctx.style, ctx.role, len(ctx.members()), rounds)
        role = (naming.parse_task_name(peer or "") or ("",))[0]
        peer = peer if kind == FAILURE and not permanent and rounds and \
            group_scope(ctx.style, role, len(ctx.members())) else None
        if peer:
            scope = GROUP
            ending = replace(ending, peer=peer)
        asked = self.planned() if kind == FAILURE and not permanent and self.planned is not None else None
        stopping = asked.reason if asked is not None else None
        if stopping:  # a peer's planned stop ended it (the ps of a job being deleted): nothing to count or report
            action = decide(style=ctx.style, role=ctx.role, code=code, decider=is_decider(ctx),
                            completion=ctx.completion, permanent=False, failures=0, max_failures=0, scope=scope)
            then = {Action.RESTART: "restarting it in place", Action.GROUP_RESTART: "the job's group restarts"}.get(
                action, "exiting")
            return Decision(action, code, f"training program {ending.ended} while its task is being stopped "
                                          f"({stopping.text}): not counted; {then}", kind=kind, counted=False)
        entry = self.entry(kind, code, ending.said, final=scope == RELAUNCH and not permanent, peer=peer or "")
        answer = self._count(entry, generation, scope == GROUP)
        counted = answer.counted
        action = decide(style=ctx.style, role=ctx.role, code=code, decider=is_decider(ctx), completion=ctx.completion,
                        permanent=permanent, failures=answer.failures if counted else 0,
                        max_failures=answer.max_failures, kind=kind, preemptions=answer.preemptions if counted else 0,
                        max_preemptions=answer.max_preemptions, scope=scope)
        round_ = answer.round if action is Action.GROUP_RESTART else None
        return Decision(action, code, reason(action, ending, answer), kind=kind,
                        counted=True if action is Action.FAIL_JOB else counted, round=round_, space=space)
