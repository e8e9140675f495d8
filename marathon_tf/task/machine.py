"""A task's state machine: the one writer of its phase (:class:`~marathon_tf.contract.phases.Phase`).

Every part of a bootstrap that changes what the task is doing says so with an event (:class:`On`):
its program started, a save round holds it, the job's size changes, its program ended for good.
:data:`TRANSITIONS` is the whole table, phase × event → phase; :meth:`TaskMachine.fire` applies it
under one lock, with the fields that go with the change (``last_error``, ``exit_code``) written in
the same update of the task's status. An event the table has no row for in the current phase changes
nothing and says so (``fire`` returns False): a save round that ends after the job's size change
took the program does not put the task back to ``running``; a hold released after the program ended
leaves ``succeeded`` alone.

The rows, read as the diagram of :mod:`marathon_tf.contract.phases`::

    discovering --STARTED--> running --SAVE/HELD--> saving --SAVE_ENDED--> running
    any live phase --STANDBY--> standby --TAKEN_IN--> discovering
    running|saving|resizing --RESIZE--> resizing;  --RESTART--> running (in place, or with the job's group)
    running|saving|resizing --SUCCEEDED|FAILED--> succeeded|failed   (the program's end, as the policy decided)
    any live phase --BROKE--> failed   (its start cannot succeed: an unusable logdir, no peers, an error)

``succeeded`` and ``failed`` are final: the task stays up (parked) or exits; nothing leads out of them.
Readers ask :attr:`TaskMachine.phase`; ``/status`` shows the same value (written under the machine's lock).
Pure but for the status it writes; no TensorFlow.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Mapping
from typing import Any

from marathon_tf.contract.phases import Phase
from marathon_tf.task.status_server import TaskStatus

__all__ = ["On", "TRANSITIONS", "FINAL", "LIVE", "TaskMachine", "next_phase"]


class On(str, enum.Enum):
    """What happened to the task (an event of its state machine)."""

    STARTED = "started"          # its training program started (the first time, or again)
    SAVE = "save"                # the deciding task runs a save round: its program saves
    HELD = "held"                # another task's save round holds this program
    SAVE_ENDED = "save_ended"    # the round ended without a stop, or its hold was let go: training goes on
    STANDBY = "standby"          # elastic: placed, not (yet) taken in, or the job waits below its minimum
    TAKEN_IN = "taken_in"        # elastic: the membership names it; it looks its peers up
    RESIZE = "resize"            # elastic: the job's size changes, the program stops for it
    RESTART = "restart"          # the program starts again: in place, or with the job's group
    SUCCEEDED = "succeeded"      # the program ended, and the policy says this task succeeded
    FAILED = "failed"            # the program ended, and the policy says this task failed
    BROKE = "broke"              # its start cannot succeed (an unusable logdir, GPUs it cannot see, no peers)

    def __str__(self) -> str:
        return self.value


FINAL = frozenset({Phase.SUCCEEDED, Phase.FAILED})
LIVE = frozenset(Phase) - FINAL
_TRAINING = (Phase.RUNNING, Phase.SAVING, Phase.RESIZING)


def _rows() -> dict[tuple[Phase, On], Phase]:
    rows: dict[tuple[Phase, On], Phase] = {}
    for phase in LIVE:
        rows[phase, On.STARTED] = Phase.RUNNING
        rows[phase, On.STANDBY] = Phase.STANDBY
        rows[phase, On.BROKE] = Phase.FAILED
    for phase in (Phase.DISCOVERING, Phase.STANDBY, Phase.RESIZING):
        rows[phase, On.TAKEN_IN] = Phase.DISCOVERING
    for phase in _TRAINING:
        rows[phase, On.RESIZE] = Phase.RESIZING
        rows[phase, On.RESTART] = Phase.RUNNING
        rows[phase, On.SUCCEEDED] = Phase.SUCCEEDED
        rows[phase, On.FAILED] = Phase.FAILED
    for phase in (Phase.RUNNING, Phase.SAVING):
        rows[phase, On.SAVE] = Phase.SAVING
        rows[phase, On.HELD] = Phase.SAVING
    rows[Phase.SAVING, On.SAVE_ENDED] = Phase.RUNNING
    return rows


#: phase × event → phase: the whole table (an event without a row changes nothing)
TRANSITIONS: Mapping[tuple[Phase, On], Phase] = _rows()

#: the event a policy's decided phase is (:meth:`TaskMachine.ended`)
_ENDED = {Phase.SUCCEEDED: On.SUCCEEDED, Phase.FAILED: On.FAILED, Phase.RUNNING: On.RESTART}


def next_phase(phase: Phase, on: On) -> Phase | None:
    """The phase ``on`` leads to from ``phase``; None: no row (nothing changes)."""
    return TRANSITIONS.get((phase, on))


class TaskMachine:
    """The task's phase and the only writer of it (into ``status``'s ``"phase"``; see the module).
    ``strict``: an event without a row raises instead of changing nothing (tests)."""

    def __init__(self, status: TaskStatus, *, strict: bool = False):
        self.status, self.strict = status, strict
        self._lock = threading.Lock()
        self._phase = Phase.of(status.light()["phase"])

    @property
    def phase(self) -> Phase:
        with self._lock:
            return self._phase

    @property
    def final(self) -> bool:
        return self.phase in FINAL

    def fire(self, on: On, **fields: Any) -> bool:
        """Apply ``on``: the new phase and ``fields`` in one status update; False (and nothing written)
        when the table has no row for ``on`` in the current phase."""
        with self._lock:
            before = self._phase
            after = next_phase(before, on)
            if after is None:
                if self.strict:
                    raise ValueError(f"no transition from {before} on {on}")
                return False
            self._phase = after
            self.status.update(phase=after, **fields)
            return True

    def ended(self, phase: Phase, **fields: Any) -> bool:
        """The program's end as the policy decided it (:attr:`marathon_tf.task.policy.Decision.phase`)."""
        return self.fire(_ENDED[Phase.of(phase)], **fields)
