"""When a worker's program that trains on its own may start: not while a save round holds the job's training, nor
while the deciding task's program restores the job's checkpoint.

A save round (:mod:`marathon_tf.task.saving`) holds every other TF1 chief and worker before the deciding program
saves. A task whose program does not run when asked (a newcomer's, about to start; one between two runs) keeps
the hold for its next start (:class:`StartHold`): it starts once the round lets go, or its time is up.

In TF1's between-graph replication (``style`` tf1) every worker runs its own training loop against the ps, and a
non-chief worker's session is ready as soon as the ps holds initialised variables. When the deciding task (TF1's
chief, ``worker-0``) starts its program from the job's checkpoint while the ps runs on — a relaunched deciding
task (a planned stop, a lost agent), or its program restarted in place — its session restores that checkpoint
onto the ps. A worker program that started meanwhile (a newcomer of an elastic job, a worker relaunched at
the same time) trains on the ps's variables of before, and the restore overwrites what it trained: trained
twice. The workers that were running are held by the save round until the deciding program's first step
(:data:`marathon_tf.task.saving.LET_GO`); this gate covers the programs that start in that window.

The deciding task says it in the job's plan (:attr:`marathon_tf.contract.plan.JobPlan.restoring`): from before it
publishes anything, when its logdir has a checkpoint, and again at each start of its program from one, until
that program's first step (or its end); and from its own stop on (its successor restores), which its followers
keep reading until the successor's plan replaces it. Every other tf1 worker waits for the plan to say otherwise
before its program starts, at most ``limit`` seconds (a program that prints no steps never clears it), saying so
with the numbers. Where workers do not train on their own (ParameterServerStrategy's workers serve its coordinator,
a synchronous group steps together) nothing waits: there the deciding program needs the others to step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from marathon_tf.task.rendezvous import Coordinator, Rendezvous

__all__ = ["RestoreGate", "StartHold", "STYLES", "hold_limit"]

#: The job styles whose workers train on their own (and so wait for the deciding program's restore).
STYLES = frozenset({"tf1"})


def hold_limit(grace_seconds: float) -> float:
    """Seconds a program stays held (or its start, or a start waits for a restore) when no stop or restart comes
    for it."""
    return max(30.0, 2 * grace_seconds)


class RestoreGate:
    """One task's side of the gate (see the module). The deciding task has a ``coordinator`` (it writes the plan);
    another task reads it through ``rendezvous()`` (None before discovery) and waits only when ``waits``."""

    def __init__(self, *, coordinator: Coordinator | None, rendezvous: Callable[[], Rendezvous | None], waits: bool,
                 leader: str, limit: float, stop: threading.Event, log: Callable[[str], None],
                 prints_steps: Callable[[], bool] = lambda: True, clock: Callable[[], float] = time.monotonic) -> None:
        self.coordinator, self.rendezvous, self.waits = coordinator, rendezvous, waits
        self.leader, self.limit, self.stop, self.log, self.clock = leader, limit, stop, log, clock
        self.prints_steps = prints_steps
        self._restoring = False

    # -- the deciding task ------------------------------------------------------------------------------------
    def program_starts(self, from_checkpoint: bool) -> None:
        """The deciding task's program starts (``from_checkpoint``: the job's logdir has one it restores); also
        said before the plan is first published, so that no answer of its rendezvous lacks it. Only of a program
        that prints its steps (``prints_steps``: the job declares a target step, or an earlier run printed one):
        the others would hold every worker's start to :attr:`limit`."""
        restoring = from_checkpoint and self.prints_steps()
        if self.coordinator is not None and restoring != self._restoring:
            self._restoring = restoring
            self.coordinator.restoring(restoring)

    def handing_over(self) -> None:
        """The deciding task stops (its save round saved the job's checkpoint, if it could): its successor's program
        restores the checkpoint (or initialises the variables afresh), overwriting whatever a worker trained from
        now on. The plan says so until that successor publishes its own."""
        self.program_starts(True)

    def program_back(self) -> None:
        """The deciding task's program stepped (it restored the checkpoint), or ended."""
        if self.coordinator is not None and self._restoring:
            self._restoring = False
            self.coordinator.restoring(False)

    # -- every other worker -----------------------------------------------------------------------------------
    def wait(self) -> float | None:
        """Before this task's program starts: wait while the plan says the deciding program restores (at most
        :attr:`limit` s, or until the task is stopped). Seconds waited; None when nothing was waited for."""
        rendezvous = self.rendezvous()
        if not self.waits or self.coordinator is not None or rendezvous is None or not rendezvous.restoring():
            return None
        began = self.clock()
        self.log(f"{self.leader}'s program is restoring the job's checkpoint: this program starts once it is back "
                 f"(at most {self.limit:g} s)")
        while rendezvous.restoring() and self.clock() - began < self.limit and not self.stop.is_set():
            self.stop.wait(0.05)
        waited = self.clock() - began
        if rendezvous.restoring() and not self.stop.is_set():
            self.log(f"{self.leader}'s program did not step within {self.limit:g} s of starting from the job's "
                     f"checkpoint: starting this program all the same")
        elif not self.stop.is_set():
            self.log(f"{self.leader}'s program is back at the job's checkpoint after {waited:.1f} s: starting")
        return waited


class StartHold:
    """A save round's hold that came while this task's program did not run (see the module). Thread-safe: the
    status server's thread holds and releases, the bootstrap's waits."""

    def __init__(self, *, log: Callable[[str], None], clock: Callable[[], float] = time.monotonic) -> None:
        self.log, self.clock = log, clock
        self._lock = threading.Lock()
        self._held: tuple[float, str] | None = None  # (until when, the round's reason)

    def hold(self, reason: str, seconds: float, *, extend: bool = False) -> dict[str, Any]:
        """The round's hold (its answer to ``POST /hold``): the next start waits up to ``seconds``; ``extend``: the
        round confirmed its checkpoint, a start held stays so ``seconds`` from now (none is held anew)."""
        with self._lock:
            held = self._held
            if extend:
                if held is not None:
                    self._held = (self.clock() + seconds, held[1])
                return {"held": held is not None}
            self._held = (self.clock() + seconds, reason)
        if held is None:
            self.log(f"held for the job's save round ({reason}) before the training program started: it starts "
                     f"once the round is over (at most {seconds:.0f} s)")
        return {"held": True, "step": None}

    def release(self, reason: str) -> None:
        """The round let go (its stop did not come, or the deciding task's program is back)."""
        with self._lock:
            held, self._held = self._held, None
        if held is not None:
            self.log(f"the save round is over ({reason}): the training program may start")

    def wait(self, stop: threading.Event) -> None:
        """Before the program starts: wait until the hold is let go, its time is up, or the task is stopped."""
        while not stop.is_set():
            with self._lock:
                held = self._held
            if held is None:
                return
            if self.clock() >= held[0]:
                with self._lock:  # (not a hold that came meanwhile)
                    if self._held is held:
                        self._held = None
                self.log(f"the save round's hold ({held[1]}) ran out before it was let go: the training program "
                         f"starts")
                return
            stop.wait(0.05)
