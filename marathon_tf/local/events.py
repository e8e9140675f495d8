"""The event bus behind ``/v2/events``: every published event goes to every subscriber.

Events are plain dicts with Marathon's fields plus ``eventType`` and ``timestamp``
(FACTS §4.2). Subscribers are asyncio queues living on the server's event loop;
``recent`` keeps the last events for Python-side inspection in tests.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Any, Iterable, Optional

from .state import now_ts

__all__ = ["EventBus"]


class EventBus:
    """Fan-out of events to subscriber queues (one per SSE connection)."""

    def __init__(self, keep: int = 2000) -> None:
        self._subscribers: dict[asyncio.Queue, Optional[frozenset[str]]] = {}
        self._recent: collections.deque[dict] = collections.deque(maxlen=keep)
        self._lock = threading.Lock()

    def subscribe(self, event_types: Optional[Iterable[str]] = None) -> asyncio.Queue:
        """A new queue that receives events (only ``event_types`` when given)."""
        queue: asyncio.Queue = asyncio.Queue()
        self._subscribers[queue] = frozenset(event_types) if event_types else None
        return queue

    def unsubscribe(self, queue: asyncio.Queue) -> None:
        self._subscribers.pop(queue, None)

    def publish(self, event_type: str, **fields: Any) -> dict:
        """Build the event (``eventType``, ``timestamp`` appended) and deliver it."""
        event = {**fields, "eventType": event_type, "timestamp": now_ts()}
        with self._lock:
            self._recent.append(event)
        for queue, types in list(self._subscribers.items()):
            if types is None or event_type in types:
                queue.put_nowait(event)
        return event

    def recent(self, event_type: Optional[str] = None) -> list[dict]:
        """The events kept so far (optionally of one type), oldest first."""
        with self._lock:
            events = list(self._recent)
        return [e for e in events if event_type is None or e["eventType"] == event_type]
