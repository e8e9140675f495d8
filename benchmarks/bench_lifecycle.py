"""Recovery times of a TF1 job on the local runner (real TensorFlow).

* killed worker: SIGKILL ``worker-1``'s task mid-training -> seconds until *every* task that
  trains (each worker) printed a ``step=`` line after the kill;
* killed ps: the same after SIGKILL of ``ps-0`` (the job restarts from its checkpoint);
* chief + ps: SIGKILL ``worker-0`` (TF1's chief, the rendezvous leader) and ``ps-0`` together;
  and the same for mnist-ps-strategy's ``chief-0`` + ``ps-0`` (seconds until the chief's next step);
* two workers: SIGKILL ``worker-0`` and ``worker-1`` together;
* scale: ``jobs.scale`` 2 -> 3 workers mid-training -> seconds until every worker (3) printed a
  ``step=`` line after the scale request;
* lost agent: on 3 agents (one task each), the agent running ``ps-0`` dies
  (``LocalCluster.kill_agent``): its task turns TASK_UNREACHABLE and, with the rendered
  ``unreachableStrategy`` 0/0, is replaced on another agent -> seconds until every worker's next
  step (compare with "killed ps": the same restart, plus the agent's loss and the new placement).

* preemption (``--only preemption``): SIGTERM to the chief's program, to its whole task, and to the
  ps's whole task, the chief saving a checkpoint every 5,000 steps (real jobs save every few
  minutes) -> seconds until every worker's next step, and the global steps trained again: the highest
  global step any program printed before the first program started again, less the checkpoint step
  the chief resumed from (its bootstrap's ``resumed from checkpoint at step N``); steps printed every 5.

Each row also says when the last training program was (re)started with the rewritten spec
(from the bootstraps' "started training program" lines): the part discovery and the
bootstrap own; the rest is TensorFlow starting and reconnecting. And, where Marathon launched tasks
again (a killed task, a new configuration), when it launched the last one (its bootstrap's first line):
the part a stock Marathon owns (the app's ``backoffSeconds``, 1 s by default, then the next pass of its
revive rate limiter, at most ``--min_revive_offers_interval`` 5 s), which no bootstrap can shorten. The
mnist-ps-strategy kill is measured a second time with ``restart.backoff_seconds: 0``.

Medians of 3 runs (1 with ``quick``). Each run deploys the linear-regression example (1 ps +
2 workers) on a fresh in-process LocalCluster with Mesos-DNS refresh 0.5 s and bootstrap watch
interval 2 s (``python -m marathon_tf.bootstrap --watch-interval 2``), and otherwise the local
cluster's defaults: since issue 28 those of a stock Marathon 1.11 (a killed task is offered again when
Marathon revives offers, at most every 5 s: ``marathon_tf/local/revive.py``; no TASK_KILLING).
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

from .common import ROOT, Repeated, Row, median, repeat, until

STEP = re.compile(r"\bstep=(\d+) loss=")
RESUMED = re.compile(r"marathon-tf bootstrap: resumed from checkpoint at step (\d+)")
TARGET = 20000  # long enough that the job is still training when it recovers


def _job_file(tmp: Path, example: str = "linear-regression-tf1",
              flags: tuple[str, ...] = ("--log_every", "20", "--save_checkpoint_steps", "250"), **changes) -> Path:
    """An example's job file for a long run on the local runner (shared checkpoints under ``tmp``)."""
    src = ROOT / "examples" / example / "job.json"
    job = json.loads(src.read_text())
    job["fetch"] = [str(src.parent / f) for f in job["fetch"]]
    for v in job["volumes"]:
        v["host_path"] = str(tmp / "shared" / v["container_path"])
        Path(v["host_path"]).mkdir(parents=True, exist_ok=True)
    job["command"] = ["python3", "train.py", "--train_steps", str(TARGET), "--checkpoint_dir", "ckpt", *flags]
    # the default entry point (what users run): its tasks share the runner's pre-warmed interpreter
    job["bootstrap"] = "marathon-tf bootstrap --watch-interval 2 --grace 5"
    job["restart"] = {"max_failures": 20, "window_seconds": 600}
    job["progress"] = {"target_step": TARGET}  # what it trains to (`scale` refuses a job past its target)
    job.update(changes)
    out = tmp / "job.json"
    out.write_text(json.dumps(job))
    return out


def _pss_job_file(tmp: Path, **changes) -> Path:
    """mnist-ps-strategy (chief + 1 ps + 2 workers; only the chief prints steps)."""
    return _job_file(tmp, "mnist-ps-strategy", ("--log_every", "10", "--save_every", "100"), **changes)


def _pss_no_backoff(tmp: Path) -> Path:
    """The same with Marathon's ``backoffSeconds`` 0 (``restart.backoff_seconds``): a killed task is launched
    again at the failure's own revive, not at the next one after its 1 s backoff (up to 5 s later)."""
    return _pss_job_file(tmp, restart={"max_failures": 20, "window_seconds": 600, "backoff_seconds": 0})


def _one_run(disrupt: Callable[[object, object, str], None], expect_workers: int,
             prepare: Callable[[object], None] | None = None, *, job_file: Callable[[Path], Path] | None = None,
             trainers: set[str] | None = None, cluster_options: dict | None = None,
             steps_lost: list | None = None, saver: str = "worker-0",
             also: Callable[[str, str, str], None] | None = None,
             **job_changes) -> tuple[float, float, float | None]:
    """Deploy (``job_file(tmp)``, default the TF1 job file with ``job_changes``), train until step > 500,
    ``prepare(cluster)`` (untimed), ``disrupt(cluster, client, job)``, and time until every worker (or
    every task in ``trainers``) printed a step line after its program started again. ``steps_lost``: gets the
    global steps trained again (the highest step printed before a program started again, less the checkpoint step
    ``saver`` resumed from). Returns (seconds to every trainer's step, to the last program's start, to the
    last bootstrap Marathon launched — None if it relaunched none). ``also(task, stream, line)``: every line
    the tasks print."""
    from marathon_tf.marathon.client import Client, RetryPolicy
    from marathon_tf.user import pipeline
    from marathon_tf.user import spec as spec_mod
    from marathon_tf.user.localrun import SandboxTailer
    from marathon_tf.user.localrun import local_cluster as LocalCluster  # as deploy --local runs it

    tmp = Path(tempfile.mkdtemp(prefix="bench-lifecycle-"))
    lines: list[tuple[float, str, int]] = []
    lock = threading.Lock()

    started: list[tuple[float, str]] = []  # the bootstraps' "started training program" lines
    resumed: list[tuple[float, str, int]] = []  # their "resumed from checkpoint at step N" lines
    relaunched: list[float] = []  # a bootstrap's first line ("status on …"): Marathon launched a task

    def emit(task: str, stream: str, line: str) -> None:
        if also is not None:
            also(task, stream, line)
        m = STEP.search(line)
        if m and stream == "stdout":
            with lock:
                lines.append((time.monotonic(), task, int(m.group(1))))
        elif "marathon-tf bootstrap: started training program" in line:
            with lock:
                started.append((time.monotonic(), task))
        elif "marathon-tf bootstrap: status on " in line:
            with lock:
                relaunched.append(time.monotonic())
        elif RESUMED.search(line):
            with lock:
                resumed.append((time.monotonic(), task, int(RESUMED.search(line).group(1))))

    cluster = LocalCluster(state_dir=tmp / "state", dns_refresh=0.5, kill_grace=2.0, **(cluster_options or {}))
    tailer = SandboxTailer(tmp / "state", emit, interval=0.05)
    try:
        cluster.start()
        spec = spec_mod.load_job(str(job_file(tmp) if job_file else _job_file(tmp, **job_changes)))
        spec = spec.with_overrides(discovery=dataclasses.replace(
            spec.discovery, nameserver=cluster.mesos_dns, http_api=cluster.mesos_dns_http,
            marathon_url=cluster.marathon_url))
        client = Client(cluster.marathon_url, retry=RetryPolicy(attempts=5, budget=30, initial=0.2, max_wait=2))
        tailer.start()
        pipeline.deploy(client, spec)
        until(lambda: any(s > 500 for _, _, s in lines), 120, "training past step 500",
              seen=lambda: _steps_seen(lines, lock, time.monotonic()))
        if prepare is not None:
            prepare(cluster)
        t0 = time.monotonic()
        disrupt(cluster, client, spec.name)
        workers = trainers or {f"worker-{i}" for i in range(expect_workers)}

        def since(w: str) -> float | None:
            """A step of ``w`` counts after this: after its program started again (one that trains on until
            it is stopped is not back to training)."""
            starts = [t for t, task in started if t > t0 and task == w]
            return max(t0 + 0.5, starts[-1]) if starts else None

        def recovered() -> bool:
            with lock:
                return all(any(t > (since(w) or float("inf")) for t, task, _ in lines if task == w) for w in workers)

        def waiting() -> str:
            """Each trainer not back yet: whether its program started again, and its last step."""
            now, out = time.monotonic(), []
            with lock:
                for w in sorted(workers):
                    if any(t > (since(w) or float("inf")) for t, task, _ in lines if task == w):
                        continue
                    start = since(w)
                    last = max(((t, s) for t, task, s in lines if task == w), default=None)
                    out.append(f"{w}: " + (f"program started again {start - t0:+.1f} s after the disruption, no step "
                                           f"since" if start is not None else "its program has not started again")
                               + (f" (last step {last[1]} at {last[0] - t0:+.1f} s)" if last else " (no step ever)"))
            return "; ".join(out) + f" ({now - t0:.0f} s after the disruption)"

        until(recovered, 90, f"every {'trainer' if trainers else 'worker'}'s next step after its program "
              f"started again ({', '.join(sorted(workers))})", seen=waiting)
        with lock:
            last = max(min(t for t, task, _ in lines if task == w and t > (since(w) or float("inf"))) for w in workers)
            respec = max((t for t, _ in started if t0 < t <= last), default=t0)
            launch = max((t for t in relaunched if t0 < t <= last), default=None)
            if steps_lost is not None:  # (a restart's announcement comes just before its program starts)
                again = min([t for t, _ in started if t > t0] + [t for t, _, _ in resumed if t > t0])
                before = max((s for t, _, s in lines if t < again), default=0)
                back = [s for t, task, s in resumed if t > t0 and task == saver]
                steps_lost.append(max(0, before - back[0]) if back else "?")
        return last - t0, respec - t0, (launch - t0 if launch is not None else None)
    finally:
        tailer.stop()
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _steps_seen(lines: list, lock: threading.Lock, now: float) -> str:
    """Each task's last step= line, and how long ago."""
    with lock:
        last: dict[str, tuple[float, int]] = {}
        for t, task, step in lines:
            last[task] = (t, step)
    if not last:
        return "no step= line from any task"
    return ", ".join(f"{task} step {step} {now - t:.0f} s ago" for task, (t, step) in sorted(last.items()))


def _kill(app: str, sig: str = "KILL") -> Callable[[object, object, str], None]:
    return lambda cluster, client, job: cluster.kill_task(f"/{job}/{app}", sig)


def _kill_together(*apps: str) -> Callable[[object, object, str], None]:
    def disrupt(cluster, client, job):
        for app in apps:
            cluster.kill_task(f"/{job}/{app}", "KILL")
    return disrupt


def _kill_agent_of(app: str) -> Callable[[object, object, str], None]:
    def disrupt(cluster, client, job):
        host = client.request("GET", f"/v2/apps/{job}/{app}/tasks").body["tasks"][0]["host"]
        cluster.kill_agent(host)
    return disrupt


def _scale(cluster, client, job) -> None:
    from marathon_tf.user import jobs

    jobs.scale(client, job, {"worker": ("=", 3)})


#: TF1's chief (worker-0: the rendezvous leader and the job's coordinator) and ps-0 SIGKILLed together
_CHIEF_PS = ("recovery after chief + ps killed together (local; TF1: worker-0 is the chief)",
             _kill_together("worker-0", "ps-0"), 2, {})


def bench_recovery(quick: bool) -> list[Row]:
    n = 1 if quick else 3
    pss = {"job_file": _pss_job_file, "trainers": {"chief-0"}, "saver": "chief-0"}
    cases = [("recovery after a killed worker (local)", _kill("worker-1"), 2, {}),
             ("recovery after a killed ps (local)", _kill("ps-0"), 2, {}),
             _CHIEF_PS,
             ("recovery after two workers killed together (local)", _kill_together("worker-0", "worker-1"), 2, {}),
             ("recovery after chief + ps killed together (local; mnist-ps-strategy, chief's next step)",
              _kill_together("chief-0", "ps-0"), 0, pss),
             ("recovery after chief + ps killed together (local; mnist-ps-strategy, restart.backoff_seconds 0)",
              _kill_together("chief-0", "ps-0"), 0, {**pss, "job_file": _pss_no_backoff}),
             ("scale 2 -> 3 workers to resumed training (local)", _scale, 3, {})]
    return _rows(cases, n)


def bench_recovery_chief_ps(quick: bool) -> list[Row]:
    """``recovery``'s TF1 chief + ps case alone: the case to repeat when the coordinator is what changed."""
    return _rows([_CHIEF_PS], 1 if quick else 3)


def bench_agent_loss(quick: bool) -> list[Row]:
    """The agent of ps-0 lost, and its baseline in the same run: ps-0 killed on one agent."""
    n = 1 if quick else 3
    return _rows([("recovery after a killed ps (local; baseline of the next row)", _kill("ps-0"), 2, {}),
                  ("recovery after the agent of ps-0 is lost (local, 3 agents)", _kill_agent_of("ps-0"), 2,
                   {"cluster_options": {"agents": 3}})], n)


def bench_preemption(quick: bool) -> list[Row]:
    """Preemptions of the TF1 example (a whole task stopped: a save round first, issue 29; a preemption
    restarts without spending the failure budget): seconds back to training and the global steps trained again,
    with a checkpoint every 5,000 steps. Steps are printed every 5 (the figure's resolution). No case sends
    SIGTERM to a program alone: in a job with save rounds every program leaves SIGTERM to its bootstrap
    (``contract/savehook.py``'s ``ROUNDS_VAR``), as a Mesos agent signals a task's whole tree (it never
    completed since; ``tests/system/lifecycle/test_preemption_e2e.py`` plays a program that takes it itself)."""
    n = 1 if quick else 3
    flags = ("--log_every", "5", "--save_checkpoint_steps", "5000")
    cases = [("preemption: SIGTERM to the chief's whole task (worker-0; TF1)", _kill("worker-0", "TERM")),
             ("preemption: SIGTERM to ps-0's whole task (TF1; the chief saves as the group restarts)",
              _kill("ps-0", "TERM"))]
    rows = []
    for name, disrupt in cases:
        lost: list[int] = []
        runs = repeat(name, n, lambda: _one_run(disrupt, 2, job_file=lambda tmp: _job_file(tmp, flags=flags),
                                                steps_lost=lost), lambda r: f", {lost[-1]} steps again")
        rows.append(_row_failed(name, runs) if not runs.results else Row(
            name, round(median([r[0] for r in runs.results]), 1), "s",
            f"median of {len(runs.results)}; SIGTERM -> every worker's step= line after its program started again; "
            f"runs: {', '.join(f'{r[0]:.1f}' for r in runs.results)}; global steps trained again: "
            f"{', '.join(str(s) for s in lost)} (checkpoints every 5,000 steps; steps printed every 5)"
            f"{runs.note()}"))
    return rows


def _row_failed(name: str, runs: Repeated) -> Row:
    """The case's row when no repetition completed."""
    return Row(name, "did not complete", "", " | ".join(runs.failures))


def _rows(cases: list, n: int) -> list[Row]:
    rows = []
    for name, disrupt, workers, options in cases:
        repeated = repeat(name, n, lambda: _one_run(disrupt, workers, **options))
        if not repeated.results:
            rows.append(_row_failed(name, repeated))
            continue
        pairs = repeated.results
        runs, respecs = [p[0] for p in pairs], [p[1] for p in pairs]
        launches = [p[2] for p in pairs if p[2] is not None]
        marathon = (f"; the last task Marathon launched again printed its first line after {median(launches):.1f} s "
                    f"(runs: {', '.join(f'{x:.1f}' for x in launches)}; after a kill, Marathon's backoff and revive "
                    f"interval)" if launches else "; no task launched again by Marathon")
        rows.append(Row(name, round(median(runs), 1), "s",
                        f"median of {len(runs)}; disruption -> every worker's step= line after its program started "
                        f"again; runs: {', '.join(f'{r:.1f}' for r in runs)}; the last program (re)started with the "
                        f"new spec after {median(respecs):.1f} s (the rest is TensorFlow starting){marathon}"
                        f"{repeated.note()}"))
    return rows


BENCHMARKS = {"recovery": bench_recovery, "recovery-chief-ps": bench_recovery_chief_ps, "agent-loss": bench_agent_loss,
              "preemption": bench_preemption}
