"""A job's goodput: how much of its wall time was training, and where the rest went (pure).

Computed from the job's events (:mod:`marathon_tf.contract.timeline`) by the deciding task while the
job runs (``/status`` ``goodput``, ``/metrics`` ``marathon_tf_goodput_ratio`` and
``marathon_tf_lost_seconds_total{cause}``), kept in the job's record when it ends (the label
``marathon-tf/goodput``), and shown by ``marathon-tf status`` (one line) and ``status -o json``.

The job's wall time runs from its submission (the last ``submitted`` event) to its end (``job_ended``)
or now. The job trains when its *deciding* task's program trains (``chief-0``, else ``worker-0``: the
program that saves, and whose end stops the job's training in every style; a TF1 worker restarting
while the chief trains on costs no wall time). Every second is given to one cause, the first that
holds of:

=============  ======================================================================================
``placement``  from the submission until every task runs (``all_running``), the deciding task's peers
               were all found or its program started, whichever comes first (an elastic job starts at its
               minimum: a standby still waiting to be placed is not the job waiting)
``start``      from then until the deciding task's first step
``recovery``   from the moment the deciding task's program last stepped before it ended, was
               preempted, hung, stopped or restarted on purpose (an event with ``stalled``: the
               seconds since its last step) until its next first step; per event in ``recoveries``.
               A planned stop's save round is part of its recovery (the program is held from the
               save on)
``stalled``    pauses of the deciding task's steps far longer than usual that ended by themselves
               (``stalled`` events: their lost ``seconds``)
``training``   the rest
=============  ======================================================================================

``retrained`` is part of ``training``: the steps a recovery trained again (the step the program had
reached, in its end's event, less the checkpoint step it resumed from, in the next start's event),
at the rate it trained before (``rate``). ``ratio`` is (training − retrained) / wall time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from marathon_tf.contract import timeline as T

__all__ = ["CAUSES", "goodput"]

#: The causes of lost time, in the order ``status`` shows them.
CAUSES = ("placement", "start", "recovery", "retrained", "stalled")
_ENDS = (T.PROGRAM_EXITED, T.HANG, T.PEER_MOVED, T.PREEMPTED, T.TASK_FAILED, T.RESTARTING)


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _minus(spans: list[tuple[float, float]], taken: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """``spans`` without what ``taken`` covers (both unions)."""
    out = []
    for a, b in spans:
        pieces = [(a, b)]
        for c, d in taken:
            pieces = [p for x, y in pieces for p in ((x, min(y, c)), (max(x, d), y)) if p[1] > p[0]]
        out += pieces
    return out


def _seconds(spans: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in spans)


# Over ruff's complexity limit (C901), as one piece: one pass over the events giving each second to one cause: a branch
# per cause (the module's table).
def goodput(events: Iterable[Mapping[str, Any]], decider: str, now: float) -> dict[str, Any] | None:  # noqa: C901
    """The goodput of the job whose events these are (see the module); None before it was submitted
    or when nothing is known yet. ``decider``: the deciding task's name; ``now``: the wall clock."""
    merged = T.merge(events)
    submitted = [e["time"] for e in merged if e["kind"] == T.SUBMITTED]
    if submitted:
        merged = [e for e in merged if e["time"] >= submitted[-1] - T.CLOCK_SLACK]
    if not merged:
        return None
    t0 = submitted[-1] if submitted else merged[0]["time"]
    ended = [e["time"] for e in merged if e["kind"] == T.JOB_ENDED]
    end = max(ended[-1] if ended else now, t0)
    mine = [e for e in merged if e.get("task") == decider and t0 <= e["time"] <= end]
    steps = [e["time"] for e in mine if e["kind"] == T.FIRST_STEP]
    first = steps[0] if steps else end
    # Placement is over at the first sign that the job can train: every task running, the deciding task's
    # peers all found, or its program started (an elastic job's starts at its minimum, its standbys still
    # waiting to be placed: they are not the job waiting for placement).
    signs = [e["time"] for e in merged if e["kind"] == T.ALL_RUNNING and e["time"] >= t0][:1] + \
        [e["time"] for e in mine if e["kind"] in (T.PEERS_FOUND, T.PROGRAM_STARTED)][:1]
    placed = min(max(min(signs, default=first), t0), first)
    spans: dict[str, list[tuple[float, float]]] = {
        "placement": [(t0, placed)], "start": [(placed, first)], "recovery": [], "stalled": []}
    recoveries: list[dict[str, Any]] = []
    retrained = 0.0
    open_: dict[str, Any] | None = None
    for e in mine:
        if e["time"] < first:
            continue
        kind = e["kind"]
        if kind in _ENDS and not (kind == T.PROGRAM_EXITED and e.get("code") == 0) and open_ is None:
            begin = max(first, e["time"] - float(e.get("stalled") or 0.0))
            open_ = {"task": decider, "cause": e.get("message") or T.REASONS[kind], "kind": kind,
                     "at": T.iso(begin), "time": round(begin, 3), "_step": e.get("step"), "_rate": e.get("rate")}
        elif kind in _ENDS and open_ is not None:  # the same end seen again (the exit a hang caused)
            for key in ("step", "rate"):
                if open_.get("_" + key) is None:
                    open_["_" + key] = e.get(key)
        elif kind == T.TASK_STARTED and open_ is None:  # the deciding task relaunched without a word of its end
            open_ = {"task": decider, "cause": e.get("message") or T.REASONS[kind], "kind": kind,
                     "at": T.iso(e["time"]), "time": round(e["time"], 3)}
        elif kind == T.PROGRAM_STARTED and open_ is not None and e.get("resumed") is not None:
            open_["_resumed"] = e["resumed"]
        elif kind == T.FIRST_STEP and open_ is not None:
            open_["seconds"] = round(e["time"] - open_["time"], 3)
            recoveries.append(open_)
            open_ = None
        elif kind == T.STALLED and e.get("seconds"):
            spans["stalled"].append((max(first, e["time"] - float(e["seconds"])), e["time"]))
    if open_ is not None:
        open_["seconds"] = round(end - open_["time"], 3)
        recoveries.append(open_)
    for r in recoveries:
        spans["recovery"].append((r["time"], r["time"] + r["seconds"]))
        step, resumed, rate = r.pop("_step", None), r.pop("_resumed", None), r.pop("_rate", None)
        if isinstance(step, int) and isinstance(resumed, int) and step > resumed:
            r["retrainedSteps"] = step - resumed
            if rate:
                r["retrainedSeconds"] = round((step - resumed) / float(rate), 3)
                retrained += r["retrainedSeconds"]
    lost: dict[str, float] = {}
    taken: list[tuple[float, float]] = []
    for cause in ("placement", "start", "recovery", "stalled"):  # each second to the first cause that holds
        mine_ = _minus(_union([(max(a, t0), min(b, end)) for a, b in spans[cause]]), taken)
        lost[cause] = _seconds(mine_)
        taken = _union(taken + mine_)
    wall = end - t0
    training = max(0.0, wall - sum(lost.values()))
    lost["retrained"] = min(training, retrained)
    productive = training - lost["retrained"]
    return {"ratio": round(productive / wall, 4) if wall > 0 else None, "wallSeconds": round(wall, 3),
            "trainingSeconds": round(training, 3), "productiveSeconds": round(productive, 3),
            "lostSeconds": {c: round(lost[c], 3) for c in CAUSES}, "recoveries": recoveries,
            "ended": bool(ended)}
