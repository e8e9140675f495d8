"""The save hook: how a training program is asked to save a checkpoint now, and how it answers (pure).

One documented hook, between the bootstrap and the training program (the program needs nothing of
marathon-tf; each example implements it in a few lines):

1. **It says it has the hook.** Once its handler is installed, the program prints the line
   :data:`READY` (``marathon-tf save-hook: ready``) on stdout or stderr. A program that never says so
   is never signalled (SIGUSR1's default action would end it): its planned stops keep today's
   behaviour, and ``status`` says once that it has no hook.
2. **It is asked.** Its bootstrap sends it :data:`SIGNAL` (SIGUSR1). The program does not stop: at
   its next step boundary it saves a checkpoint into the job's logdir (as it always does:
   ``Saver.save``, ``CheckpointManager.save``, a Keras backup), then
3. **it answers** with the line ``marathon-tf save-hook: saved step=<global step> path=<checkpoint>``
   (:func:`saved_line`) and **pauses itself** (``os.kill(os.getpid(), signal.SIGSTOP)``; or waits, below): its
   bootstrap confirms the new checkpoint in the logdir (:mod:`marathon_tf.task.checkpoints`, no
   TensorFlow) and continues it (SIGCONT), or keeps it paused when a planned stop follows, so that
   nothing is trained after the checkpoint that will be restored. A program that does not pause
   itself is paused by its bootstrap as soon as the line is read. One that answers after the round
   gave up (it saves only at the end of a long round of steps) is continued at once.

In Python::

    import os, signal
    asked = {"save": False}
    signal.signal(signal.SIGUSR1, lambda *_: asked.update(save=True))
    print("marathon-tf save-hook: ready", flush=True)
    ...
    # at each step boundary:
    if asked["save"]:
        asked["save"] = False
        path = saver.save(...)                       # whatever the program saves with
        print(f"marathon-tf save-hook: saved step={step} path={path}", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)         # the bootstrap continues it

**Holding by waiting** (what the examples do). A paused process is continued by any SIGCONT, and a Mesos
agent's kill of a task ends with one to every process of the task's tree (stop, signal, continue): a program
paused by SIGSTOP trains on for the moments until its bootstrap, woken by the same kill, stops it again —
steps past the checkpoint to be restored. A program that says :data:`READY_WAIT` (``marathon-tf save-hook:
ready hold=wait``) instead of :data:`READY` pauses by **waiting**: after its ``saved`` line it sleeps until
:data:`RESUME` (SIGUSR2, its bootstrap's "go on"; sent only to a program that said :data:`READY_WAIT`), which no
SIGCONT ends. (Its bootstrap pauses it as well while it holds, as it does every held program, so that its
TensorFlow servers answer no peer meanwhile; the wait is what the kill's SIGCONT cannot undo.) Such a program that
does not save (a ``tf1`` job's non-chief worker, which a round holds so that the chief's checkpoint is the job's
last trained state) answers SIGUSR1 at its next step boundary with ``marathon-tf save-hook: held step=<global
step>`` (:func:`held_line`) and waits the same way. A program that says one of those lines when nothing asked it
(it was asked, paused from outside, and let go before its step boundary) is sent :data:`RESUME` at once::

    asked = {"save": False, "go": False}
    signal.signal(signal.SIGUSR1, lambda *_: asked.update(save=True))
    signal.signal(signal.SIGUSR2, lambda *_: asked.update(go=True))
    print("marathon-tf save-hook: ready hold=wait", flush=True)
    ...
    if asked["save"]:
        asked["save"] = asked["go"] = False
        path = saver.save(...)
        print(f"marathon-tf save-hook: saved step={step} path={path}", flush=True)
        while not asked["go"]:                      # held: a kill's SIGCONT does not end this
            time.sleep(0.05)

**SIGTERM.** On a real Mesos agent a killed task's SIGTERM reaches the program together with its bootstrap
(the command executor signals the task's whole process tree). Where the bootstrap runs save rounds for
the job it says so in the program's environment (:data:`ROUNDS_VAR` ``=1``) and starts every member's
program with SIGTERM ignored: it has the deciding task's program save first (holding the others of a
``tf1`` job before), then ends each. A program with the hook that saves on
SIGTERM by itself leaves SIGTERM alone there (its own save would race the round's); run by other means,
it keeps its handler.

Who asks, when, and what happens when a kill's grace is too short: docs/restarts.md.
"""

from __future__ import annotations

import re
import signal
from typing import NamedTuple

__all__ = ["SIGNAL", "RESUME", "READY", "READY_WAIT", "SAVED_PREFIX", "HELD_PREFIX", "ROUNDS_VAR", "Saved", "Held",
           "saved_line", "held_line", "parse"]

#: The signal that asks a program to save now (without stopping).
SIGNAL = signal.SIGUSR1
#: The line a program prints once it handles :data:`SIGNAL`.
READY = "marathon-tf save-hook: ready"
#: The line a program prints instead of :data:`READY` when it holds by waiting for :data:`RESUME`.
READY_WAIT = READY + " hold=wait"
#: The signal that lets a program that holds by waiting go on (only ever sent to one that said :data:`READY_WAIT`).
RESUME = signal.SIGUSR2
SAVED_PREFIX = "marathon-tf save-hook: saved"
#: ``1`` in a program's environment when its bootstrap runs save rounds for the job (see SIGTERM above).
ROUNDS_VAR = "MTF_SAVE_ROUNDS"
HELD_PREFIX = "marathon-tf save-hook: held"
_SAVED = re.compile(r"marathon-tf save-hook: saved step=(?P<step>\d+)(?: path=(?P<path>\S+))?")
_HELD = re.compile(r"marathon-tf save-hook: held step=(?P<step>\d+)")


class Saved(NamedTuple):
    """What a program said it saved."""

    step: int
    path: str | None


def saved_line(step: int, path: str | None = None) -> str:
    """``marathon-tf save-hook: saved step=3012 path=ckpt/model.ckpt-3012``."""
    return f"{SAVED_PREFIX} step={int(step)}" + (f" path={path}" if path else "")


class Held(NamedTuple):
    """A program that does not save says it holds (waits) at its step boundary."""

    step: int


def held_line(step: int) -> str:
    """``marathon-tf save-hook: held step=3012``."""
    return f"{HELD_PREFIX} step={int(step)}"


def parse(text: str) -> str | Saved | Held | None:
    """What a piece of the program's output says of the hook: :data:`READY_WAIT`, :data:`READY`, a
    :class:`Saved`, a :class:`Held`, or None."""
    if "marathon-tf save-hook:" not in text:
        return None
    m = _SAVED.search(text)
    if m:
        return Saved(int(m.group("step")), m.group("path"))
    m = _HELD.search(text)
    if m:
        return Held(int(m.group("step")))
    if READY_WAIT in text:
        return READY_WAIT
    return READY if READY in text else None
