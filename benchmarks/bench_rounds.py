"""A save round's hold over a 1,000- and a 10,000-task job (issue 40).

A ``tf1`` job's save round freezes every other chief and worker at its step boundary before the deciding task's
program saves (``POST /hold`` to each: :class:`marathon_tf.task.saving.Saving`), through the task API's one
fan-out (:meth:`marathon_tf.contract.taskapi.TaskClient.hold`, :func:`~marathon_tf.contract.taskapi.broadcast`).
The round has :func:`~marathon_tf.task.saving.round_budget` of the stopping program's grace for all of it (20 s
for the stock 30 s kill grace): the hold must reach every worker well within that.

The simulated workers answer from one process of their own (HTTP/1.0: a connection per request, as to 9,999
different hosts), each ``POST /w<i>/hold`` with ``{"held": true}``: one process answering all of them is slower
than 9,999 hosts answering their own, so the figure is an upper bound on the fan-out's time.
"""

from __future__ import annotations

import subprocess
import sys
import time

from .common import Row, server_script

_WORKERS = server_script("""
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        ok = self.path.endswith("/hold")
        body = json.dumps({"held": True} if ok else {"message": "no such route"}).encode()
        self.send_response(200 if ok else 404)
        self.send_header("Content-Type", "application/json"); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
""", queue=4096)


def _hold_round(tasks: int, port: int) -> tuple[float, int]:
    """Seconds until every other worker of a ``tasks``-task job answered the round's hold; how many said held."""
    from marathon_tf.contract.taskapi import HoldRequest, TaskClient
    from marathon_tf.marathon import transport
    from marathon_tf.task.saving import HOLD_TIMEOUT

    targets = {f"worker-{i}": f"http://127.0.0.1:{port}/w{i}" for i in range(1, tasks)}
    # what a save round's holds go through (a version before the fan-out session: requests' session)
    with getattr(transport, "fanout_session", transport.session)() as session:
        began = time.monotonic()
        replies = TaskClient(session).hold(targets, HoldRequest("big", "benchmark", 30.0), timeout=HOLD_TIMEOUT)
        seconds = time.monotonic() - began
    held = sum(1 for r in replies.values() if r is not None and r.ok and (r.json() or {}).get("held"))
    return seconds, held


def bench_hold_round(quick: bool) -> list[Row]:
    from marathon_tf.task.restarts import program_grace
    from marathon_tf.task.saving import round_budget

    budget = round_budget(program_grace(30.0))
    server = subprocess.Popen([sys.executable, "-c", _WORKERS], stdout=subprocess.PIPE, text=True)
    rows = []
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        for tasks in (1_000, 10_000):
            runs = [_hold_round(tasks, port) for _ in range(1 if quick or tasks > 1_000 else 3)]
            seconds = sorted(s for s, _ in runs)[len(runs) // 2]
            held = min(h for _, h in runs)
            value: float | str = round(seconds, 2) if held == tasks - 1 else f"{held:,} of {tasks - 1:,} held"
            rows.append(Row(f"a save round's hold over a {tasks:,}-task job: every other worker held", value,
                            "s", f"{held:,} of {tasks - 1:,} said held; {(tasks - 1) / seconds:,.0f} holds/s; the "
                                 f"round's budget {budget:g} s (the stock 30 s grace); runs: "
                                 + ", ".join(f"{s:.2f}" for s, _ in runs)))
    finally:
        server.kill()
        server.wait()
    return rows


BENCHMARKS = {"hold_round": bench_hold_round}
