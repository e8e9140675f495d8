"""Following a deployment and a job: Marathon's event stream
(:class:`marathon_tf.marathon.events.EventStream`) wakes us early; polling
``/v2/deployments`` and the job's status (:func:`marathon_tf.user.status.job_status`) is the source of
truth and the fallback when there is no stream.

:func:`wait_job` is the one loop that follows a job to its end (``deploy``, ``deploy --local``,
``status --watch``, the API's ``wait``: :func:`marathon_tf.user.pipeline.follow` wires it up);
:func:`wait_deployment` follows one deployment (``scale --wait``, and ``deploy`` before the job).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from marathon_tf.contract import labels as L
from marathon_tf.contract import naming, spread
from marathon_tf.contract.errors import JobFailed, MarathonError, MarathonUnavailable, Timeout
from marathon_tf.marathon.client import Client
from marathon_tf.marathon.events import Event, EventStream
from marathon_tf.marathon.jobstate import converged
from marathon_tf.marathon.model import Deployment, job_apps
from marathon_tf.user.results import JobStatus
from marathon_tf.user.status import job_status

__all__ = ["wait_deployment", "wait_job", "FINAL_STATES", "NOT_LISTED_GRACE"]

FINAL_STATES = L.RECORDED  # Succeeded, Failed, NotPlaced (a Queued job is not final: it is submitted again)
#: How long a deployment id Marathon returned may stay out of ``/v2/deployments`` before "not
#: listed" is read as "finished" (when neither the event stream nor the group could tell).
NOT_LISTED_GRACE = 30.0


def wait_deployment(client: Client, deployment_id: str | None, job: str, *, timeout: float | None,
                    on_progress: Callable[[JobStatus], None] = lambda s: None,
                    poll: float = 2.0, clock: Callable[[], float] = time.monotonic,
                    stream: EventStream | None = None, grace: float = NOT_LISTED_GRACE,
                    mesos: str | None = None) -> JobStatus:
    """Wait until the deployment has left ``/v2/deployments`` (every task running and
    healthy). Raises :class:`Timeout` (exit 3) when ``timeout`` passes first.

    Marathon answers with the deployment's id before it lists it: 1.11 sends ``DeploymentStarted`` before
    ``LaunchDeployment`` adds the plan, 1.4 lists a plan only once its first step is reported. So an id not listed
    yet is finished only once it has been listed, or the event stream said ``deployment_success`` for it, or the
    job's apps show it done (no app names a deployment and each runs its instance count of tasks of its current
    configuration), or ``grace`` seconds passed. The statuses carry the deployment (``deployment``: as
    ``/v2/deployments`` lists it, None when it does not). ``mesos``: the Mesos master the user named (``--mesos`` /
    ``MESOS_URL``), for the job's waits."""
    deadline = None if timeout is None else clock() + timeout
    outage = _Outage(clock)
    seen = succeeded = False
    unlisted_since = None
    while True:
        try:
            active = {Deployment.parse(d).id: d for d in client.deployments()}
            status = job_status(client, job, probe=False, mesos=mesos).updated(deployment=active.get(deployment_id))
        except MarathonUnavailable as e:
            outage.tolerate(e)
            _sleep(poll)
            continue
        outage.clear()
        on_progress(status)
        if deployment_id is None or (status.elastic and status.state in (L.JobState.RUNNING.value,) + FINAL_STATES):
            return status  # (an elastic job runs once its minimum does: its standbys may wait for ever)
        if deployment_id in active:
            seen = True
        elif seen or succeeded:
            return status
        else:
            unlisted_since = clock() if unlisted_since is None else unlisted_since
            if clock() - unlisted_since >= grace or _converged(client, job):
                return status
        if deadline is not None and clock() >= deadline:
            raise Timeout(f"deployment {deployment_id} of {job} is still in progress after {timeout:g} s",
                          hint=f"follow it with: marathon-tf status {job} --watch")
        left = poll if deadline is None else max(0.0, min(poll, deadline - clock()))
        events = stream.wait(left) if stream is not None and stream.available else _sleep(left)
        for ev in map(Event.parse, events):
            if ev.event_type == "deployment_success" and ev.id == deployment_id:
                succeeded = True
            if ev.event_type == "deployment_failed" and ev.id == deployment_id:
                # The job's own end (its record, written with ?force=true) overrides the deployment:
                # that is the job's outcome, not a failed deployment.
                ended = job_status(client, job, probe=False, mesos=mesos)
                if ended.state in FINAL_STATES + (L.QUEUED,):
                    return ended
                # A job with placement rules: its leader's writes (?force=true) override the group's
                # deployment, which waits for the held tasks (marathon_tf.task.placer): follow the job.
                if _placed_by_leader(client, job):
                    return ended
                reason = ev.reason or "cancelled or overridden by another deployment"
                raise JobFailed(f"deployment {deployment_id} of {job} failed: {reason}")


def wait_job(client: Client, job: str, *, timeout: float | None,
             on_progress: Callable[[JobStatus], None] = lambda s: None,
             poll: float = 2.0, clock: Callable[[], float] = time.monotonic,
             stream: EventStream | None = None, mesos: str | None = None) -> JobStatus:
    """Follow a job until its record says Succeeded, Failed or NotPlaced; returns the final status.
    A ``Queued`` job (released at its deadline, an attempt left) is followed on: whoever follows
    re-submits it when it is due (``on_progress``: :func:`marathon_tf.user.release.drive`). ``mesos``:
    as for :func:`wait_deployment`."""
    deadline = None if timeout is None else clock() + timeout
    outage = _Outage(clock)
    while True:
        try:
            status = job_status(client, job, mesos=mesos)
        except MarathonUnavailable as e:
            outage.tolerate(e)
            _sleep(poll)
            continue
        outage.clear()
        on_progress(status)
        if status.state in FINAL_STATES:
            return status
        if deadline is not None and clock() >= deadline:
            raise Timeout(f"job {job} is still {(status.state or 'running').lower()} after {timeout:g} s",
                          hint=f"it keeps running; follow it with: marathon-tf status {job} --watch")
        left = poll if deadline is None else max(0.0, min(poll, deadline - clock()))
        if stream is not None and stream.available:
            stream.wait(left)
        else:
            _sleep(left)


def _placed_by_leader(client: Client, job: str) -> bool:
    """Whether the job's apps carry placement rules (its leader writes constraints to them)."""
    try:
        group = client.get_group(naming.group_id(job), embed=("group.groups", "group.apps"))
    except MarathonError:
        return False
    return any(spread.RULES_LABEL in a.labels for a in job_apps(group).values())


def _converged(client: Client, job: str) -> bool:
    """Whether the job's apps show no deployment left to do: none names a deployment, and each runs
    exactly its ``instances`` tasks launched at or after its ``versionInfo.lastConfigChangeAt``."""
    try:
        group = client.get_group(naming.group_id(job), embed=("group.groups", "group.apps", "group.apps.tasks",
                                                              "group.apps.deployments"))
    except MarathonError:
        return False
    return converged(job_apps(group).values())


class _Outage:
    """While following a job, Marathon may be away for a while (a restart, a leader election):
    keep polling for ``grace`` seconds before giving up with the last error."""

    def __init__(self, clock: Callable[[], float], grace: float = 60.0):
        self.clock, self.grace = clock, grace
        self.since: float | None = None

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
