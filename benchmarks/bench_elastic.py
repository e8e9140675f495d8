"""Elastic jobs (issue 30, docs/elastic.md) with real TensorFlow on a local cluster sized so that only two
workers fit (4 agents: one for the chief and the ps, three that hold one worker each; a blocker job holds the
fourth at first), the elastic mnist-ps-strategy and keras-multiworker (workers ``{"min": 2, "max": 3}``), in one
run each:

* steps/s at 2 workers (the deciding task's global steps over :data:`WINDOW` s: the PSS chief, Keras's worker-0),
  then the blocker deleted:
* grow: seconds from the standby's placement (Marathon's ``stagedAt`` of its task) to the first step at 3
  workers (``first_step_time=`` of the restarted coordinator; in Keras, of the newcomer, every worker
  restarting), and from the blocker's deletion; nothing trained again (the checkpoint restored is at or past
  every step printed before);
* steps/s at 3 workers, and the scaling efficiency: rate at 3 / (rate at 2 × 3/2);
* shrink: the agent of the third worker killed -> seconds until the deciding task's membership is 2 and a step
  at 2 (a ParameterServerStrategy coordinator trains on without the lost worker; Keras's workers restart from
  the last backup: the first step of the restarted worker-0).

Baseline in the same run (the named one for the grow): the same example at a fixed size of 2 on a cluster
with room for 3, ``scale worker=3`` -> the first step at 3 workers (every task of the job starts again
with the new cluster spec: how a job grows without ``min``/``max``). Each run deploys on a fresh in-process
LocalCluster (Mesos-DNS refresh 0.5 s; otherwise a stock Marathon 1.11's defaults); one run each (``quick`` or
not: each is 1-2 minutes of real training).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .bench_lifecycle import _job_file
from .common import Row, until

STEP = re.compile(r"\bstep=(\d+) loss=")
FIRST = re.compile(r"first_step_time=([0-9.]+)")
BIG = "cpus:2;mem:8192;disk:10000;ports:[31000-32000]"
SMALL = "cpus:1;mem:4096;disk:10000;ports:[31000-32000]"
#: Seconds of steps a rate is measured over.
WINDOW = 15.0


@dataclasses.dataclass(frozen=True)
class Example:
    name: str
    example: str
    command: tuple[str, ...]
    decider: str
    restored: re.Pattern  # the decider's line that says the step it resumes from
    coordinated: bool  # PSS: one coordinator (restarts to grow, trains on when a worker is lost)

    def roles(self, workers: Any) -> dict:
        on_first = [["hostname", "LIKE", "127.0.0.1"]]
        roles = {"chief": {"count": 1, "cpus": 1, "mem": 1536, "constraints": on_first},
                 "ps": {"count": 1, "cpus": 0.5, "mem": 1024, "constraints": on_first},
                 "worker": {"count": workers, "cpus": 1, "mem": 1536,
                            "constraints": [["hostname", "UNLIKE", "127.0.0.1"]]}}
        return roles if self.coordinated else {"worker": roles["worker"]}


PSS = Example("PSS", "mnist-ps-strategy", ("python3", "train.py", "--train_steps", "20000", "--checkpoint_dir", "ckpt",
                                          "--log_every", "10", "--save_every", "100000"),
              "chief-0", re.compile(r"restored \S+, global step (\d+)/"), True)
KERAS = Example("Keras", "keras-multiworker", ("python3", "train.py", "--epochs", "200", "--steps_per_epoch", "40",
                                               "--checkpoint_dir", "ckpt", "--log_every", "10", "--backup_every", "20",
                                               "--global_batch_size", "96"),
                "worker-0", re.compile(r"training from global step (\d+)"), False)


class _Run:
    """A sized local cluster, its tasks' lines as they come, and the jobs deployed on it."""

    def __init__(self):
        from marathon_tf.marathon.client import Client, RetryPolicy
        from marathon_tf.user.localrun import SandboxTailer, local_cluster

        self.tmp = Path(tempfile.mkdtemp(prefix="bench-elastic-"))
        self.lines: list[tuple[float, str, str]] = []
        self.lock = threading.Lock()
        self.cluster = local_cluster(state_dir=self.tmp / "state", dns_refresh=0.5, kill_grace=2.0, agents=4,
                                     agent_resources=(f"{BIG}|{SMALL}|{SMALL}|{SMALL}",))
        self.tailer = SandboxTailer(self.tmp / "state", self._emit, interval=0.05)
        self.cluster.start()
        self.client = Client(self.cluster.marathon_url,
                             retry=RetryPolicy(attempts=5, budget=30, initial=0.2, max_wait=2))
        self.tailer.start()

    def _emit(self, task: str, stream: str, line: str) -> None:
        with self.lock:
            self.lines.append((time.monotonic(), task, line))

    def found(self, task: str, pattern: re.Pattern, since: float = 0.0) -> list[tuple[float, re.Match]]:
        with self.lock:
            return [(t, m) for t, n, x in self.lines if n == task and t >= since and (m := pattern.search(x))]

    def last(self, *tasks: str) -> str:
        """What each task printed last, and when (a wait's ``seen``)."""
        now, out = time.monotonic(), []
        with self.lock:
            for task in tasks:
                mine = [(t, x) for t, n, x in self.lines if n == task]
                steps = [(t, m.group(1)) for t, x in mine if (m := STEP.search(x))]
                out.append(f"{task}: " + (f"last step {steps[-1][1]} {now - steps[-1][0]:.0f} s ago; " if steps else
                                          "no step yet; ")
                           + (f"last line {now - mine[-1][0]:.0f} s ago: {mine[-1][1][:160]!r}" if mine else
                              "no line yet"))
        return " | ".join(out)

    def ended(self, job: str) -> str | None:
        """Why nothing more will come of ``job``: its record says it ended (a wait's ``gone``)."""
        from marathon_tf.user.status import job_status

        try:
            status = job_status(self.client, job)
        except Exception:  # noqa: BLE001 - not known now: go on waiting
            return None
        if status.state in ("Succeeded", "Failed", "NotPlaced"):
            return f"the job ended {status.state}: {status.reason or '?'}"
        return None

    def deploy(self, path: Path) -> str:
        from marathon_tf.user import pipeline
        from marathon_tf.user import spec as spec_mod

        spec = spec_mod.load_job(str(path))
        spec = spec.with_overrides(discovery=dataclasses.replace(
            spec.discovery, nameserver=self.cluster.mesos_dns, http_api=self.cluster.mesos_dns_http,
            marathon_url=self.cluster.marathon_url))
        pipeline.deploy(self.client, spec)
        return spec.name

    def block(self) -> None:
        """Deploy the blocker (a job whose one task holds agent 4's cpu) and wait until it runs."""
        blocker = self.tmp / "blocker.json"
        blocker.write_text(json.dumps({
            "name": "blocker", "style": "custom", "command": ["sleep", "100000"],
            "roles": {"worker": {"count": 1, "cpus": 1, "mem": 256,
                                 "constraints": [["hostname", "LIKE", "127.0.0.4"]]}}}))
        self.deploy(blocker)
        until(lambda: self.task_of("blocker", "worker-0") is not None, 60, "the blocker running")

    def rate(self, task: str, since: float) -> float:
        """``task``'s global steps per second over :data:`WINDOW` s from ``since`` (waits for them)."""
        until(lambda: any(t > since + WINDOW for t, _ in self.found(task, STEP, since)), WINDOW + 60,
              f"{WINDOW:g} s of {task}'s steps to rate", seen=lambda: self.last(task))
        steps = [(t, int(m.group(1))) for t, m in self.found(task, STEP, since) if t <= since + WINDOW]
        return (steps[-1][1] - steps[0][1]) / (steps[-1][0] - steps[0][0])

    def view(self, job: str, decider: str) -> dict:
        """The deciding task's ``elastic`` view from its /status."""
        from marathon_tf.marathon import transport
        from marathon_tf.marathon.tasks import newest_running, task_url

        app = self.client.get_app(f"/{job}/{decider}")
        task = newest_running(app)
        url = task_url(app, task, "status", "/status") if task is not None else None
        return ((transport.get_json(url, timeout=2.0) or {}).get("elastic") or {}) if url else {}

    def sized(self, job: str, decider: str, n: int) -> bool:
        view = self.view(job, decider)
        return view.get("size") == n and not view.get("placedStandbys")

    def task_of(self, job: str, app: str) -> dict | None:
        tasks = self.client.request("GET", f"/v2/apps/{job}/{app}/tasks").body["tasks"]
        return next((t for t in tasks if t.get("state") == "TASK_RUNNING"), None)

    def close(self) -> None:
        self.tailer.stop()
        self.cluster.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


def _file(run: _Run, ex: Example, workers: Any, name: str) -> Path:
    (run.tmp / name).mkdir()
    return _job_file(run.tmp / name, ex.example, (), roles=ex.roles(workers), name=name, command=list(ex.command),
                     restart={"max_failures": 0, "window_seconds": 600})


def _wall(stamp: str) -> float:
    from marathon_tf.marathon.tasks import wall

    value = wall(stamp)
    assert value is not None, stamp
    return value


def elastic_run(ex: Example) -> dict[str, float]:
    """The elastic sequence (see the module) for ``ex``: its figures."""
    from marathon_tf.user import jobs

    run = _Run()
    try:
        run.block()
        job, d = run.deploy(_file(run, ex, {"min": 2, "max": 3}, "elastic")), ex.decider

        def seen() -> str:  # what the deciding task's view and the workers said last
            view = run.view(job, d)
            return (f"{d}'s membership: size {view.get('size')}, standbys {view.get('standbys')}; "
                    + run.last(*dict.fromkeys([d, 'worker-0', 'worker-1', 'worker-2'])))

        until(lambda: run.sized(job, d, 2), 180, "the job formed with 2 workers", seen=seen)
        until(lambda: run.found(d, STEP), 180, "training with 2 workers", seen=seen)
        at_2 = run.rate(d, run.found(d, STEP)[0][0] + 5.0)  # (past its first steps)
        standby = run.view(job, d)["standbys"][0]
        deleted, deleted_wall = time.monotonic(), time.time()
        jobs.delete(run.client, "blocker")
        until(lambda: run.sized(job, d, 3), 90, "the job grew to 3 workers", seen=seen)
        newcomer = d if ex.coordinated else standby  # whose first step is the first at 3
        until(lambda: run.found(newcomer, FIRST, deleted) and run.found(d, ex.restored, deleted), 90,
              "the first step at 3 workers", seen=seen)
        first = float(run.found(newcomer, FIRST, deleted)[0][1].group(1))
        placed = _wall(run.task_of(job, standby)["stagedAt"])
        restored = run.found(d, ex.restored, deleted)
        printed = max(int(m.group(1)) for t, m in run.found(d, STEP) if t < restored[0][0])
        again = max(0, printed - int(restored[0][1].group(1)))
        until(lambda: run.found(d, STEP, restored[0][0]), 60, "a step at 3 workers", seen=seen)
        at_3 = run.rate(d, run.found(d, STEP, restored[0][0])[0][0] + 2.0)
        victim = run.task_of(job, standby)
        killed = time.monotonic()
        run.cluster.kill_agent(victim["host"])
        until(lambda: run.sized(job, d, 2), 60, "the job shrank to 2 workers", seen=seen)
        sized = time.monotonic()

        def stepped_at_2() -> list:  # Keras: a step of the program started again at 2
            since = sized if ex.coordinated else (run.found(d, ex.restored, killed) or [(float("inf"), None)])[0][0]
            return run.found(d, STEP, since)
        until(stepped_at_2, 90, "a step at 2 workers", seen=seen)
        return {"rate2": at_2, "rate3": at_3, "grow_placed": first - placed, "grow_deleted": first - deleted_wall,
                "again": again, "shrink": stepped_at_2()[0][0] - killed, "placed_after": placed - deleted_wall}
    finally:
        run.close()


def fixed_scale_run(ex: Example) -> float:
    """The baseline: a fixed-size job of 2 workers, ``scale worker=3`` -> the first step at 3 (the
    coordinator's; in Keras, worker-2's)."""
    from marathon_tf.user import jobs

    run = _Run()
    try:
        job = run.deploy(_file(run, ex, 2, "fixed"))
        until(lambda: any(int(m.group(1)) > 300 for _, m in run.found(ex.decider, STEP)), 240,
              f"training with 2 workers (a step past 300 from {ex.decider})",
              seen=lambda: run.last(ex.decider, "worker-0", "worker-1"), gone=lambda: run.ended(job))
        asked, asked_wall = time.monotonic(), time.time()
        jobs.scale(run.client, job, {"worker": ("=", 3)})
        newcomer = ex.decider if ex.coordinated else "worker-2"
        until(lambda: run.found(newcomer, FIRST, asked), 120, f"the first step at 3 workers ({newcomer}'s)",
              seen=lambda: run.last(newcomer, "worker-2"), gone=lambda: run.ended(job))
        return float(run.found(newcomer, FIRST, asked)[0][1].group(1)) - asked_wall
    finally:
        run.close()


def _once(name: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the row says what went wrong; the other benchmarks go on
        return Row(name, "failed", "", f"{type(e).__name__}: {e}")


def _rows(ex: Example) -> list[Row]:
    figures = _once(f"elastic {ex.name}", lambda: elastic_run(ex))
    if isinstance(figures, Row):
        return [figures]
    baseline = _once(f"fixed-size {ex.name} scale 2 -> 3 (baseline)", lambda: fixed_scale_run(ex))
    rows = [Row(f"elastic {ex.name}: steps/s at 2 workers", round(figures["rate2"], 1), "steps/s",
                f"{ex.decider}'s global steps over {WINDOW:g} s"),
            Row(f"elastic {ex.name}: steps/s at 3 workers", round(figures["rate3"], 1), "steps/s",
                f"scaling efficiency {figures['rate3'] / (figures['rate2'] * 1.5):.2f} "
                f"(rate at 3 / (rate at 2 x 3/2))"),
            Row(f"elastic {ex.name}: standby placed -> first step at 3 workers", round(figures["grow_placed"], 1),
                "s", f"the blocker's deletion -> first step {figures['grow_deleted']:.1f} s (the standby placed "
                     f"after {figures['placed_after']:.1f} s); global steps trained again: {figures['again']}")]
    if isinstance(baseline, Row):
        rows.append(baseline)
    else:
        rows.append(Row(f"fixed-size {ex.name}: scale 2 -> 3 workers -> first step at 3 (baseline)",
                        round(baseline, 1), "s",
                        f"elastic grow from the room made / this: {figures['grow_deleted'] / baseline:.2f}"))
    rows.append(Row(f"elastic {ex.name}: worker's agent lost -> membership 2 and a step at 2",
                    round(figures["shrink"], 1), "s",
                    "the coordinator trains on (no restart, no failure counted)" if ex.coordinated else
                    "the workers restart from the last backup at 2 (no failure counted)"))
    return rows


def bench_elastic(quick: bool) -> list[Row]:
    return _rows(PSS) + _rows(KERAS)


BENCHMARKS = {"elastic": bench_elastic}
