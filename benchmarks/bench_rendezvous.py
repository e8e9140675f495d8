"""Load on Marathon of the leader rendezvous for a simulated 1,000- and 10,000-task job.

A counting HTTP server in a process of its own (Marathon is another machine: encoding an
8 MB group must not take the GIL of the code measured) plays Marathon for a job of N workers
whose tasks turn TASK_RUNNING over ``RAMP`` seconds (worker-0, the leader, first):
``GET /v2/groups/big`` (the whole group with its tasks, ~3 KB per app), ``GET /v2/apps/big/<task>``
(one app) and ``GET /v2/events`` (SSE: one
``status_update_event`` per task as it turns RUNNING). Every request and every byte it sends is
counted, by who asked.

The leader is the real thing (:func:`marathon_tf.task.rendezvous.make_rendezvous` with a
MarathonBackend, Marathon's event stream and a real status endpoint); so are S simulated
followers (each with its own status endpoint, started when its task turns RUNNING, asking
the leader over HTTP). The followers' Marathon requests and bytes are scaled by (N - 1) / S;
the leader's are counted as they are. "Forming" is from the first task's start until every
simulated task has the whole spec; "formed" is the ``WATCH`` seconds after that. A timeline
(when the leader's view was complete, when the followers were hinted and formed, when the
leader's group reads were answered, CPU time) comes with the formed-after row.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .common import Row, server_script

RAMP = 10.0
JOB = "big"
_SINK = server_script("""
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *a): pass
""")


def moved_port(i: int) -> int:
    """The TF port of task ``i`` once it is relaunched elsewhere (``/__move``)."""
    return 40000 + i % 20000


def _running_at(start: float, total: int, ramp: float) -> list[float]:
    """When each task turns TASK_RUNNING (time.monotonic(): one clock for every process here)."""
    return [start + ramp * i / total for i in range(total)]


class _FakeMarathon:
    def __init__(self, total: int, ramp: float, start: float | None = None):
        from marathon_tf.contract import naming

        self.total, self.start = total, time.monotonic() if start is None else start
        self.running_at = _running_at(self.start, total, ramp)
        self.default_status_port = 1
        self.log: list[tuple[float, str, str, int]] = []   # (time, who, what, bytes)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        ports = [{"port": 0, "name": "tf", "protocol": "tcp"}, {"port": 0, "name": "status", "protocol": "tcp"}]
        self.status_port: dict[int, int] = {}  # simulated followers' real status ports
        self.moves: list[int] = []  # tasks relaunched elsewhere since the start (GET /__move?i=), in order
        self._idle = []
        self._apps = []
        for i in range(total):
            app = {"id": naming.app_id(JOB, "worker", i), "instances": 1,
                   "cmd": "marathon-tf bootstrap -- python3 train.py", "cpus": 1, "mem": 2048,
                   "labels": {"marathon-tf/job": JOB, "marathon-tf/role": "worker", "marathon-tf/index": str(i)},
                   "portDefinitions": ports, "env": {"MTF_JOB": JOB, "MTF_ROLE": "worker", "MTF_INDEX": str(i)},
                   "tasksRunning": 0, "tasksStaged": 0, "tasks": []}
            self._apps.append(app)
            self._idle.append(json.dumps(app))

    def _task(self, i: int) -> dict:
        moved = i in self.moves  # relaunched: a new task, another port
        return {"id": f"{JOB}_worker-{i}.instance-{i:08d}._app.{2 if moved else 1}", "appId": f"/{JOB}/worker-{i}",
                "state": "TASK_RUNNING", "host": "127.0.0.1",
                "ports": [moved_port(i) if moved else 31000 + i % 30000,
                          self.status_port.get(i, self.default_status_port)],
                "startedAt": "2026-11-24T00:00:00.000Z", "stagedAt": "2026-11-24T00:00:00.000Z",
                "slaveId": "agent-1", "version": "2026-11-24T00:00:00.000Z", "healthCheckResults": []}

    def _app(self, i: int, now: float) -> str:
        if now < self.running_at[i]:
            return self._idle[i]
        return json.dumps({**self._apps[i], "tasksRunning": 1, "tasks": [self._task(i)]})

    def group(self) -> bytes:
        now = time.monotonic()
        return ('{"id":"/big","groups":[],"apps":[' + ",".join(self._app(i, now) for i in range(self.total))
                + "]}").encode()

    def event(self, i: int) -> bytes:
        task = self._task(i)
        data = {"slaveId": "agent-1", "taskId": task["id"], "taskStatus": "TASK_RUNNING", "message": "",
                "appId": task["appId"], "host": task["host"],
                "ipAddresses": [{"ipAddress": "127.0.0.1", "protocol": "IPv4"}], "ports": task["ports"],
                "version": task["version"], "eventType": "status_update_event",
                "timestamp": "2026-11-24T00:00:00.000Z"}
        return f"event: status_update_event\r\ndata: {json.dumps(data)}\r\n\r\n".encode()

    def count(self, who: str, what: str, n: int) -> None:
        with self.lock:
            self.log.append((time.monotonic(), who, what, n))

    def control(self, path: str, target: str) -> bytes:
        """The bench's own routes (not counted): ``/__log``, what was counted (the bench is done); ``/__move?i=K``,
        task K is relaunched elsewhere."""
        if path == "/__move":
            with self.lock:
                self.moves.append(int(target.split("i=", 1)[1]))
            return b""
        self.stopping.set()
        with self.lock:
            log = list(self.log)
        return json.dumps({"log": log, "cpu": time.process_time(),
                           "group": len(self.group())}).encode()  # its size with every task running

    def serve(self) -> ThreadingHTTPServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802
                who = self.headers.get("X-Sim", "leader")
                path = self.path.split("?")[0]
                if path.startswith("/__"):
                    body = fake.control(path, self.path)
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if path == "/v2/events":
                    return self._events(who)
                if path == f"/v2/groups/{JOB}":
                    body, what = fake.group(), "group"
                elif path.startswith(f"/v2/apps/{JOB}/worker-"):
                    i = int(path.rsplit("-", 1)[1])
                    body, what = ('{"app":' + fake._app(i, time.monotonic()) + "}").encode(), "app"
                else:
                    body, what = b'{"message":"not found"}', "other"
                fake.count(who, what, len(body))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _events(self, who):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                attached = b'event: event_stream_attached\r\ndata: {"remoteAddress":"127.0.0.1"}\r\n\r\n'
                self.wfile.write(attached)
                self.wfile.flush()
                fake.count(who, "events", len(attached))
                sent = sum(1 for t in fake.running_at if t <= time.monotonic())  # only what happens from now on
                moved = len(fake.moves)
                beat = time.monotonic()
                try:
                    while not fake.stopping.is_set():
                        now = time.monotonic()
                        chunk = b""
                        while sent < fake.total and fake.running_at[sent] <= now:
                            chunk += fake.event(sent)
                            sent += 1
                        while moved < len(fake.moves):
                            chunk += fake.event(fake.moves[moved])
                            moved += 1
                        if not chunk and now - beat > 10:
                            chunk, beat = b"\r\n", now
                        if chunk:
                            self.wfile.write(chunk)
                            self.wfile.flush()
                            fake.count(who, "events", len(chunk))
                        time.sleep(0.05)
                except OSError:
                    pass

            def log_message(self, *a):
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 1024

            def handle_error(self, request, client_address):
                pass  # a client that timed out and left (counted already)

        server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server


def _serve_fake() -> None:
    """The fake Marathon in a process of its own (``python -c`` entry): its config as JSON on
    stdin, its port on stdout; ends with its stdin. Marathon is another machine: its JSON
    encoding must not take the GIL of the leader and the simulated tasks."""
    config = json.loads(sys.stdin.readline())
    fake = _FakeMarathon(config["total"], config["ramp"], config["start"])
    fake.default_status_port = config["default_status_port"]
    fake.status_port.update({int(i): p for i, p in config["status_port"].items()})
    server = fake.serve()
    print(server.server_address[1], flush=True)
    sys.stdin.read()  # until the bench closes it (or dies)
    fake.stopping.set()
    server.shutdown()


class _FakeProcess:
    """The parent's handle on the fake Marathon's process."""

    def __init__(self, total: int, ramp: float, default_status_port: int, status_port: dict[int, int]):
        from .common import HARNESS

        self.total, self.start = total, time.monotonic() + 0.5  # the first task runs once the fake is up
        self.running_at = _running_at(self.start, total, ramp)
        self.proc = subprocess.Popen([sys.executable, "-c", "from benchmarks.bench_rendezvous import _serve_fake; "
                                      "_serve_fake()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     cwd=str(HARNESS))
        self.proc.stdin.write(json.dumps({"total": total, "ramp": ramp, "start": self.start,
                                          "default_status_port": default_status_port,
                                          "status_port": status_port}) + "\n")
        self.proc.stdin.flush()
        self.port = int(self.proc.stdout.readline())
        self.log: list[tuple[float, str, str, int]] = []
        self.cpu = 0.0
        self.group_bytes = 0

    def finish(self) -> None:
        """Collect what it counted, then end it."""
        import requests

        try:
            doc = requests.get(f"http://127.0.0.1:{self.port}/__log", timeout=60).json()
            self.log, self.cpu, self.group_bytes = [tuple(x) for x in doc["log"]], doc["cpu"], doc["group"]
        finally:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class _Timeline:
    """When the leader's view became complete, when each simulated follower was hinted (from
    a thread looking every 20 ms: no hooks in the code measured)."""

    def __init__(self, sides: list, total: int):
        self.sides, self.total = sides, total
        self.complete_at: float | None = None
        self.all_hinted_at: float | None = None
        self.hinted_at: dict[int, float] = {}

    def start(self, stop: threading.Event) -> _Timeline:
        threading.Thread(target=self._run, args=(stop,), daemon=True).start()
        return self

    def _run(self, stop: threading.Event) -> None:
        from marathon_tf.task.rendezvous import FollowerRendezvous, LeaderRendezvous

        while not stop.wait(0.02):
            now = time.monotonic()
            for side in list(self.sides):
                if isinstance(side, LeaderRendezvous):
                    if self.complete_at is None and not side.view.missing:
                        self.complete_at = now
                    if self.all_hinted_at is None and side.hints is not None and side.hints.sent >= self.total - 1:
                        self.all_hinted_at = now
                elif isinstance(side, FollowerRendezvous) and side.hints and side.me[1] not in self.hinted_at:
                    self.hinted_at[side.me[1]] = now

    def summary(self, fake, formed_at: dict[int, float], formed: float, cpu: tuple[float, float], direct: bool) -> str:
        last = fake.running_at[-1]

        def at(t):
            return "never" if t is None else f"{t - last:+.1f} s"

        followers = sorted(t for i, t in formed_at.items() if i != 0)
        out = [f"timeline from the last task RUNNING: every simulated task formed {at(formed)}"]
        if not direct:
            hinted = sorted(self.hinted_at.values())
            out += [f"leader's view complete {at(self.complete_at)}",
                    f"all {self.total - 1:,} hints delivered {at(self.all_hinted_at)}",
                    f"simulated followers hinted: median {at(hinted[len(hinted) // 2] if hinted else None)}, "
                    f"last {at(hinted[-1] if hinted else None)}",
                    f"formed: median {at(followers[len(followers) // 2] if followers else None)}"]
        groups = [f"{t - last:+.1f} s ({n / 1e6:.1f} MB)" for t, who, what, n in fake.log
                  if who == "leader" and what == "group" and t <= formed]
        if groups:
            out.append("leader's group reads answered at " + ", ".join(groups))
        who = "the simulated tasks" if direct else "the leader and the simulated followers"
        out.append(f"CPU while forming: this process ({who}) {cpu[0]:.1f} s in "
                   f"{cpu[1]:.1f} s, fake Marathon (own process) {fake.cpu:.1f} s in all")
        return "; ".join(out)


# Over ruff's complexity limit (C901), as one piece: one scenario's steps in the order they happen (a benchmark's
# script).
def _simulate(total: int, simulated: int, watch: float, direct: bool = False, move: bool = False) -> dict:  # noqa: C901
    """One simulated job; ``direct``: every task reads Marathon itself (MTF_RENDEZVOUS=direct),
    the baseline, with the same fake Marathon."""
    import requests

    from marathon_tf.contract.taskenv import TaskContext
    from marathon_tf.task.bootstrap import DEFAULT_WATCH_INTERVAL
    from marathon_tf.task.discovery import MarathonBackend, watch_interval
    from marathon_tf.task.rendezvous import DirectRendezvous, make_rendezvous
    from marathon_tf.task.rendezvous.relay import Tree
    from marathon_tf.task.status_server import StatusServer, TaskStatus

    members = [("worker", i) for i in range(total)]
    relays = [] if direct else [i for _, i in Tree.of(members, ("worker", 0)).relays]
    rest = [i for i in range(1, total) if i not in set(relays)]  # followers of the leader, or of a relay
    picked = sorted({rest[round(k * (len(rest) - 1) / max(1, simulated - 1))] for k in range(simulated)})
    sample = sorted([*relays, *picked])  # every relay (the leader serves them all), a sample of the others
    # how many tasks each simulated one stands for: a relay itself, a follower its share of the rest
    weight = {i: 1.0 for i in relays} | {i: len(rest) / len(picked) for i in picked}
    # the tasks that are not simulated take the leader's hint at one shared endpoint, in another
    # process (as they would be: this process's CPU is the leader's and the simulated tasks')
    sink = subprocess.Popen([sys.executable, "-c", _SINK], stdout=subprocess.PIPE, text=True)
    sink_port = int(sink.stdout.readline())
    own = {i: StatusServer(TaskStatus(job=JOB, task=f"worker-{i}", role="worker", index=i), "127.0.0.1", 0)
           for i in [0, *sample]}
    fake = _FakeProcess(total, RAMP, sink_port, {i: server.port for i, server in own.items()})
    url = f"http://127.0.0.1:{fake.port}"
    stop = threading.Event()
    sides, servers = [], []
    formed_at: dict[int, float] = {}
    errors: list[str] = []
    # what the simulated followers got from the leader: (when, bytes on the wire, how many followers it stands for)
    from_leader: list[tuple[float, int, float]] = []
    leader_url = f"http://127.0.0.1:{own[0].port}"

    scale = total / (len(sample) + 1)  # direct: every simulated task stands for as many

    def stands_for(who: str) -> float:
        """How many tasks a request's sender (its X-Sim) stands for."""
        if who == "follower":
            return scale
        return weight.get(int(who.rpartition("-")[2]), 1.0) if who.startswith("follower-") else 1.0

    def count_leader(resp, *args, **kwargs):
        if resp.url.startswith(leader_url):
            from_leader.append((time.monotonic(), int(resp.headers.get("Content-Length") or 0),
                                stands_for(resp.request.headers.get("X-Sim", ""))))

    def ctx(i):
        return TaskContext(job=JOB, role="worker", index=i, cluster={"worker": total}, discovery="marathon",
                           marathon_url=url, startup_timeout=600)

    def task(i: int, who: str):
        try:
            delay = fake.running_at[i] - time.monotonic()
            if delay > 0 and stop.wait(delay):
                return
            status = own[i].start()  # its port was Marathon's before the task ran (it is in the events)
            session = requests.Session()
            session.headers["X-Sim"] = who if who == "leader" or direct else "relay" if i in relays else f"follower-{i}"
            session.hooks["response"].append(count_leader)
            # the leader's backend also reads the followers' status ports (its hints), as the bootstrap makes it
            backend = MarathonBackend(session, url, job=JOB, also_port="status" if i == 0 and not direct else None)
            slow = watch_interval(total, DEFAULT_WATCH_INTERVAL)
            env = {"MTF_RENDEZVOUS": "direct"} if direct else {}
            side = make_rendezvous(ctx(i), env, backend, me=("worker", i), address=f"127.0.0.1:{31000 + i % 30000}",
                                   server=status, stop=stop, rng=random.Random(i), session=session, slow=slow)
            if side is None:  # direct reads, as the bootstrap does them
                side = DirectRendezvous(backend, sleep=stop.wait, stop=stop.is_set, rng=random.Random(i))
            else:
                sides.append(side)
            found = side.wait([m for m in members if m != ("worker", i)], 600)
            formed_at[i] = time.monotonic()
            rng = random.Random(i)
            while direct and found and not stop.wait(slow * rng.uniform(0.5, 1.5)):
                side.moved(found)  # the bootstrap's watch poll
        except Exception as e:  # reported in the row
            errors.append(f"worker-{i}: {type(e).__name__}: {e}")

    servers.extend(own.values())
    timeline = _Timeline(sides, total).start(stop)
    cpu0 = time.process_time()
    threads = [threading.Thread(target=task, args=(0, "follower" if direct else "leader"), daemon=True)]
    threads += [threading.Thread(target=task, args=(i, "follower"), daemon=True) for i in sample]
    for t in threads:
        t.start()
    deadline = time.monotonic() + RAMP + 300
    while len(formed_at) + len(errors) < len(threads) and time.monotonic() < deadline:
        time.sleep(0.1)
    formed = max(formed_at.values()) if formed_at else time.monotonic()
    cpu = (time.process_time() - cpu0, time.monotonic() - fake.start)  # CPU, wall (till every task formed)
    time.sleep(watch)
    end = time.monotonic()
    change = _move_one(url, sides, sample, from_leader) if move and not direct and len(formed_at) == len(threads) \
        else None
    plan = _plan_change(sides, from_leader) if change is not None else None
    stop.set()
    for side in sides:
        side.close()
    fake.finish()
    for s in servers:
        s.close()
    sink.terminate()
    sink.wait(10)

    def load(t0, t1):
        req = byt = 0.0
        for t, who, what, n in fake.log:
            if t0 <= t < t1:
                w = stands_for(who)
                byt += n * w
                req += w if what != "events" else 0.0
        events_streams = 0 if direct else 1  # the leader's one stream, counted as one request
        return (req + events_streams) / max(1e-9, t1 - t0), byt / max(1e-9, t1 - t0)

    group_reads = [n for t, who, what, n in fake.log if who == "leader" and what == "group"]
    by_what: dict[str, int] = {}
    for t, who, what, _n in fake.log:
        if t <= formed:
            by_what[f"{who} {what}"] = by_what.get(f"{who} {what}", 0) + 1
    return {"forming": load(fake.start, formed), "formed": load(formed, end),
            "formed_after": formed - fake.running_at[-1], "formed_in": formed - fake.start, "errors": errors,
            "simulated": len(sample), "watch": end - formed,
            "requests": by_what, "complete": len(formed_at) == len(threads),
            "group_bytes": max([*group_reads, fake.group_bytes]),
            "timeline": timeline.summary(fake, formed_at, formed, cpu, direct),
            "from_leader": (sum(n * w for t, n, w in from_leader if t <= formed),
                            sum(w for t, n, w in from_leader if t <= formed)), "relays": len(relays),
            "change": change, "plan": plan,
            "hints": (sum(getattr(x, "hints", 0) for x in sides if hasattr(x, "locates")),
                      sum(getattr(getattr(x, "hints", None), "sent", 0) for x in sides if not hasattr(x, "locates")))}


def _move_one(url: str, sides: list, sample: list[int], from_leader: list[tuple[float, int, float]]) -> dict:
    """The job's one change once formed: a worker that is no simulated task is relaunched elsewhere (a new task, a new
    port; Marathon's ``status_update_event``). Until every simulated follower's view has its new address: the
    seconds, and the bytes the followers got from the leader meanwhile (scaled by the caller)."""
    import requests

    from marathon_tf.task.rendezvous import FollowerRendezvous

    followers = [s for s in sides if isinstance(s, FollowerRendezvous)]
    k = next(i for i in range(2, 10 ** 9) if i not in sample)
    new = f"127.0.0.1:{moved_port(k)}"
    time.sleep(2.0)  # the long polls settled after the watch
    began, seen = time.monotonic(), len(from_leader)
    requests.get(f"{url}/__move?i={k}", timeout=10)
    return {"task": f"worker-{k}", **_until_every(followers, lambda side: side.view.peers.get(("worker", k)) == new,
                                                 began, from_leader, seen)}


def _until_every(followers: list, has: Callable[[Any], bool], began: float,
                 from_leader: list[tuple[float, int, float]],
                 seen: int) -> dict[str, Any]:
    """Wait (at most 60 s) until ``has(follower)`` for every follower: the seconds since ``began`` (None: not all),
    the median follower's, and the bytes and answers the followers got from the leader (``from_leader`` from its
    item ``seen`` on: it grows meanwhile) until the last one had it."""
    done: dict[int, float] = {}
    while len(done) < len(followers) and time.monotonic() - began < 60:
        for n, side in enumerate(followers):
            if n not in done and has(side):
                done[n] = time.monotonic()
        time.sleep(0.005)
    last = max(done.values()) if len(done) == len(followers) else None
    sent = [(b, w) for t, b, w in from_leader[seen:] if t <= last + 0.01] if last is not None else []
    return {"seconds": None if last is None else last - began,
            "median": sorted(done.values())[len(done) // 2] - began if done else None,
            "bytes": sum(b * w for b, w in sent), "answers": sum(w for _, w in sent), "followers": len(followers)}


def _plan_change(sides: list, from_leader: list[tuple[float, int, float]]) -> dict:
    """The job's plan changes once formed: the coordinator starts a group restart round (every member restarts).
    Until every simulated follower has adopted that plan (its generation): the seconds, and the bytes the followers
    got from the leader meanwhile (scaled by the caller)."""
    from marathon_tf.contract.plan import Round, RoundCause, RoundKind
    from marathon_tf.task.rendezvous import FollowerRendezvous, LeaderRendezvous

    lead = next(s for s in sides if isinstance(s, LeaderRendezvous))
    followers = [s for s in sides if isinstance(s, FollowerRendezvous)]
    time.sleep(2.0)  # the long polls settled after the move
    began, seen = time.monotonic(), len(from_leader)
    lead.coordinator.start_round(Round(lead.coordinator.next_round_generation(), RoundKind.RESTART,
                                       RoundCause.FAILURE, "worker-1 failed (simulated)"))
    generation = lead.view.plan.generation
    return _until_every(followers, lambda side: side.view.plan.generation >= generation, began, from_leader, seen)


def bench_leader_load(quick: bool) -> list[Row]:
    rows = []
    base = _simulate(1000, 40 if quick else 100, 60.0 if quick else 120.0, direct=True)
    (breq, bbytes), (bwreq, bwbytes) = base["forming"], base["formed"]
    rows += [
        Row("baseline: Marathon requests/s while a 1,000-task job forms, every task reading (MTF_RENDEZVOUS=direct)",
            round(breq, 1), "req/s", f"same fake Marathon; {base['simulated']} simulated tasks scaled to 1,000; "
            f"formed {base['formed_after']:.1f} s after the last task runs; {base['timeline']}"),
        Row("baseline: Marathon bytes/s while it forms (direct)", round(bbytes / 1e6, 2), "MB/s", ""),
        Row("baseline: Marathon requests/s once formed (direct)", round(bwreq, 2), "req/s",
            f"over {base['watch']:.0f} s (watch interval 100 s ± 50% at this size)"),
        Row("baseline: Marathon bytes/s once formed (direct)", round(bwbytes / 1e6, 3), "MB/s", ""),
    ]
    for total in (1000, 10000):
        r = _simulate(total, 40 if quick else 100, 30.0 if quick else 60.0, move=True)
        n = f"{total:,}"
        relays = f"; every one of its {r['relays']} relays among them" if r["relays"] else ""
        note = (f"leader rendezvous; {r['simulated']} simulated followers (scaled to {total - 1:,}{relays}) + the "
                "real leader; "
                f"tasks RUNNING over {RAMP:g} s; the fake Marathon runs in a process of its own, the leader and the "
                f"simulated followers share one (one GIL), the other followers' hint endpoint a third; "
                "requests while forming: "
                + ", ".join(f"{k} {v}" for k, v in sorted(r["requests"].items())))
        if r["errors"] or not r["complete"]:
            rows.append(Row(f"{n}-task job: leader rendezvous", "did not form", "", "; ".join(r["errors"][:3])))
            continue
        (freq, fbytes), (wreq, wbytes) = r["forming"], r["formed"]
        rows += [
            Row(f"Marathon requests/s while a {n}-task job forms (goal ≤ 5 at 1,000)", round(freq, 2), "req/s", note),
            Row(f"Marathon bytes/s while a {n}-task job forms (goal ≤ 1 MB/s at 1,000)", round(fbytes / 1e6, 3), "MB/s",
                f"over {r['formed_in']:.1f} s"),
            Row(f"Marathon requests/s once a {n}-task job formed", round(wreq, 3), "req/s",
                f"over {r['watch']:.0f} s (the leader's event stream counts as 1 request)"),
            Row(f"Marathon bytes/s once a {n}-task job formed", round(wbytes / 1e3, 2), "kB/s",
                f"measured over {r['watch']:.0f} s: event stream heartbeats, and the leader's group re-read every "
                f"60 s ± 50% (none may fall in the window); on average that re-read is "
                f"{r['group_bytes'] / 1e6:.1f} MB / 60 s = {r['group_bytes'] / 60e3:.0f} kB/s"),
            Row(f"{n}-task job formed after its last task runs (goal ≤ 10 s at 1,000)", round(r["formed_after"], 1),
                "s", "every simulated task has the whole spec; " + r["timeline"]),
            Row(f"what the leader sends its {total - 1:,} followers while a {n}-task job forms",
                round(r["from_leader"][0] / 1e6, 1), "MB",
                f"not Marathon's load: the leader's own; {r['from_leader'][1]:,.0f} answers (scaled from the simulated "
                f"followers' bytes on the wire; a whole view of {n} peers goes gzipped; "
                + (f"{r['relays']} relays, every one simulated, get whole views, the other followers a redirect "
                   "to theirs)" if r["relays"] else "every follower asks the leader)")),
        ]
        change = r["change"] or {}
        rows += _change_rows(change,
                             f"a {n}-task job's change (a worker relaunched elsewhere) -> every follower's view",
                             f"what the leader sends its {total - 1:,} followers for that change", r["relays"],
                             f"{change.get('task')} moved (Marathon's status_update_event to the leader)",
                             "each a delta since the version it had, not the whole view")
        rows += _change_rows(r["plan"] or {}, f"a {n}-task job's plan change (a group restart round) -> every "
                             f"follower has it", f"what the leader sends its {total - 1:,} followers for that plan "
                             f"change", r["relays"], "the coordinator starts a round",
                             "each a delta since the version the follower had, with the whole plan")
        if total == 1000:
            rows.append(Row("leader / direct at 1,000 tasks: requests, bytes while forming; requests once formed",
                            f"{freq / max(breq, 1e-9):.4f} / {fbytes / max(bbytes, 1e-9):.4f} / "
                            f"{wreq / max(bwreq, 1e-9):.3f}", "×", "same run, same fake Marathon"))
    return rows


def _change_rows(change: dict, what: str, sent: str, relays: int, how: str, answers: str) -> list[Row]:
    """The two rows of one change once a job formed (:func:`_until_every`'s figures): until every follower has it
    (goal ≤ 2 s at 10,000), and what the leader sends its followers for it (goal ≤ 50 MB at 10,000; the simulated
    followers' bytes on the wire, each weighted by the followers it stands for)."""
    if change.get("seconds") is None:
        return [Row(what, "did not arrive", "", f"within 60 s: {change}")]
    through = (f"{relays} relays long-polling the leader, the other simulated followers long-polling them" if relays
               else "long-polling the leader")
    return [Row(f"{what} (goal ≤ 2 s at 10,000)", round(change["seconds"], 2), "s",
                f"{how}; median follower {change['median']:.2f} s; {change['followers']} simulated followers, "
                f"{through} (the time of answering the other followers' polls at once is not in it; "
                f"the bytes are scaled)"),
            Row(f"{sent} (goal ≤ 50 MB at 10,000)", round(change["bytes"] / 1e6, 2), "MB",
                f"{change['answers']:,.0f} answers ({answers})")]


def bench_move_latency(quick: bool) -> list[Row]:
    """A peer moves -> a follower's view has the new address: the leader (real, with its status
    endpoint) and one follower (real, long-polling it over HTTP), the backend a dict the bench
    changes. Woken by a status update (as with Marathon's /v2/events), and without events (the
    calm DNS poll of a small job, about every second)."""
    import queue
    import statistics

    import requests

    from marathon_tf.task.discovery import Observation
    from marathon_tf.task.rendezvous import PATH, FollowerRendezvous, LeaderRendezvous
    from marathon_tf.task.status_server import StatusServer, TaskStatus

    class Backend:
        def __init__(self):
            self.addresses = {("ps", 0): "10.0.0.1:1", ("worker", 1): "10.0.0.2:2"}

        def lookup(self, peers):
            return {p: Observation(self.addresses.get(p), "ok") for p in peers}

    class Events:
        available, reconnects = True, 0

        def __init__(self):
            self.q = queue.Queue()

        def wait(self, seconds):
            try:
                out = [self.q.get(timeout=max(seconds, 0))]
            except queue.Empty:
                return []
            while not self.q.empty():
                out.append(self.q.get_nowait())
            return out

        def close(self):
            pass

    members = [("ps", 0), ("worker", 0), ("worker", 1)]
    rows = []
    for label, events in (("woken by a status update", Events()), ("no event stream, calm poll ~1 s", None)):
        backend, stop = Backend(), threading.Event()
        lead = LeaderRendezvous(backend, members, ("worker", 0), "10.0.0.3:3", job=JOB, slow=1.0, events=events,
                                stop=stop, hot_window=0.0)
        server = StatusServer(TaskStatus(job=JOB, task="worker-0", role="worker", index=0), "127.0.0.1", 0,
                              routes={PATH: lead.handle}).start()
        lead.start()
        at = f"127.0.0.1:{server.port}"
        follower = FollowerRendezvous(lambda: Observation(at, "ok"), backend, members, ("worker", 1), job=JOB,
                                      session=requests.Session(), stop=stop).start()
        current = dict(follower.wait([("ps", 0), ("worker", 0)], 30))
        time.sleep(2.0)  # calm
        lat = []
        for k in range(5 if quick else 20):
            new = f"10.0.1.{k}:{1000 + k}"
            t0 = time.monotonic()
            backend.addresses[("ps", 0)] = new
            if events is not None:
                events.q.put({"appId": f"/{JOB}/ps-0", "taskStatus": "TASK_RUNNING"})
            while follower.moved(current).get(("ps", 0)) != new:
                time.sleep(0.002)
            lat.append(time.monotonic() - t0)
            current[("ps", 0)] = new
            time.sleep(random.uniform(0.5, 1.5))
        for x in (follower, lead, server):
            x.close()
        stop.set()
        rows.append(Row(f"peer move -> follower's view ({label})", round(statistics.median(lat), 3), "s",
                        f"median of {len(lat)}, max {max(lat):.3f} s; leader + follower over HTTP on 127.0.0.1"))
    return rows


BENCHMARKS = {"leader_load": bench_leader_load, "move_latency": bench_move_latency}
