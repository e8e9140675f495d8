"""Following a deployment and a job: Marathon's event stream (``/v2/events``,
reconnecting on drops) wakes us early; polling ``/v2/deployments`` and the
group is the source of truth and the fallback when there is no stream.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from typing import Any, Callable

import sseclient

from .errors import JobFailed, MarathonError, MarathonUnavailable, Timeout
from .marathon import Client

__all__ = ["EventStream", "wait_deployment", "wait_job", "FINAL_STATES"]

FINAL_STATES = ("Succeeded", "Failed")
_INTERESTING = ("deployment_info", "deployment_step_success", "deployment_step_failure", "deployment_success",
                "deployment_failed", "status_update_event", "health_status_changed_event",
                "instance_health_changed_event", "group_change_success", "app_terminated_event")


class EventStream:
    """Reads ``/v2/events`` in a daemon thread into a queue; reconnects with backoff.
    ``available`` turns False when the server has no event stream (e.g. 405/404)."""

    def __init__(self, client: Client, event_types=_INTERESTING, *, reconnect_max: float = 10.0):
        self.client = client
        self.event_types = tuple(event_types)
        self.events: "queue.Queue[dict[str, Any]]" = queue.Queue()
        self.available = True
        self.reconnects = 0
        self._stop = threading.Event()
        self._response = None
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
        self._stop.set()
        r = self._response
        if r is not None:
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


def wait_deployment(client: Client, deployment_id: str | None, job: str, *, timeout: float | None,
                    on_progress: Callable[[dict[str, Any]], None] = lambda s: None,
                    poll: float = 2.0, clock: Callable[[], float] = time.monotonic,
                    stream: EventStream | None = None) -> dict[str, Any]:
    """Wait until the deployment has left ``/v2/deployments`` (every task running and
    healthy). Raises :class:`Timeout` (exit 3) when ``timeout`` passes first."""
    from .jobs import job_status  # lazily: the bootstrap uses EventStream without jinja2/marshmallow

    deadline = None if timeout is None else clock() + timeout
    outage = _Outage(clock)
    while True:
        try:
            active = {d.get("id"): d for d in client.deployments()}
            status = job_status(client, job, probe=False)
        except MarathonUnavailable as e:
            outage.tolerate(e)
            _sleep(poll)
            continue
        outage.clear()
        status["deployment"] = active.get(deployment_id)
        on_progress(status)
        if deployment_id is None or deployment_id not in active:
            return status
        if deadline is not None and clock() >= deadline:
            raise Timeout(f"deployment {deployment_id} of {job} is still in progress after {timeout:g} s",
                          hint=f"follow it with: marathon-tf status {job} --watch")
        left = poll if deadline is None else max(0.0, min(poll, deadline - clock()))
        events = stream.wait(left) if stream is not None and stream.available else _sleep(left)
        for ev in events:
            if ev.get("eventType") == "deployment_failed" and ev.get("id") == deployment_id:
                # The job's own end (its record, written with ?force=true) overrides the deployment:
                # that is the job's outcome, not a failed deployment.
                ended = job_status(client, job, probe=False)
                if ended.get("state") in FINAL_STATES:
                    return ended
                reason = ev.get("reason") or "cancelled or overridden by another deployment"
                raise JobFailed(f"deployment {deployment_id} of {job} failed: {reason}")


def wait_job(client: Client, job: str, *, timeout: float | None,
             on_progress: Callable[[dict[str, Any]], None] = lambda s: None,
             poll: float = 2.0, clock: Callable[[], float] = time.monotonic,
             stream: EventStream | None = None) -> dict[str, Any]:
    """Follow a job until its record says Succeeded or Failed; returns the final status."""
    from .jobs import job_status

    deadline = None if timeout is None else clock() + timeout
    outage = _Outage(clock)
    while True:
        try:
            status = job_status(client, job)
        except MarathonUnavailable as e:
            outage.tolerate(e)
            _sleep(poll)
            continue
        outage.clear()
        on_progress(status)
        if status.get("state") in FINAL_STATES:
            return status
        if deadline is not None and clock() >= deadline:
            raise Timeout(f"job {job} is still {status.get('state', 'running').lower()} after {timeout:g} s",
                          hint=f"it keeps running; follow it with: marathon-tf status {job} --watch")
        left = poll if deadline is None else max(0.0, min(poll, deadline - clock()))
        if stream is not None and stream.available:
            stream.wait(left)
        else:
            _sleep(left)


class _Outage:
    """While following a job, Marathon may be away for a while (a restart, a leader election):
    keep polling for ``grace`` seconds before giving up with the last error."""

    def __init__(self, clock: Callable[[], float], grace: float = 60.0):
        self.clock, self.grace, self.since = clock, grace, None

    def tolerate(self, error: MarathonUnavailable) -> None:
        now = self.clock()
        self.since = now if self.since is None else self.since
        if now - self.since >= self.grace:
            raise error

    def clear(self) -> None:
        self.since = None


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


def _sleep(seconds: float) -> list:
    time.sleep(seconds)
    return []
