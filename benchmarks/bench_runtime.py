"""Runtime benchmarks on this machine (real TensorFlow, the local runner):

* ``deploy --local`` to every task's first training step, vs the same program hand-launched
  (examples/handlaunch.py: fixed free ports, flags) — ratio, goal ≤ 1.0 (pre-warmed trainers
  import TensorFlow while discovery runs);
* steady-state training steps/s under marathon-tf vs hand-launched — ratio, goal ≥ 0.97;
* discovery latency: from the last peer becoming visible (its SRV record, or its task RUNNING in
  Marathon's API) to every bootstrap having written its cluster spec;
* the load discovery puts on Marathon for a simulated 1,000-task job (requests/s while forming
  and once formed).

Runs alternate between the two launch modes so that drift on a shared machine hits both alike.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .common import BIN, ROOT, Row, median

EXAMPLE = ROOT / "examples" / "linear-regression-tf1"
STEP = re.compile(rb"\bstep=(\d+)")
FIRST = re.compile(rb"first_step_time=([0-9.]+)")


class LineWatcher:
    """Polls files for ``step=`` and ``first_step_time=`` lines, noting when each step line arrived."""

    def __init__(self, paths_fn, interval: float = 0.05):
        self.paths_fn, self.interval = paths_fn, interval
        self.offsets: dict[Path, int] = {}
        self.steps: list[tuple[float, int]] = []   # (arrival time, global step)
        self.first: dict[Path, float] = {}         # file -> first_step_time printed by the program
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()

    def _run(self):
        while not self._stop.wait(self.interval):
            now = time.time()
            for path in self.paths_fn():
                try:
                    with open(path, "rb") as f:
                        f.seek(self.offsets.get(path, 0))
                        data = f.read()
                except OSError:
                    continue
                cut = data.rfind(b"\n") + 1
                self.offsets[path] = self.offsets.get(path, 0) + cut
                for line in data[:cut].splitlines():
                    m = FIRST.search(line)
                    if m:
                        self.first[path] = float(m.group(1))
                    m = STEP.search(line)
                    if m and b"final_step" not in line:
                        self.steps.append((now, int(m.group(1))))

    def steps_per_second(self) -> float | None:
        """Global steps per second between 20% and 100% of the run (past start-up)."""
        pts = sorted(self.steps)
        if len(pts) < 5:
            return None
        top = max(s for _, s in pts)
        window = [(t, s) for t, s in pts if s >= 0.2 * top]
        (t0, s0), (t1, s1) = window[0], max(window, key=lambda p: p[1])
        return (s1 - s0) / (t1 - t0) if t1 > t0 else None


def _hand_run(steps: int, work: Path) -> tuple[float, float | None]:
    sys.path.insert(0, str(ROOT / "examples"))
    import handlaunch

    ckpt = work / "hand-ckpt"
    logdir = work / "hand-logs"
    t0 = time.time()
    procs = handlaunch.launch(EXAMPLE, ps=1, workers=2, logdir=logdir,
                              extra_args=[f"--train_steps={steps}", f"--checkpoint_dir={ckpt}", "--log_every=20"])
    try:
        with LineWatcher(lambda: [p.stdout_path for p in procs if p.role == "worker"]) as watch:
            codes = handlaunch.wait(procs, completion="all_workers", timeout=600)
        if any(codes.values()):
            raise RuntimeError(f"hand-launched run failed: {codes}")
        firsts = [handlaunch.first_step_seconds(p) for p in procs if p.role == "worker"]
        return max(f + p.started_at for f, p in zip(firsts, [p for p in procs if p.role == "worker"])) - t0, \
            watch.steps_per_second()
    finally:
        handlaunch.stop(procs)


def _mtf_run(steps: int, work: Path, prewarm: bool = True) -> tuple[float, float | None]:
    job = json.loads((EXAMPLE / "job.json").read_text())
    if not prewarm:
        job["prewarm"] = False
    job["command"] = ["python3", "train.py", "--train_steps", str(steps), "--checkpoint_dir", "ckpt",
                      "--log_every", "20"]
    job["fetch"] = [str(EXAMPLE / "train.py")]
    job["volumes"][0]["host_path"] = str(work / "mtf-ckpt")
    job_file = work / "job.json"
    job_file.write_text(json.dumps(job))
    state = work / "state"
    env = dict(os.environ, MARATHON_TF_STATE_DIR=str(state))
    def sandboxes():
        return [p / "stdout" for p in (state.glob("*/sandboxes/*worker*") if state.exists() else [])]
    t0 = time.time()
    with LineWatcher(sandboxes) as watch:
        proc = subprocess.run([str(BIN / "marathon-tf"), "deploy", str(job_file), "--local", "--timeout", "600"],
                              env=env, cwd=work, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"deploy --local failed ({proc.returncode}): {proc.stderr[-2000:]}")
    if len(watch.first) < 2:
        raise RuntimeError("marathon-tf run: not every worker printed first_step_time")
    return max(watch.first.values()) - t0, watch.steps_per_second()


def bench_local_vs_hand(quick: bool) -> list[Row]:
    runs = 1 if quick else 3
    steps = 1500 if quick else 3000
    modes = {"hand": _hand_run, "mtf": _mtf_run, "mtf_off": lambda n, w: _mtf_run(n, w, prewarm=False)}
    first: dict[str, list[float]] = {m: [] for m in modes}
    sps: dict[str, list[float]] = {m: [] for m in modes}
    order = list(modes)
    for i in range(runs):
        for mode in order[i % 3:] + order[:i % 3]:  # rotate: drift on a shared machine hits every mode alike
            work = Path(tempfile.mkdtemp(prefix=f"bench-{mode}-"))
            try:
                f, rate = modes[mode](steps, work)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            first[mode].append(f)
            if rate:
                sps[mode].append(rate)
    hf, mf, of = (median(first[m]) for m in order)
    def each(xs):
        return ", ".join(f"{x:.2f}" for x in xs)
    rows = [
        Row("time to every worker's first step: hand-launched", round(hf, 2), "s",
            f"linear-regression-tf1, 1 ps + 2 workers, each imports TensorFlow; median of {runs}: "
            f"{each(first['hand'])}"),
        Row("time to every worker's first step: `deploy --local`", round(mf, 2), "s",
            f"from the command's start: the runner's shared pre-warmed interpreter (one import, forked per task), "
            f"local Marathon + Mesos-DNS, render, deploy, discovery; median of {runs}: {each(first['mtf'])}"),
        Row("time to every worker's first step: `deploy --local`, prewarm: false", round(of, 2), "s",
            f"every task imports TensorFlow after discovery; median of {runs}: {each(first['mtf_off'])}"),
        Row("first-step ratio marathon-tf / hand (goal ≤ 1.0)", round(mf / hf, 2), "×",
            "met" if mf / hf <= 1.0 else "NOT met"),
        Row("first-step ratio marathon-tf with prewarm: false / hand", round(of / hf, 2), "×", ""),
    ]
    if all(sps.values()):
        hs, ms, os_ = (median(sps[m]) for m in order)
        rows += [
            Row("steady-state global steps/s: hand-launched", round(hs, 1), "steps/s",
                f"{steps} steps, 20–100 % of the run; {each(sps['hand'])}"),
            Row("steady-state global steps/s: marathon-tf", round(ms, 1), "steps/s", each(sps["mtf"])),
            Row("steady-state global steps/s: marathon-tf, prewarm: false", round(os_, 1), "steps/s",
                each(sps["mtf_off"])),
            Row("throughput ratio marathon-tf / hand (goal ≥ 0.97)", round(ms / hs, 3), "×",
                "met" if ms / hs >= 0.97 else "NOT met"),
            Row("throughput ratio marathon-tf with prewarm: false / hand", round(os_ / hs, 3), "×", ""),
        ]
    return rows


# ------------------------------------------------------------------------------- discovery latency


def _discovery_latency(mode: str, refresh: float) -> float:
    """Seconds from the last peer becoming visible to every bootstrap having written its spec."""
    import dns.resolver
    import requests

    from marathon_tf.contract import naming
    from marathon_tf.user.localrun import local_cluster as LocalCluster  # as deploy --local runs it
    from marathon_tf.user.render import render_group
    from marathon_tf.user.spec import load_dict

    work = Path(tempfile.mkdtemp(prefix="bench-disc-"))
    cluster = LocalCluster(state_dir=work / "state", dns_refresh=refresh)
    try:
        cluster.start()
        spec = load_dict({"name": "disc", "style": "tf1", "command": ["sleep", "300"],
                          "roles": {"ps": {"count": 1}, "worker": {"count": 2}},
                          "discovery": {"mode": mode, "nameserver": cluster.mesos_dns,
                                        "marathon_url": cluster.marathon_url, "startup_timeout": 120}})
        group = render_group(spec)
        early = dict(group, apps=[a for a in group["apps"] if not a["id"].endswith("worker-1")])
        s = requests.Session()
        s.put(f"{cluster.marathon_url}/v2/groups/disc", json=early).raise_for_status()
        time.sleep(6)  # the first tasks are polling with backoff by now
        s.put(f"{cluster.marathon_url}/v2/groups/disc", json=group).raise_for_status()
        last = naming.app_id("disc", "worker", 1)
        resolver = dns.resolver.Resolver(configure=False)
        host, port = cluster.mesos_dns.split(":")
        resolver.nameservers, resolver.port, resolver.lifetime = [host], int(port), 1.0
        deadline = time.time() + 60
        visible = None
        while time.time() < deadline and visible is None:
            if mode == "marathon":
                tasks = s.get(f"{cluster.marathon_url}/v2/apps{last}/tasks").json().get("tasks", [])
                if any(t.get("state") == "TASK_RUNNING" for t in tasks):
                    visible = time.time()
            else:
                try:
                    resolver.resolve(naming.srv_name(last, port_name="tf"), "SRV")
                    visible = time.time()
                except Exception:
                    pass
            time.sleep(0.01)
        specs = {}
        while time.time() < deadline and len(specs) < 3:
            for box in (work / "state" / "sandboxes").glob("*"):
                f = box / "cluster_spec.json"
                if f.exists() and box.name not in specs:
                    specs[box.name] = f.stat().st_mtime
            time.sleep(0.01)
        if visible is None or len(specs) < 3:
            raise RuntimeError(f"discovery did not complete ({mode}): visible={visible} specs={len(specs)}")
        return max(specs.values()) - visible
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


def bench_discovery(quick: bool) -> list[Row]:
    runs = 1 if quick else 3
    rows = []
    for mode, refresh in (("mesos-dns", 1.0), ("marathon", 1.0)):
        lat = median([_discovery_latency(mode, refresh) for _ in range(runs)])
        note = (f"Mesos-DNS refresh {refresh:g} s; measured from the SRV record answering" if mode == "mesos-dns"
                else "measured from the task showing TASK_RUNNING in /v2/apps/…/tasks")
        rows.append(Row(f"discovery latency, {mode} (goal ≤ 1 s + one poll interval)", round(lat, 2), "s",
                        f"{note}; the early peers had been polling for 6 s (discovery.poll_schedule: 0.25 s "
                        f"doubling to 1 s for a 3-task job); median of {runs}"))
    return rows


# ------------------------------------------------------------------------------- load on Marathon


def bench_marathon_load(quick: bool) -> list[Row]:
    """Simulated tasks of a 1,000-task job run the real Rendezvous + MarathonBackend against a
    counting HTTP server whose group has its tasks turn RUNNING over ``ramp`` seconds."""
    import requests

    from marathon_tf.contract import naming
    from marathon_tf.task.bootstrap import DEFAULT_WATCH_INTERVAL
    from marathon_tf.task.discovery import MarathonBackend, watch_interval
    from marathon_tf.task.rendezvous import DirectRendezvous

    total = 1000
    simulated = 40 if quick else 100
    ramp = 10.0
    start = time.time()
    hits: list[float] = []
    sizes: list[int] = []
    lock = threading.Lock()
    apps_cache: dict[int, bytes] = {}

    def body(now: float) -> bytes:
        running = min(total, int(total * (now - start) / ramp))
        if running not in apps_cache:
            apps = []
            for i in range(total):
                app = {"id": naming.app_id("big", "worker", i), "portDefinitions": [{"name": "tf"}, {"name": "status"}],
                       "tasks": []}
                if i < running:
                    app["tasks"] = [{"id": f"big_worker-{i}.instance-1._app.1", "state": "TASK_RUNNING",
                                     "host": f"10.0.{i // 250}.{i % 250}", "ports": [31000 + i, 32000 + i],
                                     "startedAt": "2026-11-21T00:00:00.000Z"}]
                apps.append(app)
            apps_cache[running] = json.dumps({"id": "/big", "apps": apps}).encode()
        return apps_cache[running]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            data = body(time.time())
            with lock:
                hits.append(time.time())
                sizes.append(len(data))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    peers = [("worker", i) for i in range(total)]
    formed_at: list[float] = []
    watch_for = 60.0 if quick else 120.0
    stop = threading.Event()

    def task(i: int):
        backend = MarathonBackend(requests.Session(), url, job="big")
        rdv = DirectRendezvous(backend, stop=stop.is_set)
        found = rdv.wait(peers, timeout=120)
        formed_at.append(time.time())
        import random

        rng = random.Random(i)
        mean = watch_interval(total, DEFAULT_WATCH_INTERVAL)  # what the bootstrap uses for this job size
        while not stop.wait(mean * rng.uniform(0.5, 1.5)):
            rdv.moved(found)

    threads = [threading.Thread(target=task, args=(i,), daemon=True) for i in range(simulated)]
    for t in threads:
        t.start()
    time.sleep(ramp + 15)
    formed = max(formed_at) if formed_at else time.time()
    time.sleep(watch_for)
    stop.set()
    server.shutdown()
    end = time.time()
    forming = [h for h in hits if h <= formed]
    after = [h for h in hits if formed < h <= end]
    forming_bytes = sum(n for h, n in zip(hits, sizes) if h <= formed) / max(1e-9, formed - start) / simulated
    watch_bytes = sum(n for h, n in zip(hits, sizes) if formed < h <= end) / max(1e-9, end - formed) / simulated
    forming_rate = len(forming) / max(1e-9, formed - start) / simulated
    watch_rate = len(after) / max(1e-9, end - formed) / simulated
    return [
        Row("Marathon load while a 1,000-task job forms (direct reads: MTF_RENDEZVOUS=direct)",
            round(forming_rate * total, 1), "req/s",
            f"{forming_rate:.3f} req/s per task × 1,000 ({simulated} simulated tasks, real Rendezvous + "
            f"MarathonBackend; tasks RUNNING over {ramp:g} s; one GET per poll for the whole job)"),
        Row("Marathon load once formed (direct reads: MTF_RENDEZVOUS=direct)", round(watch_rate * total, 1), "req/s",
            f"{watch_rate:.4f} req/s per task × 1,000 over {end - formed:.0f} s (watch interval "
            f"{watch_interval(total, DEFAULT_WATCH_INTERVAL):g} s ± 50% at this size)"),
        Row("Marathon bytes/s while a 1,000-task job forms (direct reads)", round(forming_bytes * total / 1e6, 1),
            "MB/s", "group GET bodies, scaled like the requests"),
        Row("Marathon bytes/s once formed (direct reads)", round(watch_bytes * total / 1e6, 2), "MB/s", ""),
        Row("time for the simulated tasks to form the 1,000-task spec (direct reads)", round(formed - start, 1), "s",
            f"the last task turned RUNNING at {ramp:g} s"),
    ]


BENCHMARKS = {
    "local_vs_hand": bench_local_vs_hand,
    "discovery": bench_discovery,
    "marathon_load": bench_marathon_load,
}
