"""Fixtures for the lifecycle tests: a fake Marathon on pytest-httpserver (group GET with tasks,
bulk PUT /v2/apps), real bootstrap status endpoints, task contexts and environments."""

from __future__ import annotations

import json
import os

import jobfiles
from leaks import processes_under
import socket
import threading
import time
from typing import Any

import pytest
from werkzeug import Request, Response

from marathon_tf import labels as L
from marathon_tf import naming
from marathon_tf.marathon import Client, RetryPolicy
from marathon_tf.status_server import StatusServer, TaskStatus
from marathon_tf.taskenv import TaskContext

JOB = "ml/mnist"


class FakeMarathon:
    """Marathon's group GET (with embedded tasks) and bulk app PUT, over pytest-httpserver.

    ``apps`` maps app id -> app dict (``labels``, ``instances``, ``portDefinitions``, ``tasks``);
    ``calls`` records ``(method, path, query dict of lists, json body)``; ``fail_puts`` makes
    that many PUTs answer 503 first.
    """

    def __init__(self, server, job: str = JOB):
        self.server, self.job = server, job
        self.apps: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str, dict, Any]] = []
        self.fail_puts = 0
        self._lock = threading.Lock()
        server.expect_request(f"/v2/groups{naming.group_id(job)}", method="GET").respond_with_handler(self._group)
        server.expect_request("/v2/apps", method="PUT").respond_with_handler(self._put_apps)

    @property
    def url(self) -> str:
        return self.server.url_for("").rstrip("/")

    def client(self) -> Client:
        return Client(self.url, retry=RetryPolicy(attempts=3, budget=5, initial=0.01, max_wait=0.05, jitter=0))

    def add_app(self, role: str, index: int, *, labels: dict | None = None, status_port: int | None = None,
                host: str = "127.0.0.1") -> dict:
        app_id = naming.app_id(self.job, role, index)
        app = {"id": app_id, "instances": 1,
               "labels": {L.JOB: self.job, L.ROLE: role, L.INDEX: str(index), **(labels or {})},
               "portDefinitions": [{"port": 0, "name": "tf"}, {"port": 0, "name": "status"}],
               "tasks": []}
        if status_port is not None:
            app["tasks"].append({"id": f"{app_id}.1", "state": "TASK_RUNNING", "host": host,
                                 "ports": [1, status_port], "stagedAt": "2024-01-01T00:00:00.000Z"})
        self.apps[app_id] = app
        return app

    def _record(self, request: Request) -> None:
        body = request.get_json(silent=True)
        with self._lock:
            self.calls.append((request.method, request.path, request.args.to_dict(flat=False), body))

    def _group(self, request: Request) -> Response:
        self._record(request)
        embeds = request.args.getlist("embed")
        apps = []
        for app in self.apps.values():
            shown = {k: v for k, v in app.items() if k != "tasks"}
            if "group.apps.tasks" in embeds:
                shown["tasks"] = app["tasks"]
            apps.append(shown)
        body = {"id": naming.group_id(self.job), "groups": [], "apps": apps if "group.apps" in embeds else []}
        return Response(json.dumps(body), 200, content_type="application/json")

    def _put_apps(self, request: Request) -> Response:
        self._record(request)
        with self._lock:
            if self.fail_puts > 0:
                self.fail_puts -= 1
                return Response(json.dumps({"message": "busy"}), 503, content_type="application/json")
        for item in request.get_json():
            app = self.apps[item["id"]]
            app.update({k: v for k, v in item.items() if k != "id"})
            if item.get("instances") == 0:
                app["tasks"] = []
        return Response(json.dumps({"deploymentId": "d-1", "version": "v"}), 200, content_type="application/json")

    def puts(self) -> list[tuple[str, str, dict, Any]]:
        return [c for c in self.calls if c[0] == "PUT"]

    def gets(self) -> list[tuple[str, str, dict, Any]]:
        return [c for c in self.calls if c[0] == "GET"]


@pytest.fixture
def fake_marathon(httpserver) -> FakeMarathon:
    return FakeMarathon(httpserver)


@pytest.fixture
def status_endpoint():
    """Start a real bootstrap status endpoint: ``status_endpoint(task) -> (TaskStatus, port)``."""
    servers: list[StatusServer] = []

    def start(role: str, index: int) -> tuple[TaskStatus, int]:
        status = TaskStatus(job=JOB, task=naming.task_name(role, index), role=role, index=index)
        server = StatusServer(status, "127.0.0.1", 0).start()
        servers.append(server)
        return status, server.port

    yield start
    for server in servers:
        server.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def make_ctx():
    """``make_ctx(role, index, **TaskContext fields)`` with job ml/mnist and 1 ps + 2 workers."""

    def make(role: str = "worker", index: int = 0, **fields) -> TaskContext:
        fields.setdefault("cluster", {"ps": 1, "worker": 2})
        return TaskContext(job=JOB, role=role, index=index, **fields)

    return make


@pytest.fixture
def task_environ(tmp_path):
    """``task_environ(ctx, sandbox=None)``: the environment Marathon + the rendered app give the task."""

    def make(ctx: TaskContext, sandbox=None, **extra) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}
        env.update(ctx.to_env())
        env.update({"HOST": "127.0.0.1", "PORT_TF": str(free_port()), "PORT_STATUS": "0",
                    "MTF_STATUS_BIND": "127.0.0.1", "MESOS_SANDBOX": str(sandbox or tmp_path),
                    "PYTHONUNBUFFERED": "1"})
        env.update(extra)
        return env

    return make


# --- end-to-end on the local runner (real TensorFlow) --------------------------------------------------

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEP_LINE = __import__("re").compile(r"\bstep=(\d+) loss=")


def example_job(example: str, tmp_path, **changes) -> str:
    return str(jobfiles.example_job(example, tmp_path, **changes))


class LocalJob:
    """A job deployed on an in-process LocalCluster, with every task's output lines time-stamped as
    they appear (``lines``: ``(monotonic time, task, stream, text)``)."""

    def __init__(self, cluster, job_path: str):
        import dataclasses

        from marathon_tf import jobs, spec as spec_mod
        from marathon_tf.localrun import SandboxTailer

        self.cluster, self.jobs = cluster, jobs
        spec = spec_mod.load_job(job_path)
        self.spec = spec.with_overrides(discovery=dataclasses.replace(
            spec.discovery, nameserver=cluster.mesos_dns, http_api=cluster.mesos_dns_http,
            marathon_url=cluster.marathon_url))
        self.name = spec.name
        self.client = Client(cluster.marathon_url, retry=RetryPolicy(attempts=5, budget=30, initial=0.2, max_wait=2))
        self.lines: list[tuple[float, str, str, str]] = []
        self._lock = threading.Lock()
        self.tailer = SandboxTailer(cluster.state_dir, self._emit, interval=0.1)

    def _emit(self, task: str, stream: str, line: str) -> None:
        with self._lock:
            self.lines.append((time.monotonic(), task, stream, line))

    def deploy(self) -> "LocalJob":
        self.tailer.start()
        self.jobs.deploy(self.client, self.spec)
        return self

    def status(self) -> dict:
        return self.jobs.job_status(self.client, self.name)

    def steps(self, since: float = 0.0, task: str | None = None) -> list[tuple[float, str, int]]:
        """``(time, task, step)`` of every ``step=`` line seen after ``since``, in time order."""
        with self._lock:
            lines = list(self.lines)
        out = []
        for t, name, stream, text in lines:
            m = STEP_LINE.search(text)
            if m and t >= since and (task is None or name == task) and stream == "stdout":
                out.append((t, name, int(m.group(1))))
        return out

    def max_step(self) -> int:
        return max((s for _, _, s in self.steps()), default=-1)

    def wait(self, predicate, timeout: float, what: str, interval: float = 0.3):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(interval)
        noise = ("oneDNN", "absl::", "WARNING:tensorflow", "Instructions for", "Use standard", "loss=")
        kept = [(t, n, s, x) for t, n, s, x in self.lines if not any(w in x for w in noise)]
        tail = "\n".join(f"{t:.1f} [{n}:{s}] {x}" for t, n, s, x in kept[-80:])
        raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{tail}")

    def wait_state(self, timeout: float) -> dict:
        return self.wait(lambda: (lambda s: s if s.get("state") in (L.SUCCEEDED, L.FAILED) else None)(self.status()),
                         timeout, "the job's record")

    def text(self, task: str | None = None) -> str:
        with self._lock:
            return "\n".join(x for _, n, _, x in self.lines if task is None or n == task)


@pytest.fixture
def local_cluster(tmp_path):
    """A LocalCluster in-process; stopped at teardown, which also checks that no task process is left."""
    import time as _time

    from marathon_tf.local import LocalCluster

    state = tmp_path / "state"
    cluster = LocalCluster(state_dir=state, dns_refresh=0.5, kill_grace=2.0)
    cluster.start()
    jobs_started: list[LocalJob] = []
    cluster.jobs_started = jobs_started
    try:
        yield cluster
    finally:
        for job in jobs_started:
            job.tailer.stop()
        cluster.stop()
        deadline = _time.monotonic() + 10
        while processes_under(state) and _time.monotonic() < deadline:
            _time.sleep(0.2)
        left = processes_under(state)
        assert left == [], f"processes left behind: {left}"


@pytest.fixture
def local_job(local_cluster):
    """``local_job(job_path) -> LocalJob`` deployed on the test's cluster."""

    def start(job_path: str) -> LocalJob:
        job = LocalJob(local_cluster, job_path)
        local_cluster.jobs_started.append(job)
        return job.deploy()

    return start
