"""Marathon's event stream (``GET /v2/events``, server-sent events): read in a daemon thread,
reconnecting on drops. The user's side follows deployments with it
(:mod:`marathon_tf.user.watch`); the rendezvous leader inside a task follows its peers' status
updates (:mod:`marathon_tf.task.rendezvous`).

A standby sends ``/v2/events`` to ``http://<leader --hostname>:<http port>`` (Marathon 1.7.50+; ``https``
only with ``--disable_http``). When that cannot be followed from here (https to http, a name that does not resolve,
a refused connection) the stream goes to the leader another way, once per standby, and says so once:
a configured URL that is the leader (``--marathon URL,URL…``: first the one whose host ``/v2/leader``
names, then the others), else the leader ``/v2/leader`` names at the configured URL's scheme and port
(Marathons of one cluster usually share their ports). It stays there while the stream lasts; it never
asks one standby over and over.

Each event arrives as an :class:`Event`: the event's JSON object (a ``dict``, as Marathon sent it) with
what marathon-tf reads of it parsed once, when it is read from the stream (``event.event_type``,
``event.app_id``, ``event.task_status`` …): its readers read those, never the fields.
"""

from __future__ import annotations

import json
import logging
import queue
import socket
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import sseclient

from marathon_tf.contract.errors import MarathonError, MarathonUnavailable, Timeout
from marathon_tf.marathon import shapes
from marathon_tf.marathon.client import Client, RedirectNotFollowed
from marathon_tf.marathon.model import Event
from marathon_tf.marathon.transport import oneline, redact_url

log = logging.getLogger("marathon_tf.marathon")

if TYPE_CHECKING:
    import requests

__all__ = ["EventStream", "Event", "INTERESTING"]

#: The events a follower of deployments and jobs wants (the default filter).
INTERESTING = ("deployment_info", "deployment_step_success", "deployment_step_failure", "deployment_success",
               "deployment_failed", "status_update_event", "health_status_changed_event",
               "instance_health_changed_event", "group_change_success", "app_terminated_event")


class EventStream:
    """Reads ``/v2/events`` in a daemon thread into a queue; reconnects with backoff (also after
    a standby's redirect led to a leader that was not up, or refused). ``available`` turns False
    when the server has no event stream (405/404) or refuses the credentials (401/403)."""

    def __init__(self, client: Client, event_types=INTERESTING, *, reconnect_max: float = 10.0,
                 say: Callable[[str], None] | None = None):
        self.client = client
        #: where the stream attached last when that is not the client's own URL (the leader found after a
        #: redirect that could not be followed); None: the client's URL in use
        self.base: str | None = None
        self._say = say or log.warning
        self._said: set[tuple[str, str]] = set()
        self.event_types = tuple(event_types)
        self.events: queue.Queue[Event] = queue.Queue()
        self.available = True
        self.reconnects = 0
        self._stop = threading.Event()
        self._response: requests.Response | None = None
        self._reconnect_max = reconnect_max
        self._thread = threading.Thread(target=self._run, name="marathon-events", daemon=True)

    def __enter__(self) -> EventStream:
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
                self._response = self._open()
                delay = 0.5
                for ev in sseclient.SSEClient(_unbuffered(self._response)).events():
                    if self._stop.is_set():
                        return
                    if not ev.data or not ev.data.strip():
                        continue
                    data = _event(ev.event, ev.data)
                    if data is not None:
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

    def _open(self) -> requests.Response:
        try:
            return self.client.events(self.event_types, read_timeout=30.0, base=self.base)
        except RedirectNotFollowed as e:
            return self._to_leader(e)
        except MarathonUnavailable:
            if self.base is not None:  # the leader found earlier is gone: the client's URLs again next time
                self.base = None
            raise

    def _to_leader(self, refused: RedirectNotFollowed) -> requests.Response:
        """The stream at the leader, when ``refused.standby``'s redirect cannot be followed (see the module)."""
        tried, failures = {refused.standby.rstrip("/")}, []
        for base in self._leader_candidates(refused):
            if base.rstrip("/") in tried:
                continue
            tried.add(base.rstrip("/"))
            try:
                response = self.client.events(self.event_types, read_timeout=30.0, base=base)
            except (Timeout, MarathonError) as e:
                failures.append(f"{redact_url(base)}: {e.message}")
                continue
            self.base = base
            self._once(("attached", base), f"event stream: {refused.message}; attached to the leader at "
                                           f"{redact_url(base)} instead")
            return response
        self._once(("lost", refused.standby), f"event stream: {refused.message}; the leader could not be reached "
                   "another way" + (f" ({'; '.join(failures)})" if failures else "")
                   + "; give its URL with --marathon URL,URL… (the stream keeps trying; progress is polled meanwhile)")
        raise refused

    def _leader_candidates(self, refused: RedirectNotFollowed) -> list[str]:
        """The configured URLs, the one on the leader's host first, then the leader ``/v2/leader`` names
        (or the redirect named) at the configured URL's scheme, port and path."""
        configured = list(self.client.urls)
        try:
            named = self.client.leader(retry=False)
        except (Timeout, MarathonError):
            named = None
        host = _host(named) or urlsplit(refused.target or "").hostname
        if not host:
            return configured
        model = urlsplit(refused.standby)
        userinfo = model.netloc.rpartition("@")[0]
        netloc = (userinfo + "@" if userinfo else "") + (f"[{host}]" if ":" in host else host)
        netloc += f":{model.port}" if model.port else ""
        derived = urlunsplit((model.scheme, netloc, model.path, "", ""))
        on_host = [u for u in configured if (urlsplit(u).hostname or "").lower() == host.lower()]
        return on_host + [derived] + [u for u in configured if u not in on_host]

    def _once(self, key: tuple[str, str], line: str) -> None:
        if key not in self._said:
            self._said.add(key)
            self._say(line)

    def wait(self, seconds: float) -> list[Event]:
        """Events that arrive within ``seconds`` (returns early on the first one)."""
        out: list[Event] = []
        try:
            out.append(self.events.get(timeout=max(seconds, 0)))
            while True:
                out.append(self.events.get_nowait())
        except queue.Empty:
            pass
        return out


def _event(kind: str, text: str) -> Event | None:
    """One event's ``data`` as an :class:`Event` whose fields have their shape (:data:`.shapes.EVENT`);
    None (the event is left out, said at debug level) for one that is not JSON or has a wrong shape: the
    readers go on with the next event and their polling, and the stream stays attached."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise shapes.ShapeError("", f"is {shapes.kind(data)}, not an object")
        data.setdefault("eventType", kind)
        return Event(shapes.check(data, shapes.EVENT))
    except (ValueError, RecursionError) as e:
        log.debug("event %s left out: %s", oneline(str(kind))[:80], oneline(str(e))[:200])
        return None


def _host(host_port: str | None) -> str | None:
    """``m2.example:8080`` → ``m2.example`` (``[::1]:8080`` → ``::1``)."""
    if not host_port:
        return None
    return urlsplit("//" + host_port.strip()).hostname


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
