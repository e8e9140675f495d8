"""Following a deployment and a job: Marathon's event stream
(:class:`marathon_tf.marathon.events.EventStream`) wakes us early; polling
``/v2/deployments`` and the group is the source of truth and the fallback when
there is no stream.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from marathon_tf.contract.errors import JobFailed, MarathonUnavailable, Timeout
from marathon_tf.marathon.client import Client
from marathon_tf.marathon.events import EventStream

__all__ = ["wait_deployment", "wait_job", "FINAL_STATES"]

FINAL_STATES = ("Succeeded", "Failed")


def wait_deployment(client: Client, deployment_id: str | None, job: str, *, timeout: float | None,
                    on_progress: Callable[[dict[str, Any]], None] = lambda s: None,
                    poll: float = 2.0, clock: Callable[[], float] = time.monotonic,
                    stream: EventStream | None = None) -> dict[str, Any]:
    """Wait until the deployment has left ``/v2/deployments`` (every task running and
    healthy). Raises :class:`Timeout` (exit 3) when ``timeout`` passes first."""
    from marathon_tf.user.jobs import job_status  # lazily: the bootstrap uses EventStream without jinja2/marshmallow

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
    from marathon_tf.user.jobs import job_status

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


def _sleep(seconds: float) -> list:
    time.sleep(seconds)
    return []
