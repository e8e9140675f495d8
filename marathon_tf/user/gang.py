"""The gang deadline and the retries on the user's side: what ``status`` says of a starting job, and
what a marathon-tf that looks at it does when the deadline has passed or the next attempt is due.

A job is *starting* while a task of its TF cluster waits to be placed for the first time in this
attempt (:func:`marathon_tf.marathon.waiting.starting_members`). Its deadline is the attempt's
submission (the apps' latest ``versionInfo.lastConfigChangeAt``) plus ``admission.timeout``. Past
it, nothing of the job may be held: :func:`marathon_tf.marathon.record.release_job` writes the
record ``NotPlaced`` (why, per role) and scales every app to 0 in one request; Marathon stops the
placed tasks with their grace period. With ``admission.retries`` left the record says when the next
attempt starts (``Queued (attempt 2 of 4, next in 40s)``); then :func:`resubmit` puts every app back
to one instance, without the record.

Who drives it (README "Admission"):

* the deadline: whoever looks first once it has passed. Every placed task of the job watches it
  while it waits for its peers (:mod:`marathon_tf.task.admission`: one Marathon look at the
  deadline, not a poll); so does a marathon-tf that follows the job (``deploy``, ``status --watch``,
  ``deploy --local``, the API's ``wait``), and a ``status`` or ``deploy`` run later. The task that
  would decide the job's end cannot be the one: it may be among those not placed. The first
  writer wins (a record is never overwritten).
* the retries: only the user's side can, since no task of a released job runs (that is the
  point). A following marathon-tf re-submits when the record says the next attempt is due, and
  so does the next ``status`` or ``deploy`` after that time. With nobody looking (``deploy
  --detach``, a laptop closed) the job stays ``Queued``, holding nothing, until someone does.

Before a release a running task is asked (its ``/status`` phase): a job one of whose tasks is past
its rendezvous has started, whatever Marathon's queue says now.
"""

from __future__ import annotations

import random
import time
from typing import Any, Callable, Mapping, Optional

from marathon_tf.contract import labels as L, naming, timeline as T
from marathon_tf.contract.errors import MarathonError
from marathon_tf.contract.progress import duration
from marathon_tf.marathon import waiting as W
from marathon_tf.marathon.record import job_apps, release_job

__all__ = ["settings", "annotate", "drive", "resubmit", "released", "queued_text", "RELEASED", "RESUBMITTED"]

RELEASED, RESUBMITTED = "released", "resubmitted"
_RECORD = (L.STATE, L.FINISHED_AT, L.REASON, L.FINAL_STEP, L.NEXT_ATTEMPT_AT, L.EVENTS)


def settings(spec: Mapping[str, Any]) -> tuple[float, int, float]:
    """``(timeout, retries, backoff)`` of a job file as deployed (its ``admission``, with defaults)."""
    from marathon_tf.user.spec.model import Admission

    a = {**Admission().__dict__, **((spec or {}).get("admission") or {})}
    return float(a["timeout"]), int(a["retries"]), float(a["backoff_seconds"])


def _labels(apps: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for app in apps.values():
        out.update({k: str(v) for k, v in (app.get("labels") or {}).items() if k.startswith(L.PREFIX)})
    return out


def released(group: Mapping[str, Any]) -> bool:
    """Whether the job's record says ``NotPlaced`` (deploying it again starts it afresh, attempt 1)."""
    return _labels(job_apps(group)).get(L.STATE) == L.NOT_PLACED


def queued_text(admission: Mapping[str, Any]) -> str:
    """``attempt 2 of 4, next in 40s`` (or ``…, due now``)."""
    left = admission.get("nextInSeconds")
    when = "due now" if left is not None and left <= 0 else f"next in {duration(left or 0)}"
    return f"attempt {admission.get('attempt')} of {admission.get('attempts')}, {when}"


def annotate(status: dict[str, Any], apps: Mapping[str, Mapping[str, Any]], queue: Mapping[str, Mapping[str, Any]],
             client: Any, *, now: Optional[float] = None, mesos: Optional[str] = None) -> None:
    """Add ``admission`` to a ``job_status`` result: for a starting job, per role how many tasks are
    placed and why the rest wait (:mod:`marathon_tf.marathon.waiting`; numbers from the agents' free
    resources when the master, ``mesos`` or the one Marathon names, can be read) and its deadline; for
    a released job its attempts, and the state ``Queued`` while one is left."""
    from marathon_tf.user.jobs import stored_spec

    now = time.time() if now is None else now
    timeout, retries, _ = settings(stored_spec(apps))
    labels = _labels(apps)
    attempts = int(labels.get(L.ATTEMPTS) or retries + 1)
    view: dict[str, Any] = {"attempt": int(labels.get(L.ATTEMPT) or 1), "attempts": attempts,
                            "timeoutSeconds": timeout}
    if labels.get(L.STATE) == L.NOT_PLACED:
        view["attempt"] = int(labels.get(L.ATTEMPT) or 1) + (1 if labels.get(L.NEXT_ATTEMPT_AT) else 0)
        if labels.get(L.NEXT_ATTEMPT_AT):
            view["nextAttemptAt"] = labels[L.NEXT_ATTEMPT_AT]
            view["nextInSeconds"] = round((W.wall(labels[L.NEXT_ATTEMPT_AT]) or now) - now, 1)
            status["state"] = L.QUEUED
        status["admission"] = view
        return
    if labels.get(L.STATE):
        return
    starting = W.starting_members(apps.values())
    if not starting:
        return
    free = None
    try:
        from marathon_tf.user import capacity

        cap = capacity.read(client, mesos)
        free = cap.free_by_agent() if cap is not None else None
    except Exception:  # noqa: BLE001 - the numbers are advisory: Marathon's offers still say why
        free = None
    waits = W.role_waits(apps.values(), queue, free=free, now=now)
    started = W.attempt_started(apps.values())
    view.update(starting=starting, roles={r: w.to_dict() for r, w in waits.items()},
                waiting=[w.text() for w in waits.values() if w.waiting], reason=W.summary(waits))
    if started is not None:
        deadline = started + timeout
        view.update(submittedAt=T.iso(started), deadline=T.iso(deadline), secondsLeft=round(deadline - now, 1))
    status["admission"] = view


def _past_rendezvous(client: Any, job: str, mesos: Optional[str] = None) -> bool:
    """Whether a running task of the job says it is past its rendezvous (its ``/status`` phase)."""
    from marathon_tf.user.jobs import job_status

    rows = job_status(client, job, probe=True, mesos=mesos).get("tasks") or []
    return any(r.get("phase") not in (None, "discovering") for r in rows if r.get("role") in naming.CLUSTER_ROLES)


def _events(client: Any, job: str, status: Mapping[str, Any], reason: str, now: float) -> dict[str, dict[str, str]]:
    """The job's events with its release, for the record (the deciding task's app, as its end's)."""
    from marathon_tf.user import history

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
          rng: Optional[random.Random] = None, mesos: Optional[str] = None) -> Optional[str]:
    """One look at the job's admission (``status``: its ``job_status``): past the deadline of a
    starting job, release it (:data:`RELEASED`); a ``Queued`` job whose next attempt is due,
    re-submit it (:data:`RESUBMITTED`); else None. ``mesos``: the master the user named."""
    view = status.get("admission") or {}
    if status.get("state") == L.QUEUED and (view.get("nextInSeconds") or 0) <= 0:
        return RESUBMITTED if resubmit(client, job) else None
    if not view.get("starting") or view.get("secondsLeft") is None or view["secondsLeft"] > 0:
        return None
    if _past_rendezvous(client, job, mesos):
        return None
    from marathon_tf.user.jobs import stored_spec

    group = client.get_group(naming.group_id(job), embed=("group.groups", "group.apps"))
    _, retries, backoff = settings(stored_spec({a: v for a, v in job_apps(group).items()}))
    reason = view.get("reason") or ", ".join(view.get("starting") or [])
    wrote = release_job(client, job, reason, attempts=retries + 1, backoff=backoff, now=now, rng=rng,
                        extra=_events(client, job, status, reason, now()))
    return RELEASED if wrote else None


def resubmit(client: Any, job: str, *, now: Callable[[], float] = time.time) -> Optional[str]:
    """Submit a released job again: every app back to one instance, the record removed, the attempt
    counted, its events kept as ``marathon-tf/earlier-events`` (one bulk ``PUT /v2/apps``, once the
    release's deployment is done). The deployment id, or None when the job had no record left."""
    from marathon_tf.user.redeploy import await_stopped

    await_stopped(client, job)
    group = client.get_group(naming.group_id(job), embed=("group.groups", "group.apps"))
    apps = job_apps(group)
    labels = _labels(apps)
    if labels.get(L.STATE) != L.NOT_PLACED:
        return None  # someone else did it (or deployed the job again)
    attempt = int(labels.get(L.ATTEMPT) or 1) + 1
    attempts = int(labels.get(L.ATTEMPTS) or attempt)
    earlier: list[dict[str, Any]] = []
    for app in apps.values():
        for key in (L.EARLIER_EVENTS, L.EVENTS):
            earlier += T.expand((app.get("labels") or {}).get(key))[0]
    earlier = T.merge(earlier, [{"time": now(), "task": "job", "kind": T.RESUBMITTED,
                                 "message": f"submitted again: attempt {attempt} of {attempts}"}])
    body = []
    for i, (app_id, app) in enumerate(sorted(apps.items())):
        kept = {k: str(v) for k, v in (app.get("labels") or {}).items() if k not in _RECORD and k != L.EARLIER_EVENTS}
        kept.update({L.ATTEMPT: str(attempt), L.ATTEMPTS: str(attempts)})
        if i == 0:
            kept[L.EARLIER_EVENTS] = T.compact(earlier)
        body.append({"id": app_id, "instances": 1, "labels": kept})
    return (client.update_apps(body) or {}).get("deploymentId") or "submitted"
