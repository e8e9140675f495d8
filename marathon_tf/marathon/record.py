"""The job's record in Marathon: what the whole job's end looks like, whoever writes it.

Marathon relaunches any task that exits, even with 0, so a training job ends only when someone
says so. The deciding task's bootstrap (:mod:`marathon_tf.task.jobcontrol`) does, and so does
whoever follows a job from the user's side when a task can never start (``deploy --local``, a
waiting ``deploy``: :func:`fail_if_hopeless`). Both write the same record with
:func:`finish_job`: the labels of :mod:`marathon_tf.contract.labels` (``marathon-tf/state``,
``/finished-at``, ``/final-step``, ``/reason``) on every app of the job, whose instances are set
to 0 in ONE bulk ``PUT /v2/apps?force=true``. Marathon then kills every task and relaunches
nothing; the apps stay, so ``marathon-tf status`` shows the outcome, when, the final step and
the reason.

A job whose tasks were not all placed by its admission deadline gets the record ``NotPlaced``
(:func:`release_job`: whoever sees the deadline pass first, a placed task or a following CLI),
with the attempt it was and, when ``admission.retries`` are left, when the next one starts.

Only :mod:`marathon_tf.marathon.client` talks to Marathon here; the Marathon JSON is read with
``.get()``, field by field.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from marathon_tf.contract import labels as L
from marathon_tf.contract import naming
from marathon_tf.marathon.client import Client
from marathon_tf.marathon.model import apps_by_id

__all__ = ["GROUP_EMBEDS", "finish_job", "hopeless_task_failure", "hopeless_failures",
           "hopeless_verdict", "fail_if_hopeless", "release_job", "next_attempt_delay", "attempt_of", "MAX_BACKOFF"]

#: What a look at the job's group embeds: its subgroups, apps and their tasks.
GROUP_EMBEDS = ("group.groups", "group.apps", "group.apps.tasks")


def _iso(wall: float) -> str:
    return datetime.fromtimestamp(wall, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + \
        f"{int(wall * 1000) % 1000:03d}Z"


def finish_job(client: Client, job: str, state: str, *, reason: str, final_step: int | None,
               now: Callable[[], float] = time.time,
               extra: Mapping[str, Mapping[str, str]] | None = None,
               record_extra: Mapping[str, str] | None = None) -> bool:
    """Record the job's end on every app of the job and stop it (instances 0), in one request.

    ``GET`` the group, then one bulk ``PUT /v2/apps?force=true`` with, per app,
    ``{"id", "instances": 0, "labels": {...existing, state, finished-at, final-step, reason}}``
    (all label values strings; existing labels such as ``marathon-tf/spec`` are kept; ``extra``: more
    labels for some apps, by app id, e.g. the job's events on the deciding task's; ``record_extra``:
    more record labels on every app). Returns
    False, changing nothing, when the job already carries a record (another task decided first).
    Transient Marathon errors are retried by the client (a PUT whose answer was lost is looked for on the
    job, not sent again: :mod:`.marker`); others raise :class:`MarathonError`.
    """
    if state not in L.RECORDED:
        raise ValueError(f"state must be one of {', '.join(L.RECORDED)}, not {state!r}")
    group = client.get_group(naming.group_id(job), embed=("group.groups", "group.apps"))
    apps = apps_by_id(group)
    if any(a.labels.get(L.STATE) for a in apps.values()):
        return False
    record = {L.STATE: state, L.FINISHED_AT: _iso(now()), L.REASON: reason[:2000], **(record_extra or {})}
    if final_step is not None:
        record[L.FINAL_STEP] = str(final_step)
    # The digest (marathon.marker) is dropped: it names the definition as deployed, which this changes.
    body = [{"id": app_id, "instances": 0,
             "labels": {**{k: str(v) for k, v in (app.get("labels") or {}).items() if k != L.DIGEST}, **record,
                        **(extra or {}).get(app_id, {})}}
            for app_id, app in sorted(apps.items())]

    def recorded() -> dict[str, Any] | None:
        """Whether our record is on the job (the PUT's answer was lost but it went through)."""
        now_apps = apps_by_id(client.get_group(naming.group_id(job), embed=("group.groups", "group.apps")))
        mine = all(i in now_apps and now_apps[i].labels.get(L.FINISHED_AT) == record[L.FINISHED_AT] for i in apps)
        return {"adopted": True} if mine else None

    client.update_apps(body, force=True, reconcile=recorded)
    return True


# --- a task that can never start ----------------------------------------------------------------

_HOPELESS = re.compile(r"exited with status 12[67]\b|Failed to fetch all URIs|hostPath \S+ (is not a directory|"
                       r"cannot be created)")


def hopeless_task_failure(message: str) -> bool:
    """Whether a task failure message from Marathon (``lastTaskFailure.message``) means a relaunch
    cannot help: the command could not be executed (exit 126/127), its URIs cannot be fetched, or
    a volume's host path is unusable (the local runner's words)."""
    return bool(_HOPELESS.search(message or ""))


def hopeless_failures(group: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(task, message)`` for every app of the job whose last task failure (of its current
    version) is hopeless and that has no running task: see :func:`hopeless_task_failure`."""
    out = []
    for app_id, app in sorted(apps_by_id(group).items()):
        ltf = app.get("lastTaskFailure") or {}
        message = ltf.get("message") or ""
        if not hopeless_task_failure(message) or (ltf.get("version") and app.get("version")
                                                  and ltf["version"] < app["version"]):
            continue
        if any(t.get("state") == "TASK_RUNNING" for t in app.get("tasks") or []):
            continue
        out.append((app_id.rstrip("/").rsplit("/", 1)[-1], message))
    return out


def hopeless_verdict(client: Client, job: str, *, group: Mapping[str, Any] | None = None) -> str | None:
    """One look at the job (a group GET, or ``group`` when the caller made it with tasks and
    ``lastTaskFailure``): the reason to fail it when a task can never start
    (:func:`hopeless_failures`), ``""`` when the job already has its record, else None."""
    if group is None:
        group = client.get_group(naming.group_id(job), embed=GROUP_EMBEDS + ("group.apps.lastTaskFailure",))
    if any(a.labels.get(L.STATE) for a in apps_by_id(group).values()):
        return ""
    hopeless = hopeless_failures(group)
    return f"{hopeless[0][0]} cannot run: {hopeless[0][1]}" if hopeless else None


def fail_if_hopeless(client: Client, job: str, final_step: int | None = None) -> str | None:
    """Fail the job (its record, see :func:`finish_job`) when a task can never start; the reason, or
    None. For whoever follows a job: ``deploy --local`` and a waiting ``deploy``."""
    verdict = hopeless_verdict(client, job)
    if verdict:
        finish_job(client, job, L.FAILED, reason=verdict, final_step=final_step)
    return verdict or None


# --- a job not placed by its admission deadline ---------------------------------------------------

#: The longest wait between two attempts (seconds).
MAX_BACKOFF = 3600.0


def next_attempt_delay(attempt: int, backoff: float, rng: random.Random | None = None) -> float:
    """Seconds before attempt ``attempt + 1``: ``backoff`` doubling with each attempt, times a random
    0.5–1.5 (two jobs released together do not come back together), at most :data:`MAX_BACKOFF`."""
    base = min(MAX_BACKOFF, backoff * 2 ** max(0, attempt - 1))
    return min(MAX_BACKOFF, base * (rng or random).uniform(0.5, 1.5))


def attempt_of(apps: Mapping[str, Mapping[str, Any]]) -> int:
    """Which attempt the job is at (its apps' ``marathon-tf/attempt``; the first when unset)."""
    for app in apps.values():
        value = str((app.get("labels") or {}).get(L.ATTEMPT) or "")
        if value.isdigit():
            return max(1, int(value))
    return 1


def release_job(client: Client, job: str, reason: str, *, attempts: int, backoff: float,
                now: Callable[[], float] = time.time, rng: random.Random | None = None,
                extra: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, str] | None:
    """Hold nothing of a job whose admission deadline passed: the record ``NotPlaced`` with
    ``reason`` (why its tasks wait, per role) on every app, whose instances go to 0, in one request
    (:func:`finish_job`: Marathon kills the placed tasks with their grace period). With an attempt
    left (``attempts``: ``admission.retries`` + 1) the record says when the next one starts. The
    record labels written, or None when the job already had a record (someone else decided)."""
    group = client.get_group(naming.group_id(job), embed=("group.groups", "group.apps"))
    attempt = attempt_of(apps_by_id(group))
    labels = {L.ATTEMPT: str(attempt), L.ATTEMPTS: str(max(attempts, attempt))}
    if attempt < attempts:
        labels[L.NEXT_ATTEMPT_AT] = _iso(now() + next_attempt_delay(attempt, backoff, rng))
    wrote = finish_job(client, job, L.NOT_PLACED, reason=reason, final_step=None, now=now, extra=extra,
                       record_extra=labels)
    return labels if wrote else None
