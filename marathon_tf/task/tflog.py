"""TensorFlow's words about a peer it waits for or lost, read from the training program's output.

TensorFlow names a task ``/job:<job>/replica:<r>/task:<i>`` (also with ``/device:…`` after it);
:func:`task_of` maps that to the marathon-tf task (``/job:ps/replica:0/task:0`` → ``ps-0``).
:class:`TFLogWatcher` reads the program's lines (the bootstrap hands it every line of stdout and
stderr) and remembers, per peer, what TensorFlow last said about it. The texts, from
TensorFlow 2.21's sources (and its shared libraries' strings):

* ``CreateSession still waiting for response from worker: /job:ps/replica:0/task:0`` — TF1's
  master, every 10 s while a task of the cluster does not answer (logged at INFO, so hidden by
  ``TF_CPP_MIN_LOG_LEVEL`` ≥ 1);
* gRPC errors naming the remote task: ``Additional GRPC error information from remote target
  /job:ps/replica:0/task:0`` (after an ``UnavailableError`` / ``DeadlineExceeded``)
  and ``Unavailable: From /job:ps/replica:0/task:0:``;
* MultiWorkerMirroredStrategy's health check: ``/job:worker/replica:0/task:1 seems down, retrying
  1/3`` and ``Cluster check alive failed, /job:worker/replica:0/task:1 is down, aborting
  collectives``;
* a peer restarted under a program that still holds its old incarnation (a ParameterServerStrategy
  coordinator): ``RecvTensor expects a different device incarnation: … Your worker job
  ("/job:worker/replica:0/task:1") was probably restarted``, :data:`RESTARTED`;
* the coordination service:
  ``Task /job:worker/replica:0/task:1 heartbeat timeout. This indicates that the remote task has
  failed…``; ``The following tasks are unhealthy (stopped sending heartbeats):`` followed by one
  task name per line; ``Barrier timed out. … Some timed out task names:`` and ``Waiting for N/M
  tasks to connect.`` + ``Example stragglers:``, each also followed by task names on their own
  lines.

Pure and cheap: a line without ``/job:`` costs four substring tests (steady-state ``step=``
lines pass through untouched).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["task_of", "PeerSignal", "parse_line", "TFLogWatcher", "is_noise", "RESTARTED"]

#: What TensorFlow says of a peer that was restarted under this program: it will not take it back.
RESTARTED = "was restarted (TensorFlow holds its old incarnation)"

#: Lines TensorFlow prints at the start of every run, failed or not (seen with TF 2.21 on CPU; the
#: CUDA ones on machines without a GPU driver): never a reason for a failure (issue 24).
_NOISE = re.compile(
    r"All log messages before absl::InitializeLog\(\) is called|cpu_feature_guard\.cc|"
    r"This TensorFlow binary is optimized|To enable the following instructions:|oneDNN custom operations are on|"
    r"failed call to cuInit|Could not find cuda drivers|Unable to register cu(DNN|FFT|BLAS) factory|"
    r"computation placer already registered|TF-TRT Warning|Started server with target:|"
    r"disabling MLIR crash reproducer|cuda_executor\.cc.*(NUMA|kernel driver)|port\.cc:\d+\] oneDNN")


def is_noise(line: str) -> bool:
    """Whether ``line`` is one of TensorFlow's start-up lines every run prints (:data:`_NOISE`)."""
    return bool(_NOISE.search(line))

_TASK = re.compile(r"/job:(?P<job>[A-Za-z0-9_]+)(?:/replica:\d+)?/task:(?P<task>\d+)")
#: (pattern, what it means) for lines that name the task inline
_NAME = r"(?P<name>/job:[A-Za-z0-9_]+(?:/replica:\d+)?/task:\d+)"
_INLINE = (
    (re.compile(r"CreateSession still waiting for response from worker: " + _NAME), "does not answer"),
    (re.compile(_NAME + r"\W{0,3} was probably restarted"), RESTARTED),
    (re.compile(r"Task " + _NAME + r" heartbeat timeout"), "stopped sending heartbeats"),
    (re.compile(r"Cluster check alive failed, " + _NAME + r" is down"), "is down"),
    (re.compile(_NAME + r" seems down"), "seems down"),
    (re.compile(r"(?:DeadlineExceeded|Deadline Exceeded|DEADLINE_EXCEEDED)\b.*?" + _NAME), "deadline exceeded"),
    (re.compile(r"Additional GRPC error information from remote target " + _NAME), "unavailable"),
    (re.compile(r"(?:UnavailableError|Unavailable|UNAVAILABLE)\b.*?From " + _NAME), "unavailable"),
)
#: lines after which TensorFlow lists task names, one per line
_HEADERS = (
    ("The following tasks are unhealthy (stopped sending heartbeats)", "stopped sending heartbeats"),
    ("Some timed out task names:", "did not reach a barrier"),
    ("Example stragglers:", "has not connected"),
)
_LISTED = 3  # TensorFlow lists at most 3 tasks (kPendingStragglerLogLimit)


def task_of(tf_name: str) -> str | None:
    """``/job:ps/replica:0/task:0`` (or with ``/device:…``) → ``ps-0``; None for ``/job:localhost``
    and what is no task name."""
    m = _TASK.search(tf_name)
    if not m or m["job"] == "localhost":
        return None
    return f"{m['job']}-{int(m['task'])}"


@dataclass(frozen=True)
class PeerSignal:
    task: str    # the marathon-tf task, e.g. ps-0
    why: str     # what TensorFlow said, e.g. "does not answer"
    line: str    # the line it said it in (cut to 300 characters)


def parse_line(line: str) -> PeerSignal | None:
    """The peer a line names, if it is one of the lines above that name it inline."""
    if "/job:" not in line:
        return None
    for pattern, why in _INLINE:
        m = pattern.search(line)
        if m:
            task = task_of(m["name"])
            if task:
                return PeerSignal(task, why, line.strip()[:300])
    return None


class TFLogWatcher:
    """What TensorFlow last said about each peer: ``feed`` every output line (from any thread);
    ``signals(since)`` → ``{task: (wall time, why, line)}`` said at or after ``since``; ``own``
    is this task's name (TensorFlow sometimes names the task itself: not a peer)."""

    def __init__(self, own: str, *, clock: Callable[[], float] = time.time):
        self.own, self.clock = own, clock
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[float, str, str]] = {}
        self._listing: tuple[str, str, int] | None = None  # (why, header line, names still expected)

    def feed(self, text: str) -> None:
        for line in text.splitlines():
            self._feed_line(line)

    def _feed_line(self, line: str) -> None:
        for header, why in _HEADERS:
            if header in line:
                with self._lock:
                    self._listing = (why, line.strip()[:300], _LISTED)
                return
        if "/job:" not in line:
            if line.strip():
                with self._lock:
                    self._listing = None
            return
        signal = parse_line(line)
        with self._lock:
            listing = self._listing
            if signal is None and listing is not None and line.strip().startswith("/job:"):
                task = task_of(line)
                if task:
                    signal = PeerSignal(task, listing[0], listing[1])
                self._listing = (listing[0], listing[1], listing[2] - 1) if listing[2] > 1 else None
            if signal is not None and signal.task != self.own:
                self._seen[signal.task] = (self.clock(), signal.why, signal.line)

    def signals(self, since: float = 0.0) -> dict[str, tuple[float, str, str]]:
        with self._lock:
            return {task: seen for task, seen in self._seen.items() if seen[0] >= since}

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()
            self._listing = None
