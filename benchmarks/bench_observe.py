"""What watching a job costs it: steady-state steps/s with every task's ``/metrics`` scraped every second,
against the same job unscraped.

One ``deploy --local`` of linear-regression-tf1 (1 ps + 2 workers) trains long enough for many
short alternating windows: scraped (every task's ``/metrics`` once a second, as a Prometheus with a
1 s interval would) and unscraped. Same run, same processes; each scraped window is compared with
the unscraped window next to it, so drift on a shared machine cancels out, and the ratio is the
median of those pairs. Goal ≥ 0.99. Beside it, what a scrape costs the tasks: the bootstraps' CPU
time (``/proc/<pid>/stat``) in scraped windows minus unscraped ones, per scrape. The scraper runs
in a process of its own at the lowest priority (nice 19): a real Prometheus scrapes from another
machine, so its own CPU is not the job's cost; on these 2 cores it takes only what the job leaves.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from .bench_runtime import EXAMPLE, LineWatcher
from .common import BIN, Row, median

METRICS_LINE = re.compile(r"job \S+: metrics at (.*)$", re.M)


def _rate(points: list[tuple[float, int]], start: float, end: float) -> float | None:
    inside = [(t, s) for t, s in points if start <= t <= end]
    if len(inside) < 3:
        return None
    (t0, s0), (t1, s1) = inside[0], max(inside, key=lambda p: p[1])
    return (s1 - s0) / (t1 - t0) if t1 > t0 else None


def _bootstraps(state: Path) -> list[int]:
    """The tasks' bootstrap processes (their working directory is a sandbox of ``state``)."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cwd = os.readlink(proc / "cwd")
            cmd = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if cwd.startswith(str(state)) and b"bootstrap" in cmd and b"prewarm_child" not in cmd:
            out.append(int(proc.name))
    return out


def _cpu(pids: list[int]) -> float:
    """User + system CPU seconds of ``pids`` so far."""
    total = 0
    for pid in pids:
        try:
            fields = (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1]).split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


def _scraper(urls: list[str], on, stop, count) -> None:
    """Scrape every URL once a second while ``on`` is set (a process of its own: see the module)."""
    os.nice(19)  # a real Prometheus scrapes from another machine: here it takes only what the job leaves
    while not stop.is_set():
        began = time.monotonic()
        if on.is_set():
            for url in urls:
                try:
                    with urllib.request.urlopen(url, timeout=2) as r:
                        r.read()
                    with count.get_lock():
                        count.value += 1
                except OSError:
                    pass
        stop.wait(max(0.0, 1.0 - (time.monotonic() - began)))


def bench_metrics_overhead(quick: bool) -> list[Row]:
    windows, seconds = (12, 5.0) if quick else (40, 8.0)
    work = Path(tempfile.mkdtemp(prefix="bench-metrics-"))
    job = json.loads((EXAMPLE / "job.json").read_text())
    job["command"] = ["python3", "train.py", "--train_steps", "100000000", "--checkpoint_dir", "ckpt",
                      "--log_every", "20"]
    job["fetch"] = [str(EXAMPLE / "train.py")]
    job["volumes"][0]["host_path"] = str(work / "ckpt")
    (work / "job.json").write_text(json.dumps(job))
    state, err = work / "state", work / "stderr.txt"
    env = dict(os.environ, MARATHON_TF_STATE_DIR=str(state))
    def sandboxes():
        return [p / "stdout" for p in (state.glob("*/sandboxes/*worker*") if state.exists() else [])]
    mp = multiprocessing.get_context("spawn")
    on, stop, scrapes = mp.Event(), mp.Event(), mp.Value("i", 0)
    with open(err, "w") as e:
        proc = subprocess.Popen([str(BIN / "marathon-tf"), "deploy", str(work / "job.json"), "--local"],
                                cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=e, start_new_session=True)
    try:
        with LineWatcher(sandboxes) as watch:
            deadline = time.monotonic() + 300
            while not METRICS_LINE.search(err.read_text()) or len(watch.steps) < 20:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the job did not start training: {err.read_text()[-2000:]}")
                time.sleep(0.5)
            urls = re.findall(r"http://\S+/metrics", METRICS_LINE.search(err.read_text()).group(1))
            scraper = mp.Process(target=_scraper, args=(urls, on, stop, scrapes), daemon=True)
            scraper.start()
            boots = _bootstraps(state)
            time.sleep(10)  # past the start
            spans: list[tuple[bool, float, float, float, int]] = []  # (scraped, start, end, bootstraps' CPU, scrapes)
            for i in range(windows):
                scraped = i % 2 == 1
                on.set() if scraped else on.clear()
                time.sleep(0.5)  # the switch settles
                start, cpu, n = time.time(), _cpu(boots), scrapes.value
                time.sleep(seconds)
                spans.append((scraped, start, time.time(), _cpu(boots) - cpu, scrapes.value - n))
            stop.set()
            scraper.join(10)
        rates = [(scraped, _rate(watch.steps, a, b), cpu, n) for scraped, a, b, cpu, n in spans]
    finally:
        os.killpg(proc.pid, 2)  # Ctrl-C: the runner stops every task
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)
    pairs = [on_r / off_r for (_, off_r, _, _), (_, on_r, _, _) in zip(rates[0::2], rates[1::2]) if off_r and on_r]
    off = [r for scraped, r, _, _ in rates if not scraped and r]
    on_ = [r for scraped, r, _, _ in rates if scraped and r]
    done = sum(n for scraped, _, _, n in rates if scraped)
    cpu_per_scrape = (sum(c for s_, _, c, _ in rates if s_) - sum(c for s_, _, c, _ in rates if not s_)) / max(1, done)
    ratio = median(pairs)
    def each(xs):
        return ", ".join(f"{x:.2f}" for x in xs)
    return [
        Row("steady-state global steps/s, unscraped", round(median(off), 1), "steps/s",
            f"linear-regression-tf1 under `deploy --local`, {len(off)} windows of {seconds:g} s (median)"),
        Row("steady-state global steps/s, every task's /metrics scraped every second", round(median(on_), 1),
            "steps/s", f"the same run, {len(on_)} windows between them ({done} scrapes of {len(urls)} tasks)"),
        Row("throughput ratio scraped / unscraped (goal ≥ 0.99)", round(ratio, 3), "×",
            f"{'met' if ratio >= 0.99 else 'NOT met'}; median of {len(pairs)} neighbouring pairs: {each(pairs)}"),
        Row("the bootstraps' CPU per scrape", round(cpu_per_scrape * 1000, 2), "ms",
            f"scraped minus unscraped windows' CPU time of the {len(boots)} bootstraps (10 ms clock ticks), "
            f"per scrape; 1 scrape/s is {cpu_per_scrape * 100:.2f} % of one core"),
    ]


BENCHMARKS = {"metrics_overhead": bench_metrics_overhead}
