"""The Marathon leader's death on the local HA Marathon (``marathon_instances=3``), with stock Marathon's
ZooKeeper session (``--zk_session_timeout``, 10 s: the local cluster's default since issue 28; 3 s before).

* next request: the leader instance is killed; seconds until the CLI's client (``user/cli/params.py``
  ``Connection.marathon``: every URL, the CLI's retry policy) gets its next answer (``GET /v2/apps``). Baseline: the
  election gap, the earliest any request can succeed; also a client given one standby's URL only. A
  client that gives up during the election (its retries counted, not timed: marathon/client.py) is asked
  again at once, as a user runs the command again; how often that happened is noted.
* next training step: the linear-regression example (1 ps + 2 workers, real TensorFlow) trains; the
  leader is killed; seconds until every worker printed its next ``step=`` line (every 5 steps).
  Baseline, in the same run: the same wait from an instant when nothing is killed (the tasks do not
  need Marathon to train: a ratio near 1 means the failover did not disturb them).

Medians of 5 kills (3 with ``quick``); the killed instance is started again, as a standby, between kills.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .bench_lifecycle import STEP, _job_file
from .common import Row, median, until

GAP = 10.0  # LocalCluster's default zk_session_timeout (stock Marathon's)
#: request() calls that gave up during an election (asked again at once)
GAVE_UP: list[float] = []


def _kill_and_time(cluster, request: Callable[[], object]) -> float:
    """Kill the leader, time ``request()`` (asked again at once when it gives up); then start the dead
    instance again and wait for a leader."""
    from marathon_tf.contract.errors import MarathonError

    t0 = time.monotonic()
    killed = cluster.kill_leader()
    while True:
        try:
            request()
            break
        except MarathonError:
            GAVE_UP.append(time.monotonic() - t0)
            if time.monotonic() - t0 > GAP + 60:
                raise
    seconds = time.monotonic() - t0
    until(lambda: cluster.leader_url is not None, GAP + 10, "the next leader")
    cluster.start_instance(killed)
    return seconds


def bench_next_request(quick: bool) -> list[Row]:
    from marathon_tf.local import LocalCluster
    from marathon_tf.marathon.client import CLI_TIMEOUT, Client, RetryPolicy

    n = 3 if quick else 5
    tmp = Path(tempfile.mkdtemp(prefix="bench-failover-"))
    try:
        with LocalCluster(state_dir=tmp / "state", dns_refresh=0, marathon_instances=3) as c:
            every = Client(c.marathon_urls, timeout=CLI_TIMEOUT, retry=RetryPolicy(connection_errors=False))
            GAVE_UP.clear()
            all_urls = [_kill_and_time(c, every.list_apps) for _ in range(n)]
            gave_up_all, gave_up_one = list(GAVE_UP), []
            GAVE_UP.clear()
            one = []
            for _ in range(n):
                leader = c.leader_url
                standby = next(u for u in c.marathon_urls if u != leader)
                client = Client(standby, timeout=CLI_TIMEOUT, retry=RetryPolicy(connection_errors=False))
                one.append(_kill_and_time(c, client.list_apps))
            gave_up_one = list(GAVE_UP)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    def runs(xs):
        return ", ".join(f"{x:.2f}" for x in xs)

    def gave(xs):
        return (f"; the client gave up {len(xs)}x during the election (at {runs(xs)} s) and was asked again"
                if xs else "; the client never gave up")
    return [Row("leader killed -> next successful request (CLI client, 3 URLs)", round(median(all_urls), 2), "s",
                f"median of {n}; election gap {GAP:g} s (the earliest possible: {median(all_urls) / GAP:.2f}x it); "
                f"runs: {runs(all_urls)}{gave(gave_up_all)}"),
            Row("leader killed -> next successful request (CLI client, one standby's URL)", round(median(one), 2),
                "s", f"median of {n}; {median(one) / GAP:.2f}x the gap; runs: {runs(one)}{gave(gave_up_one)}")]


def bench_next_step(quick: bool) -> list[Row]:
    from marathon_tf.marathon.client import Client, RetryPolicy
    from marathon_tf.user import pipeline
    from marathon_tf.user import spec as spec_mod
    from marathon_tf.user.localrun import SandboxTailer, local_cluster
    from marathon_tf.user.status import job_status

    n = 3 if quick else 5
    tmp = Path(tempfile.mkdtemp(prefix="bench-failover-"))
    lines: list[tuple[float, str]] = []
    lock = threading.Lock()

    def emit(task: str, stream: str, line: str) -> None:
        if stream == "stdout" and STEP.search(line):
            with lock:
                lines.append((time.monotonic(), task))

    cluster = local_cluster(state_dir=tmp / "state", dns_refresh=0.5, kill_grace=2.0, marathon_instances=3,
                            )
    tailer = SandboxTailer(tmp / "state", emit, interval=0.02)
    workers = {"worker-0", "worker-1"}
    kills: list[float] = []
    quiet: list[float] = []

    def next_steps(t0: float) -> float:
        """Seconds from ``t0`` until every worker printed a step line after it."""
        def stepped() -> bool:
            with lock:
                return workers <= {task for t, task in lines if t > t0}

        until(stepped, 60, "every worker's next step")
        with lock:
            return max(min(t for t, task in lines if t > t0 and task == w) for w in workers) - t0

    try:
        cluster.start()
        spec = spec_mod.load_job(str(_job_file(tmp, flags=("--log_every", "5", "--save_checkpoint_steps", "250"))))
        spec = spec.with_overrides(discovery=dataclasses.replace(
            spec.discovery, nameserver=cluster.mesos_dns, http_api=cluster.mesos_dns_http,
            marathon_url=",".join(cluster.marathon_urls)))
        client = Client(cluster.marathon_urls, retry=RetryPolicy(attempts=10, budget=60, initial=0.2, max_wait=2))
        tailer.start()
        pipeline.deploy(client, spec)
        until(lambda: len(lines) > 40, 180, "training")
        for _ in range(n):
            time.sleep(1.0)
            quiet.append(next_steps(time.monotonic()))
            time.sleep(1.0)
            t0 = time.monotonic()
            killed = cluster.kill_leader()
            kills.append(next_steps(t0))
            until(lambda: cluster.leader_url is not None, GAP + 10, "the next leader")
            cluster.start_instance(killed)
        state = job_status(client, spec.name, probe=False).to_dict()["state"]
    finally:
        tailer.stop()
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    def runs(xs):
        return ", ".join(f"{x:.2f}" for x in xs)
    return [Row("leader killed -> every worker's next training step (local, TF1 example)", round(median(kills), 2),
                "s", f"median of {n} kills; {median(kills) / median(quiet):.2f}x the same wait with no kill "
                     f"({median(quiet):.2f} s); runs: {runs(kills)}; no kill: {runs(quiet)}; job still {state}")]


BENCHMARKS = {"failover_request": bench_next_request, "failover_step": bench_next_step}
