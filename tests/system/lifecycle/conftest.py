"""Fixtures for the job's life end to end: a LocalCluster in-process and jobs deployed on it with
every task's output lines time-stamped as they appear (real TensorFlow)."""

from __future__ import annotations

import os
import threading
import time

import jobfiles
import pytest
from leaks import processes_under
from offers import FAST_OFFERS

from marathon_tf.contract import labels as L
from marathon_tf.marathon.client import Client, RetryPolicy
from marathon_tf.user.local_options import REVIVE_INTERVAL

# --- end-to-end on the local runner (real TensorFlow) --------------------------------------------------

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
STEP_LINE = __import__("re").compile(r"\bstep=(\d+) loss=")


def example_job(example: str, tmp_path, **changes) -> str:
    return str(jobfiles.example_job(example, tmp_path, **changes))


class LocalJob:
    """A job deployed on an in-process LocalCluster, with every task's output lines time-stamped as
    they appear (``lines``: ``(monotonic time, task, stream, text)``)."""

    def __init__(self, cluster, job_path: str):
        import dataclasses

        from marathon_tf.user import jobs
        from marathon_tf.user import spec as spec_mod
        from marathon_tf.user.localrun import SandboxTailer

        self.cluster, self.jobs = cluster, jobs
        spec = spec_mod.load_job(job_path)
        self.spec = spec.with_overrides(discovery=dataclasses.replace(
            spec.discovery, nameserver=cluster.mesos_dns, http_api=cluster.mesos_dns_http,
            marathon_url=cluster.marathon_url))
        self.name = spec.name
        self.client = Client(cluster.marathon_url, retry=RetryPolicy(attempts=5, budget=30, initial=0.2, max_wait=2))
        self.lines: list[tuple[float, str, str, str]] = []
        self._lock = threading.Lock()
        self.tailer = SandboxTailer(cluster.state_dir, self._emit, interval=0.1, job=spec.name)  # its own tasks only

    def _emit(self, task: str, stream: str, line: str) -> None:
        with self._lock:
            self.lines.append((time.monotonic(), task, stream, line))

    def deploy(self) -> LocalJob:
        from marathon_tf.user import pipeline

        self.tailer.start()
        pipeline.deploy(self.client, self.spec)
        return self

    def status(self) -> dict:
        from marathon_tf.user.status import job_status

        return job_status(self.client, self.name).to_dict()

    def steps(self, since: float = 0.0, task: str | None = None,
              started: str | None = None) -> list[tuple[float, str, int]]:
        """``(time, task, step)`` of every ``step=`` line seen after ``since``, in time order; with
        ``started``, only those a task printed after its first line past ``since`` that holds it (the
        program's restart). A time here is when the tailer read the line, not when it was printed: a
        line a killed program printed just before its kill can be read after it (a CI run: worker-1's
        step 1254 read after the kill that followed checkpoint 1259, the resumed 1353 five seconds
        later), and only a line's place in its task's stream tells which program printed it."""
        with self._lock:
            lines = list(self.lines)
        out, restarted = [], set()
        for t, name, stream, text in lines:
            if t < since or stream != "stdout" or (task is not None and name != task):
                continue
            if started is not None and started in text:
                restarted.add(name)
            m = STEP_LINE.search(text)
            if m and (started is None or name in restarted):
                out.append((t, name, int(m.group(1))))
        return out

    def seen(self, task: str, text: str) -> float | None:
        """When the tailer first read a line of ``task`` holding ``text`` (None: not yet)."""
        with self._lock:
            return next((t for t, name, _, line in self.lines if name == task and text in line), None)

    def max_step(self) -> int:
        return max((s for _, _, s in self.steps()), default=-1)

    def wait(self, predicate, timeout: float, what: str, interval: float = 0.3):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(interval)
        noise = ("oneDNN", "absl::", "WARNING:tensorflow", "Instructions for", "Use standard", "loss=")
        kept = [(t, n, s, x) for t, n, s, x in self.lines if not any(w in x for w in noise)]
        tail = "\n".join(f"{t:.1f} [{n}:{s}] {x}" for t, n, s, x in kept[-80:])
        raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{tail}")

    def wait_state(self, timeout: float) -> dict:
        return self.wait(lambda: (lambda s: s if s.get("state") in (L.SUCCEEDED, L.FAILED) else None)(self.status()),
                         timeout, "the job's record")

    def text(self, task: str | None = None) -> str:
        with self._lock:
            return "\n".join(x for _, n, _, x in self.lines if task is None or n == task)


@pytest.fixture
def local_cluster(tmp_path, request):
    """A started cluster as :func:`_clusters` makes them (Mesos-DNS refreshed every 0.5 s); a test marked
    ``stock_revive_interval`` gets Marathon's stock revive interval (5 s) instead of :data:`FAST_OFFERS`, one marked
    ``own_prewarm`` no shared pre-warm server (each task pre-warms its own interpreter, as on a cluster)."""
    stock = request.node.get_closest_marker("stock_revive_interval") is not None
    own = request.node.get_closest_marker("own_prewarm") is not None
    yield from _one_cluster(tmp_path, dns_refresh=0.5, own_prewarm=own,
                            **({"revive_interval": REVIVE_INTERVAL} if stock else {}))


@pytest.fixture
def local_job(local_cluster):
    """``local_job(job_path) -> LocalJob`` deployed on the test's cluster."""

    def start(job_path: str) -> LocalJob:
        job = LocalJob(local_cluster, job_path)
        local_cluster.jobs_started.append(job)
        return job.deploy()

    return start


@pytest.fixture
def job_on():
    """``job_on(cluster, job_path) -> LocalJob`` deployed on a cluster the test made itself (one with
    agents, say); its tailer is stopped by ``cluster.jobs_started``'s owner."""

    def start(cluster, job_path: str) -> LocalJob:
        job = LocalJob(cluster, job_path)
        cluster.jobs_started.append(job)
        return job.deploy()

    return start


BIG = "cpus:2;mem:8192;disk:10000;ports:[31000-32000]"
SMALL = "cpus:1;mem:4096;disk:10000;ports:[31000-32000]"


def _clusters(tmp_path):
    """Yields ``start(own_prewarm=False, **options)``, which starts an in-process LocalCluster (marathon-tf's, with
    the pre-warm pool: the tasks' Python programs are forks of one import, unless ``own_prewarm``: each task
    pre-warms its own interpreter, as on a cluster; kill grace 2 s, :data:`FAST_OFFERS`) with these options; at
    the end each job's lines go to ``<name>.lines.txt`` in ``tmp_path``, the clusters stop, and nothing may be
    left running."""
    from marathon_tf.local import LocalCluster
    from marathon_tf.user.localrun import local_cluster

    made = []

    def start(own_prewarm: bool = False, **options):
        make = LocalCluster if own_prewarm else local_cluster  # (LocalCluster alone: no pool, as on a cluster)
        cluster = make(state_dir=tmp_path / "state", kill_grace=2.0, **{**FAST_OFFERS, **options})
        cluster.start()
        cluster.jobs_started = []
        made.append(cluster)
        return cluster

    yield start
    for cluster in made:
        for job in cluster.jobs_started:
            job.tailer.stop()
            (tmp_path / f"{job.name}.lines.txt").write_text("\n".join(f"{t:.2f} [{n}] {x}" for t, n, _, x in job.lines))
        cluster.stop()
    deadline = time.monotonic() + 10
    while processes_under(tmp_path / "state") and time.monotonic() < deadline:
        time.sleep(0.2)
    left = processes_under(tmp_path / "state")
    assert left == [], f"processes left behind: {left}"


@pytest.fixture
def cluster_of(tmp_path):
    """``cluster_of(**options)``: a started cluster as :func:`_clusters` makes them."""
    yield from _clusters(tmp_path)


def _one_cluster(tmp_path, **options):
    """Yields one started cluster (:func:`_clusters`) with these options."""
    clusters = _clusters(tmp_path)
    yield next(clusters)(**options)
    next(clusters, None)


def _agents_cluster(tmp_path, agents: int, resources: str, **options):
    """A started cluster (:func:`_clusters`) of ``agents`` agents with ``resources`` (``|`` between agents)."""
    yield from _one_cluster(tmp_path, dns_refresh=0.5, agents=agents, agent_resources=(resources,), **options)


@pytest.fixture
def sized_cluster(tmp_path):
    """A LocalCluster of 4 agents: one for the chief and ps, three that hold one worker each (the elastic tests:
    the job forms at 2 workers while a blocker holds the fourth agent)."""
    yield from _agents_cluster(tmp_path, 4, f"{BIG}|{SMALL}|{SMALL}|{SMALL}")


@pytest.fixture
def versioned_cluster(tmp_path, request):
    """Three agents (one for the chief and ps, two for a worker each) of a local Marathon that plays the version
    ``request.param`` (None: the newest)."""
    version = request.param
    yield from _agents_cluster(tmp_path, 3, f"{BIG}|{SMALL}|{SMALL}",
                               **({} if version is None else {"marathon_version": version}))
