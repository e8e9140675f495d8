"""A job's events, and the timeline of its start and of every recovery built from them (pure).

Every bootstrap records what happens to its task as events (:mod:`marathon_tf.task.timeline`):
``{"time": <unix seconds>, "task": "worker-1", "kind": <one of KINDS>, "message": "…", …}``; the
deciding task adds the job's own (submitted, deployed, every task running, scaled, placement waits,
the end) from what Marathon says. The user's side reads them back (``marathon-tf status
--timeline``, ``marathon-tf events``) from the running tasks' ``/events``, or from the job's record
once it has ended (the label :data:`marathon_tf.contract.labels.EVENTS`, see :func:`compact`).

:func:`timeline` turns a list of events into

* ``start``: the phases of the job's start (:class:`marathon_tf.contract.phases.StartPhase`), each
  with when it happened and how long it took after the phase before it: submitted → deployment
  done → every task running → cluster spec complete → every TF server up → first step (sorted by
  time: every duration is ≥ 0);
* ``recoveries``: for every failure of a program (exit, hang, a peer that moved, preemption):
  its cause → the program restarted (in place, or the task relaunched) → training again, with
  the seconds each took; a recovery a save round came before (a planned stop) says the step it saved;
* ``resizes``: every size change of an elastic job (docs/elastic.md): grew, shrank, or waits below its
  minimum, its cause, the sizes, whether programs restarted, and how long until training went on;
* ``saves``: every save round (the phase ``saving`` of :class:`marathon_tf.contract.phases.Phase`):
  why it was asked, the step and checkpoint it confirmed (or why it could not), how long it took.

A job's goodput (its wall time split by cause) is computed from the same events:
:mod:`marathon_tf.contract.goodput`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from marathon_tf.contract.phases import StartPhase

__all__ = ["KINDS", "REASONS", "merge", "timeline", "compact", "expand", "iso",
           "TASK_STARTED", "PEERS_FOUND", "PROGRAM_STARTED", "SERVER_UP", "FIRST_STEP", "PROGRAM_EXITED",
           "HANG", "WAITING", "PEER_MOVED", "FINISHED", "PREEMPTED", "SUBMITTED", "DEPLOYED", "ALL_RUNNING",
           "SCALED", "PLACEMENT_WAIT", "PLACED", "RELAUNCHED", "JOB_ENDED", "TASK_FAILED", "NOT_PLACED", "RESUBMITTED",
           "SAVE_ROUND", "SAVED", "SAVE_FAILED", "STALLED", "GREW", "SHRANK", "BELOW_MIN",
           "START_FAILED", "RESTARTING", "PLANNED", "ENDS", "cluster_change", "planned_for", "planned_text",
           "LABEL_LIMIT"]

# a task's events (its bootstrap records them)
TASK_STARTED = "task_started"        # the bootstrap runs (Marathon's TASK_RUNNING)
PEERS_FOUND = "peers_found"          # every peer's address known: the cluster spec is complete
PROGRAM_STARTED = "program_started"  # the training program started ("restart": 0 the first time)
SERVER_UP = "server_up"              # the program's TF server answers
FIRST_STEP = "first_step"            # the first step of a run of the program
PROGRAM_EXITED = "program_exited"    # the program exited; "message": what the bootstrap made of it
HANG = "hang"                        # the progress watchdog stopped the program
WAITING = "waiting"                  # the task waits for a peer (named)
PEER_MOVED = "peer_moved"            # a peer came back at a new address: the program restarts
FINISHED = "finished"                # the program succeeded
PREEMPTED = "preempted"              # (issue 21: preemptions) the task was preempted
RESTARTING = "restarting"            # a planned restart (:data:`PLANNED`): never a failure, never counted
START_FAILED = "start_failed"        # the program could not be started (an unusable logdir, GPUs it cannot
                                     # see, a logdir another run holds, peers never found): the job fails
STALLED = "stalled"                  # steps came again after a pause far longer than usual ("seconds": lost)
# a save round (the deciding task records them: task/saving.py)
SAVE_ROUND = "save_round"            # the deciding task asks its program to save ("reason", "hold")
SAVED = "saved"                      # the round's checkpoint is in the logdir ("step", "path", "seconds")
SAVE_FAILED = "save_failed"          # the round could not save ("message": why); the stop goes on as before
# the job's events (the deciding task records them)
SUBMITTED = "submitted"              # the job's apps were (re)deployed: Marathon's version time
DEPLOYED = "deployed"                # Marathon's deployment is done: every task running and healthy
ALL_RUNNING = "all_running"          # every task of the job running (Marathon's startedAt)
SCALED = "scaled"                    # the job's cluster changed size
PLACEMENT_WAIT = "placement_wait"    # a task waits to be placed (Marathon's queue says why)
PLACED = "placed"                    # that task runs now
RELAUNCHED = "relaunched"            # a task Marathon left dead (1.4-1.7: its relaunch dropped for a deployment's
#                                      lock) is launched again by a restart of its app ("waited": s since seen so)
JOB_ENDED = "job_ended"              # the job's record was written: Succeeded or Failed
TASK_FAILED = "task_failed"          # (the user's side, from Marathon's lastTaskFailure) a task died
NOT_PLACED = "not_placed"            # the admission deadline passed: every app scaled to 0 (why, per role)
RESUBMITTED = "resubmitted"          # a NotPlaced job submitted again (its next attempt)
# an elastic job's size (the deciding task: "size", "previous", "cause", "restart": the tasks restarted,
# "workers": the members, "since": when what caused it was seen)
GREW = "grew"                        # standbys placed were taken in
SHRANK = "shrank"                    # a worker was lost: the job trains on without it
BELOW_MIN = "below_min"              # fewer than min workers: the job's programs wait for placement

#: kind → the word ``marathon-tf events`` shows (like kubectl's reasons)
REASONS = {
    SUBMITTED: "Submitted", DEPLOYED: "Deployed", ALL_RUNNING: "AllRunning", TASK_STARTED: "TaskStarted",
    PEERS_FOUND: "PeersFound", PROGRAM_STARTED: "ProgramStarted", SERVER_UP: "ServerUp",
    FIRST_STEP: "FirstStep", PROGRAM_EXITED: "ProgramExited", HANG: "Hang", WAITING: "Waiting",
    PEER_MOVED: "PeerMoved", FINISHED: "Finished", PREEMPTED: "Preempted", SCALED: "Scaled",
    PLACEMENT_WAIT: "PlacementWait", PLACED: "Placed", RELAUNCHED: "Relaunched", JOB_ENDED: "JobEnded",
    TASK_FAILED: "TaskFailed",
    NOT_PLACED: "NotPlaced", RESUBMITTED: "Resubmitted", STALLED: "Stalled", SAVE_ROUND: "SaveRound",
    SAVED: "Saved", SAVE_FAILED: "SaveFailed", GREW: "Grew", SHRANK: "Shrank", BELOW_MIN: "BelowMin",
    START_FAILED: "StartFailed", RESTARTING: "Restarting",
}
KINDS = tuple(REASONS)
#: A task's events of one millisecond in the order of its life: the end of a run before the start of
#: the next, its TF server up before its first step.
_LIFE = (SUBMITTED, SCALED, DEPLOYED, ALL_RUNNING, PLACEMENT_WAIT, PLACED, RELAUNCHED, SAVE_ROUND, SAVED, SAVE_FAILED,
         GREW, SHRANK, BELOW_MIN, HANG, PEER_MOVED, PROGRAM_EXITED, PREEMPTED, TASK_FAILED, RESTARTING, START_FAILED,
         TASK_STARTED, PEERS_FOUND, PROGRAM_STARTED, SERVER_UP, FIRST_STEP, STALLED, WAITING, FINISHED, JOB_ENDED,
         NOT_PLACED, RESUBMITTED)
_RANK = {kind: n for n, kind in enumerate(_LIFE)}
#: the kinds that say the job's end (the record's)
ENDS = (JOB_ENDED, NOT_PLACED)

#: A *planned restart*: marathon-tf stops a task, or its program, on purpose and starts it again; never a
#: failure (never ``TaskFailed``, never a task's last failure, never counted), an event of its own kind
#: (:data:`RESTARTING`, with ``why``, one of these). Why → what ``status`` and ``events`` say
#: (``Restarting for scale (2 → 3 workers)``). The one place the notion lives: the bootstrap records
#: the program's stops (:meth:`marathon_tf.task.observer.TaskObserver.planned_restart`), the user's side
#: reads a task's stop for a new configuration as one (:func:`marathon_tf.marathon.jobstate.planned_stop`,
#: which the keeper's classification uses too).
PLANNED = {
    "scale": "scale",                          # marathon-tf scale: every task with the new cluster spec
    "redeploy": "a new configuration",         # a re-deploy of a changed job file
    "group": "the job's group restart",        # the keeper's round after a member's failure (a ps' …)
    "preemption": "a preemption round",        # the keeper's round after a member's preemption
    "peer_moved": "a peer that moved",         # a peer relaunched at a new address: the rewritten spec
    "peer_restarted": "a peer restarted under it",  # a ParameterServerStrategy coordinator's peer
    "resize": "the job's size change",         # an elastic job grew or shrank (docs/elastic.md)
}


def cluster_change(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """``2 → 3 workers`` (one role changed), ``worker 2 → 3, ps 1 → 2``; "" when the counts are the same."""
    roles = sorted(r for r in set(before) | set(after) if int(before.get(r, 0) or 0) != int(after.get(r, 0) or 0))
    if len(roles) == 1:
        role = roles[0]
        return f"{int(before.get(role, 0) or 0)} → {int(after.get(role, 0) or 0)} {role}s"
    return ", ".join(f"{r} {int(before.get(r, 0) or 0)} → {int(after.get(r, 0) or 0)}" for r in roles)


def planned_for(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> tuple[str, str]:
    """``(why, change)`` of a task's restart with its app's new configuration, from the cluster it ran with
    (``before``) and the new one's (``after``): ``("scale", "2 → 3 workers")`` when the counts changed, else
    ``("redeploy", "")`` (also when either is not known: "a new configuration" is true of both)."""
    change = cluster_change(before, after) if before and after else ""
    return ("scale" if change else "redeploy"), change


def planned_text(why: str, detail: str = "") -> str:
    """``Restarting for scale (2 → 3 workers)``: what ``status`` says of a planned restart."""
    return f"Restarting for {PLANNED.get(why, why)}" + (f" ({detail})" if detail else "")

_CAUSES = (PROGRAM_EXITED, HANG, PEER_MOVED, PREEMPTED, TASK_FAILED, START_FAILED, RESTARTING)
_MEMBERS = ("chief", "ps", "worker", "evaluator")
#: Hosts' clocks differ a little: events this much before ``submitted`` still belong to it (seconds).
CLOCK_SLACK = 2.0
#: A recovery this soon (seconds) after a save round's start followed from it (the round before a planned stop).
SAVE_REACH = 120.0
#: The most a job's record keeps of its events (bytes of compact JSON).
LABEL_LIMIT = 32 * 1024


def iso(wall: float) -> str:
    return datetime.fromtimestamp(wall, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + \
        f"{int(wall * 1000) % 1000:03d}Z"


def _key(event: Mapping[str, Any]) -> tuple:
    return (round(float(event.get("time", 0)), 3), event.get("task", ""), event.get("kind", ""))


def _order(event: Mapping[str, Any]) -> tuple:
    """Time order; a task's events of one millisecond in the order of its life (:data:`_LIFE`)."""
    time_, task, kind = _key(event)
    return time_, task, _RANK.get(kind, len(_RANK)), kind


def merge(*sources: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every event of ``sources`` once (the same task, kind and time is one event), in time order."""
    seen: dict[tuple, dict[str, Any]] = {}
    for source in sources:
        for event in source or []:
            if isinstance(event, Mapping) and isinstance(event.get("time"), (int, float)) and event.get("kind"):
                seen.setdefault(_key(event), dict(event))
    return sorted(seen.values(), key=_order)


def _first(events: list[dict[str, Any]], kind: str) -> dict[str, float]:
    """task → the time of its first event of ``kind``."""
    out: dict[str, float] = {}
    for e in events:
        if e["kind"] == kind and e.get("task") not in out:
            out[e.get("task", "")] = e["time"]
    return out


def _members(times: Mapping[str, float]) -> dict[str, float]:
    return {t: v for t, v in times.items() if t.rsplit("-", 1)[0] in _MEMBERS}


def _start(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    job = {e["kind"]: e["time"] for e in reversed(events) if e["kind"] in (SUBMITTED, DEPLOYED, ALL_RUNNING)}
    running = _members(_first(events, TASK_STARTED))
    spec = _members(_first(events, PEERS_FOUND))
    servers = _members(_first(events, SERVER_UP))
    steps = _first(events, FIRST_STEP)
    found = {
        StartPhase.SUBMITTED: job.get(SUBMITTED),
        StartPhase.DEPLOYED: job.get(DEPLOYED),
        StartPhase.ALL_RUNNING: job.get(ALL_RUNNING) or (max(running.values()) if running else None),
        StartPhase.SPEC_COMPLETE: max(spec.values()) if spec else None,
        StartPhase.SERVERS_UP: max(servers.values()) if servers else None,
        StartPhase.FIRST_STEP: min(steps.values()) if steps else None,
    }
    order = list(StartPhase)
    known = sorted(((t, order.index(phase), phase) for phase, t in found.items() if t is not None))
    origin = known[0][0] if known else 0.0
    out, previous = [], None
    for t, _, phase in known:
        out.append({"phase": phase.value, "at": iso(t), "time": round(t, 3), "sinceStart": round(t - origin, 3),
                    "seconds": round(t - (previous if previous is not None else t), 3)})
        previous = t
    return out


def _recoveries(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    open_: dict[str, dict[str, Any]] = {}  # task -> the recovery under way
    for e in events:
        task, kind = e.get("task", ""), e["kind"]
        current = open_.get(task)
        if kind in _CAUSES:
            if kind == PROGRAM_EXITED and e.get("code") == 0:
                continue
            if current and "restarted" not in current:  # the same failure, seen again (the exit a hang
                if e.get("code") is not None:            # caused, Marathon's word on the task that exited)
                    current.setdefault("code", e.get("code"))
                continue
            current = {"task": task, "cause": e.get("message") or REASONS[kind], "kind": kind,
                       "at": iso(e["time"]), "time": round(e["time"], 3)}
            if e.get("code") is not None:
                current["code"] = e["code"]
            if e.get("peer"):
                current["peer"] = e["peer"]
            open_[task] = current
            out.append(current)
        elif current and kind in (PROGRAM_STARTED, TASK_STARTED) and "restarted" not in current:
            current["restarted"] = iso(e["time"])
            current["secondsToRestart"] = round(e["time"] - current["time"], 3)
            current["how"] = "relaunched by Marathon" if kind == TASK_STARTED else "in place"
            current["_restart_time"] = e["time"]
        elif current and kind == FIRST_STEP and "_restart_time" in current:
            current["trainingAgain"] = iso(e["time"])
            current["secondsToTraining"] = round(e["time"] - current["_restart_time"], 3)
            current["seconds"] = round(e["time"] - current["time"], 3)
            open_.pop(task, None)
    # A task that never steps (a ps; a ParameterServerStrategy worker: only its coordinator prints steps) is
    # training again when the job is: the first step of any task after its restart. A recovery the job's end
    # came before is said so, not left "not training yet".
    steppers = {e.get("task") for e in events if e["kind"] == FIRST_STEP}
    firsts = [(e["time"], e.get("task", "")) for e in events if e["kind"] == FIRST_STEP]
    end = next((e["time"] for e in events if e["kind"] in ENDS), None)
    for r in out:
        restarted = r.pop("_restart_time", None)
        if restarted is None or "trainingAgain" in r:
            continue
        nxt = next(((t, who) for t, who in firsts if t >= restarted), None) if r["task"] not in steppers else None
        if nxt is not None:
            r["trainingAgain"], r["trainedBy"] = iso(nxt[0]), nxt[1]
            r["secondsToTraining"] = round(nxt[0] - restarted, 3)
            r["seconds"] = round(nxt[0] - r["time"], 3)
        elif end is not None and end >= restarted:
            r["jobEnded"] = iso(end)
    return out


def _saves(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every save round: asked (why, held or not) → saved at a step, or failed (why)."""
    out: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for e in events:
        kind = e["kind"]
        if kind == SAVE_ROUND:
            current = {"task": e.get("task", ""), "reason": e.get("reason") or e.get("message") or "",
                       "hold": bool(e.get("hold")), "at": iso(e["time"]), "time": round(e["time"], 3)}
            out.append(current)
        elif kind in (SAVED, SAVE_FAILED) and current is not None and "outcome" not in current:
            current["outcome"] = "saved" if kind == SAVED else "failed"
            current["seconds"] = round(e["time"] - current["time"], 3)
            for key in ("step", "path"):
                if e.get(key) is not None:
                    current[key] = e[key]
            if kind == SAVE_FAILED:
                current["message"] = e.get("message") or ""
    return out


_RESIZES = {GREW: "grew", SHRANK: "shrank", BELOW_MIN: "below min"}


def _resizes(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every size change: its cause and sizes, then training again: at once when no program restarted,
    else the first step after it (of the task that recorded it: the deciding task, whose program steps)."""
    out: list[dict[str, Any]] = []
    for i, e in enumerate(events):
        if e["kind"] not in _RESIZES:
            continue
        row: dict[str, Any] = {"task": e.get("task", ""), "change": _RESIZES[e["kind"]], "cause": e.get("cause") or
                               e.get("message") or "", "at": iso(e["time"]), "time": round(e["time"], 3)}
        for key in ("size", "previous", "restart", "workers"):
            if e.get(key) is not None:
                row[key] = e[key]
        if isinstance(e.get("since"), (int, float)):
            row["sinceCause"] = round(e["time"] - e["since"], 3)
        if e["kind"] != BELOW_MIN:
            if not e.get("restart"):
                row["secondsToTraining"] = 0.0
            else:
                step = next((x for x in events[i + 1:] if x["kind"] == FIRST_STEP and x.get("task") == e.get("task")),
                            None)
                if step is not None:
                    row["trainingAgain"] = iso(step["time"])
                    row["secondsToTraining"] = round(step["time"] - e["time"], 3)
        out.append(row)
    return out


def timeline(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"start": [...], "recoveries": [...], "saves": [...]}`` of the job's current deployment (the
    events since the last ``submitted``; a logdir used by earlier runs of the job holds theirs too).
    A recovery that began within :data:`SAVE_REACH` s after a round saved says so (``savedStep``)."""
    merged = merge(events)
    submitted = [e["time"] for e in merged if e["kind"] == SUBMITTED]
    if submitted:
        merged = [e for e in merged if e["time"] >= submitted[-1] - CLOCK_SLACK]
    recoveries, saves = _recoveries(merged), _saves(merged)
    for r in recoveries:
        before = [s for s in saves if s.get("outcome") == "saved" and 0 <= r["time"] - s["time"] <= SAVE_REACH]
        if before:
            r["savedStep"] = before[-1].get("step")
    return {"start": _start(merged), "recoveries": recoveries, "saves": saves, "resizes": _resizes(merged)}


_SHORT = {"time": "t", "task": "n", "kind": "k", "message": "m"}
_LONG = {v: k for k, v in _SHORT.items()}


def compact(events: Iterable[Mapping[str, Any]], limit: int = LABEL_LIMIT) -> str:
    """Events as one compact JSON text of at most ``limit`` bytes for a Marathon label: when they do
    not all fit, the oldest (the start) and the newest are kept, half the room each, and
    ``{"omitted": N}`` stands where events were left out."""
    def text(kept: list | dict) -> str:
        return json.dumps(kept, separators=(",", ":"), sort_keys=True, ensure_ascii=False)

    rows = [{_SHORT.get(k, k): (round(v, 3) if k == "time" else v) for k, v in e.items()} for e in merge(events)]
    whole = text(rows)
    if len(whole.encode()) <= limit:
        return whole
    sizes = [len(text(r).encode()) + 1 for r in rows]  # with its comma
    room = (limit - 2 - len(text([{"omitted": len(rows)}]).encode())) // 2
    head = tail = used = 0
    while head < len(rows) and used + sizes[head] <= room:
        used, head = used + sizes[head], head + 1
    used = 0
    while tail < len(rows) - head and used + sizes[len(rows) - 1 - tail] <= room:
        used, tail = used + sizes[len(rows) - 1 - tail], tail + 1
    kept = rows[:head] + [{"omitted": len(rows) - head - tail}] + (rows[len(rows) - tail:] if tail else [])
    return text(kept)


def expand(label: str | None) -> tuple[list[dict[str, Any]], int]:
    """The events a job's record keeps (see :func:`compact`), and how many were left out."""
    try:
        rows = json.loads(label or "[]")
    except ValueError:
        return [], 0
    events: list[dict[str, Any]] = []
    omitted = 0
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict) and "omitted" in row:
            omitted += int(row.get("omitted") or 0)
        elif isinstance(row, dict):
            events.append({_LONG[k] if k in _LONG else k: v for k, v in row.items()})
    return merge(events), omitted
