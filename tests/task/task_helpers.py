"""Helpers for the bootstrap tests: fake DNS / Marathon / clock (injected, never patched),
a real Mesos-DNS-style DNS server on 127.0.0.1 (dnslib), and process helpers.
The fixtures that use them are in conftest.py."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterable

from polling import descendants, wait_for  # noqa: F401 (wait_for: used through this module)

from marathon_tf.contract import naming
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.task.discovery import LookupFailure, Observation, SrvRecord

JOB = "ml/mnist"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def task_env(role: str, index: int, cluster: dict, *, sandbox: str, tf_port: int | None = None,
             status_port: int = 0, **ctx_fields) -> dict[str, str]:
    """The environment Marathon + the rendered app would give one task (plus MTF_STATUS_BIND)."""
    ctx = TaskContext(job=ctx_fields.pop("job", JOB), role=role, index=index, cluster=cluster, **ctx_fields)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}
    env.update(ctx.to_env())
    env.update({"HOST": "127.0.0.1", "PORT_TF": str(tf_port or free_port()), "PORT_STATUS": str(status_port),
                "MTF_STATUS_BIND": "127.0.0.1", "MESOS_SANDBOX": sandbox, "PYTHONUNBUFFERED": "1"})
    return env


class FakeClock:
    """A clock whose ``sleep`` advances time; records every sleep."""

    def __init__(self, start: float = 1000.0):
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class FakeDns:
    """A DnsClient: ``answers[name]`` is a list of SrvRecord, a LookupFailure message, or a
    callable (call count -> either). ``a_records`` answers separate A queries."""

    def __init__(self):
        self.answers: dict[str, object] = {}
        self.a_records: dict[str, list[str]] = {}
        self.queries: list[str] = []
        self._lock = threading.Lock()

    def add_task(self, role: str, index: int, ip: str, port: int, *, job: str = JOB, in_additional: bool = True):
        app = naming.app_id(job, role, index)
        target = naming.host_name(app)
        self.answers[naming.srv_name(app, port_name="tf")] = [
            SrvRecord(target, port, (ip,) if in_additional else ())]
        self.a_records[target] = [ip]

    def srv(self, name: str) -> list[SrvRecord]:
        with self._lock:
            self.queries.append(name)
            count = self.queries.count(name)
        answer = self.answers.get(name, "NXDOMAIN")
        if callable(answer):
            answer = answer(count)
        if isinstance(answer, str):
            raise LookupFailure(answer)
        return list(answer)

    def a(self, name: str) -> list[str]:
        with self._lock:
            self.queries.append("A " + name)
        if name not in self.a_records:
            raise LookupFailure("NXDOMAIN")
        return self.a_records[name]


class FakeBackend:
    """A discovery Backend whose answers the test changes while it runs."""

    def __init__(self, addresses: dict | None = None):
        self.addresses: dict = dict(addresses or {})
        self.calls: list[list] = []
        self._lock = threading.Lock()

    def lookup(self, peers):
        with self._lock:
            self.calls.append(list(peers))
            return {p: Observation(self.addresses[p], "ok") if p in self.addresses
                    else Observation(None, "NXDOMAIN") for p in peers}


class FakeResponse:
    def __init__(self, status_code: int, body=None):
        self.status_code, self._body = status_code, body

    def json(self):
        if isinstance(self._body, Exception):
            raise self._body
        return self._body


class FakeMarathon:
    """A requests-like session answering ``GET /v2/groups/<job>`` from ``self.apps``.

    ``apps`` maps (role, index) -> list of task dicts. ``script`` (optional) is a list of
    per-call overrides: an exception to raise or a status code to return."""

    def __init__(self, job: str = JOB):
        self.job = job
        self.apps: dict[tuple[str, int], list[dict]] = {}
        self.requests: list[dict] = []
        self.script: dict[str, list] = {}

    def add_running(self, role: str, index: int, host: str, port: int, started: str = "2024-01-01T00:00:00.000Z",
                    state: str = "TASK_RUNNING") -> None:
        self.apps.setdefault((role, index), []).append(
            {"id": f"{naming.safe_path(naming.app_id(self.job, role, index))}.instance-{len(self.requests)}",
             "appId": naming.app_id(self.job, role, index), "host": host, "state": state,
             "startedAt": started if state == "TASK_RUNNING" else None, "ports": [port, port + 1]})

    def group(self) -> dict:
        apps = [{"id": naming.app_id(self.job, r, i),
                 "portDefinitions": [{"port": 0, "name": "tf"}, {"port": 0, "name": "status"}],
                 "tasks": tasks} for (r, i), tasks in sorted(self.apps.items())]
        return {"id": naming.group_id(self.job), "apps": apps, "groups": []}

    def get(self, url, params=None, headers=None, timeout=None):
        self.requests.append({"url": url, "params": params, "headers": dict(headers or {}), "timeout": timeout})
        base = url.split("/v2/")[0]
        for step in [self.script[base].pop(0)] if self.script.get(base) else []:
            if isinstance(step, Exception):
                raise step
            return FakeResponse(step, {"message": "scripted"})
        for app in self.group()["apps"]:
            if url.endswith("/v2/apps" + app["id"]):
                return FakeResponse(200, {"app": app})
        if not url.endswith("/v2/groups" + naming.group_id(self.job)):
            return FakeResponse(404, {"message": "Group does not exist"})
        return FakeResponse(200, self.group())


# --- a real DNS server speaking Mesos-DNS records on 127.0.0.1 ----------------------------------

class MesosDnsDouble:
    """dnslib DNSServer on 127.0.0.1 answering named SRV (``_tf._<label>._tcp.marathon.mesos.``)
    and A records for the tasks registered with :meth:`set_task`; NXDOMAIN otherwise."""

    def __init__(self):
        from dnslib import QTYPE, RCODE, RR, SRV, A
        from dnslib.server import BaseResolver, DNSLogger, DNSServer

        self.records: dict[str, tuple[str, int, str]] = {}
        self.queries: list[str] = []
        double = self

        class Resolver(BaseResolver):
            def resolve(self, request, handler):
                reply = request.reply()
                qname = str(request.q.qname).lower()
                qtype = QTYPE[request.q.qtype]
                double.queries.append(f"{qtype} {qname}")
                srv = double.records.get(qname)
                hosts = {t: ip for t, _, ip in double.records.values()}
                if qtype == "SRV" and srv:
                    target, port, ip = srv
                    reply.add_answer(RR(qname, QTYPE.SRV, rdata=SRV(0, 1, port, target), ttl=60))
                    reply.add_ar(RR(target, QTYPE.A, rdata=A(ip), ttl=60))
                elif qtype == "A" and qname in hosts:
                    reply.add_answer(RR(qname, QTYPE.A, rdata=A(hosts[qname]), ttl=60))
                else:
                    reply.header.rcode = RCODE.NXDOMAIN
                return reply

        logger = DNSLogger(log="-recv,-send,-request,-reply,-truncated,-error,-data", prefix=False)
        self.server = DNSServer(Resolver(), port=0, address="127.0.0.1", logger=logger)
        self.port = self.server.server.server_address[1]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def set_task(self, role: str, index: int, port: int, ip: str = "127.0.0.1", job: str = JOB,
                 status_port: int | None = None) -> None:
        app = naming.app_id(job, role, index)
        self.records[naming.srv_name(app, port_name="tf")] = (naming.host_name(app), port, ip)
        if status_port is not None:
            self.records[naming.srv_name(app, port_name="status")] = (naming.host_name(app), status_port, ip)

    def remove_task(self, role: str, index: int, job: str = JOB) -> None:
        for port_name in ("tf", "status"):
            self.records.pop(naming.srv_name(naming.app_id(job, role, index), port_name=port_name), None)


# --- processes ------------------------------------------------------------------------------------

class Procs:
    """Bootstraps started by a test; every one is stopped (SIGTERM, then SIGKILL) at teardown."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen] = []

    def start(self, env: dict, command: Iterable[str], *, options: Iterable[str] = (), name: str = "task"):
        with open(self.tmp_path / f"{name}.log", "wb") as log:  # the child keeps its own descriptor
            proc = subprocess.Popen([sys.executable, "-m", "marathon_tf.bootstrap", *options, "--", *command],
                                    env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        proc.log_path = self.tmp_path / f"{name}.log"
        self.procs.append(proc)
        return proc

    @staticmethod
    def output(proc) -> str:
        return proc.log_path.read_text(errors="replace")

    def stop_all(self) -> None:
        """SIGTERM every bootstrap still running, then SIGKILL whatever is left of it and of
        its descendants (the trainers run in their own process groups)."""
        leftovers = {pid for proc in self.procs for pid in descendants(proc.pid)}
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for pid in leftovers:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def http_json(url: str, timeout: float = 2.0) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


class GrpcLikeServer:
    """A TCP server on 127.0.0.1 that answers like gRPC (a SETTINGS frame) or accepts and says nothing."""

    def __init__(self, answer: bool):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.answer, self.conns = answer, []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.sock.getsockname()[1]}"

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.answer:
                conn.recv(64)
                conn.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() under way, which holds the socket
        except OSError:
            pass
        self.sock.close()
        self.thread.join(5)
        for c in self.conns:
            c.close()
