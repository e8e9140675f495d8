"""The admission deadline and the retries, driven from the user's side (see :mod:`.gang` for the rules
and what ``status`` says of them): :func:`drive` is one look at a job's status by whoever follows it
(``deploy``, ``status --watch``, ``deploy --local``, the API's ``wait``) or looks at it (``status``,
``deploy``): past the deadline of a starting job it releases the job (the record ``NotPlaced``:
:func:`marathon_tf.marathon.record.release_job`); a ``Queued`` job whose next attempt is due it
submits again (:func:`resubmit`).

Before a release a running task is asked (its ``/status`` phase): a job one of whose tasks is past
its rendezvous has started, whatever Marathon's queue says now.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from marathon_tf.contract import labels as L
from marathon_tf.contract import naming
from marathon_tf.contract import timeline as T
from marathon_tf.contract.errors import MarathonError
from marathon_tf.marathon import versions
from marathon_tf.marathon.jobstate import job_labels, stored_spec
from marathon_tf.marathon.model import apps_by_id
from marathon_tf.marathon.record import release_job
from marathon_tf.user import apart, history
from marathon_tf.user import status as job_status
from marathon_tf.user.gang import settings
from marathon_tf.user.redeploy import await_stopped

__all__ = ["drive", "resubmit", "RELEASED", "RESUBMITTED"]

RELEASED, RESUBMITTED = "released", "resubmitted"
_RECORD = (L.STATE, L.FINISHED_AT, L.REASON, L.FINAL_STEP, L.NEXT_ATTEMPT_AT, L.EVENTS)


def _past_rendezvous(client: Any, job: str, mesos: str | None = None) -> bool:
    """Whether a running task of the job says it is past its rendezvous (its ``/status`` phase)."""
    rows = job_status.job_status(client, job, probe=True, mesos=mesos).tasks
    return any(r.phase not in (None, "discovering") for r in rows if r.role in naming.CLUSTER_ROLES)


def _events(client: Any, job: str, status: Mapping[str, Any], reason: str, now: float) -> dict[str, dict[str, str]]:
    """The job's events with its release, for the record (the deciding task's app, as its end's)."""
    try:
        events = history.job_events(client, job, status)["events"]
    except MarathonError:
        events = []
    events = T.merge(events, [{"time": now, "task": "job", "kind": T.NOT_PLACED, "message": f"NotPlaced: {reason}"}])
    tasks = {r.get("task") for r in status.get("tasks") or []}
    holder = next((t for t in ("chief-0", "worker-0") if t in tasks), sorted(tasks)[0] if tasks else "worker-0")
    role, index = naming.parse_task_name(holder) or ("worker", 0)
    return {naming.app_id(job, role, index): {L.EVENTS: T.compact(events)}}


def drive(client: Any, job: str, status: Mapping[str, Any], *, now: Callable[[], float] = time.time,
          rng: random.Random | None = None, mesos: str | None = None) -> str | None:
    """One look at the job's admission (``status``: its status, as ``-o json`` prints it): past the
    deadline of a starting job, release it (:data:`RELEASED`); a ``Queued`` job whose next attempt is
    due, re-submit it (:data:`RESUBMITTED`); else None. ``mesos``: the master the user named."""
    view = status.get("admission") or {}
    if status.get("state") == L.QUEUED and (view.get("nextInSeconds") or 0) <= 0:
        return RESUBMITTED if resubmit(client, job) else None
    if not view.get("starting") or view.get("secondsLeft") is None or view["secondsLeft"] > 0:
        return None
    if _past_rendezvous(client, job, mesos):
        return None
    group = client.get_group(naming.group_id(job), embed=("group.groups", "group.apps"))
    _, retries, backoff = settings(stored_spec(apps_by_id(group).values()))
    reason = view.get("reason") or ", ".join(view.get("starting") or [])
    wrote = release_job(client, job, reason, attempts=retries + 1, backoff=backoff, now=now, rng=rng,
                        extra=_events(client, job, status, reason, now()))
    return RELEASED if wrote else None


def resubmit(client: Any, job: str, *, now: Callable[[], float] = time.time) -> str | None:
    """Submit a released job again: every app back to one instance, the record removed, the attempt
    counted, its events kept as ``marathon-tf/earlier-events`` (one bulk ``PUT /v2/apps``, once the
    release's deployment is done). The deployment id, or None when the job had no record left."""
    await_stopped(client, job)
    group = client.get_group(naming.group_id(job), embed=("group.groups", "group.apps"))
    apps = apps_by_id(group)
    labels = job_labels(apps.values())
    if labels.get(L.STATE) != L.NOT_PLACED:
        return None  # someone else did it (or deployed the job again)
    attempt = int(labels.get(L.ATTEMPT) or 1) + 1
    attempts = int(labels.get(L.ATTEMPTS) or attempt)
    earlier: list[dict[str, Any]] = []
    for app in apps.values():
        for key in (L.EARLIER_EVENTS, L.EVENTS):
            earlier += T.expand(app.labels.get(key))[0]
    earlier = T.merge(earlier, [{"time": now(), "task": "job", "kind": T.RESUBMITTED,
                                 "message": f"submitted again: attempt {attempt} of {attempts}"}])
    body = []
    for i, (app_id, app) in enumerate(sorted(apps.items())):
        kept = {k: v for k, v in app.labels.items() if k not in _RECORD and k != L.EARLIER_EVENTS}
        kept.update({L.ATTEMPT: str(attempt), L.ATTEMPTS: str(attempts)})
        if i == 0:
            kept[L.EARLIER_EVENTS] = T.compact(earlier)
        body.append({"id": app_id, "instances": 1, "labels": kept})
    caps = client.capabilities() if callable(getattr(client, "capabilities", None)) else versions.Capabilities()
    return apart.update(client, body, apps, caps) or "submitted"  # (1.4 - 1.7: what may wait, apart)
