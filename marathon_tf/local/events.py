"""The event bus behind ``/v2/events``: every published event goes to every subscriber.

Events are plain dicts with Marathon's fields plus ``eventType`` and ``timestamp`` (Marathon 1.11's
event classes' fields). Subscribers are asyncio queues living on the server's event loop;
``recent`` keeps the last events for Python-side inspection in tests; ``listeners`` are told of
every event (the state's change counter).

A subscriber that does not keep up is dropped, as Marathon drops an event stream connection with
``--event_stream_max_outstanding_messages`` (1024) events waiting for it: its queue gets
:data:`DROPPED` and no more events, so a stalled client costs bounded memory.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Callable, Iterable
from typing import Any

from .state import now_ts

__all__ = ["EventBus", "DROPPED", "MAX_OUTSTANDING"]

#: Marathon's ``--event_stream_max_outstanding_messages`` default.
MAX_OUTSTANDING = 1024
#: What a dropped subscriber's queue receives last.
DROPPED: dict = {"eventType": "__dropped__"}


class EventBus:
    """Fan-out of events to subscriber queues (one per SSE connection)."""

    def __init__(self, keep: int = 2000, max_outstanding: int = MAX_OUTSTANDING) -> None:
        self._subscribers: dict[asyncio.Queue, frozenset[str] | None] = {}
        self._recent: collections.deque[dict] = collections.deque(maxlen=keep)
        self._lock = threading.Lock()
        self.max_outstanding = max_outstanding
        #: Called with every event as it is published.
        self.listeners: list[Callable[[dict], None]] = []

    def subscribe(self, event_types: Iterable[str] | None = None) -> asyncio.Queue:
        """A new queue that receives events (only ``event_types`` when given), :data:`DROPPED` last
        when the subscriber fell :attr:`max_outstanding` events behind."""
        queue: asyncio.Queue = asyncio.Queue(self.max_outstanding + 1)
        self._subscribers[queue] = frozenset(event_types) if event_types else None
        return queue

    def unsubscribe(self, queue: asyncio.Queue) -> None:
        self._subscribers.pop(queue, None)

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def publish(self, event_type: str, **fields: Any) -> dict:
        """Build the event (``eventType``, ``timestamp`` appended) and deliver it."""
        event = {**fields, "eventType": event_type, "timestamp": now_ts()}
        with self._lock:
            self._recent.append(event)
        for listener in self.listeners:
            listener(event)
        for queue, types in list(self._subscribers.items()):
            if types is None or event_type in types:
                if queue.qsize() >= self.max_outstanding:
                    self.unsubscribe(queue)
                    queue.put_nowait(DROPPED)
                else:
                    queue.put_nowait(event)
        return event

    def recent(self, event_type: str | None = None) -> list[dict]:
        """The events kept so far (optionally of one type), oldest first."""
        with self._lock:
            events = list(self._recent)
        return [e for e in events if event_type is None or e["eventType"] == event_type]
