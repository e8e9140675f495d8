"""A job's events and timeline on the user's side (``status --timeline``, ``marathon-tf events``).

Where they come from (:mod:`marathon_tf.contract.timeline`):

* a job that has ended: its record, the deciding task's label ``marathon-tf/events``;
* a running job: the deciding task's ``/events?shared=1`` (every task's events, when the job's
  logdir is shared storage: ``<logdir>/.marathon-tf/events.jsonl``), else every running task's
  ``/events``;
* and Marathon itself: every app's ``lastTaskFailure`` (a task that died: its bootstrap could not
  say so), with the task's last words (the bootstrap's own lines at the end of its sandbox's
  stderr) and, for a task that is not placed, ``/v2/queue``'s reason now;
* the record's end itself (``marathon-tf/state`` and ``/reason``, whole), when none of the events
  above says it (a record written from the user's side, or by a task that kept no events).

Returns data; never prints (the text of a timeline and of events is :mod:`marathon_tf.user.output`'s).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from marathon_tf.contract import labels as L
from marathon_tf.contract import timeline as T
from marathon_tf.contract.errors import MarathonError
from marathon_tf.contract.taskapi import broadcast
from marathon_tf.marathon.jobstate import planned_stop, restarting
from marathon_tf.marathon.model import App, wall
from marathon_tf.marathon.queue import entries_by_app, placement

__all__ = ["job_events", "status_timeline", "events_rows", "last_words", "record_end"]

#: Marathon's task states that are a task's own failure (a TASK_KILLED is a stop).
_FAILED = ("TASK_FAILED", "TASK_ERROR", "TASK_LOST", "TASK_DROPPED", "TASK_GONE", "TASK_UNKNOWN")
#: At most this much of a task's last words is shown.
WORDS_LIMIT = 2000
_BOOTSTRAP = "marathon-tf bootstrap: "


def _get(url: str) -> dict[str, Any] | None:
    from marathon_tf.marathon import transport

    return transport.task_json(url, timeout=4.0)


def last_words(client, job: str, task: str, *, lines: int = 20) -> str | None:
    """What a task that died said last: the bootstrap's own lines among the last ``lines`` of its
    newest instance's stderr (else its last line), one line, at most :data:`WORDS_LIMIT` characters;
    None when its agent keeps no sandbox or cannot be read."""
    from marathon_tf.contract.errors import MarathonTFError
    from marathon_tf.user import logs

    try:
        found, _ = logs.find_task_logs(client, job, task)
        if not found:
            return None
        text = logs.read_new(logs.AgentSession(client), found[-1], "stderr", tail=lines)
    except (MarathonTFError, OSError, ValueError):
        return None
    said = [ln.strip() for ln in text.splitlines() if ln.strip()]
    own = [ln[len(_BOOTSTRAP):] for ln in said if ln.startswith(_BOOTSTRAP)]
    words = " / ".join(own[-3:]) if own else (said[-1] if said else "")
    return (words[:WORDS_LIMIT] + " …") if len(words) > WORDS_LIMIT else words or None


def record_end(apps: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """The job's end as its record says it (an event: ``JobEnded``, or ``NotPlaced``), or None."""
    labels = next((a.labels for a in map(App.parse, apps.values()) if a.labels.get(L.STATE)), None)
    if not labels:
        return None
    when = wall(labels.get(L.FINISHED_AT))
    if when is None:
        return None
    state = labels[L.STATE]
    return {"time": when, "task": "job", "kind": T.NOT_PLACED if state == L.NOT_PLACED else T.JOB_ENDED,
            "message": f"{state}: {labels[L.REASON]}" if labels.get(L.REASON) else state, "state": state}


def job_events(client, job: str, status: Mapping[str, Any], *,
               get: Callable[[str], dict[str, Any] | None] = _get,
               words: Callable[[Any, str, str], str | None] = last_words) -> dict[str, Any]:
    """``{"events": [...], "omitted": N, "source": "record"|"tasks"}`` for a job (``status``: its
    :func:`marathon_tf.user.status.job_status`, as ``-o json`` prints it; ``words``: a task's last
    words, :func:`last_words`)."""
    from marathon_tf.contract import naming
    from marathon_tf.marathon.model import job_apps

    group = client.get_group(naming.group_id(job), embed=("group.groups", "group.apps", "group.apps.tasks",
                                                          "group.apps.deployments", "group.apps.lastTaskFailure"))
    apps = job_apps(group)
    events: list[dict[str, Any]] = []
    omitted, source = 0, "tasks"
    recorded = [a.labels.get(L.EVENTS) for a in apps.values()]
    if any(recorded):
        for label in recorded:
            found, skipped = T.expand(label)
            events += found
            omitted += skipped
        source = "record"
    else:
        rows = [r for r in status.get("tasks") or [] if r.get("metricsUrl")]
        bases = {r["task"]: r["metricsUrl"][: -len("/metrics")] for r in rows}
        decider = next((t for t in ("chief-0", "worker-0") if t in bases), None)
        shared = get(bases[decider] + "/events?shared=1") if decider else None
        if shared and shared.get("shared") is not None:
            events += shared["shared"] + (shared.get("events") or [])
        elif bases:
            for body in broadcast(get, [b + "/events" for b in bases.values()]):
                events += (body or {}).get("events") or []
    from marathon_tf.user.status import planned as planned_restart
    from marathon_tf.user.status import version_cluster

    before: dict[str, Any] = {}
    for name, app in apps.items():  # what Marathon saw: a task that died
        failure = app.last_failure
        when = wall(failure.timestamp) if failure is not None else None
        if failure is not None and when and not (status.get("state") in (L.SUCCEEDED, L.FAILED)
                                                 and failure.state == "TASK_KILLED"):
            message = f"Marathon: {failure.state or ''} {failure.message}".rstrip()
            version = failure.version or ""
            planned = failure.state == "TASK_KILLED" and planned_stop(app, version)
            if planned:  # a planned restart (scale, a re-deploy): an event of its own kind, never TaskFailed
                if version not in before:  # the cluster it ran with (one GET per version)
                    before[version] = version_cluster(client, str(app.id), version) if version else None
                for_, change = planned_restart(before[version], apps)
                events.append({"time": when, "task": name, "kind": T.RESTARTING, "why": for_,
                               "message": f"{name} stopped for {T.PLANNED[for_]}" + (f" ({change})" if change else "")
                                          + f": {planned}; it starts again ({message})"})
                continue
            said = words(client, job, name) if failure.state in _FAILED else None
            events.append({"time": when, "task": name, "kind": T.TASK_FAILED,
                           "message": message + (f"; its last words: {said}" if said else "")})
    end = record_end(apps)
    since = max((e["time"] for e in events if e.get("kind") == T.SUBMITTED and isinstance(e.get("time"), (int, float))),
                default=float("-inf"))  # this deployment's end, not an earlier attempt's
    if end is not None and not any(e.get("kind") in T.ENDS and e.get("time", 0) >= since for e in events):
        events.append(end)  # the record's reason, whole, when no task's events carry it
    try:  # a task not placed now: Marathon's queue says why
        queue: Mapping[Any, Mapping[str, Any]] = entries_by_app(client.queue())  # looked up by ids that may be None
    except MarathonError:
        queue = {}
    for name, app in apps.items():
        entry = None if restarting(app) else queue.get(app.id)  # a planned restart waits for no offer
        why, since = placement(entry), wall((entry or {}).get("since"))
        if why and since:
            events.append({"time": since, "task": name, "kind": T.PLACEMENT_WAIT,
                           "message": f"{name} waits to be placed: {why}"})
    return {"events": T.merge(events), "omitted": omitted, "source": source}


def status_timeline(found: Mapping[str, Any]) -> dict[str, Any]:
    """The timeline (:func:`marathon_tf.contract.timeline.timeline`) of :func:`job_events`' result."""
    out = T.timeline(found["events"])
    if found.get("omitted"):
        out["omittedEvents"] = found["omitted"]
    return out


def events_rows(events: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Events for ``-o json``: time (ISO), task, reason (the event's type: one of
    :data:`marathon_tf.contract.timeline.REASONS`, always), message (its text), the details. A detail
    named like a column (a save round's ``reason``, why it was asked) is kept as ``cause``: it never
    takes the type's place."""
    out = []
    for e in events:
        row = {"time": T.iso(e["time"]), "task": e.get("task", ""), "reason": T.REASONS.get(e["kind"], "Other"),
               "message": e.get("message", "")}
        for key, value in e.items():
            if key in ("time", "task", "kind", "message"):
                continue
            row["cause" if key == "reason" else key] = value
        if e["kind"] not in T.REASONS:  # an event of a newer kind than this version knows
            row["kind"] = e["kind"]
        out.append(row)
    return out
