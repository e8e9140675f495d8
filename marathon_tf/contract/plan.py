"""A job's plan: what the deciding task decided, as typed values with one wire form.

The deciding task (chief-0, else worker-0) decides what the job's tasks do together: which tasks train
(:class:`~marathon_tf.contract.cluster_spec.Membership`), the *round* under way (:class:`Round`: every member's
program restarts after a failure, an elastic job changes its size, …), the restart ledger's counts
(:class:`Counts`) and, once it is over, the job's verdict. :class:`JobPlan` holds all of it at one generation.

* :class:`RoundKind` says what a round does: ``start``, ``restart`` (the members' programs stop and start again in
  place), ``resize`` (an elastic job's size changes: only the tasks the round names restart), ``save``, ``hold``,
  ``stop``.
* :class:`RoundCause` says what decided it (a member's failure, preemption or infrastructure death; an elastic
  change: ``form``, ``grow``, ``shrink``, ``below_min``; a save asked for; a planned stop; moved peers). Code compares
  these values, never the prose of :attr:`Round.cause` (for people: logs, events).
* :class:`StopReason` says why a task's stop was marathon-tf's own doing (the job ended, its app was removed, its
  app has a new configuration): its value is the stable words people read in events and ``status``
  (:attr:`StopReason.text`); code compares the members.

The wire form is defined once, here: :meth:`Round.to_wire` / :meth:`Round.from_wire` and :meth:`JobPlan.to_wire` /
:meth:`JobPlan.from_wire` (a plan's round travels as its :meth:`Round.to_wire`). Reading is tolerant of keys it does
not know (a newer writer may add some) and strict on the shapes of those it does: a wrong one is a
:class:`PlanError` whose message is one line naming the field. Every value is frozen: a change is a new value
(:func:`dataclasses.replace`).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from marathon_tf.contract import timeline as T
from marathon_tf.contract.cluster_spec import Membership
from marathon_tf.contract.labels import JobState

__all__ = ["RoundKind", "RoundCause", "StopReason", "PlannedStop", "Round", "Counts", "JobPlan", "PlanError", "FORMAT",
           "VERDICTS"]

#: The plan's wire format; a reader takes any plan of this format or an older one.
FORMAT = 1


class PlanError(ValueError):
    """A wire form that is not a plan or a round: its message is one line naming the field."""


class _Word(str, enum.Enum):
    """A ``str`` that compares equal to its value and shows as it (in f-strings and JSON)."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class RoundKind(_Word):
    """What a round does to the job's programs."""

    START = "start"      # the job's programs start (a formed membership)
    RESTART = "restart"  # every member's program stops and starts again in place (a keeper's group restart)
    RESIZE = "resize"    # an elastic job's size changes: the tasks the round names restart with the new membership
    SAVE = "save"        # the deciding task's program saves a checkpoint now
    HOLD = "hold"        # the job's training is held at a checkpoint (a save before a stop)
    STOP = "stop"        # the job's programs stop (its end, a planned stop)


class RoundCause(_Word):
    """What decided a round (compared by code; :attr:`Round.cause` says it in words)."""

    FAILURE = "failure"                # a member's program failed (marathon_tf.task.ledger's kinds)
    PREEMPTION = "preemption"          # a member was preempted (or stopped by someone else)
    INFRASTRUCTURE = "infrastructure"  # the machinery around a member's program died
    FORM = "form"                      # an elastic job formed
    GROW = "grow"                      # standbys were taken in
    SHRINK = "shrink"                  # members were let go
    BELOW_MIN = "below_min"            # fewer than the minimum are left: every program waits
    ASKED = "asked"                    # a save someone asked for (``checkpoint``, ``scale``)
    STOP = "stop"                      # a planned stop of a task
    MOVED = "moved"                    # peers moved: the job restarts with the new cluster spec


class StopReason(_Word):
    """Why a task's stop was marathon-tf's own doing (:func:`marathon_tf.marathon.jobstate.planned_stop`). Its value
    is the words people have always read in a planned restart's event and a task's ``last_error`` (``status``,
    ``events``, ``-o json``): stable, and shown as they are."""

    JOB_ENDED = "the job ended"                              # the job's record is written: stopped for good
    APP_REMOVED = "its app was removed"                      # ``delete``
    NEW_CONFIGURATION = "its app has a new configuration"    # ``scale``, a re-deploy

    @property
    def text(self) -> str:
        """The words people read (logs, events, a task's ``last_error``)."""
        return self.value

    @property
    def final(self) -> bool:
        """The job's programs are gone for good (nothing is left to save): the job ended or its app was removed."""
        return self in (StopReason.JOB_ENDED, StopReason.APP_REMOVED)


@dataclass(frozen=True)
class PlannedStop:
    """What Marathon says of a task's stop that was marathon-tf's own doing (read once per stop:
    :func:`marathon_tf.task.keeper.stop_asked`): why, and the cluster (role → count) the task's app has now
    (its ``MTF_CLUSTER``; None: the app is gone, or it does not say)."""

    reason: StopReason
    cluster: Mapping[str, int] | None = None

    def restart(self, before: Mapping[str, int]) -> tuple[str, str] | None:
        """The planned restart this stop is for a task that ran with the cluster ``before``
        (:data:`marathon_tf.contract.timeline.PLANNED`): ``("scale", "2 → 3 workers")`` when the new
        configuration's counts differ, else ``("redeploy", "")``; None for a stop for good (the job's end,
        its app removed: nothing starts again)."""
        if self.reason is not StopReason.NEW_CONFIGURATION:
            return None
        return T.planned_for(before, self.cluster)


#: The verdicts a plan can carry (the job's record: :class:`~marathon_tf.contract.labels.JobState`).
VERDICTS = (JobState.SUCCEEDED, JobState.FAILED, JobState.NOT_PLACED)


# --- reading helpers: one line naming the field ------------------------------------------------------------
def _mapping(data: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise PlanError(f"{what}: expected an object, got {type(data).__name__}")
    return data


def _int(data: Mapping[str, Any], key: str, what: str, *, default: int | None = None, least: int = 0) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanError(f"{what}.{key}: expected an integer, got {_shown(value)}")
    if value < least:
        raise PlanError(f"{what}.{key}: expected at least {least}, got {value}")
    return value


def _number(data: Mapping[str, Any], key: str, what: str, *, default: float | None = None,
            optional: bool = False) -> float | None:
    value = data.get(key, default)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise PlanError(f"{what}.{key}: expected a number of seconds (0 or more), got {_shown(value)}")
    return float(value)


def _enum(data: Mapping[str, Any], key: str, what: str, cls: type[_Word]) -> Any:
    value = data.get(key)
    try:
        return cls(value)
    except ValueError:
        choices = ", ".join(m.value for m in cls)
        raise PlanError(f"{what}.{key}: expected one of {choices}, got {_shown(value)}") from None


def _shown(value: Any) -> str:
    text = repr(value)
    return (text[:60] + "…") if len(text) > 60 else text


# --- the values ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Round:
    """One round the deciding task started: its ``generation`` (one up from the last round's), what it does
    (``kind``), what decided it (``reason``) and in words (``cause``); ``delay``: seconds the members wait before
    their programs start again (a failure streak's backoff); ``grace``: seconds a stopping program gets (None: the
    task's own grace; 0: at once); ``deadline``: wall-clock seconds by which the round is over (None: none);
    ``restart``: the tasks whose programs the round stops (None: every member)."""

    generation: int
    kind: RoundKind
    reason: RoundCause
    cause: str = ""
    delay: float = 0.0
    grace: float | None = None
    deadline: float | None = None
    restart: tuple[str, ...] | None = None

    def follows(self, task: str) -> bool:
        """Whether ``task``'s program stops for this round."""
        return self.restart is None or task in self.restart

    @property
    def resize(self) -> bool:
        """An elastic job's size change (the job's phase is ``resizing`` meanwhile)."""
        return self.kind is RoundKind.RESIZE

    def to_wire(self) -> dict[str, Any]:
        """The round as JSON (every task reads it back with :meth:`from_wire`)."""
        out: dict[str, Any] = {"generation": self.generation, "kind": self.kind.value, "reason": self.reason.value,
                               "cause": self.cause, "delay": self.delay, "grace": self.grace}
        if self.deadline is not None:
            out["deadline"] = self.deadline
        if self.restart is not None:
            out["restart"] = list(self.restart)
        return out

    @classmethod
    def from_wire(cls, data: Any, what: str = "round") -> Round:
        """Read one back; :class:`PlanError` (one line) for a wrong shape, unknown keys ignored."""
        data = _mapping(data, what)
        restart = data.get("restart")
        if restart is not None and (not isinstance(restart, list) or not all(isinstance(t, str) for t in restart)):
            raise PlanError(f"{what}.restart: expected a list of task names, got {_shown(restart)}")
        cause = data.get("cause", "")
        if not isinstance(cause, str):
            raise PlanError(f"{what}.cause: expected a string, got {_shown(cause)}")
        return cls(generation=_int(data, "generation", what, least=1), kind=_enum(data, "kind", what, RoundKind),
                   reason=_enum(data, "reason", what, RoundCause), cause=cause,
                   delay=_number(data, "delay", what, default=0.0) or 0.0,
                   grace=_number(data, "grace", what, optional=True),
                   deadline=_number(data, "deadline", what, optional=True),
                   restart=tuple(restart) if restart is not None else None)


@dataclass(frozen=True)
class Counts:
    """The restart ledger's counts (:class:`marathon_tf.task.ledger.Answer`'s): counted failures and preemptions
    within their windows, and the budgets."""

    failures: int = 0
    max_failures: int = 0
    window_seconds: float = 0.0
    preemptions: int = 0
    max_preemptions: int = 0

    def to_wire(self) -> dict[str, Any]:
        return {"failures": self.failures, "max_failures": self.max_failures, "window_seconds": self.window_seconds,
                "preemptions": self.preemptions, "max_preemptions": self.max_preemptions}

    @classmethod
    def from_wire(cls, data: Any, what: str = "ledger") -> Counts:
        data = _mapping(data, what)
        return cls(failures=_int(data, "failures", what, default=0),
                   max_failures=_int(data, "max_failures", what, default=0),
                   window_seconds=_number(data, "window_seconds", what, default=0.0) or 0.0,
                   preemptions=_int(data, "preemptions", what, default=0),
                   max_preemptions=_int(data, "max_preemptions", what, default=0))


@dataclass(frozen=True)
class JobPlan:
    """The job's plan at one ``generation`` (see the module): who trains (``membership``; None: a fixed-size job,
    every member of its cluster spec), the round under way (``round``; None: none), the ledger's ``counts``, the
    job's ``verdict`` once it is over (one of :data:`VERDICTS`; None: it runs), and whether the deciding task's
    program is ``restoring`` the job's checkpoint (started from one, no step yet): a program that trains on its
    own (a TF1 worker) and started meanwhile would train on what the restore then overwrites."""

    generation: int = 0
    membership: Membership | None = None
    round: Round | None = None
    counts: Counts = field(default_factory=Counts)
    verdict: JobState | None = None
    restoring: bool = False

    def to_wire(self) -> dict[str, Any]:
        """The plan as JSON: the one wire form (:meth:`from_wire` reads it back)."""
        return {"format": FORMAT, "generation": self.generation,
                "membership": self.membership.to_dict() if self.membership is not None else None,
                "round": self.round.to_wire() if self.round is not None else None,
                "ledger": self.counts.to_wire(),
                "verdict": self.verdict.value if self.verdict is not None else None,
                "restoring": self.restoring}

    @classmethod
    def from_wire(cls, data: Any) -> JobPlan:
        """Read one back; :class:`PlanError` (one line) for a wrong shape or a newer format, unknown keys ignored."""
        data = _mapping(data, "plan")
        version = _int(data, "format", "plan", default=FORMAT, least=1)
        if version > FORMAT:
            raise PlanError(f"plan.format: {version} is newer than this marathon-tf reads ({FORMAT})")
        membership = None
        if data.get("membership") is not None:
            try:
                membership = Membership.from_dict(data["membership"])
            except (AttributeError, TypeError, ValueError, KeyError):  # members/vacant of another shape
                membership = None
            if membership is None:
                raise PlanError(f"plan.membership: not a membership: {_shown(data['membership'])}")
        round_ = Round.from_wire(data["round"], "plan.round") if data.get("round") is not None else None
        verdict = data.get("verdict")
        if verdict is not None and verdict not in [v.value for v in VERDICTS]:
            raise PlanError(f"plan.verdict: expected one of {', '.join(v.value for v in VERDICTS)} or null, "
                            f"got {_shown(verdict)}")
        restoring = data.get("restoring", False)
        if not isinstance(restoring, bool):
            raise PlanError(f"plan.restoring: expected true or false, got {_shown(restoring)}")
        return cls(generation=_int(data, "generation", "plan", default=0), membership=membership, round=round_,
                   counts=Counts.from_wire(data["ledger"] if data.get("ledger") is not None else {}, "plan.ledger"),
                   verdict=JobState(verdict) if verdict is not None else None, restoring=restoring)
