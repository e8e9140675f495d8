"""The job's restart ledger: every failure and preemption of the job's programs, counted job-wide.

A task's bootstrap lives as long as its Marathon task: a relaunch starts a fresh one in a fresh
sandbox, so a budget kept in a bootstrap's memory counts one task's life, not the job's. The
ledger is kept by the *deciding* task's bootstrap (:mod:`marathon_tf.task.keeper`), which every
other bootstrap tells about its program's ends, and which watches Marathon for the deaths no
bootstrap could report (a bootstrap killed outright, a lost agent). What survives the deciding
task's own relaunch is what Marathon keeps (each app's ``lastTaskFailure``), what the other
bootstraps still know of their own tasks (they send it again to a new keeper) and, when the
logdir is writable shared storage, ``<logdir>/.marathon-tf/failures.jsonl``.

Kinds of entries:

* ``failure``: the program failed (an exit code that is neither 0, a preemption code nor a
  stop the bootstrap asked for; a Marathon task that failed without its bootstrap saying so).
  Counted against ``restart.max_failures`` within ``restart.window_seconds``.
* ``preemption``: the program or its task was stopped from outside (SIGTERM to the bootstrap
  through a kill's grace period, an exit code in ``restart.preemption_exit_codes`` (143 only
  after a SIGTERM), ``TASK_KILLED`` not asked for by marathon-tf, ``TASK_GONE_BY_OPERATOR``,
  ``TASK_UNREACHABLE``, ``TASK_LOST`` ...). Counted against ``restart.max_preemptions`` only.
* ``infrastructure``: the program died because the machinery around it did (the shared
  pre-warmed interpreter that forked it). Shown, never counted.

An entry may be *uncounted* (``counted: false``): a consequence of another one (a peer's
program failing because a member of its group was preempted, see :func:`attribute`).

Evaluator failures have a budget of their own (``bucket``): a crash-looping evaluator ends the
job after ``max_failures`` of *its* failures without eating the training tasks' budget.
Tensorboard is never recorded. Everything here is pure bookkeeping: no I/O but the file.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from marathon_tf.contract import naming
from marathon_tf.contract.plan import PlanError, Round

__all__ = ["FAILURE", "PREEMPTION", "INFRASTRUCTURE", "KINDS", "Entry", "Answer", "Ledger", "bucket",
           "classify_status", "ATTRIBUTION", "PREEMPTED_STATES", "FAILED_STATES", "read_file", "append_file"]

FAILURE, PREEMPTION, INFRASTRUCTURE = "failure", "preemption", "infrastructure"
KINDS = (FAILURE, PREEMPTION, INFRASTRUCTURE)
#: A failure this close (seconds, before or after) to a preemption or an infrastructure death of the
#: job is taken for its consequence (a TF peer failing because a member went away), not counted.
ATTRIBUTION = 2.0
#: Terminal Mesos states of a task stopped from outside (the agent, an operator, the master).
#: ``TASK_KILLED`` is one too unless marathon-tf asked (the job ended, or its app changed).
PREEMPTED_STATES = frozenset({"TASK_KILLED", "TASK_GONE_BY_OPERATOR", "TASK_GONE", "TASK_LOST", "TASK_DROPPED",
                              "TASK_UNREACHABLE", "TASK_UNKNOWN"})
FAILED_STATES = frozenset({"TASK_FAILED", "TASK_ERROR"})
_EXITED = re.compile(r"exited with status (\d+)")


def _task_name(value: Any) -> str:
    """A task's name from JSON (``ps-0``), else ``""``."""
    return value if isinstance(value, str) and naming.parse_task_name(value) is not None else ""


def bucket(task: str) -> str:
    """Whose budget an entry of ``task`` counts against: ``evaluator`` for evaluators, else ``job``."""
    return "evaluator" if task.startswith("evaluator-") else "job"


@dataclass(frozen=True)
class Entry:
    """One end of a program (or of a task, as Marathon saw it)."""

    id: str                 # unique: "<Mesos task id>#<n>" from a bootstrap, "marathon:<task id>" from Marathon
    task: str               # worker-1
    kind: str               # FAILURE | PREEMPTION | INFRASTRUCTURE
    time: float             # wall clock (seconds)
    reason: str = ""
    code: int | None = None
    task_id: str = ""       # the Mesos task the program ran in
    final: bool = False     # its bootstrap exits after it (Marathon's status of that task is this entry)
    counted: bool = True    # False: the consequence of another entry
    source: str = "bootstrap"
    peer: str = ""          # the peer the evidence names as the cause (a frozen ps this task hung on): its group
                            # round restarts the job for that peer

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, "", False) or k in ("counted", "kind")}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Entry | None:
        """An entry from JSON (a report, the file); None when it is not one."""
        try:
            kind = str(data["kind"])
            if kind not in KINDS:
                return None
            code = data.get("code")
            return cls(id=str(data["id"]), task=str(data["task"]), kind=kind, time=float(data["time"]),
                       reason=str(data.get("reason") or "")[:2000], code=int(code) if code is not None else None,
                       task_id=str(data.get("task_id") or ""), final=bool(data.get("final")),
                       counted=bool(data.get("counted", True)), source=str(data.get("source") or "bootstrap"),
                       peer=_task_name(data.get("peer")))
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class Answer:
    """The job's counts after one end of a program, from which its bootstrap decides
    (:func:`marathon_tf.task.policy.decide`): the keeper's answer to a report (``POST /ledger``, the
    JSON of :meth:`to_dict`, read back with :meth:`from_dict`), or a task's own count when no keeper
    answered (``alone``: :meth:`marathon_tf.task.budget.RestartBudget.take`)."""

    counted: bool           # the entry counts against its budget (False: a consequence of another end)
    failures: int           # counted failures within the window (of the entry's bucket), this one included
    max_failures: int
    window_seconds: float
    preemptions: int        # counted preemptions within their window
    max_preemptions: int
    kind: str = ""          # the entry's kind as the keeper kept it
    keeper: str = ""        # the keeper's id
    generation: int = 0     # the keeper's group restart generation
    ended: bool = False     # the job has its end: nothing is counted any more
    round: Round | None = None  # the group restart round under way
    alone: bool = False     # no keeper answered: the task's own count

    #: the counts the job's record keeps (``marathon-tf/restarts``)
    COUNTS = ("failures", "max_failures", "window_seconds", "preemptions", "max_preemptions")

    def counts(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.COUNTS}

    def to_dict(self) -> dict[str, Any]:
        """The keeper's answer on the wire."""
        out = {"keeper": self.keeper, "counted": self.counted, "kind": self.kind, **self.counts(),
               "generation": self.generation, "ended": self.ended}
        if self.round is not None:
            out["round"] = self.round.to_wire()
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Answer | None:
        """A keeper's answer from JSON; None when it is not one (then the task counts alone)."""
        if not isinstance(data, Mapping) or any(k not in data for k in cls.COUNTS):
            return None
        try:
            round_ = Round.from_wire(data["round"]) if data.get("round") is not None else None
        except PlanError:
            round_ = None  # an answer whose round this task cannot read: counted without it
        try:
            return cls(counted=bool(data.get("counted", True)), failures=int(data["failures"]),
                       max_failures=int(data["max_failures"]), window_seconds=float(data["window_seconds"]),
                       preemptions=int(data["preemptions"]), max_preemptions=int(data["max_preemptions"]),
                       kind=str(data.get("kind") or ""), keeper=str(data.get("keeper")),
                       generation=int(data["generation"] or 0) if "generation" in data else 0,
                       ended=bool(data.get("ended")),
                       round=round_)
        except (TypeError, ValueError):
            return None


def classify_status(state: str, message: str, preemption_codes: Iterable[int]) -> str | None:
    """What a terminal Marathon/Mesos task status means for the ledger, when no bootstrap said:
    ``TASK_FAILED``/``TASK_ERROR`` a failure (unless the command exited with a preemption code),
    the states of :data:`PREEMPTED_STATES` a preemption; anything else (``TASK_FINISHED``, a
    running state) None."""
    if state in FAILED_STATES:
        m = _EXITED.search(message or "")
        return PREEMPTION if m and int(m.group(1)) in set(preemption_codes) else FAILURE
    if state in PREEMPTED_STATES:
        return PREEMPTION
    return None


class Ledger:
    """The job's entries by id, counted within sliding windows. Thread-safe.

    ``budget``/``preemption_budget``: (N, SECONDS); the job fails when an entry makes the count
    within SECONDS exceed N. ``clock`` is wall time (entries come from several hosts).
    """

    def __init__(self, budget: tuple[int, float], preemption_budget: tuple[int, float], *,
                 clock: Callable[[], float] = time.time, keep: int = 1000):
        self.max_failures, self.window = int(budget[0]), float(budget[1])
        self.max_preemptions, self.preemption_window = int(preemption_budget[0]), float(preemption_budget[1])
        self.clock, self.keep = clock, keep
        self._lock = threading.RLock()
        self._entries: dict[str, Entry] = {}
        self._claimed: set[str] = set()  # Mesos task ids a bootstrap reported the last end of

    def add(self, entry: Entry) -> bool:
        """Record ``entry`` (an id seen before is kept as it was); whether it is new. An entry of
        Marathon's about a Mesos task whose bootstrap already reported its end is not added."""
        with self._lock:
            if entry.id in self._entries:
                return False
            if entry.source == "marathon" and entry.task_id in self._claimed:
                return False
            if entry.final and entry.task_id:
                self._claimed.add(entry.task_id)
                shadow = f"marathon:{entry.task_id}"  # Marathon's word came first: the bootstrap's is better
                self._entries.pop(shadow, None)
            self._entries[entry.id] = entry
            if len(self._entries) > self.keep:
                for old in sorted(self._entries.values(), key=lambda e: e.time)[: len(self._entries) - self.keep]:
                    del self._entries[old.id]
            return True

    def claimed(self, task_id: str) -> bool:
        with self._lock:
            return task_id in self._claimed

    def set_counted(self, entry_id: str, counted: bool) -> None:
        with self._lock:
            if entry_id in self._entries:
                self._entries[entry_id] = replace(self._entries[entry_id], counted=counted)

    def get(self, entry_id: str) -> Entry | None:
        with self._lock:
            return self._entries.get(entry_id)

    def entries(self, task: str | None = None) -> list[Entry]:
        """Every entry (of ``task``), oldest first."""
        with self._lock:
            out = [e for e in self._entries.values() if task is None or e.task == task]
        return sorted(out, key=lambda e: (e.time, e.id))

    def count(self, kind: str, bucket_of: str = "job", *, at: float | None = None) -> int:
        """Counted entries of ``kind`` within their window (failures: of ``bucket_of``)."""
        now = self.clock() if at is None else at
        window = self.preemption_window if kind == PREEMPTION else self.window
        with self._lock:
            return sum(1 for e in self._entries.values()
                       if e.kind == kind and e.counted and e.time >= now - window
                       and (kind != FAILURE or bucket(e.task) == bucket_of))

    def over(self, entry: Entry) -> bool:
        """Whether the job's budget for ``entry``'s kind is exceeded now."""
        if entry.kind == FAILURE:
            return self.count(FAILURE, bucket(entry.task)) > self.max_failures
        if entry.kind == PREEMPTION:
            return self.count(PREEMPTION) > self.max_preemptions
        return False

    def near(self, entry: Entry, kinds: Iterable[str], seconds: float = ATTRIBUTION) -> list[Entry]:
        """Entries of ``kinds`` (other than ``entry``) within ``seconds`` of it."""
        kinds = set(kinds)
        with self._lock:
            return [e for e in self._entries.values()
                    if e.id != entry.id and e.kind in kinds and abs(e.time - entry.time) <= seconds]

    def summary(self) -> dict[str, Any]:
        """The counts as ``status`` and the record show them."""
        with self._lock:
            infra = sum(1 for e in self._entries.values() if e.kind == INFRASTRUCTURE)
            last = max(self._entries.values(), key=lambda e: e.time, default=None)
        out: dict[str, Any] = {
            "failures": self.count(FAILURE), "max_failures": self.max_failures, "window_seconds": self.window,
            "preemptions": self.count(PREEMPTION), "max_preemptions": self.max_preemptions,
            "preemption_window_seconds": self.preemption_window, "infrastructure": infra}
        evaluator = self.count(FAILURE, "evaluator")
        if evaluator:
            out["evaluator_failures"] = evaluator
        if last is not None:
            out["last"] = {"task": last.task, "kind": last.kind, "reason": last.reason[:300],
                           "counted": last.counted}
        return out


def read_file(path: str | None) -> list[Entry]:
    """The entries of a ``failures.jsonl`` (its older lines, ``{"task", "time", "code", "stderr"}``,
    read as counted failures); malformed lines are skipped."""
    if not path:
        return []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    out = []
    for n, line in enumerate(lines):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        if "kind" not in data and "time" in data:  # a line of the per-task budget of old
            data = {"id": f"file:{n}", "task": data.get("task", "?"), "kind": FAILURE, "time": data.get("time"),
                    "code": data.get("code"), "reason": data.get("stderr", "")}
        entry = Entry.from_dict(data)
        if entry is not None:
            out.append(entry)
    return out


def append_file(path: str | None, entry: Entry) -> None:
    """Append one entry as a JSON line (one ``write`` on ``O_APPEND``: lines never interleave)."""
    if not path:
        return
    line = json.dumps(entry.to_dict(), sort_keys=True) + "\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except OSError as e:
        sys.stderr.write(f"marathon-tf bootstrap: cannot append to {path}: {e}\n")
