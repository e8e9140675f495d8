"""Phases: a task's state as its bootstrap reports it, and the milestones of a job's start (pure).

:class:`Phase` is the one vocabulary of a bootstrap's state. The task side sets it
(:mod:`marathon_tf.task.bootstrap`, from the decision of :mod:`marathon_tf.task.policy`) and shows it
at ``GET /status`` (``"phase"``), ``/health``, ``/progress`` and, in words of its own
(:meth:`Phase.metric`), in ``marathon_tf_phase{phase}`` of ``/metrics``; the user's side reads it
from ``/status`` (``status``' wide output, the waits it names, whether a job is past its
rendezvous). The states and what leads from one to the next::

    discovering ──► running ──► succeeded      (exit 0: the job finished, or this task waits for it)
                     │ ▲ ▲  └─► failed         (the job failed, or the task exits for a relaunch)
                     │ │ └───┘ restart in place, or with the job's group
                     ▼ │
                    saving ───► (stopped)      (a save round: the program saves, or is held for one;
                                                back to running, or a planned stop follows)
    discovering ──► failed                     (an unusable logdir, GPUs it cannot see, no peers)
    discovering ──► standby ──► running        (an elastic job's worker placed while the job does not
                     ▲  │                       take it in yet; a member while the job waits below its
                     │  ▼                       minimum: taken in at the next size change)
    running ──► resizing ──► running | standby (the job changes size: the program restarts with the
                                                new cluster spec, or waits outside it)

A task that succeeded or failed for good stays up (parked) until Marathon stops it; one that exits
for a relaunch starts again, in a new task, at ``discovering``. ``saving`` is a save round
(:mod:`marathon_tf.task.saving`, docs/restarts.md): the deciding task's program saves a checkpoint
on request (``marathon-tf checkpoint``, before every planned stop), the job's other trainers are held
meanwhile when the round precedes a stop; it goes back to ``running``, or the task is stopped.

:class:`StartPhase` names the milestones of a job's start in its timeline
(:func:`marathon_tf.contract.timeline.timeline`: ``"phase"`` of each ``start`` row).

``standby`` and ``resizing`` are an elastic job's (docs/elastic.md): the deciding task decides the job's
size (:mod:`marathon_tf.task.resize`), every member follows it (:mod:`marathon_tf.task.elastic`).

Both are ``str`` enums: a member compares equal to its value and is its value in JSON and text.
"""

from __future__ import annotations

import enum
from typing import Any

__all__ = ["Phase", "METRIC_PHASES", "StartPhase"]


class Phase(str, enum.Enum):
    """A task's phase (``/status``' ``"phase"``)."""

    DISCOVERING = "discovering"  # the bootstrap finds its peers; no program yet
    RUNNING = "running"          # the program runs (again, after a restart in place)
    SAVING = "saving"            # a save round: the program saves a checkpoint, or is held for one
    STANDBY = "standby"          # elastic: placed, not taken into the job (yet), or the job waits below its min
    RESIZING = "resizing"        # elastic: the program stopped for the job's size change, restarting at the new size
    SUCCEEDED = "succeeded"      # the program exited 0; the task stays up until stopped
    FAILED = "failed"            # the program (or the task's start) failed; parked, or exiting for a relaunch

    def __str__(self) -> str:
        return self.value

    def metric(self, stepped: bool = False) -> str:
        """The phase in the metrics' words (:data:`METRIC_PHASES`): a running program is ``starting``
        until its first step, ``training`` from then on."""
        if self is Phase.RUNNING:
            return "training" if stepped else "starting"
        return _METRIC_WORDS[self]

    @classmethod
    def of(cls, value: Any) -> Phase:
        """The phase a ``/status`` says (a member or its value); ValueError for anything else."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"unknown phase {value!r}") from None


_METRIC_WORDS = {Phase.DISCOVERING: "waiting_for_peers", Phase.SAVING: "saving", Phase.STANDBY: "standby",
                 Phase.RESIZING: "resizing", Phase.SUCCEEDED: "done", Phase.FAILED: "failed"}
#: ``marathon_tf_phase{phase}``'s values, in their order on ``/metrics``.
METRIC_PHASES = ("waiting_for_peers", "starting", "training", "saving", "standby", "resizing", "done", "failed")


class StartPhase(str, enum.Enum):
    """A milestone of a job's start, in its usual order (the timeline's ``start`` rows)."""

    SUBMITTED = "submitted"
    DEPLOYED = "deployment done"
    ALL_RUNNING = "every task running"
    SPEC_COMPLETE = "cluster spec complete"
    SERVERS_UP = "every TF server up"
    FIRST_STEP = "first step"

    def __str__(self) -> str:
        return self.value
