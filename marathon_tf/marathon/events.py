"""Marathon's event stream (``GET /v2/events``, server-sent events): read in a daemon thread,
reconnecting on drops. The user's side follows deployments with it
(:mod:`marathon_tf.user.watch`); the rendezvous leader inside a task follows its peers' status
updates (:mod:`marathon_tf.task.rendezvous`).
"""

from __future__ import annotations

import json
import queue
import socket
import threading
from typing import TYPE_CHECKING, Any

import sseclient

from marathon_tf.contract.errors import MarathonError, MarathonUnavailable
from marathon_tf.marathon.client import Client

if TYPE_CHECKING:
    import requests

__all__ = ["EventStream", "INTERESTING"]

#: The events a follower of deployments and jobs wants (the default filter).
INTERESTING = ("deployment_info", "deployment_step_success", "deployment_step_failure", "deployment_success",
               "deployment_failed", "status_update_event", "health_status_changed_event",
               "instance_health_changed_event", "group_change_success", "app_terminated_event")


class EventStream:
    """Reads ``/v2/events`` in a daemon thread into a queue; reconnects with backoff (also after
    a standby's redirect led to a leader that was not up, or refused). ``available`` turns False
    when the server has no event stream (405/404) or refuses the credentials (401/403)."""

    def __init__(self, client: Client, event_types=INTERESTING, *, reconnect_max: float = 10.0):
        self.client = client
        self.event_types = tuple(event_types)
        self.events: "queue.Queue[dict[str, Any]]" = queue.Queue()
        self.available = True
        self.reconnects = 0
        self._stop = threading.Event()
        self._response: requests.Response | None = None
        self._reconnect_max = reconnect_max
        self._thread = threading.Thread(target=self._run, name="marathon-events", daemon=True)

    def __enter__(self) -> "EventStream":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def attached(self) -> bool:
        """Connected once (Marathon sends what happens from then on), or known to have no stream."""
        return self._response is not None or not self.available

    def close(self) -> None:
        """Stop reading, at once: the stream's socket is shut down first, so the reading thread's
        blocked read returns now (closing the response alone waits for that read to end: until
        Marathon's next event or heartbeat, up to the read timeout; a task's bootstrap stopped
        with its task waited that long before it could exit)."""
        self._stop.set()
        r = self._response
        if r is not None:
            _shutdown(r)
            try:
                r.close()
            except Exception:
                pass

    def _run(self) -> None:
        delay = 0.5
        while not self._stop.is_set():
            try:
                self._response = self.client.events(self.event_types, read_timeout=30.0)
                delay = 0.5
                for ev in sseclient.SSEClient(_unbuffered(self._response)).events():
                    if self._stop.is_set():
                        return
                    if not ev.data or not ev.data.strip():
                        continue
                    try:
                        data = json.loads(ev.data)
                    except ValueError:
                        continue
                    data.setdefault("eventType", ev.event)
                    self.events.put(data)
            except MarathonUnavailable:
                pass  # e.g. the leader it was sent to is not up (yet): reconnect below
            except MarathonError as e:
                if e.status in (404, 405, 401, 403):
                    self.available = False
                    return
            except Exception:
                pass  # dropped stream: reconnect below
            if self._stop.is_set():
                return
            self.reconnects += 1
            self._stop.wait(delay)
            delay = min(delay * 2, self._reconnect_max)

    def wait(self, seconds: float) -> list[dict[str, Any]]:
        """Events that arrive within ``seconds`` (returns early on the first one)."""
        out = []
        try:
            out.append(self.events.get(timeout=max(seconds, 0)))
            while True:
                out.append(self.events.get_nowait())
        except queue.Empty:
            pass
        return out


def _shutdown(response) -> None:
    """Shut a streamed response's socket down in both directions (a read blocked on it returns)."""
    raw = getattr(response, "raw", None)
    sock = getattr(getattr(raw, "_connection", None), "sock", None)  # urllib3 2
    if sock is None:  # http.client's own: response.fp (buffered) -> SocketIO -> the socket
        fp = getattr(getattr(raw, "_fp", None), "fp", None)
        sock = getattr(getattr(fp, "raw", None), "_sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _unbuffered(response):
    """The stream's bytes as they arrive. Marathon (Jetty) sends /v2/events without chunked
    encoding, so requests' buffered iteration would hold events back until a buffer fills."""
    raw = response.raw
    read1 = getattr(raw, "read1", None)
    if read1 is None:  # urllib3 < 2
        yield from response.iter_content(chunk_size=1)
        return
    while True:
        data = read1(65536)
        if not data:
            return
        yield data
