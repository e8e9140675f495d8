"""``marathon-tf deploy job.json --local``: the same pipeline on one machine.

Starts the built-in Marathon + Mesos-DNS (:mod:`marathon_tf.local`), points the
job's discovery at them, deploys and follows it with the same use case as on a cluster
(:mod:`marathon_tf.user.pipeline`: render once, admission once, put, the one wait loop), streams
every task's output prefixed with its name (``[worker-1] …``), and returns when the job has ended
(its record says Succeeded, Failed or NotPlaced). Everything it started is stopped
when it returns, also on Ctrl-C, SIGTERM and SIGHUP (:mod:`marathon_tf.user.stopsignals`:
raised as :class:`~marathon_tf.contract.errors.Interrupted`, exit 128 + the signal's number):
the tasks get their grace period, and a second signal kills them at once; when it is killed
outright (SIGKILL), the local runner's guardian (:mod:`marathon_tf.local.reaper`) kills every
task process.

Printing goes through the ``sink`` callbacks the CLI passes in.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from marathon_tf.contract import joblock, naming
from marathon_tf.contract.errors import Interrupted, NotPlaced, Timeout, UsageError
from marathon_tf.marathon.client import Client, RetryPolicy
from marathon_tf.user import localstate, pipeline, stopsignals
from marathon_tf.user.results import Deployment, JobStatus
from marathon_tf.user.spec import JobSpec

__all__ = ["LocalRun", "run", "local_cluster", "default_state_dir", "SandboxTailer"]


def local_cluster(**options: Any):
    """A :class:`~marathon_tf.local.LocalCluster` set up for marathon-tf's tasks: the Python programs
    of its tasks share pre-warmed interpreters (:class:`marathon_tf.task.warmpool.WarmPool`), which
    the cluster itself, like a Mesos agent, knows nothing of. ``options``: LocalCluster's."""
    from marathon_tf.local import LocalCluster  # imported on use: aiohttp and dnslib are not needed elsewhere
    from marathon_tf.task.warmpool import WarmPool

    return LocalCluster(warm_pool=WarmPool, **options)


def default_state_dir(job: str) -> Path:
    """``<state home>/<job>-<time>`` (see :func:`marathon_tf.user.config.state_home`), made here: one per
    run, also for two runs of one job started in the same second (``…-2``, ``…-3``: ``mkdir`` decides)."""
    from marathon_tf.user.config import state_home

    base = state_home() / f"{job.replace('/', '-')}-{time.strftime('%Y%m%d-%H%M%S')}"
    base.parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10_000):
        path = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise UsageError(f"{base}: 10,000 runs of {job} started in one second; nothing was started")


class SandboxTailer:
    """Follows ``<state>/sandboxes/<task id>/{stdout,stderr}`` of every task (and
    ``<state>/agents/<agent>/sandboxes/…`` of the other agents'), also of relaunched ones, and hands
    complete lines to ``emit(task_name, stream, line)``.

    Memory is bounded whatever the output: files are read :data:`READ_CHUNK` bytes at a time, and
    a line longer than :data:`LINE_LIMIT` bytes is cut there (the rest of it is skipped, and the
    emitted line says so and where the whole line is)."""

    #: Longest line shown (bytes); the same limit as the bootstrap's pieces.
    LINE_LIMIT = 64 * 1024
    #: Bytes read from a file per step.
    READ_CHUNK = 1024 * 1024

    def __init__(self, state_dir: Path, emit: Callable[[str, str, str], None], interval: float = 0.2,
                 job: str | None = None):
        self.state_dir = Path(state_dir)
        #: only this job's tasks (their ids begin with its group's path, ``ml_mnist_``), when a cluster runs others
        self.prefix = naming.safe_path(naming.group_id(job)) + "_" if job else ""
        self.emit = emit
        self.interval = interval
        self._offsets: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}
        self._skipping: set[Path] = set()  # inside a line that was cut: drop bytes up to its newline
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sandbox-tailer", daemon=True)

    @staticmethod
    def task_name(task_id: str) -> str:
        """``ml_mnist_worker-1.instance-…`` → ``worker-1`` (job names hold no ``_``)."""
        return task_id.split(".", 1)[0].rsplit("_", 1)[-1]

    def start(self) -> SandboxTailer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # started (a job refused before its deploy never was)
            self._thread.join(timeout=5)
        self.poll(final=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    def poll(self, final: bool = False) -> None:
        roots = [self.state_dir / "sandboxes", *sorted(self.state_dir.glob("agents/*/sandboxes"))]
        boxes = [box for root in roots if root.is_dir() for box in root.iterdir() if box.name.startswith(self.prefix)]
        for box in sorted(boxes, key=lambda p: p.stat().st_mtime):
            for stream in ("stdout", "stderr"):
                path = box / stream
                try:
                    size = path.stat().st_size
                except OSError:
                    continue
                name = self.task_name(box.name)
                while self._offsets.get(path, 0) < size and not (self._stop.is_set() and not final):
                    offset = self._offsets.get(path, 0)
                    with open(path, "rb") as f:
                        f.seek(offset)
                        chunk = f.read(min(self.READ_CHUNK, size - offset))
                    if not chunk:
                        break
                    self._offsets[path] = offset + len(chunk)
                    self._feed(path, name, stream, chunk)
                if final and self._partial.get(path):
                    self.emit(name, stream, self._partial.pop(path).decode("utf-8", "replace").rstrip("\r"))

    def _feed(self, path: Path, name: str, stream: str, chunk: bytes) -> None:
        if path in self._skipping:
            cut = chunk.find(b"\n")
            if cut < 0:
                return
            self._skipping.discard(path)
            chunk = chunk[cut + 1:]
        data = self._partial.pop(path, b"") + chunk
        *lines, rest = data.split(b"\n")
        for line in lines:
            self._emit_line(path, name, stream, line)
        if len(rest) > self.LINE_LIMIT:
            self._emit_line(path, name, stream, rest)
            self._skipping.add(path)
        elif rest:
            self._partial[path] = rest

    def _emit_line(self, path: Path, name: str, stream: str, line: bytes) -> None:
        if len(line) > self.LINE_LIMIT:
            shown = line[: self.LINE_LIMIT].decode("utf-8", "replace")
            self.emit(name, stream, f"{shown} [marathon-tf: line longer than {self.LINE_LIMIT // 1024} KiB cut "
                                    f"here; the whole line is in {path}]")
            return
        self.emit(name, stream, line.decode("utf-8", "replace").rstrip("\r"))


@dataclass
class LocalRun:
    state: str
    status: JobStatus
    seconds: float
    state_dir: Path
    logdir: str | None = None  # where the job's logdir is on this machine


# Over ruff's complexity limit (C901), as one piece: deploy --local's whole run: the cluster, the deploy, following it,
# its outcome.
def run(spec: JobSpec, *, templates_dir: str | None = None, timeout: float | None = None,  # noqa: C901
        state_dir: Path | None = None, emit_task_line: Callable[[str, str, str], None] = lambda *a: None,
        progress: Callable[[JobStatus], None] = lambda s: None,
        on_deployed: Callable[[Deployment, Any], None] = lambda d, c: None,
        poll: float = 1.0, cluster_options: dict[str, Any] | None = None,
        wait_for_resources: bool = True,
        stopping: Callable[[int, float], None] = lambda tasks, grace: None) -> LocalRun:
    """Run ``spec`` to its end on a fresh local cluster (``cluster_options``: LocalCluster's, see
    :mod:`marathon_tf.user.local_options`); raises :class:`Timeout` (exit 3). ``wait_for_resources``
    False: a job its agents cannot hold now is refused (:class:`NotPlaced`) before it is sent.
    On the first stop signal ``stopping(tasks, longest grace)`` is called before the tasks are
    stopped with their grace; a second signal kills them at once."""
    from marathon_tf.local.launcher import host_volume_path, volume_problem
    from marathon_tf.user.local_options import DEPLOY_DNS_REFRESH

    made = state_dir is None
    if made:
        from marathon_tf.user.config import state_home

        made_home = None if state_home().exists() else state_home()
    state_dir = Path(state_dir or default_state_dir(spec.name))
    try:
        host_paths = [str(host_volume_path(state_dir, spec.name, v.host_path)) for v in spec.volumes]
        for i, host_path in enumerate(host_paths):  # hopeless: refuse before anything starts
            problem = volume_problem(host_path)
            if problem:
                raise UsageError(f"volumes[{i}].host_path: {problem.replace('hostPath ', '', 1)}; "
                                 "nothing was started")
        logdir = logdir_host_path(spec, host_paths)
        try:
            lock = joblock.acquire(logdir, spec.name) if logdir else None  # LogdirLocked: refused, nothing started
        except OSError as e:
            raise UsageError(f"logdir: {logdir} cannot be used: {e.strerror or e}; nothing was started") from None
    except BaseException:
        if made:  # refused before anything started: no run folder is left behind either
            for folder in (state_dir, made_home):
                try:
                    if folder is not None:
                        folder.rmdir()
                except OSError:
                    pass
        raise
    try:
        runner = localstate.hold(state_dir, spec.name)  # `local clean` leaves a run alone while it is held
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    started: list[Any] = []  # the cluster, once made
    killed: list[int] = []
    refused: list[bool] = []  # the deploy was refused before anything was sent (exit 2, 4): no run folder is kept

    def kill_now(signum: int) -> None:  # a second stop signal: no more waiting for the graces
        killed.append(signum)
        for cluster in started:
            cluster.kill_tasks_now()

    try:
        with stopsignals.converted(again=kill_now):
            try:
                cluster = local_cluster(state_dir=state_dir, **{"dns_refresh": DEPLOY_DNS_REFRESH,
                                                                **(cluster_options or {})})
            except ValueError as e:  # what the cluster refuses of its options
                raise UsageError(f"{e}; nothing was started") from None
            started.append(cluster)
            result = _run(spec, cluster, state_dir,
                          templates_dir=templates_dir, timeout=timeout, emit_task_line=emit_task_line,
                          progress=progress, on_deployed=on_deployed, poll=poll, lock=lock,
                          wait_for_resources=wait_for_resources, stopping=stopping, refused=refused)
        result.logdir = logdir
        return result
    except KeyboardInterrupt as e:  # stopsignals.Stopped (SIGINT, SIGTERM, SIGHUP), after the clean-up
        signum = getattr(e, "signum", None)
        how = "interrupted" if signum in (None, 2) else f"stopped by {stopsignals.signal_name(signum)}"
        tasks = (" (its tasks killed at once: a second stop signal)" if killed else
                 " (its tasks with their grace period)") if started else ""
        raise Interrupted(f"{how}: the local job {spec.name} was stopped{tasks}", signum=signum) from None
    finally:
        runner.release()
        if lock is not None:
            lock.release()
        if refused and made:  # its tasks never ran: nothing of it (pre-warm logs, an empty volume) is worth keeping
            import shutil

            shutil.rmtree(state_dir, ignore_errors=True)
            if made_home is not None:
                try:
                    made_home.rmdir()
                except OSError:
                    pass


def logdir_host_path(spec: JobSpec, host_paths: list[str] | None = None) -> str | None:
    """Where the job's logdir is on this machine (:func:`marathon_tf.user.localstate.logdir_host_path`);
    ``host_paths``: each volume's host directory as the runner resolves it (default the job file's)."""
    from marathon_tf.user.localstate import logdir_host_path as on_host

    hosts = host_paths or [v.host_path for v in spec.volumes]
    return on_host(spec.logdir, [(v.container_path, h) for v, h in zip(spec.volumes, hosts)])



def _run(spec: JobSpec, cluster: Any, state_dir: Path, *, templates_dir: str | None, timeout: float | None,
         emit_task_line: Callable[[str, str, str], None], progress: Callable[[JobStatus], None],
         on_deployed: Callable[[Deployment, Any], None], poll: float,
         lock: joblock.Lock | None, wait_for_resources: bool = True,
         stopping: Callable[[int, float], None] = lambda tasks, grace: None,
         refused: list[bool] | None = None) -> LocalRun:
    tailer = SandboxTailer(state_dir, emit_task_line, job=spec.name)
    start = time.monotonic()
    try:
        _prewarm(cluster, spec, templates_dir)
        cluster.start()
        if lock is not None:  # the deciding task's bootstrap recognises its own run by this
            lock.update(run=joblock.run_id(cluster.marathon_url, spec.name))
            lock.keep_alive()
        local_spec = spec.with_overrides(discovery=replace(
            spec.discovery, nameserver=cluster.mesos_dns, http_api=cluster.mesos_dns_http,
            marathon_url=cluster.marathon_url))
        client = Client(cluster.marathon_url, retry=RetryPolicy(attempts=5, budget=30, initial=0.2, max_wait=2))
        # the same deploy as on a cluster: a task no agent can hold is refused (exit 2) before anything is sent
        try:
            deployment = pipeline.deploy(client, local_spec, templates_dir=templates_dir,
                                         wait_for_resources=wait_for_resources, earlier_run=False)
        except (UsageError, NotPlaced):  # refused (what fits no agent, no room now): nothing was sent
            if refused is not None:
                refused.append(True)
            raise
        tailer.start()
        on_deployed(deployment, cluster)
        last: list[JobStatus] = []

        def seen(status: JobStatus) -> None:
            last[:] = [status]
            progress(status)

        # its end is its record (the deciding task's, or NotPlaced at its admission deadline with no attempt
        # left); bootstrap phases are not used: a task that exits to be relaunched shows failed briefly
        left = None if timeout is None else max(0.0, timeout - (time.monotonic() - start))
        try:
            final = pipeline.follow(client, spec.name, timeout=left, on_progress=seen, poll=poll, events=False,
                                    hopeless_every=0.0)  # a task that can never start (tensorboard too): at once
        except Timeout:
            state = last[0].state if last else "running"
            raise Timeout(f"job {spec.name} was still {(state or 'running').lower()} after {timeout:g} s; it was "
                          f"stopped with the local cluster", hint=f"task output is in {state_dir}/sandboxes") from None
        return LocalRun(final.state, final, time.monotonic() - start, state_dir)
    except KeyboardInterrupt:
        try:
            tasks, grace = cluster.shutdown_plan()
        except Exception:  # noqa: BLE001 - the runner stops whatever it could not count
            tasks, grace = 0, 0.0
        if tasks:
            stopping(tasks, grace)
        raise  # run() says it, once the tasks are stopped
    finally:
        tailer.stop()
        cluster.stop()


def _prewarm(cluster: Any, spec: JobSpec, templates_dir: str | None) -> None:
    """Start the job's shared pre-warmed interpreter(s) first, so that importing TensorFlow overlaps
    the local Marathon's start-up, the deployment and discovery (one app per role is enough: the
    tasks of a role differ only in per-task variables)."""
    from marathon_tf.user.render import render_app

    try:
        apps = [render_app(spec, role, 0, templates_dir=templates_dir) for role, r in spec.roles.items() if r.count]
    except Exception:  # noqa: BLE001 - the deployment renders again and says what is wrong
        return
    cluster.prewarm(apps)


LOCAL_RESOURCES = ("the local runner does not enforce cpus, mem, disk or gpus: every task sees this machine's "
                   "CPUs, memory and devices (--agent-resources makes its agents finite)")


def unenforced(spec: JobSpec) -> list[str]:
    """What the job asks for that this machine's runner will not give it (gpus; more cpus than it has)."""
    asked = [f"roles.{r}.gpus: {spec.roles[r].gpus:g}" for r in spec.counts() if spec.roles[r].gpus]
    return asked + [f"roles.{r}.cpus: {spec.roles[r].cpus:g}" for r in spec.counts()
                    if spec.roles[r].cpus > (os.cpu_count() or 1)]


def check_local_options(detach: bool) -> None:
    if detach:
        raise UsageError("--local runs the job in this process, so it cannot --detach",
                         hint="start `marathon-tf local serve` and deploy with MARATHON_URL=http://127.0.0.1:8080")
