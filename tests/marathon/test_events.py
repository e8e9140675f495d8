"""The event stream's reader thread (marathon_tf.marathon.events)."""

from __future__ import annotations

import socket
import threading
import time

from marathon_tf.marathon.client import Client
from marathon_tf.marathon.events import EventStream


class SilentStream:
    """A server that answers ``GET /v2/events`` like Marathon (headers, one event) and then says
    nothing more, the connection held open: the reader's next read blocks."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
                         b"event: event_stream_attached\r\ndata: {\"remoteAddress\": \"127.0.0.1\"}\r\n\r\n")

    def close(self) -> None:
        self.sock.close()
        for conn in self.conns:
            conn.close()


def test_close_returns_at_once_while_the_reader_waits_on_a_silent_stream():
    """A task's bootstrap closes its event stream as it exits: closing the response alone waited for
    the blocked read (Marathon's next event or heartbeat, up to the 30 s read timeout); a task stopped
    with SIGTERM outlived its program by 6 s, and its relaunch came that much later."""
    server = SilentStream()
    try:
        stream = EventStream(Client(server.url), event_types=("status_update_event",))
        stream.__enter__()
        deadline = time.monotonic() + 10
        while stream.events.empty() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert stream.events.get_nowait()["eventType"] == "event_stream_attached"
        time.sleep(0.3)  # the reader is blocked in its next read
        started = time.monotonic()
        stream.close()
        took = time.monotonic() - started
        stream._thread.join(2)
        assert took < 1.0, took
        assert not stream._thread.is_alive()
    finally:
        server.close()
