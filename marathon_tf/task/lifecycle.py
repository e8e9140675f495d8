"""The job's lifecycle, decided inside the tasks' bootstraps: completion, failure policy, the record.

Marathon relaunches any task that exits, even with 0, so a training job ends only when one of
its bootstraps says so: it writes the job's record into the labels of every app of the job and
sets their instances to 0 in ONE bulk ``PUT /v2/apps?force=true``
(:func:`marathon_tf.marathon.record.finish_job`). Marathon then kills every task and relaunches
nothing; the apps stay, so ``marathon-tf status`` shows ``Succeeded``/``Failed``, when, the
final step and the reason.

Who decides what (:func:`decide` is the whole table, a pure function):

* **Success** is decided by the *decider* task (:func:`decider_task`: ``chief-0`` when the
  job's completion is ``chief``, else ``worker-0``). With completion ``chief``/``worker0`` its
  program's exit 0 ends the job; with ``all_workers`` it first waits (:func:`await_workers`,
  bounded: a worker that shows nothing new for :data:`AWAIT_SILENCE` s fails the job, named)
  until every other worker's bootstrap reports ``phase == "succeeded"``. Any other
  task whose program exits 0 just stays up (healthy) until the job is stopped.
* **A permanent exit code** (``restart.permanent_exit_codes``) fails the job at once; so do a
  program that cannot be executed (:data:`UNEXECUTABLE_CODES`: the shell's 127 "not found" and
  126 "not executable", also when the bootstrap itself could not spawn it) and a logdir that is
  not a usable directory (:func:`logdir_problem`: checked at start and after every failure, so a
  vanished or read-only checkpoint directory fails the job with one line, not after N restarts),
  and Keras 3's ``model.fit`` failing under a multi-worker strategy (:func:`marathon_tf.contract.keras3.runtime_failure`:
  the reason is one line with the fix, ``TF_USE_LEGACY_KERAS=1`` + tf_keras).
  Every failure, permanent ones included, is recorded in the restart budget's file.
* **Any other failure** counts against the restart budget (N failures within a sliding window,
  :class:`RestartBudget`: per task in memory and, when the logdir is writable shared storage,
  job-wide in ``<logdir>/.marathon-tf/failures.jsonl``). More than N fails the job.
* **Within the budget** the restart scope follows what TensorFlow 2.21 can recover from
  (``/work/shared/background/TF_RUNTIME.md``): styles ``tf1``, ``parameter_server`` and
  ``custom`` restart a failed chief/worker/evaluator program *in place* (same host:port, so its
  peers take it back); a failed ps makes the bootstrap exit, so Marathon relaunches it at a
  new address and every task holding the old one restarts with the rewritten spec (the whole
  job resumes from its last checkpoint). ``multi_worker_mirrored`` has no partial recovery:
  any failed member makes its bootstrap exit, and the group restarts through the peer move.
* Tensorboard is not part of the job's outcome: it stays up after exit 0 and is relaunched
  by Marathon after any failure (never counted, never fails the job).

Everything that talks to the outside (Marathon client, status GETs, clocks, sleep) is injected.
This module imports requests/tenacity (through :mod:`marathon_tf.marathon.client`) but never
TensorFlow, jinja2 or marshmallow: the bootstrap imports it.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any, Callable, Mapping

from marathon_tf.contract import keras3, labels as L, naming
from marathon_tf.contract.errors import MarathonError
from marathon_tf.contract.taskenv import TaskContext, marathon_token
from marathon_tf.marathon.client import Client, RetryPolicy
from marathon_tf.marathon.record import GROUP_EMBEDS, finish_job, hopeless_verdict, job_apps
from marathon_tf.task.supervisor import ExitPolicy, Outcome

__all__ = [
    "FINISH", "AWAIT_WORKERS", "STAY", "FAIL_JOB", "RESTART", "EXIT", "ACTIONS",
    "decider_task", "is_decider", "decide", "RestartBudget", "failures_path", "FAILURES_FILE",
    "await_workers", "client_from_env", "JobControl", "JobPolicy", "startup_reason", "UNEXECUTABLE_CODES",
    "logdir_problem", "logdir_path", "AWAIT_SILENCE",
]

# --- the decision table -------------------------------------------------------------------------

FINISH = "finish"                # exit 0 of the decider: the job Succeeded
AWAIT_WORKERS = "await_workers"  # exit 0 of the decider under all_workers: wait, then finish
STAY = "stay"                    # exit 0 of any other task: stay up (Marathon would relaunch it)
FAIL_JOB = "fail_job"            # permanent code or budget exceeded: the job Failed
RESTART = "restart"              # restart the program in place (same host:port)
EXIT = "exit"                    # exit with the code: Marathon relaunches the task elsewhere
ACTIONS = (FINISH, AWAIT_WORKERS, STAY, FAIL_JOB, RESTART, EXIT)

_RESTARTS_IN_PLACE = ("chief", "worker", "evaluator")
FAILURES_FILE = os.path.join(".marathon-tf", "failures.jsonl")
#: Exit codes that mean "the command could not be executed" (POSIX shells; the bootstrap uses them
#: for its own spawn errors too): always permanent, a relaunch cannot fix them.
UNEXECUTABLE_CODES = (126, 127)


def decider_task(completion: str) -> str:
    """The task whose program's exit 0 ends the job: ``chief-0`` for ``chief``, else ``worker-0``."""
    return "chief-0" if completion == "chief" else "worker-0"


def is_decider(ctx: TaskContext) -> bool:
    return ctx.task == decider_task(ctx.completion)


def decide(*, style: str, role: str, code: int, decider: bool, completion: str,
           permanent: bool, failures: int, max_failures: int) -> str:
    """What the bootstrap does after its program exited with ``code`` (one of :data:`ACTIONS`).

    ``decider``: this task decides the job's success; ``permanent``: ``code`` is one of the
    job's permanent exit codes; ``failures``: failures within the budget window *including this
    one* (0 for exit 0); the job fails when ``failures > max_failures``.
    """
    if role == "tensorboard":
        return STAY if code == 0 else EXIT
    if code == 0:
        if not decider:
            return STAY
        return AWAIT_WORKERS if completion == "all_workers" else FINISH
    if permanent or failures > max_failures:
        return FAIL_JOB
    if style == "multi_worker_mirrored":
        return RESTART if role == "evaluator" else EXIT
    return RESTART if role in _RESTARTS_IN_PLACE else EXIT


# --- the restart budget ---------------------------------------------------------------------------


def logdir_path(ctx: TaskContext, environ: Mapping[str, str]) -> str | None:
    """The job's logdir as a local path for this task (relative paths are inside the sandbox);
    None without a logdir or for a URL (``gs://…``)."""
    if not ctx.logdir or "://" in ctx.logdir:
        return None
    base = environ.get("MESOS_SANDBOX") or os.getcwd()
    return ctx.logdir if os.path.isabs(ctx.logdir) else os.path.join(base, ctx.logdir)


def failures_path(ctx: TaskContext, environ: Mapping[str, str]) -> str | None:
    """``<logdir>/.marathon-tf/failures.jsonl`` when the job's logdir (relative paths are inside
    the sandbox) is a directory this task can write; else None (the budget is per task)."""
    logdir = logdir_path(ctx, environ)
    if logdir is None:
        return None
    if not (os.path.isdir(logdir) and os.access(logdir, os.W_OK | os.X_OK)):
        return None
    path = os.path.join(logdir, FAILURES_FILE)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    except OSError:
        return None
    return path



def logdir_problem(ctx: TaskContext, environ: Mapping[str, str]) -> str | None:
    """Why the job's logdir is unusable (one line), or None: it must be (or be creatable as) a
    directory this task can create files in. Only local paths are checked (not ``gs://`` etc.);
    relative ones are inside the sandbox (a volume's container path)."""
    logdir = logdir_path(ctx, environ)
    if logdir is None:
        return None
    shown = ctx.logdir if ctx.logdir == logdir else f"{ctx.logdir} ({os.path.realpath(logdir)})"
    if os.path.islink(logdir) and not os.path.exists(logdir):
        return f"logdir {shown} is gone: the volume's host path does not exist any more"
    if os.path.exists(logdir) and not os.path.isdir(logdir):
        return f"logdir {shown} is not a directory"
    try:
        os.makedirs(logdir, exist_ok=True)
    except OSError as e:
        return f"logdir {shown} cannot be created: {e.strerror or e}"
    probe = os.path.join(logdir, f".marathon-tf-write-test.{os.getpid()}")
    try:
        with open(probe, "w") as f:
            f.write("ok")
        os.unlink(probe)
    except OSError as e:
        return f"logdir {shown} is not writable: {e.strerror or e}"
    return None


class RestartBudget:
    """At most ``max_failures`` failures within ``window`` seconds (a sliding window).

    Failures are kept in memory for this task and, when ``path`` is given (shared storage),
    appended to a job-wide JSON-lines file (``{"task", "time", "code", "stderr"}``) that every
    task and every relaunch of a task reads, so the budget is the job's. ``clock`` is wall time
    (the file is shared between processes and hosts).
    """

    def __init__(self, max_failures: int, window: float, *, task: str, path: str | None = None,
                 clock: Callable[[], float] = time.time):
        self.max_failures, self.window, self.task, self.path, self.clock = max_failures, window, task, path, clock
        self._mine: list[float] = []

    def record(self, code: int, stderr_tail: str = "") -> int:
        """Count one failure; returns the failures within the window (job-wide when shared)."""
        now = self.clock()
        self._mine.append(now)
        if self.path:
            line = json.dumps({"task": self.task, "time": now, "code": code, "stderr": stderr_tail[-2000:]},
                              sort_keys=True) + "\n"
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, line.encode())  # one write on O_APPEND: lines never interleave
                finally:
                    os.close(fd)
            except OSError as e:
                sys.stderr.write(f"marathon-tf bootstrap: cannot append to {self.path}: {e}\n")
        return self.count()

    def count(self) -> int:
        """Failures within the window: the larger of this task's and the job-wide file's count."""
        since = self.clock() - self.window
        self._mine = [t for t in self._mine if t >= since]
        return max(len(self._mine), sum(1 for r in self.shared() if r.get("time", 0) >= since))

    def shared(self) -> list[dict[str, Any]]:
        """Every record of the job-wide file (malformed lines are skipped)."""
        if not self.path:
            return []
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("time"), (int, float)):
                out.append(record)
        return out


# --- Marathon: the record and the workers' status ----------------------------------------------------


def _status_url(app: Mapping[str, Any], port_name: str) -> str | None:
    """The bootstrap /status URL of the app's newest running task (its port named ``port_name``)."""
    names = [p.get("name") for p in app.get("portDefinitions") or []]
    if port_name not in names:
        return None
    running = [t for t in app.get("tasks") or [] if t.get("state") == "TASK_RUNNING"]
    task = max(running, key=lambda t: t.get("stagedAt") or "", default=None)
    if task is None:
        return None
    ports = task.get("ports") or []
    index = names.index(port_name)
    if index >= len(ports) or not task.get("host"):
        return None
    return f"http://{task['host']}:{ports[index]}/status"


def _get_json(url: str) -> dict[str, Any] | None:
    from marathon_tf.marathon import transport

    return transport.get_json(url, timeout=4.0)


#: A pending worker that shows nothing new (step, phase, restarts) this long fails the wait (seconds).
AWAIT_SILENCE = 300.0


def _shown(status: Mapping[str, Any] | None, phase: str) -> str:
    """``running, at step 3990; waiting for ps-0: its TF server does not answer`` (what a worker shows)."""
    parts = [phase]
    if status and status.get("step") is not None:
        parts[0] += f", at step {status['step']}"
    waiting = (status or {}).get("waiting_for") or {}
    if waiting.get("peer"):
        parts.append(f"waiting for {waiting['peer']}: {waiting.get('why')}")
    return "; ".join(parts)


def await_workers(client: Client, ctx: TaskContext, *, timeout: float = AWAIT_SILENCE, interval: float = 2.0,
                  get_json: Callable[[str], dict[str, Any] | None] = _get_json,
                  clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                  stop: Callable[[], bool] = lambda: False,
                  log: Callable[[str], None] = lambda m: None) -> tuple[str, str] | None:
    """Wait until every other worker's bootstrap reports ``phase == "succeeded"``.

    One Marathon request per poll (the group with its apps' tasks) finds each worker's status
    port; then each worker's ``/status`` is read. Returns ``(SUCCEEDED, reason)``, or
    ``(FAILED, reason)`` when one reports ``failed``, or when one shows nothing new (its phase,
    step, restarts) for ``timeout`` seconds: a worker that still trains is waited for, a silent one
    is named with what it last showed (its step, the peer it waits for). None when ``stop()``
    became true or the job already carries a record (someone else decided).
    """
    others = [naming.task_name("worker", i) for i in range(int(ctx.cluster.get("worker", 0)))
              if not (ctx.role == "worker" and i == ctx.index)]
    phases: dict[str, str] = {name: "unknown" for name in others}
    seen: dict[str, tuple] = {}
    quiet_since: dict[str, float] = {name: clock() for name in others}
    shown: dict[str, str] = {name: "unknown" for name in others}
    while True:
        try:
            apps = job_apps(client.get_group(naming.group_id(ctx.job), embed=GROUP_EMBEDS))
        except MarathonError as e:
            log(f"waiting for the other workers: Marathon: {e}")
            apps = None
        if apps is not None:
            if any((a.get("labels") or {}).get(L.STATE) for a in apps.values()):
                return None
            for name in others:
                app = apps.get(naming.app_id(ctx.job, *naming.parse_task_name(name)))
                url = _status_url(app, ctx.status_port_name) if app else None
                status = get_json(url) if url else None
                if status is None:
                    phases[name] = "unreachable" if app else "no app"
                else:
                    phases[name] = str(status.get("phase"))
                    if phases[name] == "failed":
                        detail = status.get("last_error") or f"exit code {status.get('exit_code')}"
                        return L.FAILED, f"{name} failed after {ctx.task} finished: {detail}"
                now = (phases[name], (status or {}).get("step"), (status or {}).get("restarts"))
                if seen.get(name) != now:
                    seen[name], quiet_since[name] = now, clock()
                shown[name] = _shown(status, phases[name])
            if all(phases[n] == "succeeded" for n in others):
                return L.SUCCEEDED, f"all {len(others) + 1} workers finished"
        silent = [n for n in others if phases[n] != "succeeded" and clock() - quiet_since[n] >= timeout]
        if silent:
            named = ", ".join(f"{n} ({shown[n]})" for n in silent)
            return L.FAILED, f"{ctx.task} finished but not every worker did: nothing new for {timeout:g} s from {named}"
        if stop():
            return None
        sleep(interval)
        if stop():
            return None


def client_from_env(ctx: TaskContext, environ: Mapping[str, str], *,
                    retry: RetryPolicy | None = None) -> Client | None:
    """A Marathon client for ``MTF_MARATHON_URL`` with ``MARATHON_TOKEN`` (or the token file
    ``MARATHON_TOKEN_FILE`` names) or ``MARATHON_USER``/``MARATHON_PASSWORD`` from the task's
    environment; None without a URL."""
    if not ctx.marathon_url:
        return None
    token = marathon_token(environ)
    user = environ.get("MARATHON_USER") or None
    password = environ.get("MARATHON_PASSWORD") if user else None
    return Client(ctx.marathon_url, token=token, user=user, password=password,
                  retry=retry or RetryPolicy(attempts=8, budget=60.0, initial=0.5, max_wait=10.0))


def startup_reason(timeout: float, missing: Mapping[str, str]) -> str:
    """``startup deadline (300s) passed; missing: worker-1 (NXDOMAIN), ps-0 (no SRV record)``."""
    shown = [f"{name} ({detail})" for name, detail in sorted(missing.items())]
    if len(shown) > 20:
        shown = shown[:20] + [f"and {len(shown) - 20} more"]
    return f"startup deadline ({timeout:g}s) passed; missing: " + (", ".join(shown) or "?")


class JobControl:
    """What a bootstrap does to the job as a whole: wait for the workers and record its end.

    ``finish`` retries until Marathon took the record or ``stop()`` is true (the bootstrap
    keeps serving its phase meanwhile); credentials stay inside the client and are never logged.
    """

    def __init__(self, ctx: TaskContext, client: Client, *, await_timeout: float = AWAIT_SILENCE,
                 poll_interval: float = 2.0, retry_interval: float = 10.0,
                 get_json: Callable[[str], dict[str, Any] | None] = _get_json,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 log: Callable[[str], None] = lambda m: None):
        self.ctx, self.client = ctx, client
        self.await_timeout, self.poll_interval, self.retry_interval = await_timeout, poll_interval, retry_interval
        self.get_json, self.clock, self.wall, self.log = get_json, clock, wall, log
        self.finished: tuple[str, str] | None = None
        #: ``(state, reason) -> {app id: labels}`` added to the record (the bootstrap's: the job's events)
        self.extra_labels: Callable[[str, str], Mapping[str, Mapping[str, str]]] | None = None

    def await_workers(self, stop: threading.Event) -> tuple[str, str] | None:
        return await_workers(self.client, self.ctx, timeout=self.await_timeout, interval=self.poll_interval,
                             get_json=self.get_json, clock=self.clock, sleep=stop.wait, stop=stop.is_set,
                             log=self.log)

    def watch_hopeless(self, stop: threading.Event, step: Callable[[], int | None],
                       interval: float = 10.0) -> threading.Thread:
        """The deciding task's watch over the other tasks (tensorboard included): a task that can
        never start (:func:`marathon_tf.marathon.record.hopeless_failures`; Marathon relaunches it
        for ever, and the job would stay deploying) fails the job with its reason. One group GET per ``interval``; stops when
        ``stop`` is set or the job has its record."""
        def run() -> None:
            while not stop.wait(interval):
                try:
                    verdict = hopeless_verdict(self.client, self.ctx.job)
                except MarathonError:
                    continue
                if verdict == "":
                    return
                if verdict:
                    self.finish(L.FAILED, verdict, step(), stop)
                    return
        thread = threading.Thread(target=run, name="hopeless-watch", daemon=True)
        thread.start()
        return thread

    def finish(self, state: str, reason: str, final_step: int | None, stop: threading.Event) -> bool:
        """Record ``state`` on the job (retrying until done or stopped); whether this task wrote it."""
        extra = self.extra_labels(state, reason) if self.extra_labels else None
        while not stop.is_set():
            try:
                wrote = finish_job(self.client, self.ctx.job, state, reason=reason, final_step=final_step,
                                   now=self.wall, extra=extra)
            except MarathonError as e:
                self.log(f"could not record the job as {state} yet ({e.message}); retrying in "
                         f"{self.retry_interval:g} s")
                stop.wait(self.retry_interval)
                continue
            self.finished = (state, reason)
            self.log(f"job {self.ctx.job} {state}: {reason}" if wrote else
                     f"job {self.ctx.job} already has its record; not overwriting it")
            return wrote
        return False


# --- the job-aware exit policy ---------------------------------------------------------------------

def _tail_for_reason(stderr_tail: str, lines: int = 5) -> str:
    kept = [line.strip() for line in stderr_tail.splitlines() if line.strip()][-lines:]
    return " | ".join(kept) if kept else "(no stderr)"


class JobPolicy(ExitPolicy):
    """:class:`ExitPolicy` for a task of a job: :func:`decide` plus the :class:`RestartBudget`.

    ``decide`` records a counted failure (a side effect) and maps the action to an
    :class:`~marathon_tf.task.supervisor.Outcome`: ``finish`` / ``await_workers`` / ``restart``
    tell the bootstrap what to do; after a job-ending failure it stays up and *healthy*
    (Marathon's health check must not kill and relaunch a parked task).
    """

    def __init__(self, ctx: TaskContext, budget: RestartBudget, environ: Mapping[str, str] | None = None):
        super().__init__(ctx.permanent_exit_codes)
        self.ctx, self.budget = ctx, budget
        self.environ = environ  # None: the logdir is not re-checked after a failure

    def decide(self, code: int, *, stderr_tail: str = "") -> Outcome:
        ctx = self.ctx
        unusable = None
        if code != 0 and self.environ is not None and ctx.role != "tensorboard":
            unusable = logdir_problem(ctx, self.environ)
        unexecutable = code in UNEXECUTABLE_CODES
        keras = keras3.runtime_failure(stderr_tail) if code != 0 else None  # no relaunch fixes it
        permanent = code in self.permanent_exit_codes or unexecutable or unusable is not None or keras is not None
        counted = code != 0 and ctx.role != "tensorboard"
        failures = self.budget.record(code, stderr_tail) if counted else 0
        action = decide(style=ctx.style, role=ctx.role, code=code, decider=is_decider(ctx),
                        completion=ctx.completion, permanent=permanent, failures=failures,
                        max_failures=self.budget.max_failures)
        tail = keras or _tail_for_reason(stderr_tail)
        if action == FINISH:
            return Outcome("succeeded", True, 0, True, None, finish=L.SUCCEEDED)
        if action == AWAIT_WORKERS:
            return Outcome("succeeded", True, 0, True, None, finish=L.SUCCEEDED, await_workers=True)
        if action == STAY:
            return Outcome("succeeded", True, 0, True)
        if action == FAIL_JOB:
            if unusable:
                reason = f"{ctx.task} failed (exit {code}): {unusable}"
            elif unexecutable:
                reason = f"{ctx.task} could not run its program (exit {code}, permanent): {tail}"
            elif permanent:
                reason = f"{ctx.task} exited with {code} (permanent): {tail}"
            else:
                reason = (f"{ctx.task} failed {failures} times in {self.budget.window:g} s; "
                          f"last exit {code}: {tail}")
            return Outcome("failed", True, code, True, reason, finish=L.FAILED)
        budget = f"failure {failures} of at most {self.budget.max_failures} in {self.budget.window:g} s"
        if action == RESTART:
            return Outcome("running", False, code, True,
                           f"training program exited with {code} ({budget}); restarting it in place: {tail}",
                           restart=True)
        return Outcome("failed", False, code, False,
                       f"training program exited with {code} ({budget}); exiting so Marathon relaunches "
                       f"the task: {tail}")
