"""``marathon-tf deploy job.json --local``: the same pipeline on one machine.

Starts the built-in Marathon + Mesos-DNS (:mod:`marathon_tf.local`), points the
job's discovery at them, deploys through the ordinary client, streams every
task's output prefixed with its name (``[worker-1] …``), and returns when the
job has ended (its record says Succeeded or Failed; before the record exists,
the deciding task's bootstrap phase is used). Everything it started is stopped
when it returns, also on Ctrl-C.

Printing goes through the ``sink`` callbacks the CLI passes in.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from . import jobs, labels as L, naming
from .errors import Interrupted, Timeout, UsageError
from .marathon import Client, RetryPolicy
from .spec import JobSpec

__all__ = ["LocalRun", "run", "default_state_dir", "SandboxTailer"]


#: Mesos-DNS's refresh in local mode (a cluster's default is 60 s; one machine can afford 0.25 s).
LOCAL_DNS_REFRESH = 0.25


def default_state_dir(job: str) -> Path:
    """``<state home>/<job>-<time>`` (see :func:`marathon_tf.config.state_home`): one per run."""
    from .config import state_home

    return state_home() / f"{job.replace('/', '-')}-{time.strftime('%Y%m%d-%H%M%S')}"


class SandboxTailer:
    """Follows ``<state>/sandboxes/<task id>/{stdout,stderr}`` of every task, also of relaunched ones,
    and hands complete lines to ``emit(task_name, stream, line)``."""

    def __init__(self, state_dir: Path, emit: Callable[[str, str, str], None], interval: float = 0.2):
        self.root = Path(state_dir) / "sandboxes"
        self.emit = emit
        self.interval = interval
        self._offsets: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sandbox-tailer", daemon=True)

    @staticmethod
    def task_name(task_id: str) -> str:
        """``ml_mnist_worker-1.instance-…`` → ``worker-1`` (job names hold no ``_``)."""
        return task_id.split(".", 1)[0].rsplit("_", 1)[-1]

    def start(self) -> "SandboxTailer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.poll(final=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    def poll(self, final: bool = False) -> None:
        if not self.root.is_dir():
            return
        for box in sorted(self.root.iterdir(), key=lambda p: p.stat().st_mtime):
            for stream in ("stdout", "stderr"):
                path = box / stream
                try:
                    size = path.stat().st_size
                except OSError:
                    continue
                offset = self._offsets.get(path, 0)
                if size <= offset:
                    continue
                with open(path, "rb") as f:
                    f.seek(offset)
                    data = self._partial.pop(path, b"") + f.read(size - offset)
                self._offsets[path] = size
                *lines, rest = data.split(b"\n")
                if rest and final:
                    lines.append(rest)
                elif rest:
                    self._partial[path] = rest
                name = self.task_name(box.name)
                for line in lines:
                    self.emit(name, stream, line.decode("utf-8", "replace").rstrip("\r"))


@dataclass
class LocalRun:
    state: str
    status: dict[str, Any]
    seconds: float
    state_dir: Path

    @property
    def exit_code(self) -> int:
        return 0 if self.state == L.SUCCEEDED else 1


def _decided(status: dict[str, Any]) -> str | None:
    """The job's end is its record (written by the deciding task's bootstrap, see lifecycle).
    Bootstrap phases are not used: a task that exits to be relaunched shows ``failed`` briefly."""
    state = status.get("state")
    return state if state in (L.SUCCEEDED, L.FAILED) else None


def run(spec: JobSpec, *, templates_dir: str | None = None, timeout: float | None = None,
        state_dir: Path | None = None, emit_task_line: Callable[[str, str, str], None] = lambda *a: None,
        progress: Callable[[dict[str, Any]], None] = lambda s: None,
        on_deployed: Callable[[jobs.DeployResult, Any], None] = lambda r, c: None,
        poll: float = 1.0) -> LocalRun:
    """Run ``spec`` to its end on a fresh local cluster; raises :class:`Timeout` (exit 3)."""
    from .local import LocalCluster  # imported on use: aiohttp and dnslib are not needed elsewhere

    state_dir = Path(state_dir or default_state_dir(spec.name))
    cluster = LocalCluster(state_dir=state_dir, dns_refresh=LOCAL_DNS_REFRESH)
    tailer = SandboxTailer(state_dir, emit_task_line)
    start = time.monotonic()
    try:
        cluster.start()
        local_spec = spec.with_overrides(discovery=replace(
            spec.discovery, nameserver=cluster.mesos_dns, http_api=cluster.mesos_dns_http,
            marathon_url=cluster.marathon_url))
        client = Client(cluster.marathon_url, retry=RetryPolicy(attempts=5, budget=30, initial=0.2, max_wait=2))
        tailer.start()
        result = jobs.deploy(client, local_spec, templates_dir=templates_dir)
        on_deployed(result, cluster)
        while True:
            status = jobs.job_status(client, spec.name)
            progress(status)
            end = _decided(status)
            if end:
                return LocalRun(end, status, time.monotonic() - start, state_dir)
            if timeout is not None and time.monotonic() - start >= timeout:
                raise Timeout(f"job {spec.name} was still {status.get('state', 'running').lower()} after "
                              f"{timeout:g} s; it was stopped with the local cluster",
                              hint=f"task output is in {state_dir}/sandboxes")
            time.sleep(poll)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted: the local job {spec.name} was stopped") from None
    finally:
        tailer.stop()
        cluster.stop()


def check_local_options(detach: bool) -> None:
    if detach:
        raise UsageError("--local runs the job in this process, so it cannot --detach",
                         hint="start `marathon-tf local serve` and deploy with MARATHON_URL=http://127.0.0.1:8080")
