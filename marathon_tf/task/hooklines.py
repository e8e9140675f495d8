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
        self._saved: savehook.Saved | None = None
        self._count = 0

    def reset(self) -> None:
        """A new run of the program: it says again whether it has the hook."""
        with self._cond:
            self.ready = False

    def feed(self, text: str) -> str | savehook.Saved | None:
        said = savehook.parse(text)
        if said is not None:
            with self._cond:
                if said == savehook.READY:
                    self.ready = True
                elif isinstance(said, savehook.Saved):
                    self.ready = True
                    self._saved, self._count = said, self._count + 1
                self._cond.notify_all()
        return said

    def mark(self) -> int:
        with self._cond:
            return self._count

    def last(self) -> savehook.Saved | None:
        """The last ``saved`` line the program said."""
        with self._cond:
            return self._saved

    def wait_saved(self, after: int, timeout: float) -> savehook.Saved | None:
        """The first ``saved`` line said after :meth:`mark` returned ``after`` (None: none within ``timeout``)."""
        with self._cond:
            self._cond.wait_for(lambda: self._count > after, max(0.0, timeout))
            return self._saved if self._count > after else None
