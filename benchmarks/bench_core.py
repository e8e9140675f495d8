"""CLI start time; validate + render for 1 ps + N workers (time, peak Python memory, cost per task); `local serve`'s
answer when its ports are busy."""

from __future__ import annotations

import gc
import json
import subprocess
import tracemalloc

from .common import BIN, PYTHON, ROOT, Row, median, run_seconds, timed


def _job(workers: int) -> dict:
    return {"name": "bench", "style": "tf1", "command": ["python3", "train.py", "--steps", "1000"],
            "env": {"A": "1", "B": "two"}, "constraints": [["hostname", "UNIQUE"]],
            "volumes": [{"host_path": "/shared/ckpt", "container_path": "ckpt"}], "logdir": "ckpt",
            "image": "marathon-tf/tensorflow:2.21.0-cpu",
            "roles": {"ps": {"count": 1}, "worker": {"count": workers}}}


def _validate_and_render(job: dict) -> int:
    from marathon_tf.user.render import render_group
    from marathon_tf.user.spec import load_dict

    return len(json.dumps(render_group(load_dict(job))))


def bench_cli(quick: bool) -> list[Row]:
    n = 5 if quick else 11
    exe = str(BIN / "marathon-tf")
    help_s = median(run_seconds([exe, "--help"], n))
    job = ROOT / "examples" / "linear-regression-tf1" / "job.json"
    validate_s = median(run_seconds([exe, "validate", str(job)], n))
    bare = median(run_seconds([PYTHON, "-c", "pass"], n))
    return [
        Row("CLI start: `marathon-tf --help`", round(help_s * 1000, 1), "ms",
            f"bare python start {bare * 1000:.0f} ms"),
        Row("CLI: `marathon-tf validate` an example", round(validate_s * 1000, 1), "ms"),
    ]


def bench_render(quick: bool) -> list[Row]:
    _validate_and_render(_job(10))  # warm imports and template compilation
    rows = []
    per_task = {}
    sizes = (1000, 10000)
    for workers in sizes:
        job = _job(workers)
        repeat = 3 if (quick or workers > 1000) else 7
        secs = median(timed(lambda: _validate_and_render(job), repeat))
        gc.collect()
        tracemalloc.start()
        _validate_and_render(job)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        tasks = workers + 1
        per_task[workers] = secs / tasks
        rows.append(Row(f"validate + render 1 ps + {workers:,} workers", round(secs, 3), "s",
                        f"peak {peak / 2**20:.1f} MiB; {secs / tasks * 1e6:.0f} µs and "
                        f"{peak / tasks / 1024:.1f} KiB per task"))
    ratio = per_task[sizes[1]] / per_task[sizes[0]]
    rows.append(Row("render cost per task, 10k vs 1k (1.0 = linear)", round(ratio, 2), "×"))
    return rows


def bench_busy_ports(quick: bool) -> list[Row]:
    """`local serve` with all three of its ports taken: the time to its one-line error (every busy port),
    against `marathon-tf --help` in the same run (the CLI's own start)."""
    import socket
    import tempfile

    n = 5 if quick else 11
    exe = str(BIN / "marathon-tf")
    holders = [socket.socket(), socket.socket(socket.AF_INET, socket.SOCK_DGRAM), socket.socket()]
    try:
        for sock in holders:
            sock.bind(("127.0.0.1", 0))
            if sock.type == socket.SOCK_STREAM:
                sock.listen()
        api, dns, http = (str(sock.getsockname()[1]) for sock in holders)
        with tempfile.TemporaryDirectory() as state:
            cmd = [exe, "local", "serve", "--port", api, "--dns-port", dns, "--dns-http-port", http,
                   "--state-dir", state]
            busy_s = median(timed(lambda: subprocess.run(cmd, capture_output=True, timeout=120), n))  # exits 2
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stderr.splitlines()[0]
    finally:
        for sock in holders:
            sock.close()
    help_s = median(run_seconds([exe, "--help"], n))
    return [Row("`local serve` with its 3 ports busy: to the error", round(busy_s * 1000, 1), "ms",
                f"{busy_s / help_s:.2f}× `marathon-tf --help` ({help_s * 1000:.0f} ms); says: {out[:60]}…")]
