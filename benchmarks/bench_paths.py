"""What a change of a running job's size goes through (issue 40): the modules it runs and the requests it sends.

``scale_paths``: the TF1 example (1 ps + 2 workers, fixed size) on a fresh local cluster, trained past step 500,
then ``jobs.scale(worker=3)`` (what ``marathon-tf scale JOB worker=3`` runs) until every worker (3) printed a step
after its program started again. Measured, not read: every bootstrap runs with the tracer of
``benchmarks/pathtrace/`` on its ``PYTHONPATH`` (which of marathon-tf's modules had a function called, per
quarter second; every request ``requests`` sent), and the user side's calls are traced the same way in this
process (its own thread: the local Marathon's threads are not the user's). Rows, from the scale's start to every
worker's step:

* the modules of ``marathon_tf`` the change ran: the user side's, the tasks' (the stopped tasks' and their
  relaunched successors', from their first line: a relaunch is the change's doing), and both;
* the requests it sent, by who sent them to what: the user side to Marathon, to a task; a task to Marathon, to
  Mesos-DNS's HTTP API, to another task (TaskClient's routes); and the *kinds* (method and route, ids and
  queries left out: ``GET /v2/apps/*``), the number of different hops;
* the save rounds: checkpoints a program saved for a round (its ``marathon-tf save-hook: saved`` line), and the
  ``POST /save`` requests (the user side's; each stopped task asks at its stop too).

One run (``quick`` or not): a count, not a time. ``--compare REF`` runs the same for another version.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

from .bench_lifecycle import _job_file, _one_run
from .common import HARNESS, ROOT, Row

TRACER = HARNESS / "benchmarks" / "pathtrace"
SAVED = "marathon-tf save-hook: saved"  # contract/savehook.py's SAVED_PREFIX: a program saved for a round
_ID = re.compile(r"^/v2/(apps|tasks|deployments|queue|groups)/.*")


def _route(url: str, marathon_port: str) -> tuple[str, str]:
    """``(destination, kind)`` of a request's URL: Marathon, Mesos-DNS or a task, and its route without ids."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    path = parts.path or "/"
    if path.startswith("/v2/"):
        return "Marathon", _ID.sub(lambda m: f"/v2/{m.group(1)}/*", path)
    if path.startswith("/v1/") and str(parts.port) != marathon_port:
        return "Mesos-DNS", re.sub(r"^/v1/(\w+)/.*", r"/v1/\1/*", path)
    if path.startswith("/_local/"):  # the local runner's own API (a Mesos master's /state on a cluster)
        return "Mesos", path
    return "task", path


def _trace_here(calls: set[str], sent: list[tuple[float, str, str]]):
    """The tasks' profiler for this thread: the marathon_tf modules whose functions it calls go into ``calls`` (not
    the local cluster's: its answers run in this process too), the requests it sends into ``sent``."""
    from .pathtrace.sitecustomize import profiler

    return profiler(lambda module: None if module.startswith("marathon_tf/local/") else calls.add(module),
                    lambda method, url: sent.append((time.time(), method, url)))


class _Traced:
    """The tracer on every task this process's local clusters launch from now on (:meth:`close` takes it off), the
    user side's calls and requests (:meth:`user`), the programs' save lines (:meth:`line`), and the rows."""

    def __init__(self):
        import tempfile

        self.folder = Path(tempfile.mkdtemp(prefix="bench-paths-"))
        self._pythonpath = os.environ.get("PYTHONPATH")  # (a local task gets the runner's; the folder by its env)
        os.environ["PYTHONPATH"] = os.pathsep.join([str(TRACER), *filter(None, [self._pythonpath])])
        self.user_calls: set[str] = set()
        self.user_requests: list[tuple[float, str, str]] = []
        self.saved: list[float] = []  # the programs' "marathon-tf save-hook: saved" lines (a round's checkpoint)
        self.marathon_port = ""

    def env(self, example: str) -> dict[str, str]:
        """The job's ``env``: the example's, and the tracer's folder."""
        env = json.loads((ROOT / "examples" / example / "job.json").read_text()).get("env") or {}
        return {**env, "PATHTRACE_DIR": str(self.folder)}

    def line(self, task: str, stream: str, text: str, at: float | None = None) -> None:  # noqa: ARG002
        """A task's line (``at``: when, wall clock; default now)."""
        if SAVED in text:
            self.saved.append(time.time() if at is None else at)

    def user(self, fn, *args) -> None:
        """``fn(*args)`` with this thread's calls and requests traced (the user side's)."""
        sys.setprofile(_trace_here(self.user_calls, self.user_requests))
        try:
            fn(*args)
        finally:
            sys.setprofile(None)

    def close(self) -> None:
        if self._pythonpath is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = self._pythonpath

    def rows(self, name: str, t0: float, t1: float, what: str) -> list[Row]:
        """The rows of the window ``[t0, t1]`` (wall clock)."""
        lo, hi = int(t0 * 4), int(t1 * 4) + 1
        task_calls: set[str] = set()
        sent: Counter[tuple[str, str, str]] = Counter()  # (from, to, kind)
        for dump in self.folder.glob("*.json"):
            data = json.loads(dump.read_text())
            for module, buckets in data["calls"].items():
                if any(lo <= b <= hi for b in buckets):
                    task_calls.add(module)
            for at, method, url in data["requests"]:
                if t0 <= at <= t1:
                    to, kind = _route(url, self.marathon_port)
                    sent["task", to, f"{method} {kind}"] += 1
        for at, method, url in self.user_requests:
            if t0 <= at <= t1:
                to, kind = _route(url, self.marathon_port)
                sent["user", to, f"{method} {kind}"] += 1
        saves = sum(n for (_, _, kind), n in sent.items() if kind == "POST /save")
        both = self.user_calls | task_calls
        by: Counter[tuple[str, str]] = Counter()
        for (src, to, _), n in sent.items():
            by[src, to] += n
        kinds = sorted({f"{src}->{to} {kind}" for src, to, kind in sent})

        def names(modules: set[str]) -> str:
            return ", ".join(sorted(m.removeprefix("marathon_tf/") for m in modules))
        return [
            Row(f"{name}: marathon_tf modules run (user side + tasks)", len(both), "modules",
                f"user side {len(self.user_calls)}, tasks {len(task_calls)}; {t1 - t0:.1f} s {what}"),
            Row(f"{name}: user side's modules", len(self.user_calls), "modules", names(self.user_calls)),
            Row(f"{name}: tasks' modules", len(task_calls), "modules", names(task_calls)),
            Row(f"{name}: requests sent", sum(sent.values()), "requests",
                "; ".join(f"{src}->{to} {n}" for (src, to), n in sorted(by.items()))),
            Row(f"{name}: kinds of request (hops)", len(kinds), "kinds", "; ".join(kinds)),
            Row(f"{name}: save rounds (checkpoints a program saved for a round)",
                sum(t0 <= t <= t1 for t in self.saved), "rounds", f"POST /save requests: {saves}"
                + "".join(f"; {src}->{to} {n}" for (src, to, kind), n in sorted(sent.items()) if kind == "POST /save")
                + (" (a stopped task asks at its stop too, and finds the job saved)" if saves else "")),
        ]


def bench_scale_paths(quick: bool) -> list[Row]:  # noqa: ARG001 (one run either way)
    traced = _Traced()
    window: dict[str, float] = {}

    def scale(cluster, client, job) -> None:
        from marathon_tf.user import jobs

        traced.marathon_port = cluster.marathon_url.rstrip("/").rsplit(":", 1)[-1]
        window["t0"] = time.time()
        traced.user(jobs.scale, client, job, {"worker": ("=", 3)})

    try:
        took, _, _ = _one_run(scale, 3, job_file=lambda tmp: _job_file(tmp, env=traced.env("linear-regression-tf1")),
                              also=traced.line)
    finally:
        traced.close()
    return traced.rows("scale worker=3 of a fixed-size TF1 job (2 -> 3 workers)", window["t0"],
                       window["t0"] + took, "from the scale to every worker's step")


def bench_grow_paths(quick: bool) -> list[Row]:  # noqa: ARG001 (one run either way)
    """The elastic PSS example (``bench_elastic``'s cluster: 2 workers fit, a blocker holds the third agent) formed at
    2 workers and training; the blocker deleted; until the coordinator's first step at 3 workers."""
    from marathon_tf.user import jobs

    from .bench_elastic import FIRST, PSS, STEP, _file, _Run
    from .common import until

    traced = _Traced()
    run = None
    try:
        run = _Run()
        traced.marathon_port = run.cluster.marathon_url.rstrip("/").rsplit(":", 1)[-1]
        run.block()
        path = _file(run, PSS, {"min": 2, "max": 3}, "elastic")
        spec = json.loads(path.read_text())
        spec["env"] = traced.env(PSS.example)
        path.write_text(json.dumps(spec))
        job, d = run.deploy(path), PSS.decider
        until(lambda: run.sized(job, d, 2), 180, "the job formed with 2 workers", seen=lambda: run.last(d))
        until(lambda: run.found(d, STEP), 180, "training with 2 workers", seen=lambda: run.last(d))
        deleted, t0 = time.monotonic(), time.time()
        jobs.delete(run.client, "blocker")  # (not the job's: the user side does nothing to it)
        until(lambda: run.found(d, FIRST, deleted), 120, "the first step at 3 workers", seen=lambda: run.last(d))
        t1 = t0 + (run.found(d, FIRST, deleted)[0][0] - deleted)
        with run.lock:
            for t, task, text in run.lines:
                traced.line(task, "", text, at=t0 + (t - deleted))
        time.sleep(1.0)  # (the tracers write twice a second)
    finally:
        traced.close()
        if run is not None:
            run.close()
    return traced.rows("elastic PSS grows 2 -> 3 workers (the room made)", t0, t1,
                       "from the blocker's deletion to the coordinator's first step at 3")


BENCHMARKS = {"scale_paths": bench_scale_paths, "grow_paths": bench_grow_paths}
