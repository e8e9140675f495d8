"""What a training program said of the save hook (:mod:`marathon_tf.contract.savehook`): whether it has
it (``ready``) and each ``saved`` line, counted, so that a save round (:mod:`marathon_tf.task.saving`)
waits for the answer to its own request and tells a late one from it. Every piece of the program's output
goes through :meth:`SaveHook.feed`. Pure: no I/O.
"""

from __future__ import annotations

import threading

from marathon_tf.contract import savehook

__all__ = ["SaveHook"]


class SaveHook:
    """What the program said of the save hook (every piece of its output goes through :meth:`feed`)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.ready = False
        #: it holds by waiting for savehook.RESUME (it said READY_WAIT), not by SIGSTOP
        self.waits = False
        self._saved: savehook.Saved | None = None
        self._count = 0
        self._held = 0  # its ``held`` lines so far

    def reset(self) -> None:
        """A new run of the program: it says again whether it has the hook."""
        with self._cond:
            self.ready = self.waits = False

    def feed(self, text: str) -> str | savehook.Saved | savehook.Held | None:
        said = savehook.parse(text)
        if said is not None:
            with self._cond:
                if said in (savehook.READY, savehook.READY_WAIT):
                    self.ready, self.waits = True, said == savehook.READY_WAIT
                elif isinstance(said, savehook.Held):
                    self._held += 1
                elif isinstance(said, savehook.Saved):
                    self.ready = True
                    self._saved, self._count = said, self._count + 1
                self._cond.notify_all()
        return said

    def mark(self) -> int:
        with self._cond:
            return self._count

    def held_mark(self) -> int:
        with self._cond:
            return self._held

    def wait_held(self, after: int, timeout: float) -> bool:
        """Whether a ``held`` line was said after :meth:`held_mark` returned ``after`` (within ``timeout``)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._held > after, max(0.0, timeout))

    def last(self) -> savehook.Saved | None:
        """The last ``saved`` line the program said."""
        with self._cond:
            return self._saved

    def wait_saved(self, after: int, timeout: float) -> savehook.Saved | None:
        """The first ``saved`` line said after :meth:`mark` returned ``after`` (None: none within ``timeout``)."""
        with self._cond:
            self._cond.wait_for(lambda: self._count > after, max(0.0, timeout))
            return self._saved if self._count > after else None
