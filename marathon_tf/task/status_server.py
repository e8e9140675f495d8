"""The bootstrap's status endpoint on ``PORT_STATUS``.

``GET /health`` -> 200 unless the bootstrap is unhealthy (503);
``GET /status`` -> the JSON described in docs/architecture.md;
``GET /metrics`` -> Prometheus' text format (:mod:`marathon_tf.task.metrics`, imported on first use);
extra GET routes (the leader's ``/rendezvous``, :mod:`marathon_tf.task.rendezvous`) are
handlers ``query dict (+ "_client": the caller's IP, "_accept_encoding": its Accept-Encoding)
-> (code, body dict or JSON bytes[, extra headers])`` given to :class:`StatusServer`; POST routes
(the deciding task's ``/ledger``, :mod:`marathon_tf.task.keeper`) are handlers ``(query, JSON body)
-> (code, body dict)``, the body at most :data:`POST_LIMIT` bytes. Every control route (every POST, and the
GETs :data:`marathon_tf.contract.taskauth.CONTROL_GETS` names) passes the job's
:class:`~marathon_tf.contract.taskauth.Guard` first, here and nowhere else: 401 without the job's key,
403 with a wrong one; the read-only routes stay open.
:class:`TaskStatus` is the thread-safe record the bootstrap updates and the
server reads.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from marathon_tf.contract.phases import Phase
from marathon_tf.contract.taskauth import HEADER, Guard

__all__ = ["TaskStatus", "StatusServer", "POST_LIMIT"]

#: The largest request body a POST route gets (a report to the keeper is a few kB).
POST_LIMIT = 256 * 1024

_HEAVY = ("cluster", "tf_config", "peers", "missing")
#: ``/progress``: what the deciding task reads of every chief and worker (small: no cluster spec)
PROGRESS_FIELDS = ("task", "role", "index", "phase", "step", "steps_per_second", "report_rate", "restarts",
                   "failures", "stall_seconds", "waiting_for", "first_step_at", "elastic")


class TaskStatus:
    """The task's state, as /status shows it. All methods are thread-safe."""

    def __init__(self, *, job: str, task: str, role: str, index: int):
        self._lock = threading.Lock()
        self._data: dict[str, Any] = {
            "job": job, "task": task, "role": role, "index": index, "phase": Phase.DISCOVERING.value,
            "cluster": {}, "tf_config": None, "peers": {}, "missing": {}, "step": None,
            "exit_code": None, "restarts": 0, "last_error": None, "warnings": [],
            "resumed_from": None, "steps_per_second": None,
            # what marathon_tf.task.observer keeps up to date (metrics, hangs, stragglers, the job's view)
            "failures": 0, "preemptions": 0, "target_step": None, "first_step_at": None, "stall_seconds": None,
            "progress_limit": None, "waiting_for": None, "report_rate": None, "checkpoint": None,
            "server_up": None, "job_view": None, "ledger": None,
            # save rounds (marathon_tf.task.saving): whether the program has the save hook (None: not
            # known yet), the last checkpoint a round confirmed; the job's goodput (the deciding task)
            "save_hook": None, "last_save": None, "goodput": None,
            # a program that failed on a full logdir waits for room (marathon_tf.task.restarts.Restarter.await_space)
            "waiting_for_space": None,
            # an elastic job (docs/elastic.md): this task's place in its membership; the deciding task
            # also shows the job's size, bounds, members and standbys (marathon_tf.task.resize)
            "elastic": None,
        }
        self._healthy = True

    def update(self, **fields: Any) -> None:
        with self._lock:
            for key, value in fields.items():
                if key not in self._data:
                    raise KeyError(f"unknown status field {key!r}")
                if key == "phase":  # one of the task's phases (kept as its plain value: JSON, labels)
                    value = Phase.of(value).value
                self._data[key] = value

    def set_healthy(self, healthy: bool) -> None:
        with self._lock:
            self._healthy = bool(healthy)

    def warn(self, message: str) -> None:
        with self._lock:
            self._data["warnings"] = self._data["warnings"] + [message]

    def add_restart(self) -> int:
        with self._lock:
            self._data["restarts"] += 1
            return self._data["restarts"]

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return json.loads(json.dumps(self._data))

    def light(self) -> dict[str, Any]:
        """The fields without the cluster spec and peers (what metrics and ``/progress`` read; the
        values are replaced, never changed in place, so a shallow copy is a consistent view)."""
        with self._lock:
            return {k: v for k, v in self._data.items() if k not in _HEAVY}

    def add(self, field: str, n: int = 1) -> int:
        """Add ``n`` to a counter field (``restarts``, ``failures``, ``preemptions``)."""
        with self._lock:
            self._data[field] += n
            return self._data[field]

    @property
    def healthy(self) -> bool:
        with self._lock:
            return self._healthy


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        status = self.server.task_status
        path = self.path.split("?", 1)[0]
        if path == "/health":
            healthy = status.healthy
            self._send(200 if healthy else 503, {"healthy": healthy, "phase": status.snapshot()["phase"]})
        elif path == "/status":
            self._send(200, status.snapshot())
        elif path == "/progress":
            light = status.light()
            self._send(200, {k: light.get(k) for k in PROGRESS_FIELDS})
        elif path == "/metrics" and path not in self.server.routes:
            from marathon_tf.task.metrics import metrics_route  # prometheus_client only when scraped

            self.server.add_route("/metrics", metrics_route(status.light))
            self._send(*self.server.routes["/metrics"]({}))
        elif path in self.server.routes:
            refused = self.server.guard.refusal("GET", path, self.headers.get(HEADER), self.client_address[0])
            if refused is not None:
                self._send(*refused)
                return
            query = {k: v[-1] for k, v in parse_qs(self.path.partition("?")[2]).items()}
            query["_client"] = self.client_address[0]  # who asks (set here: a URL cannot forge it)
            query["_accept_encoding"] = self.headers.get("Accept-Encoding", "")
            self._send(*self.server.routes[path](query))
        else:
            self._send(404, {"message": f"no such path {path!r}; try /health or /status"})

    def do_POST(self) -> None:  # noqa: N802 (http.server naming)
        path = self.path.split("?", 1)[0]
        handler = self.server.post_routes.get(path)
        if handler is None:
            self._send(404 if path not in self.server.routes else 405, {"message": f"no POST {path!r}"})
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= POST_LIMIT:
            self._send(413, {"message": f"the body must be a JSON document of at most {POST_LIMIT} bytes"})
            return
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except ValueError:
            self._send(400, {"message": "the body is not JSON"})
            return
        refused = self.server.guard.refusal("POST", path, self.headers.get(HEADER), self.client_address[0], body)
        if refused is not None:
            self._send(*refused)
            return
        query = {k: v[-1] for k, v in parse_qs(self.path.partition("?")[2]).items()}
        query["_client"] = self.client_address[0]
        self._send(*handler(query, body))

    def _send(self, code: int, body: dict | bytes, headers: Mapping[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else (json.dumps(body, sort_keys=True) + "\n").encode()
        self.send_response(code)
        headers = dict(headers or {})
        for name, value in headers.items():  # e.g. Content-Encoding of a pre-encoded body
            self.send_header(name, value)
        if "Content-Type" not in headers:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # health checks every 10 s would drown the trainer's output


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # a leader's followers connect at once

    def __init__(self, address: tuple[str, int], status: TaskStatus, guard: Guard,
                 routes: Mapping[str, Callable[[dict[str, str]], tuple[Any, ...]]]):
        super().__init__(address, _Handler)
        self.task_status, self.guard = status, guard
        #: (code, body dict or JSON bytes[, extra headers]) by path; replaced, never changed in place (read by
        #: the request threads without a lock)
        self.routes: Mapping[str, Callable[[dict[str, str]], tuple[Any, ...]]] = dict(routes)
        self.post_routes: Mapping[str, Callable[[dict[str, str], object], tuple[int, dict]]] = {}

    def add_route(self, path: str, handler: Callable, *, post: bool = False) -> None:
        if post:
            self.post_routes = {**self.post_routes, path: handler}
        else:
            self.routes = {**self.routes, path: handler}

    def handle_error(self, request, client_address) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):  # a caller that left
            super().handle_error(request, client_address)


class StatusServer:
    """Serve a :class:`TaskStatus` on (host, port) in a background thread; ``guard``: who may use the
    control routes (default: the job-host fallback with no host known, i.e. anyone)."""

    def __init__(self, status: TaskStatus, host: str, port: int,
                 routes: Mapping[str, Callable[[dict[str, str]], tuple[int, dict]]] | None = None,
                 guard: Guard | None = None):
        self._server = _Server((host, port), status, guard if guard is not None else Guard(None), routes or {})
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        daemon=True, name="status-server")

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def add_route(self, path: str, handler: Callable[[dict[str, str]], tuple[int, dict]]) -> None:
        """Serve ``GET path`` with ``handler(query) -> (code, body)`` (may block: a long poll)."""
        self._server.add_route(path, handler)

    def add_post_route(self, path: str, handler: Callable[[dict[str, str], object], tuple[int, dict]]) -> None:
        """Serve ``POST path`` with ``handler(query, JSON body) -> (code, body)``."""
        self._server.add_route(path, handler, post=True)

    def start(self) -> StatusServer:
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread.is_alive():  # shutdown() of a server that never served would wait for ever
            self._server.shutdown()
        self._server.server_close()
