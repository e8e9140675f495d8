"""Load on ``marathon-tf local serve``: ``GET /v2/apps`` with 100 apps (one task each), 50 concurrent
clients × 200 requests, from a load generator in its own process (:mod:`benchmarks.loadgen`).

Baseline in the same run: ``GET /v2/info`` (a small fixed answer through the same server, middlewares
and security), the same 50 × 200; the two are run twice, interleaved, and averaged. Then the server's
RSS and open files before, after those 40,000 requests, after 100 event streams were opened and
closed, and after another 10,000 ``/v2/apps`` (flat = no growth between the last two). The
machine's load average is reported with each row: this runs on whatever else the machine does.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

from .common import BIN, HARNESS, PYTHON, Row

APPS = 100


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _until(what: str, check, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.25)
    raise RuntimeError(f"{what}: not within {timeout:g} s")


def _loadgen(url: str, *args: str) -> dict:
    out = subprocess.run([PYTHON, "-m", "benchmarks.loadgen", url, *args], capture_output=True, text=True,
                         cwd=HARNESS, timeout=600, check=True)
    return json.loads(out.stdout)


def _mean(runs: list[dict]) -> dict:
    return {k: sum(r[k] for r in runs) / len(runs) for k in runs[0]}


def _load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def bench_serve_load(quick: bool) -> list[Row]:
    per_client = "40" if quick else "200"
    tmp = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARATHON")}
    proc = subprocess.Popen([str(BIN / "marathon-tf"), "local", "serve", "--port", "0", "--dns-port", "0",
                             "--dns-http-port", "0", "--state-dir", str(tmp / "state")],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env,
                            start_new_session=True)
    try:
        first = proc.stderr.readline()
        url = first.split()[2]
        apps = [{"id": f"/load/app-{i:03d}", "cmd": "sleep 3600", "cpus": 0.01, "mem": 8, "instances": 1,
                 "labels": {"team": "bench"}, "env": {"A": "b"}} for i in range(APPS)]
        requests.put(url + "/v2/groups/load", json={"id": "/load", "apps": apps}, timeout=30).raise_for_status()
        _until("100 tasks running", lambda: sum(a["tasksRunning"] for a in requests.get(
            url + "/v2/apps", timeout=30).json()["apps"]) == APPS, 120)
        _until("the deployment to end", lambda: requests.get(url + "/v2/deployments", timeout=30).json() == [], 60)
        _loadgen(url, "/v2/apps", "10", "50")  # warm-up
        before = (_rss_mib(proc.pid), _fds(proc.pid))
        load_before = _load()
        runs = [_loadgen(url, path, "50", per_client) for path in ("/v2/info", "/v2/apps") * 2]  # interleaved
        info, apps_run = _mean(runs[0::2]), _mean(runs[1::2])
        load_after = _load()
        after = (_rss_mib(proc.pid), _fds(proc.pid))
        streams = _loadgen(url, "--events", "100")
        _until("the event streams' connections to close", lambda: _fds(proc.pid) <= after[1] + 2, 30)
        after_events = (_rss_mib(proc.pid), _fds(proc.pid))
        again = _loadgen(url, "/v2/apps", "50", per_client)
        last = (_rss_mib(proc.pid), _fds(proc.pid))
        body = len(requests.get(url + "/v2/apps", timeout=30).content)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    n = int(per_client) * 50
    def ms(s):
        return f"{s * 1000:.0f} ms"
    where = f"{load_before} before, {load_after} after; 2 cores shared with the load generator"
    return [
        Row(f"local serve GET /v2/apps, {APPS} apps, 50 clients x {per_client}", round(apps_run["rps"], 1), "req/s",
            f"goal >= 300; mean of 2 runs; median {ms(apps_run['median'])}, p99 {ms(apps_run['p99'])}; "
            f"{apps_run['errors'] * 2:.0f} errors in 2 x {n}; body {body / 1024:.0f} KiB; {where}"),
        Row("baseline: local serve GET /v2/info, same clients", round(info["rps"], 1), "req/s",
            f"mean of 2 runs; median {ms(info['median'])}, p99 {ms(info['p99'])}; {info['errors'] * 2:.0f} errors"),
        Row("GET /v2/apps (100 apps) / GET /v2/info requests/s", round(apps_run["rps"] / info["rps"], 2), "x",
            "1.0 = listing 100 apps costs no more than the smallest answer"),
        Row("local serve RSS: before / after 4 x 10,000 requests / after 100 event streams / after 10,000 more",
            " / ".join(f"{x[0]:.1f}" for x in (before, after, after_events, last)), "MiB",
            f"{streams['attached']} of {streams['streams']} streams attached; second run {again['rps']:.0f} req/s"),
        Row("local serve open files: the same four points", " / ".join(str(x[1]) for x in (before, after, after_events,
                                                                                              last)), "fds", ""),
    ]


BENCHMARKS = {"serve_load": bench_serve_load}

if __name__ == "__main__":  # pragma: no cover
    for row in bench_serve_load("--quick" in sys.argv):
        print(row)
