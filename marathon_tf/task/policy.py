"""What a task's bootstrap does when its program ends: the decision table and its reasons (pure).

Marathon relaunches any task that exits, even with 0, so a training job ends only when one of
its bootstraps says so (:mod:`marathon_tf.task.jobcontrol` writes the job's record). This module is
the one place that maps an end of the program to what happens next: an :class:`Action`
(:func:`decide` is the whole table), the task's :class:`~marathon_tf.contract.phases.Phase` it leads
to, and the reason the task, the job's record and ``status`` give. The actions and where they lead
(docs/architecture.md, "Task states and transitions")::

    action          phase after    the task              the job
    finish          succeeded      stays up, healthy     Succeeded (recorded, every app at 0)
    await_workers   succeeded      stays up, healthy     Succeeded once every worker did (else Failed)
    stay            succeeded      stays up, healthy     -
    fail_job        failed         stays up, healthy     Failed
    restart         running        restarts the program in place (same host:port)
    group_restart   running        every member restarts its program in place (a keeper's round)
    exit            failed         exits with the code: Marathon relaunches the task elsewhere

Who decides what:

* **Success** is decided by the *decider* task (:func:`decider_task`: ``chief-0`` when the
  job's completion is ``chief``, else ``worker-0``). With completion ``chief``/``worker0`` its
  program's exit 0 ends the job; with ``all_workers`` it first waits for every other worker
  (:func:`marathon_tf.task.jobcontrol.await_workers`). Any other task whose program exits 0 just
  stays up (healthy) until the job is stopped.
* **A permanent exit code** (``restart.permanent_exit_codes``) fails the job at once; so do a
  program that cannot be executed (:data:`UNEXECUTABLE_CODES`: the shell's 127 "not found" and
  126 "not executable", also when the bootstrap itself could not spawn it; Python's exit 2 for a script
  that does not exist: :func:`cannot_run_program`), a logdir that is
  not a usable directory (:func:`marathon_tf.task.logdir.logdir_problem`) and Keras 3's
  ``model.fit`` failing under a multi-worker strategy (:func:`marathon_tf.contract.keras3.runtime_failure`).
* **Any other failure** counts against the job's restart budget (N failures within a sliding
  window), kept job-wide by the deciding task (:mod:`marathon_tf.task.ledger`,
  :mod:`marathon_tf.task.keeper`), or by the task alone when that one does not answer
  (:mod:`marathon_tf.task.budget`). More than N fails the job.
* **A full logdir** (:func:`marathon_tf.task.logdir.space_problem`: no room left on its filesystem) is
  an infrastructure fault, not the program's: not counted; the program starts again from its last
  checkpoint once there is room (:attr:`Decision.space`: the bootstrap waits for it, bounded, and
  fails the job with one line if it never comes). Before the first start it is a refusal.
* **Preemptions** (an exit code in ``restart.preemption_exit_codes``, 143 only after a SIGTERM;
  SIGTERM to the bootstrap that marathon-tf did not ask for) are restarted like failures but
  counted against ``restart.max_preemptions`` only; a program killed because the runner's
  machinery died (its pre-warmed interpreter) is not counted at all.
* **Within the budget** the restart scope follows what TensorFlow 2.21 can recover from
  (docs/restarts.md, :func:`restart_scope`): a chief/worker/evaluator
  program of ``tf1``, ``parameter_server`` and ``custom`` restarts *in place* (same host:port, so
  its peers take it back), at once the first time and then after :func:`marathon_tf.task.budget.backoff`.
  A ps, and any member of a ``multi_worker_mirrored`` job (no partial recovery), need the whole
  group (:func:`group_scope`): the keeper starts a *round* and every member's program restarts in
  place. Without a rendezvous leader (``MTF_RENDEZVOUS=direct``) such a task exits instead:
  Marathon relaunches it elsewhere, its peers restart with the rewritten spec.
* Tensorboard is not part of the job's outcome: it stays up after exit 0 and is relaunched
  by Marathon after any failure (never counted, never fails the job).

:class:`ExitPolicy` is the table for a task without a job around it; the job-aware
:class:`marathon_tf.task.jobpolicy.JobPolicy` records each end in the job's ledger first.
An elastic job's size is :mod:`marathon_tf.task.sizing`'s table.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from marathon_tf.contract import labels as L
from marathon_tf.contract import naming
from marathon_tf.contract.phases import Phase
from marathon_tf.contract.plan import Round
from marathon_tf.contract.restartscope import UNEXECUTABLE_CODES, group_scope
from marathon_tf.contract.shellexec import signal_name
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.task.ledger import FAILURE, INFRASTRUCTURE, PREEMPTION, Answer
from marathon_tf.task.tflog import is_noise

__all__ = ["Action", "Decision", "Ending", "ExitPolicy", "decide", "restart_scope", "group_scope", "decider_task",
           "is_decider", "reason", "ended_text", "tail_for_reason", "startup_reason", "UNEXECUTABLE_CODES",
           "SELF", "GROUP", "RELAUNCH"]

#: Python's own words when the script it was given does not exist (it exits 2 with them): as permanent as
#: 127, a relaunch in the same sandbox cannot make the file appear (a typo in the command, a missing fetch).
_NO_SCRIPT = re.compile(r"can't open file '?[^\n]*'?: \[Errno 2\] No such file or directory")


def cannot_run_program(code: int, stderr_tail: str) -> bool:
    """Whether the program could not be run at all: the shell's 126/127, or Python's exit 2 for a
    script that does not exist."""
    return code in UNEXECUTABLE_CODES or (code == 2 and _NO_SCRIPT.search(stderr_tail or "") is not None)
#: Who restarts after a program ended (:func:`restart_scope`).
SELF, GROUP, RELAUNCH = "self", "group", "relaunch"


class Action(str, enum.Enum):
    """What the bootstrap does after its program ended (see the module's table)."""

    FINISH = "finish"                # exit 0 of the decider: the job Succeeded
    AWAIT_WORKERS = "await_workers"  # exit 0 of the decider under all_workers: wait, then finish
    STAY = "stay"                    # exit 0 of any other task: stay up (Marathon would relaunch it)
    FAIL_JOB = "fail_job"            # permanent code or budget exceeded: the job Failed
    RESTART = "restart"              # restart the program in place (same host:port)
    GROUP_RESTART = "group_restart"  # every member restarts its program in place (a keeper's round)
    EXIT = "exit"                    # exit with the code: Marathon relaunches the task elsewhere

    def __str__(self) -> str:
        return self.value

    @property
    def phase(self) -> Phase:
        """The task's phase once the action is taken."""
        return _EFFECTS[self][0]

    @property
    def stays_up(self) -> bool:
        """The bootstrap keeps serving its status until stopped (a finished or parked task)."""
        return _EFFECTS[self][1]

    @property
    def healthy(self) -> bool:
        """What ``GET /health`` says meanwhile (a parked task must not be killed and relaunched)."""
        return _EFFECTS[self][2]

    @property
    def record(self) -> str | None:
        """The job's end this action records (``Succeeded`` / ``Failed``), or None."""
        return _EFFECTS[self][3]

    @property
    def restarts(self) -> bool:
        """The program starts again in this task."""
        return self in (Action.RESTART, Action.GROUP_RESTART)


#: action -> (the phase it leads to, stays up, healthy, the job's record)
_EFFECTS: Mapping[Action, tuple[Phase, bool, bool, str | None]] = {
    Action.FINISH: (Phase.SUCCEEDED, True, True, L.SUCCEEDED),
    Action.AWAIT_WORKERS: (Phase.SUCCEEDED, True, True, L.SUCCEEDED),
    Action.STAY: (Phase.SUCCEEDED, True, True, None),
    Action.FAIL_JOB: (Phase.FAILED, True, True, L.FAILED),
    Action.RESTART: (Phase.RUNNING, False, True, None),
    Action.GROUP_RESTART: (Phase.RUNNING, False, True, None),
    Action.EXIT: (Phase.FAILED, False, False, None),
}


@dataclass(frozen=True)
class Decision:
    """What the bootstrap does after its program ended: the :class:`Action`, and what goes with it.
    Everything else (phase, health, staying up, the job's record) follows from the action."""

    action: Action
    exit_code: int = 0      # the bootstrap's exit code (now, or when it is stopped)
    reason: str | None = None
    kind: str = FAILURE     # failure | preemption | infrastructure (marathon_tf.task.ledger)
    counted: bool = True    # counted against the job's budget for its kind
    round: Round | None = None  # the group restart round the keeper started
    space: str | None = None  # the logdir's filesystem is full (why): wait for room before starting again

    @property
    def phase(self) -> Phase:
        return self.action.phase

    @property
    def stay_up(self) -> bool:
        return self.action.stays_up

    @property
    def healthy(self) -> bool:
        return self.action.healthy

    @property
    def finish(self) -> str | None:
        """The job's end to record (``labels.SUCCEEDED`` / ``labels.FAILED``), or None."""
        return self.action.record

    @property
    def await_workers(self) -> bool:
        """Before finishing: wait until every other worker succeeded."""
        return self.action is Action.AWAIT_WORKERS

    @property
    def restart(self) -> bool:
        """The program restarts in this task (in place, alone or with its group)."""
        return self.action.restarts

    @property
    def group(self) -> bool:
        """Every member of the job restarts (a keeper's round)."""
        return self.action is Action.GROUP_RESTART


# --- the table -------------------------------------------------------------------------------------


def decider_task(completion: str) -> str:
    """The task whose program's exit 0 ends the job: ``chief-0`` for ``chief``, else ``worker-0``
    (:func:`marathon_tf.contract.naming.deciding_task`, the one rule both sides read)."""
    return naming.deciding_task(completion)


def is_decider(ctx: TaskContext) -> bool:
    return ctx.task == decider_task(ctx.completion)


def restart_scope(style: str, role: str, members: int = 2, rounds: bool = False) -> str:
    """Who restarts after ``role``'s program ended: :data:`SELF` (in place), :data:`GROUP` (every
    member, in place: a keeper's round) or :data:`RELAUNCH` (the bootstrap exits; without ``rounds``,
    what a group-scope task does). ``members``: the job's cluster members."""
    if group_scope(style, role, members):
        return GROUP if rounds else RELAUNCH
    return SELF


def decide(*, style: str, role: str, code: int, decider: bool, completion: str,
           permanent: bool, failures: int, max_failures: int, kind: str = FAILURE, preemptions: int = 0,
           max_preemptions: int = 1 << 30, scope: str | None = None) -> Action:
    """What the bootstrap does after its program exited with ``code``.

    ``decider``: this task decides the job's success; ``permanent``: ``code`` is one of the
    job's permanent exit codes; ``kind``: ``failure``, ``preemption`` or ``infrastructure``;
    ``failures``/``preemptions``: the job's counted ones within their windows *including this
    one* (0 for exit 0); the job fails when one exceeds its maximum. ``scope``:
    :func:`restart_scope` (default: without rounds, as for two members).
    """
    if role == "tensorboard":
        return Action.STAY if code == 0 else Action.EXIT
    if code == 0:
        if not decider:
            return Action.STAY
        return Action.AWAIT_WORKERS if completion == "all_workers" else Action.FINISH
    if kind == FAILURE and (permanent or failures > max_failures):
        return Action.FAIL_JOB
    if kind == PREEMPTION and preemptions > max_preemptions:
        return Action.FAIL_JOB
    scope = scope or restart_scope(style, role)
    return {SELF: Action.RESTART, GROUP: Action.GROUP_RESTART}.get(scope, Action.EXIT)


# --- the reasons -------------------------------------------------------------------------------------


def ended_text(code: int, killed_by: int | None = None) -> str:
    """``exited with 3`` / ``was killed by SIGKILL (exit 137)``."""
    if killed_by:
        return f"was killed by {signal_name(killed_by)} (exit {code})"
    return f"exited with {code}"


#: The most a failure's reason carries of one line of the program's stderr (characters; a longer one is cut
#: with "…": a tensor a program printed whole, a Keras dataset's repr).
TAIL_LINE_CHARS = 300
#: The most a failure's reason carries of the program's stderr in all (its newest lines that fit).
TAIL_CHARS = 1000


def tail_for_reason(stderr_tail: str, lines: int = 5) -> str:
    """The program's last meaningful stderr lines, joined (TensorFlow's start-up lines, which every
    run prints, are left out: :func:`marathon_tf.task.tflog.is_noise`). The one place that caps what
    a failure's reason (the record, the events, the ledger, the bootstrap's log) carries of a
    program's stderr: each line at most :data:`TAIL_LINE_CHARS`, all at most :data:`TAIL_CHARS`."""
    kept = [line.strip() for line in stderr_tail.splitlines() if line.strip() and not is_noise(line)][-lines:]
    cut = [line if len(line) <= TAIL_LINE_CHARS else line[:TAIL_LINE_CHARS - 1] + "…" for line in kept]
    shown: list[str] = []
    for line in reversed(cut):
        if shown and sum(len(x) + 3 for x in shown) + len(line) > TAIL_CHARS:
            break
        shown.insert(0, line)
    return " | ".join(shown) if shown else "(no stderr)"


def _with_tail(text: str, tail: str) -> str:
    """``exited with 3: ValueError: boom``, or ``exited with 3 (no stderr)``."""
    if tail == "(no stderr)":
        return f"{text} {tail}" if text else f" {tail}"
    return f"{text}: {tail}"


def startup_reason(timeout: float, missing: Mapping[str, str]) -> str:
    """``startup deadline (300s) passed; missing: worker-1 (NXDOMAIN), ps-0 (no SRV record)``."""
    shown = [f"{name} ({detail})" for name, detail in sorted(missing.items())]
    if len(shown) > 20:
        shown = shown[:20] + [f"and {len(shown) - 20} more"]
    return f"startup deadline ({timeout:g}s) passed; missing: " + (", ".join(shown) or "?")


@dataclass(frozen=True)
class Ending:
    """One end of a task's program, as its reasons tell it."""

    task: str
    code: int
    kind: str = FAILURE
    killed_by: int | None = None  # the signal that ended it
    why: str | None = None        # an infrastructure death: what died with it
    tail: str = "(no stderr)"     # its last meaningful stderr lines (:func:`tail_for_reason`), or Keras 3's line
    unusable: str | None = None   # the logdir's problem (permanent)
    unexecutable: bool = False    # it could not be executed (permanent)
    permanent: bool = False       # no restart can help: a permanent code, or one of the two above
    space: str | None = None      # the logdir's filesystem is full (not the program's fault: not counted)
    peer: str | None = None       # the frozen peer it hung on (a ps): the job's group restarts for it

    @property
    def ended(self) -> str:
        return ended_text(self.code, self.killed_by)

    @property
    def said(self) -> str:
        """What the job's ledger keeps of it."""
        if self.why:
            return f"{self.why}; {self.ended}"
        if self.kind == PREEMPTION:
            return f"{self.ended} (a preemption exit code)"
        return _with_tail(self.ended, self.tail)


def reason(action: Action, ending: Ending, answer: Answer | None = None) -> str | None:
    """Why the bootstrap takes ``action`` after ``ending``, given the job's counts (``answer``; None:
    the end was not counted at all: an exit 0, a tensorboard). None for a success."""
    if answer is None:
        return f"training program {ending.ended}; exiting so Marathon relaunches the task (not counted)" \
            if action is Action.EXIT else None
    task, code, kind, ended, tail = ending.task, ending.code, ending.kind, ending.ended, ending.tail
    if action is Action.FAIL_JOB:
        if ending.unusable:
            return f"{task} failed (exit {code}): {ending.unusable}"
        if ending.unexecutable:
            return f"{task} could not run its program (exit {code}, permanent): {tail}"
        if ending.permanent:
            return f"{task} exited with {code} (permanent): {tail}"
        if kind == PREEMPTION:
            return (f"{task} was preempted {answer.preemptions} times (restart.max_preemptions "
                    f"{answer.max_preemptions}); last: {ending.said}")
        if answer.alone:
            return (f"{task} failed {answer.failures} times in {answer.window_seconds:g} s, more than "
                    f"restart.max_failures ({answer.max_failures}; counted by the task alone: the deciding task "
                    f"did not answer); last: " + _with_tail(ended, tail))
        return (f"the job's programs failed {answer.failures} times in {answer.window_seconds:g} s, more than "
                f"restart.max_failures ({answer.max_failures}); last: " + _with_tail(f"{task} {ended}", tail))
    then = {Action.RESTART: "restarting it in place", Action.GROUP_RESTART: "the job's group restarts"}.get(
        action, "exiting so Marathon relaunches the task")
    if ending.space:
        return f"training program {ended}: {ending.space} (not counted: infrastructure); {then} from the last " \
               f"checkpoint once there is room"
    whose = "counted by the task alone: the deciding task did not answer" if answer.alone else "job-wide"
    if not answer.counted:
        budget = "not counted" + ("" if kind == INFRASTRUCTURE else ": a consequence of another task's end")
    elif kind == PREEMPTION:
        budget = f"preemption {answer.preemptions} of at most {answer.max_preemptions}, {whose}"
    elif kind == INFRASTRUCTURE:
        budget = "not counted: the runner's machinery"
    else:
        budget = f"failure {answer.failures} of at most {answer.max_failures} in {answer.window_seconds:g} s, {whose}"
    what = f"was killed: {ending.why}" if kind == INFRASTRUCTURE else "was preempted" if kind == PREEMPTION else ended
    detail = "" if kind == INFRASTRUCTURE else _with_tail("", tail) if kind == FAILURE else f" ({ended})"
    if ending.peer and action is Action.GROUP_RESTART:
        then = f"the job's group restarts, {ending.peer} with it (its program does not answer)"
    return f"training program {what} ({budget}); {then}{detail}"


# --- a task without a job ---------------------------------------------------------------------------


class ExitPolicy:
    """The program exited with ``code``: what now, for a task without a job around it?

    * 0: :attr:`Action.STAY`: succeeded; stay up (Marathon relaunches any task that exits, even
      with 0) and exit 0 when stopped on purpose.
    * a code in ``permanent_exit_codes``: :attr:`Action.FAIL_JOB`: failed for good; stay up (no
      relaunch loop), and stay *healthy* so Marathon's health check does not relaunch it either.
    * anything else: :attr:`Action.EXIT`: failed; exit with the code so Marathon relaunches the task.
    """

    def __init__(self, permanent_exit_codes: Sequence[int] = ()):
        self.permanent_exit_codes = frozenset(int(c) for c in permanent_exit_codes)

    def decide(self, code: int, *, stderr_tail: str = "", **what: object) -> Decision:
        """``stderr_tail``: the program's last stderr lines; ``what``: what the bootstrap knows of the
        end (its kind, the signal; :class:`marathon_tf.task.jobpolicy.JobPolicy` uses them, this one does not)."""
        if code == 0:
            return Decision(Action.STAY)
        if code in self.permanent_exit_codes:
            return Decision(Action.FAIL_JOB, code, f"training program exited with permanent code {code}: not retried")
        return Decision(Action.EXIT, code, f"training program exited with code {code}")
