"""SIGTERM and SIGHUP stop a foreground command the way Ctrl-C does.

``timeout``, CI cancellation, ``docker stop`` and a closed terminal send SIGTERM or SIGHUP, not
SIGINT. Inside :func:`converted`, the first of SIGINT/SIGTERM/SIGHUP raises :class:`Stopped`
(a :class:`KeyboardInterrupt`, so every ``except KeyboardInterrupt`` clean-up path applies) in the
main thread; further ones are only remembered until the block is left, so the clean-up itself is
not interrupted (``again``, when given, is called with each of them: e.g. a second Ctrl-C that
cuts the clean-up's waiting short). The caller raises :class:`~marathon_tf.contract.errors.Interrupted`
with the signal's number, whose exit code is ``128 + signum`` (130, 143, 129).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

__all__ = ["Stopped", "converted", "SIGNALS", "signal_name"]

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


@contextlib.contextmanager
def converted(again: Callable[[int], None] | None = None) -> Iterator[list[int]]:
    """Turn the stop signals into :class:`Stopped` within the block (main thread only; elsewhere a
    no-op). Yields the list of signals received; ``again(signum)`` is called on each after the first
    (in the main thread; what it raises is ignored: the clean-up goes on)."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def remember(signum: int, frame: object) -> None:
        received.append(signum)
        if again is not None:
            try:
                again(signum)
            except Exception:  # noqa: BLE001 - a signal handler must not break the clean-up it interrupts
                pass

    def first(signum: int, frame: object) -> None:
        received.append(signum)
        for sig in SIGNALS:
            signal.signal(sig, remember)
        raise Stopped(signum)

    previous = {sig: signal.signal(sig, first) for sig in SIGNALS}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
