#!/usr/bin/env python3
"""Start an example's TensorFlow tasks by hand, as plain local processes.

This is what people do without a cluster manager, and the baseline the benchmarks compare
marathon-tf against: pick free ports on 127.0.0.1, start one process per task with the
cluster spec as classic flags (``--ps_hosts=... --job_name=... --task_index=...``) or as
``TF_CONFIG``, wait for the deciding tasks, then stop the ones that never exit (ps, and the
workers of a ParameterServerStrategy job).

Library use::

    from handlaunch import launch, wait, stop
    procs = launch("examples/linear-regression-tf1", ps=1, workers=2,
                   extra_args=["--train_steps=200", "--checkpoint_dir=/tmp/ckpt"])
    try:
        codes = wait(procs, timeout=120)      # {"worker-0": 0, "worker-1": 0}
    finally:
        stop(procs)

``launch`` returns ``subprocess.Popen`` objects with extra attributes: ``role``, ``index``,
``name`` (``"worker-1"``), ``address`` (``"127.0.0.1:PORT"``), ``stdout_path``,
``stderr_path`` and ``started_at`` (``time.time()`` just before the process was started).

CLI::

    python3 examples/handlaunch.py examples/linear-regression-tf1 --ps 1 --workers 2 \\
        -- --train_steps=300 --checkpoint_dir=/tmp/lr-ckpt

Every task's stdout/stderr go to ``<logdir>/<role>-<index>.out|.err``.  The exit code of the
CLI is 0 when every deciding task exited 0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

HOST = "127.0.0.1"

# Which tasks decide that a job is over, by the job's style (matches marathon-tf's defaults).
DEFAULT_COMPLETION = {
    "tf1": "all_workers",
    "parameter_server": "chief",
    "multi_worker_mirrored": "all_workers",
    "custom": "all_workers",
}


def ephemeral_range() -> tuple:
    """The kernel's ephemeral port range: where outgoing connections and binds to port 0 take ports."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on 127.0.0.1, chosen at random *below* the kernel's ephemeral range
    and bind-tested. A port picked inside that range (a bind to port 0) can be taken by any outgoing
    connection or another program's bind before TensorFlow binds it, seconds later ("Could not start gRPC
    server", seen in a CI run); below it, only a program that names the port can."""
    low, _ = ephemeral_range()
    pool = list(range(max(1024, low - 12000), low))
    if len(pool) < 10 * n:  # an unusual range: the kernel's choice, held open together while picking
        socks, ports = [], []
        try:
            for _ in range(n):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.bind((HOST, 0))
                socks.append(s)
                ports.append(s.getsockname()[1])
        finally:
            for s in socks:
                s.close()
        return ports
    ports = []
    for port in random.SystemRandom().sample(pool, len(pool)):
        if len(ports) == n:
            break
        if _bindable(port):
            ports.append(port)
    if len(ports) != n:
        raise OSError(f"no {n} free ports below {low}")
    return ports


def load_job(example_dir: os.PathLike) -> dict:
    """The example's ``job.json`` (an empty dict when there is none)."""
    path = Path(example_dir) / "job.json"
    if not path.exists():
        return {}
    with open(path) as f:
        return json.load(f)


def cluster_for(ps: int, workers: int, chief: int) -> dict[str, list[str]]:
    """A ``{"chief": [...], "ps": [...], "worker": [...]}`` cluster on free local ports."""
    ports = iter(free_ports(ps + workers + chief))
    cluster: dict[str, list[str]] = {}
    for role, count in (("chief", chief), ("ps", ps), ("worker", workers)):
        if count:
            cluster[role] = [f"{HOST}:{next(ports)}" for _ in range(count)]
    return cluster


def spec_flags(cluster: dict[str, list[str]], role: str, index: int) -> list[str]:
    """The classic between-graph flags for one task."""
    flags = []
    for r in ("chief", "ps", "worker"):
        if r in cluster:
            flags.append(f"--{r}_hosts={','.join(cluster[r])}")
    return flags + [f"--job_name={role}", f"--task_index={index}"]


def tf_config(cluster: dict[str, list[str]], role: str, index: int) -> str:
    return json.dumps({"cluster": cluster, "task": {"type": role, "index": index}})


def launch(
    example_dir: os.PathLike,
    ps: int = 1,
    workers: int = 2,
    chief: int = 0,
    extra_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    cluster_spec: str | None = None,
    logdir: os.PathLike | None = None,
    python: str = sys.executable,
    program: str = "train.py",
    cwd: os.PathLike | None = None,
    delays: dict[str, float] | None = None,
) -> list[subprocess.Popen]:
    """Start every task of an example; return their ``Popen`` objects (chief, ps, workers order).

    ``cluster_spec`` is ``"flags"``, ``"tf_config"`` or ``"both"``; by default it is taken from the
    example's ``job.json`` (``flags`` for tf1 style, ``tf_config`` otherwise).  ``extra_args`` go to
    every task before the cluster flags.  ``env`` is added to the current environment.
    ``delays`` (``{"worker-0": 5.0}``) starts those tasks that many seconds after the others.
    """
    example_dir = Path(example_dir).resolve()
    job = load_job(example_dir)
    if cluster_spec is None:
        cluster_spec = job.get("cluster_spec") or ("flags" if job.get("style", "tf1") == "tf1" else "tf_config")
    if cluster_spec not in ("flags", "tf_config", "both"):
        raise ValueError(f"cluster_spec must be flags, tf_config or both, not {cluster_spec!r}")
    logdir = Path(logdir) if logdir else Path(tempfile.mkdtemp(prefix=f"handlaunch-{example_dir.name}-"))
    logdir.mkdir(parents=True, exist_ok=True)

    cluster = cluster_for(ps, workers, chief)
    base_env = dict(os.environ)
    base_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    base_env["PYTHONUNBUFFERED"] = "1"
    base_env.pop("TF_CONFIG", None)
    base_env.update(env or {})

    delays = delays or {}
    tasks = [(role, index, address) for role in ("chief", "ps", "worker")
             for index, address in enumerate(cluster.get(role, []))]
    tasks.sort(key=lambda t: delays.get(f"{t[0]}-{t[1]}", 0.0))  # stable: undelayed keep their order
    t0 = time.monotonic()
    procs: list[subprocess.Popen] = []
    try:
        for role, index, address in tasks:
            pause = t0 + delays.get(f"{role}-{index}", 0.0) - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            argv = [python, str(example_dir / program), *extra_args]
            task_env = dict(base_env)
            if cluster_spec in ("flags", "both"):
                argv += spec_flags(cluster, role, index)
            if cluster_spec in ("tf_config", "both"):
                task_env["TF_CONFIG"] = tf_config(cluster, role, index)
            name = f"{role}-{index}"
            out_path, err_path = logdir / f"{name}.out", logdir / f"{name}.err"
            with open(out_path, "wb") as out, open(err_path, "wb") as err:
                started_at = time.time()
                proc = subprocess.Popen(
                    argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                    env=task_env, cwd=str(cwd or example_dir),
                    start_new_session=True,  # its own process group: stop() takes children too
                )
            proc.role, proc.index, proc.name, proc.address = role, index, name, address
            proc.stdout_path, proc.stderr_path, proc.started_at = out_path, err_path, started_at
            proc.peak_rss_kib = None
            procs.append(proc)
    except BaseException:
        stop(procs)
        raise
    order = {"chief": 0, "ps": 1, "worker": 2}
    return sorted(procs, key=lambda p: (order[p.role], p.index))


def deciding(procs: Iterable[subprocess.Popen], completion: str) -> list[subprocess.Popen]:
    """The tasks whose exit ends the job: ``chief``, ``worker0`` or ``all_workers``."""
    procs = list(procs)
    if completion == "chief":
        chosen = [p for p in procs if p.role == "chief"]
    elif completion == "worker0":
        chosen = [p for p in procs if p.role == "worker" and p.index == 0]
    elif completion == "all_workers":
        chosen = [p for p in procs if p.role == "worker"]
    else:
        raise ValueError(f"unknown completion {completion!r}")
    if not chosen:
        raise ValueError(f"no task decides completion {completion!r} in {[p.name for p in procs]}")
    return chosen


def completion_of(example_dir: os.PathLike) -> str:
    job = load_job(example_dir)
    return job.get("completion") or DEFAULT_COMPLETION.get(job.get("style", "tf1"), "all_workers")


def wait(
    procs: Sequence[subprocess.Popen],
    completion: str = "all_workers",
    timeout: float = 300.0,
    fail_fast: bool = True,
) -> dict[str, int]:
    """Wait until the deciding tasks have exited; return ``{name: returncode}`` for them.

    With ``fail_fast`` a deciding task exiting non-zero ends the wait at once.  Any task dying
    while the deciding ones still run also ends it (a hand-launched job has nobody to restart
    it).  Raises ``TimeoutError`` after ``timeout`` seconds; never stops anything itself.
    """
    chosen = deciding(procs, completion)
    deadline = time.monotonic() + timeout
    while True:
        for p in procs:
            _sample_rss(p)
        codes = {p.name: p.poll() for p in chosen}
        if all(c is not None for c in codes.values()):
            return codes
        if fail_fast and any(c not in (None, 0) for c in codes.values()):
            return codes
        others_dead = [p for p in procs if p not in chosen and p.poll() not in (None, 0)]
        if fail_fast and others_dead:
            return codes
        if time.monotonic() > deadline:
            raise TimeoutError(f"tasks still running after {timeout:.0f}s: "
                               f"{[n for n, c in codes.items() if c is None]}")
        time.sleep(0.1)


def _sample_rss(p: subprocess.Popen) -> None:
    """Remember the task's peak resident memory (VmHWM, KiB) while it runs, in ``p.peak_rss_kib``."""
    try:
        with open(f"/proc/{p.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    p.peak_rss_kib = max(p.peak_rss_kib or 0, int(line.split()[1]))
    except (OSError, ValueError):
        pass


def first_step_seconds(p: subprocess.Popen) -> float | None:
    """Seconds from the task's start to the ``first_step_time=`` it printed (None if it did not)."""
    for line in Path(p.stdout_path).read_text(errors="replace").splitlines():
        if line.startswith("first_step_time="):
            return float(line.split("=", 1)[1]) - p.started_at
    return None


def stop(procs: Iterable[subprocess.Popen], grace: float = 5.0) -> None:
    """Stop every still-running task (SIGTERM to its process group, SIGKILL after ``grace``)."""
    procs = list(procs)
    for p in procs:
        if p.poll() is None:
            _signal_group(p, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(p, signal.SIGKILL)
            p.wait()
    for p in procs:  # the group may hold children that outlived their leader
        _signal_group(p, signal.SIGKILL)


def _signal_group(p: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(p.pid, sig)  # start_new_session=True: the group id is the task's pid
    except (ProcessLookupError, PermissionError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Hand-launch an example's TF tasks on 127.0.0.1 (arguments after -- go to train.py).")
    parser.add_argument("example_dir")
    parser.add_argument("--ps", type=int, default=None, help="ps tasks (default: job.json's roles)")
    parser.add_argument("--workers", type=int, default=None, help="worker tasks (default: job.json's roles)")
    parser.add_argument("--chief", type=int, default=None, help="chief tasks, 0 or 1 (default: job.json's roles)")
    parser.add_argument("--cluster-spec", choices=["flags", "tf_config", "both"], default=None)
    parser.add_argument("--completion", choices=["chief", "worker0", "all_workers"], default=None)
    parser.add_argument("--logdir", default=None, help="where <role>-<index>.out/.err go (default: a temp dir)")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--quiet", action="store_true", help="do not echo the deciding tasks' stdout at the end")
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    args, train_args = parser.parse_args(argv[:split]), argv[split + 1:]

    job = load_job(args.example_dir)
    roles = job.get("roles", {})
    def count(role, given):
        return given if given is not None else int(roles.get(role, {}).get("count", 0))
    procs = launch(args.example_dir, ps=count("ps", args.ps), workers=count("worker", args.workers),
                   chief=count("chief", args.chief), extra_args=train_args,
                   cluster_spec=args.cluster_spec, logdir=args.logdir)
    completion = args.completion or completion_of(args.example_dir)
    logdir = procs[0].stdout_path.parent
    print(f"started {', '.join(f'{p.name}@{p.address} pid={p.pid}' for p in procs)}; logs in {logdir}", flush=True)
    t0 = min(p.started_at for p in procs)
    try:
        codes = wait(procs, completion=completion, timeout=args.timeout)
    except TimeoutError as e:
        print(f"handlaunch: {e}", file=sys.stderr)
        codes = {"timeout": 124}
    except KeyboardInterrupt:
        codes = {"interrupted": 130}
    finally:
        stop(procs)
    print(f"finished in {time.time() - t0:.1f}s: {codes}", flush=True)
    for p in procs:
        first = first_step_seconds(p)
        rss = f"{p.peak_rss_kib / 1024:.0f} MiB" if p.peak_rss_kib else "?"
        print(f"  {p.name}: exit {p.returncode}, first step after "
              f"{'-' if first is None else f'{first:.1f}s'}, peak RSS {rss}", flush=True)
    if not args.quiet:
        for p in deciding(procs, completion):
            tail = p.stdout_path.read_text().splitlines()[-3:]
            for line in tail:
                print(f"[{p.name}] {line}")
    return 0 if codes and all(c == 0 for c in codes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
