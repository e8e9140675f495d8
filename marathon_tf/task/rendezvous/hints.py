"""The leader's hints: it tells each follower where it serves the view, so that followers need not
ask Marathon (``marathon`` discovery, where the leader reads every task's ports anyway)."""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from marathon_tf.contract.taskapi import LEADER, TaskClient
from marathon_tf.marathon import transport
from marathon_tf.task.discovery import PeerKey

__all__ = ["Hints"]


class Hints:
    """The leader tells each follower where it is, so that followers need not ask Marathon:
    ``GET http://<follower's status address>/leader?job=&task=&at=<leader's status address>``,
    a few tries each (a task's bootstrap starts its endpoint a moment after TASK_RUNNING).

    A try that fails is retried later (0.25 s doubling) from a heap, not by a sender thread
    sleeping: thousands of followers whose endpoints are not up yet must not hold up the
    hints of those that are. Each try is one bounded GET through the task API's client
    (:class:`marathon_tf.contract.taskapi.TaskClient`: 2 s to connect, 2 s to answer) over the fan-out session
    (:func:`marathon_tf.marathon.transport.fanout_session`)."""

    def __init__(self, job: str, task: str, at: str, *, workers: int = 48, tries: int = 6,
                 closed: threading.Event | None = None, first_retry: float = 0.25):
        self.job, self.task, self.at, self.tries, self.first_retry = job, task, at, tries, first_retry
        self.closed = closed or threading.Event()
        self.sent = 0
        self.tried = 0
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rendezvous-hint")
        self._pending: dict[PeerKey, str] = {}
        self._lock = threading.Lock()
        self._due = threading.Condition(self._lock)
        self._retries: list[tuple[float, int, PeerKey, str, int]] = []  # heap: (when, seq, key, address, try)
        self._seq = 0
        self._retrier: threading.Thread | None = None
        self._session = transport.fanout_session()  # one for every sender thread: 9,999 hints cost the leader

    def send(self, targets: Mapping[PeerKey, str | None]) -> None:
        """Hint every follower at a status address it has not been hinted at yet."""
        with self._lock:  # once per batch: 48 sender threads take this lock too
            new = [(k, a) for k, a in targets.items() if a and self._pending.get(k) != a]
            self._pending.update(new)
        for key, address in new:
            self._submit(key, address, 0)

    def _submit(self, key: PeerKey, address: str, attempt: int) -> None:
        try:
            self._pool.submit(self._one, key, address, attempt)
        except RuntimeError:  # shut down
            pass

    def _one(self, key: PeerKey, address: str, attempt: int) -> None:
        if self.closed.is_set() or self._pending.get(key) != address:
            return  # closed, or a newer address is being hinted
        self.tried += 1
        reply = TaskClient(self._session).call(address, LEADER, params={"job": self.job, "task": self.task,
                                                                  "at": self.at}, timeout=(2.0, 2.0))
        if reply.ok and reply.json() is not None:  # 200 {"ok": true}
            self.sent += 1
            return
        with self._lock:
            if attempt + 1 >= self.tries:  # given up: a later read of the same address tries again
                if self._pending.get(key) == address:
                    del self._pending[key]
                return
            self._seq += 1
            heapq.heappush(self._retries, (time.monotonic() + self.first_retry * 2 ** attempt, self._seq, key,
                                           address, attempt + 1))
            self._due.notify()
            if self._retrier is None:
                self._retrier = threading.Thread(target=self._retry_loop, name="rendezvous-hint-retry", daemon=True)
                self._retrier.start()

    def _retry_loop(self) -> None:
        while True:
            with self._lock:
                while not self.closed.is_set() and (not self._retries or self._retries[0][0] > time.monotonic()):
                    self._due.wait(self._retries[0][0] - time.monotonic() if self._retries else None)
                if self.closed.is_set():
                    return
                _, _, key, address, attempt = heapq.heappop(self._retries)
            self._submit(key, address, attempt)

    def close(self) -> None:
        self.closed.set()
        with self._lock:
            self._due.notify_all()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._session.close()
