"""The event stream's reader thread (marathon_tf.marathon.events)."""

from __future__ import annotations

import threading
import time

from hostile_server import Answer, Hostile

from marathon_tf.marathon.client import Client
from marathon_tf.marathon.events import EventStream


def test_close_returns_at_once_while_the_reader_waits_on_a_silent_stream():
    """A task's bootstrap closes its event stream as it exits: closing the response alone waited for
    the blocked read (Marathon's next event or heartbeat, up to the 30 s read timeout); a task stopped
    with SIGTERM outlived its program by 6 s, and its relaunch came that much later."""
    released = threading.Event()

    def silent():  # Marathon's first event, then nothing: the reader's next read blocks
        yield b'event: event_stream_attached\r\ndata: {"remoteAddress": "127.0.0.1"}\r\n\r\n'
        released.wait(60)

    def answer(r):
        return Answer(200, silent(), headers={"Content-Type": "text/event-stream"}, length=False)
    with Hostile(answer) as server:
        stream = EventStream(Client(server.url), event_types=("status_update_event",))
        with stream:
            assert stream.events.get(timeout=10)["eventType"] == "event_stream_attached"
            time.sleep(0.3)  # the reader is blocked in its next read
            started = time.monotonic()
            stream.close()
            took = time.monotonic() - started
            stream._thread.join(2)
            released.set()
        assert took < 1.0, took
        assert not stream._thread.is_alive()
