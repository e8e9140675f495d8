"""A task's reconcile step: from what its bootstrap sees now, the one thing it does next.

The bootstrap's loop (:meth:`marathon_tf.task.bootstrap.Bootstrap._supervise`) looks every tick (0.2 s) and
puts what it saw into one :class:`Seen`: whether the task was told to stop, the job plan's round that its program
has not followed yet, its program's exit code, the progress watchdog's word, a peer TensorFlow says was restarted
under the program, whether a look at the peers' addresses is due. :func:`next_step` turns one look into one
:class:`Step`; the bootstrap carries it out (its *effects*: a save round and the program's stop, the program
stopped and started again, the policy's decision on its end), and the task's phase changes through its state
machine (:mod:`marathon_tf.task.machine`) as it does.

Level-triggered: a look holds what *is* (the plan's newest round against the generation the program runs in, the
program's state now), never the changes since the last tick, so a missed update, a relaunched coordinator or a
follower that reconnects to another rendezvous reads the current plan and converges on it; a round the program
already followed is not followed twice (its generation is the program's).

The order of :data:`ORDER` is the whole policy of a tick, first match wins:

1. ``STOP`` — the task was stopped (SIGTERM: a kill with grace, ``scale``, ``delete``, a drain): nothing else
   matters, its stop asks for exactly one save round (:meth:`marathon_tf.task.restarts.Restarter.stopped`).
2. ``FOLLOW`` — the plan has a round this program must follow (the job's group restarts, an elastic job's size
   changes and names it): not this program's failure, even when it ended meanwhile (it ended *because* of the
   round: a peer it trained with went away).
3. ``HUNG`` — the program runs, and the watchdog says it made no progress for too long: it is stopped, and its
   end is decided as a failure named by the peer it waits for.
4. ``PEER`` — the program runs and TensorFlow says a peer was restarted under it (a ParameterServerStrategy
   coordinator never takes the peer back): the program starts again in place, never counted.
5. ``ENDED`` — the program ended by itself: the policy decides (start again, fail, succeed).
6. ``WATCH`` — a look at the peers' addresses is due: a peer that moved rewrites the spec.
7. ``RUN`` — nothing to do: the program trains.

Pure: no I/O, no clock, no TensorFlow.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from marathon_tf.contract.plan import Round

__all__ = ["Seen", "Step", "ORDER", "next_step"]


class Step(str, enum.Enum):
    """What the bootstrap does this tick (see the module)."""

    STOP = "stop"
    FOLLOW = "follow"
    HUNG = "hung"
    PEER = "peer"
    ENDED = "ended"
    WATCH = "watch"
    RUN = "run"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Seen:
    """One look of the bootstrap's loop: what it does next depends on this alone."""

    #: the task was told to stop (a signal)
    stopping: bool = False
    #: the plan's newest round that this program must follow and has not (None: none)
    round: Round | None = None
    #: the program's exit code (None: it runs)
    exit_code: int | None = None
    #: the progress watchdog's reason the running program is hung (None: it makes progress, or it ended)
    hung: str | None = None
    #: the peer TensorFlow says was restarted under the running program (None: none)
    peer_restarted: str | None = None
    #: a look at the peers' addresses is due
    watch_due: bool = False

    @property
    def running(self) -> bool:
        return self.exit_code is None


#: (step, whether a look calls for it), first match wins: the whole policy of a tick
ORDER: tuple[tuple[Step, Callable[[Seen], bool]], ...] = (
    (Step.STOP, lambda s: s.stopping),
    (Step.FOLLOW, lambda s: s.round is not None),
    (Step.HUNG, lambda s: s.running and s.hung is not None),
    (Step.PEER, lambda s: s.running and s.peer_restarted is not None),
    (Step.ENDED, lambda s: not s.running),
    (Step.WATCH, lambda s: s.watch_due),
)


def next_step(seen: Seen) -> Step:
    """The one thing to do after the look ``seen`` (:data:`ORDER`; ``RUN`` when nothing calls for anything)."""
    for step, applies in ORDER:
        if applies(seen):
            return step
    return Step.RUN
