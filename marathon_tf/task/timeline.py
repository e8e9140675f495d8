"""What happened to this task, as events (:mod:`marathon_tf.contract.timeline`), kept where they last.

:class:`TaskEvents` keeps the task's events in memory (the last :data:`KEPT`, served on the status
port's ``/events``) and, when the job's logdir is a directory the task can write (shared storage
on a cluster, the run's volume locally), appends them to ``<logdir>/.marathon-tf/events.jsonl``,
one JSON object per line, written with one ``write`` on ``O_APPEND`` (lines of several tasks never
interleave), as the restart budget's ``failures.jsonl`` is. So the history survives the task: a
relaunched task, and the deciding task, read what the others recorded. An event that cannot be written
there is left out of the file (said on stderr); the file is given up only for another reason than a
full disk.

Why not Marathon's labels while the job runs: a label change is a new app version, and Marathon
restarts the app's task for it. Only the job's end (which stops every task anyway) puts the events
into the record (:func:`marathon_tf.contract.timeline.compact`, on the deciding task's app).
"""

from __future__ import annotations

import errno
import json
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from marathon_tf.contract import labels as L
from marathon_tf.contract import timeline as T

__all__ = ["TaskEvents", "EVENTS_FILE", "KEPT", "READ_LIMIT"]

EVENTS_FILE = os.path.join(".marathon-tf", "events.jsonl")
#: Events of this task kept in memory.
KEPT = 500
#: At most this many bytes of the shared file are read (its end).
READ_LIMIT = 4 * 1024 * 1024


class TaskEvents:
    """``record(kind, message, **details)``; ``mine()`` (this task's, in memory); ``shared()`` (the
    whole file, every task's, when there is one)."""

    def __init__(self, task: str, path: str | None = None, *, wall: Callable[[], float] = time.time):
        self.task, self.path, self.wall = task, path, wall
        self._lock = threading.Lock()
        self._mine: deque[dict[str, Any]] = deque(maxlen=KEPT)

    def record(self, kind: str, message: str = "", *, task: str | None = None, at: float | None = None,
               **details: Any) -> dict[str, Any]:
        """Record one event (``task``: "job" for the job's own; ``at``: when, default now)."""
        if kind not in T.KINDS:
            raise ValueError(f"unknown event kind {kind!r}")
        event = {"time": round(self.wall() if at is None else at, 3), "task": task or self.task, "kind": kind,
                 **({"message": message} if message else {}),
                 **{k: v for k, v in details.items() if v is not None}}
        with self._lock:
            self._mine.append(event)
        if self.path:
            line = (json.dumps(event, sort_keys=True, separators=(",", ":")) + "\n").encode()
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, line)
                finally:
                    os.close(fd)
            except OSError as e:
                sys.stderr.write(f"marathon-tf bootstrap: cannot append to {self.path}: {e}\n")
                if e.errno not in (errno.ENOSPC, errno.EDQUOT):  # a full disk passes: the next events are kept
                    self.path = None
        return event

    def mine(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._mine)

    def shared(self) -> list[dict[str, Any]]:
        """Every event in the job's file (its last :data:`READ_LIMIT` bytes), [] without one."""
        if not self.path:
            return []
        try:
            with open(self.path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - READ_LIMIT))
                data = f.read()
        except OSError:
            return []
        if size > READ_LIMIT:
            data = data.split(b"\n", 1)[-1]  # a cut first line
        out = []
        for line in data.decode("utf-8", "replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                out.append(event)
        return out

    def end_labels(self, app_id: str, state: str, reason: str) -> dict[str, dict[str, str]]:
        """What the job's record adds on this task's app when this task writes it and keeps no view of
        the job (it is not the deciding task: a task whose start failed, a program that failed for
        good): its own events (every task's, from the logdir's file when there is one) with the end."""
        self.record(T.JOB_ENDED, f"{state}: {reason}", task="job", state=state)
        return {app_id: {L.EVENTS: T.compact(self.shared() or self.mine())}}

    def route(self, query: dict[str, str]) -> tuple[int, dict]:
        """``GET /events``: this task's events, and the job's file when this task reads one
        (``?shared=1``)."""
        body: dict[str, Any] = {"task": self.task, "events": self.mine()}
        if query.get("shared") in ("1", "true") and self.path:
            body["shared"] = self.shared()
        return 200, body
