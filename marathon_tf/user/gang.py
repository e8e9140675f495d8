"""The gang deadline and the retries on the user's side: what ``status`` says of a starting job
(:func:`annotate`, pure: it adds to a status built from one look at the job, and fetches nothing);
what a marathon-tf that looks at it does when the deadline has passed or the next attempt is due is
:mod:`marathon_tf.user.release`.

A job is *starting* while a task of its TF cluster waits to be placed for the first time in this
attempt (:func:`marathon_tf.marathon.waiting.starting_members`). Its deadline is the attempt's
submission (the apps' latest ``versionInfo.lastConfigChangeAt``) plus ``admission.timeout``. Past
it, nothing of the job may be held: :func:`marathon_tf.marathon.record.release_job` writes the
record ``NotPlaced`` (why, per role) and scales every app to 0 in one request; Marathon stops the
placed tasks with their grace period. With ``admission.retries`` left the record says when the next
attempt starts (``Queued (attempt 2 of 4, next in 40s)``); then
:func:`marathon_tf.user.release.resubmit` puts every app back to one instance, without the record.

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

import time
from collections.abc import Mapping
from typing import Any

from marathon_tf.contract import labels as L
from marathon_tf.contract import timeline as T
from marathon_tf.contract.progress import duration
from marathon_tf.marathon import waiting as W
from marathon_tf.marathon.jobstate import job_labels, job_state, stored_spec
from marathon_tf.marathon.model import apps_by_id
from marathon_tf.marathon.tasks import wall

__all__ = ["settings", "annotate", "waits_to_start", "released", "queued_text"]


def settings(spec: Mapping[str, Any]) -> tuple[float, int, float]:
    """``(timeout, retries, backoff)`` of a job file as deployed (its ``admission``, with defaults)."""
    from marathon_tf.user.spec.model import Admission

    a = {**Admission().__dict__, **((spec or {}).get("admission") or {})}
    return float(a["timeout"]), int(a["retries"]), float(a["backoff_seconds"])


def released(group: Mapping[str, Any]) -> bool:
    """Whether the job's record says ``NotPlaced`` (deploying it again starts it afresh, attempt 1)."""
    return job_state(apps_by_id(group).values()) in (L.JobState.NOT_PLACED, L.JobState.QUEUED)


def waits_to_start(apps: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether the job has no record and a task of its TF cluster waits to be placed for the first
    time in this attempt (:func:`annotate` then says why, with the agents' free resources)."""
    return not job_labels(apps.values()).get(L.STATE) and bool(W.starting_members(apps.values()))


def queued_text(admission: Mapping[str, Any]) -> str:
    """``attempt 2 of 4, next in 40s`` (or ``…, due now``)."""
    left = admission.get("nextInSeconds")
    when = "due now" if left is not None and left <= 0 else f"next in {duration(left or 0)}"
    return f"attempt {admission.get('attempt')} of {admission.get('attempts')}, {when}"


def annotate(status: dict[str, Any], apps: Mapping[str, Mapping[str, Any]], queue: Mapping[str, Mapping[str, Any]],
             *, free: Mapping[str, Mapping[str, float]] | None = None, now: float | None = None) -> None:
    """Add ``admission`` to a job's status (its dict, ``state`` already set): for a starting job, per
    role how many tasks are placed and why the rest wait (:mod:`marathon_tf.marathon.waiting`; numbers
    from the agents' free resources ``free`` when they were read) and its deadline; for a released job
    its attempts (its state ``Queued`` while one is left: :func:`marathon_tf.marathon.jobstate.job_state`)."""
    now = time.time() if now is None else now
    timeout, retries, _ = settings(stored_spec(apps.values()))
    labels = job_labels(apps.values())
    attempts = int(labels.get(L.ATTEMPTS) or retries + 1)
    view: dict[str, Any] = {"attempt": int(labels.get(L.ATTEMPT) or 1), "attempts": attempts,
                            "timeoutSeconds": timeout}
    if labels.get(L.STATE) == L.NOT_PLACED:
        view["attempt"] = int(labels.get(L.ATTEMPT) or 1) + (1 if labels.get(L.NEXT_ATTEMPT_AT) else 0)
        if labels.get(L.NEXT_ATTEMPT_AT):
            view["nextAttemptAt"] = labels[L.NEXT_ATTEMPT_AT]
            view["nextInSeconds"] = round((wall(labels[L.NEXT_ATTEMPT_AT]) or now) - now, 1)
        status["admission"] = view
        return
    if not waits_to_start(apps):
        return
    waits = W.role_waits(apps.values(), queue, free=free, now=now)
    started = W.attempt_started(apps.values())
    view.update(starting=W.starting_members(apps.values()), roles={r: w.to_dict() for r, w in waits.items()},
                waiting=[w.text() for w in waits.values() if w.waiting], reason=W.summary(waits))
    if started is not None:
        deadline = started + timeout
        view.update(submittedAt=T.iso(started), deadline=T.iso(deadline), secondsLeft=round(deadline - now, 1))
    status["admission"] = view
