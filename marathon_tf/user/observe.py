"""What ``status`` adds from the tasks' own view: waits named by the peer, stragglers, restarts.

Pure annotators: they take a status being built from one look at the job
(:func:`marathon_tf.user.status.build`) and add to it; they fetch nothing.

* :func:`take_probe` copies what a task's ``/status`` says beyond its step: the peer it waits for
  (``waiting_for``, found by its bootstrap: :mod:`marathon_tf.task.peers`) and, for the deciding
  task, the job's view (:mod:`marathon_tf.task.jobview`);
* :func:`annotate` turns them into ``waits`` (``worker-1 waiting 45s for ps-0 (ps-0: Staging on
  agent-2)``, the peer's state from Marathon: its task's state and host, or why it is not placed,
  from ``/v2/queue``, or what its own bootstrap says; ``worker-0 waiting 12s for room: no space left
  on the logdir's filesystem (…)``) and ``stragglers``;
* :func:`restarts`: the job's failures and preemptions against its restart budget;
* :func:`saving`: the job's goodput (the record's once it ended, else the deciding task's), the
  checkpoint its last save round confirmed, and whether its deciding task's program has the save hook.

Returns data and text; never prints. What ``deploy --local`` and ``local serve`` print once (where to
scrape a job's metrics, its TensorBoard) is :mod:`marathon_tf.user.announce`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from marathon_tf.contract.progress import duration, median
from marathon_tf.marathon.queue import placement

__all__ = ["take_probe", "annotate", "restarts", "saving", "peer_state"]


def take_probe(row: dict[str, Any], result: Mapping[str, Any]) -> None:
    """Copy a task's ``/status`` fields ``status`` shows beyond its step into its row."""
    if result.get("waiting_for"):
        row["waitingForPeer"] = result["waiting_for"]
    if isinstance(result.get("waiting_for_space"), dict):  # its program failed on a full logdir (task/restarts.py)
        row["waitingForSpace"] = result["waiting_for_space"]
    if result.get("job_view"):
        row["jobView"] = result["job_view"]
    if result.get("failures"):
        row["failures"] = result["failures"]
    if result.get("preemptions"):
        row["preemptions"] = result["preemptions"]
    if isinstance(result.get("ledger"), dict):  # the deciding task keeps the job's restart ledger
        row["_ledger"] = result["ledger"]
    if result.get("save_hook") is not None:  # whether its program has the save hook (marathon_tf.task.saving)
        row["saveHook"] = bool(result["save_hook"])
    for key, shown in (("goodput", "_goodput"), ("last_save", "_lastSave")):  # the deciding task's
        if isinstance(result.get(key), dict):
            row[shown] = result[key]


def saving(status: dict[str, Any], recorded: str | None, decider: str) -> None:
    """``goodput`` (the record's ``marathon-tf/goodput`` once the job ended, else what the deciding task
    computes), ``lastSave`` and ``saveHook`` (``{"task", "declared"}``: whether the deciding task's program
    said it has the save hook) in a status being built."""
    good = None
    if recorded:
        try:
            good = json.loads(recorded)
        except ValueError:
            good = None
    for row in status.get("tasks") or []:
        good = good or row.get("_goodput")
        if row.get("_lastSave"):
            status["lastSave"] = {"task": row["task"], **row["_lastSave"]}
        row.pop("_goodput", None)
        row.pop("_lastSave", None)
        if row["task"] == decider and row.get("saveHook") is not None:
            status["saveHook"] = {"task": decider, "declared": row["saveHook"]}
    if isinstance(good, dict) and "lostSeconds" in good:
        status["goodput"] = good


_BUDGET_KEYS = {"failures": "failures", "max_failures": "maxFailures", "window_seconds": "windowSeconds",
                "preemptions": "preemptions", "max_preemptions": "maxPreemptions",
                "infrastructure": "infrastructure", "evaluator_failures": "evaluatorFailures"}


def restarts(status: dict[str, Any], recorded: str | None) -> None:
    """The job's restart counts (the record's ``marathon-tf/restarts`` once it ended, else the deciding
    task's ledger): ``failures``, ``preemptions`` and ``restartBudget`` in a status being built
    (:func:`marathon_tf.user.status.build`)."""
    ledger = None
    if recorded:
        try:
            ledger = json.loads(recorded)
        except ValueError:
            ledger = None
    for row in status.get("tasks") or []:
        ledger = ledger or row.get("_ledger")
        row.pop("_ledger", None)
    if not isinstance(ledger, dict) or "failures" not in ledger:
        return
    status["restartBudget"] = {_BUDGET_KEYS[k]: v for k, v in ledger.items() if k in _BUDGET_KEYS}
    status["failures"], status["preemptions"] = ledger.get("failures", 0), ledger.get("preemptions", 0)


def _state_word(state: str | None) -> str:
    text = str(state or "")
    return text[5:].capitalize() if text.startswith("TASK_") else text


def peer_state(peer: Mapping[str, Any] | None, queue_entry: Mapping[str, Any] | None) -> str:
    """``Staging on agent-2``, ``not placed: InsufficientMemory (…)``, ``running on h1``, … ``peer``: the peer's
    row of the status being built (its ``state``, ``host``, ``phase``: marathon-tf's row, not Marathon's task)."""
    if peer is None:
        return "no such task"
    state = peer.get("state")
    if state == "TASK_RUNNING":
        words = f"running on {peer.get('host')}"
        if peer.get("phase") and peer.get("phase") != "running":
            words += f", {peer['phase']}"
        return words
    if isinstance(state, str) and state.startswith("TASK_"):
        return f"{_state_word(state)} on {peer.get('host')}" if peer.get("host") else _state_word(state)
    return placement(queue_entry) or peer.get("waitingFor") or str(state or "unknown")


def annotate(status: dict[str, Any], queue: Mapping[Any, Mapping[str, Any]]) -> None:
    """Add ``waits`` (one line per waiting task, the peer's state in brackets) and ``stragglers``
    (from the deciding task's view) to a status being built."""
    rows = {r["task"]: r for r in status.get("tasks") or []}
    waits = []
    for row in rows.values():
        space = row.get("waitingForSpace") or {}
        if space.get("why"):
            limit = space.get("limit")
            waits.append(f"{row['task']} waiting {duration(space.get('seconds') or 0)} for room: {space['why']}; "
                         f"its program starts again from the last checkpoint once there is room"
                         + (f" (the job fails after {duration(limit)})" if isinstance(limit, (int, float)) else ""))
        waiting = row.get("waitingForPeer") or {}
        peer = waiting.get("peer")
        if not peer:
            continue
        other = rows.get(peer)
        why = peer_state(other, queue.get((other or {}).get("appId")))
        if other and other.get("state") == "TASK_RUNNING" and waiting.get("why"):
            why += f"; {waiting['why']}"
        row["waiting"] = f"waiting {duration(waiting.get('seconds') or 0)} for {peer} ({peer}: {why})"
        waits.append(f"{row['task']} {row['waiting']}")
    if waits:
        status["waits"] = waits
    view = next((r["jobView"] for r in rows.values() if r.get("jobView")), None)
    if view:
        status["jobView"] = {k: view.get(k) for k in ("roles", "stragglers", "rates")}
        for task in view.get("stragglers") or []:
            if task in rows:
                rows[task]["straggler"] = True
        if view.get("stragglers"):
            rates = view.get("rates") or {}
            status["stragglers"] = [f"{t} ({rates.get(t) or 0:.2g} step reports/s; its role's median "
                                    f"{_median_of_others(rates, t):.2g})" for t in view["stragglers"]]


def _median_of_others(rates: Mapping[str, Any], task: str) -> float:
    role = task.rsplit("-", 1)[0]
    others = [r for t, r in rates.items() if t != task and t.rsplit("-", 1)[0] == role and r is not None]
    return median(others) if others else 0.0
