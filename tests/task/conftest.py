"""Fixtures for the task side's tests (the helpers themselves are in task_helpers.py): fakes of
Marathon and Mesos-DNS, bootstraps as real processes, real status endpoints, task contexts and
environments."""

from __future__ import annotations

import os

import pytest
from task_helpers import FakeClock, FakeDns, FakeMarathon, MesosDnsDouble, Procs, free_port

from marathon_tf.contract import naming
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.task.status_server import StatusServer, TaskStatus

JOB = "ml/mnist"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fake_dns() -> FakeDns:
    return FakeDns()


@pytest.fixture
def marathon() -> FakeMarathon:
    return FakeMarathon()


@pytest.fixture
def mesos_dns():
    """A real DNS server on 127.0.0.1 with Mesos-DNS-style SRV + A records."""
    double = MesosDnsDouble()
    double.server.start_thread()
    try:
        yield double
    finally:
        double.server.stop()
        double.server.server.server_close()  # dnslib's stop() leaves the UDP socket open


@pytest.fixture
def procs(tmp_path):
    """Start bootstraps as real processes; all of them (and their trainers) die at teardown."""
    p = Procs(tmp_path)
    try:
        yield p
    finally:
        p.stop_all()


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
