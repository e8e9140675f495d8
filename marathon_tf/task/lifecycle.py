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
* **Any other failure** counts against the job's restart budget (N failures within a sliding
  window), kept job-wide by the deciding task (:mod:`marathon_tf.task.ledger`,
  :mod:`marathon_tf.task.keeper`): every bootstrap reports its program's ends there and decides
  from the job's counts; a bootstrap that gets no answer falls back on its own count
  (:class:`RestartBudget`: in memory, and in ``<logdir>/.marathon-tf/failures.jsonl`` when the
  logdir is writable). More than N fails the job.
* **Preemptions** (the program or its task stopped from outside: an exit code in
  ``restart.preemption_exit_codes``, 143 only after a SIGTERM; SIGTERM to the bootstrap that
  marathon-tf did not ask for) are restarted like failures but counted against
  ``restart.max_preemptions`` only; a program killed because the runner's machinery died (its
  pre-warmed interpreter) is not counted at all.
* **Within the budget** the restart scope follows what TensorFlow 2.21 can recover from
  (``/work/shared/background/TF_RUNTIME.md``, :func:`restart_scope`): a chief/worker/evaluator
  program of ``tf1``, ``parameter_server`` and ``custom`` restarts *in place* (same host:port, so
  its peers take it back), at once the first time and after 1, 2, 4 ... s when it fails again
  and again. A ps, and any member of a ``multi_worker_mirrored`` job (no partial recovery),
  need the whole group: the keeper starts a *round* and every member's program restarts in place
  (:data:`GROUP_RESTART`). Without a rendezvous leader (``MTF_RENDEZVOUS=direct``) such a task exits
  instead: Marathon relaunches it elsewhere, its peers restart with the rewritten spec.
* Tensorboard is not part of the job's outcome: it stays up after exit 0 and is relaunched
  by Marathon after any failure (never counted, never fails the job).

Everything that talks to the outside (Marathon client, status GETs, clocks, sleep) is injected.
This module imports requests/tenacity (through :mod:`marathon_tf.marathon.client`) but never
TensorFlow, jinja2 or marshmallow: the bootstrap imports it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Callable, Mapping

from marathon_tf.contract import keras3, labels as L, naming
from marathon_tf.contract.errors import MarathonError
from marathon_tf.contract.taskenv import TaskContext, marathon_token
from marathon_tf.marathon.client import Client, RetryPolicy
from marathon_tf.marathon.record import GROUP_EMBEDS, finish_job, hopeless_verdict, job_apps
from marathon_tf.task.ledger import FAILURE, INFRASTRUCTURE, PREEMPTION, Entry, append_file, bucket, read_file
from marathon_tf.task.supervisor import ExitPolicy, Outcome

__all__ = [
    "FINISH", "AWAIT_WORKERS", "STAY", "FAIL_JOB", "RESTART", "GROUP_RESTART", "EXIT", "ACTIONS",
    "decider_task", "is_decider", "decide", "restart_scope", "RestartBudget", "failures_path", "FAILURES_FILE",
    "await_workers", "client_from_env", "JobControl", "JobPolicy", "startup_reason", "UNEXECUTABLE_CODES",
    "logdir_problem", "logdir_path", "AWAIT_SILENCE",
]

# --- the decision table -------------------------------------------------------------------------

FINISH = "finish"                # exit 0 of the decider: the job Succeeded
AWAIT_WORKERS = "await_workers"  # exit 0 of the decider under all_workers: wait, then finish
STAY = "stay"                    # exit 0 of any other task: stay up (Marathon would relaunch it)
FAIL_JOB = "fail_job"            # permanent code or budget exceeded: the job Failed
RESTART = "restart"              # restart the program in place (same host:port)
GROUP_RESTART = "group_restart"  # every member restarts its program in place (a keeper's round)
EXIT = "exit"                    # exit with the code: Marathon relaunches the task elsewhere
ACTIONS = (FINISH, AWAIT_WORKERS, STAY, FAIL_JOB, RESTART, GROUP_RESTART, EXIT)

FAILURES_FILE = os.path.join(".marathon-tf", "failures.jsonl")
#: Exit codes that mean "the command could not be executed" (POSIX shells; the bootstrap uses them
#: for its own spawn errors too): always permanent, a relaunch cannot fix them.
UNEXECUTABLE_CODES = (126, 127)


def decider_task(completion: str) -> str:
    """The task whose program's exit 0 ends the job: ``chief-0`` for ``chief``, else ``worker-0``."""
    return "chief-0" if completion == "chief" else "worker-0"


def is_decider(ctx: TaskContext) -> bool:
    return ctx.task == decider_task(ctx.completion)


def restart_scope(style: str, role: str, members: int = 2, rounds: bool = False) -> str:
    """Who restarts after ``role``'s program ended: ``self`` (in place), ``group`` (every member,
    in place: a keeper's round) or ``relaunch`` (the bootstrap exits; without ``rounds``, what a
    group-scope task does). ``members``: the job's cluster members."""
    from marathon_tf.task.keeper import group_scope

    if group_scope(style, role, members):
        return "group" if rounds else "relaunch"
    return "self"


def decide(*, style: str, role: str, code: int, decider: bool, completion: str,
           permanent: bool, failures: int, max_failures: int, kind: str = "failure", preemptions: int = 0,
           max_preemptions: int = 1 << 30, scope: str | None = None) -> str:
    """What the bootstrap does after its program exited with ``code`` (one of :data:`ACTIONS`).

    ``decider``: this task decides the job's success; ``permanent``: ``code`` is one of the
    job's permanent exit codes; ``kind``: ``failure``, ``preemption`` or ``infrastructure``;
    ``failures``/``preemptions``: the job's counted ones within their windows *including this
    one* (0 for exit 0); the job fails when one exceeds its maximum. ``scope``:
    :func:`restart_scope` (default: without rounds, as for two members).
    """
    if role == "tensorboard":
        return STAY if code == 0 else EXIT
    if code == 0:
        if not decider:
            return STAY
        return AWAIT_WORKERS if completion == "all_workers" else FINISH
    if kind == "failure" and (permanent or failures > max_failures):
        return FAIL_JOB
    if kind == "preemption" and preemptions > max_preemptions:
        return FAIL_JOB
    scope = scope or restart_scope(style, role)
    return {"self": RESTART, "group": GROUP_RESTART}.get(scope, EXIT)


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
    """A task's own count, for when the keeper cannot be reached: at most ``max_failures`` failures
    within ``window`` seconds (a sliding window).

    Failures are kept in memory for this task and, when ``path`` is given (the logdir's
    ``failures.jsonl``), appended to that file as ledger entries (:mod:`marathon_tf.task.ledger`),
    which every relaunch of every task reads: with shared storage the count is the job's even
    without the keeper. ``clock`` is wall time (the file is shared between processes and hosts).
    """

    def __init__(self, max_failures: int, window: float, *, task: str, path: str | None = None,
                 clock: Callable[[], float] = time.time):
        self.max_failures, self.window, self.task, self.path, self.clock = max_failures, window, task, path, clock
        self._mine: list[float] = []

    def record(self, code: int, stderr_tail: str = "", *, entry: Entry | None = None) -> int:
        """Count one failure; returns the failures within the window (job-wide when shared)."""
        now = self.clock()
        self._mine.append(now)
        append_file(self.path, entry or Entry(id=f"{self.task}@{now:.6f}", task=self.task, kind=FAILURE, time=now,
                                              code=code, reason=stderr_tail[-2000:]))
        return self.count()

    def count(self) -> int:
        """Failures within the window: the larger of this task's and the file's (of its bucket) count."""
        since = self.clock() - self.window
        self._mine = [t for t in self._mine if t >= since]
        mine = bucket(self.task)
        return max(len(self._mine), sum(1 for e in read_file(self.path) if e.kind == FAILURE and e.counted
                                        and e.time >= since and bucket(e.task) == mine))

    def shared(self) -> list[dict[str, Any]]:
        """Every entry of the file (malformed lines are skipped), as dicts."""
        return [e.to_dict() for e in read_file(self.path)]


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
        #: the job's restart ledger (:class:`marathon_tf.task.keeper.Keeper`) when this task keeps it
        self.keeper = None
        #: ``() -> dict | None``: the job's restart counts for the record (set by the bootstrap)
        self.counts: Callable[[], Mapping[str, Any] | None] = lambda: self.keeper.ledger.summary() if self.keeper \
            else None

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
                    group = self.client.get_group(naming.group_id(self.ctx.job),
                                                  embed=GROUP_EMBEDS + ("group.apps.lastTaskFailure",))
                    verdict = hopeless_verdict(self.client, self.ctx.job, group=group)
                except MarathonError:
                    continue
                if self.keeper is not None:  # ends of tasks nobody reported (marathon_tf.task.keeper)
                    self.keeper.observe_group(group)
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
        if self.keeper is not None:
            self.keeper.ended = True  # the stops that follow are the job's end, not preemptions
        counts = self.counts()
        more = {L.RESTARTS: json.dumps(dict(counts), sort_keys=True, separators=(",", ":"))} if counts else None
        while not stop.is_set():
            try:
                wrote = finish_job(self.client, self.ctx.job, state, reason=reason, final_step=final_step,
                                   now=self.wall, extra=extra, record_extra=more)
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
    """The program's last meaningful stderr lines, joined (TensorFlow's start-up lines, which every
    run prints, are left out: :func:`marathon_tf.task.tflog.is_noise`)."""
    from marathon_tf.task.tflog import is_noise

    kept = [line.strip() for line in stderr_tail.splitlines() if line.strip() and not is_noise(line)][-lines:]
    return " | ".join(kept) if kept else "(no stderr)"


def _with_tail(text: str, tail: str) -> str:
    """``exited with 3: ValueError: boom``, or ``exited with 3 (no stderr)``."""
    if tail == "(no stderr)":
        return f"{text} {tail}" if text else f" {tail}"
    return f"{text}: {tail}"


def ended_text(code: int, killed_by: int | None = None) -> str:
    """``exited with 3`` / ``was killed by SIGKILL (exit 137)``."""
    if killed_by:
        import signal as _signal

        try:
            name = _signal.Signals(killed_by).name
        except ValueError:
            name = f"signal {killed_by}"
        return f"was killed by {name} (exit {code})"
    return f"exited with {code}"


class JobPolicy(ExitPolicy):
    """:class:`ExitPolicy` for a task of a job: :func:`decide` on the job's counts.

    ``keeper`` (the deciding task) or ``reporter`` (any other) records each end of the program in
    the job's ledger and answers with the job's counts (:mod:`marathon_tf.task.keeper`); without
    an answer the task's own :class:`RestartBudget` counts. ``rounds``: the task's rendezvous carries
    the keeper's group restart rounds (the bootstrap sets it). ``decide`` records (a side effect)
    and maps the action to an :class:`~marathon_tf.task.supervisor.Outcome`: ``finish`` /
    ``await_workers`` / ``restart`` / ``group`` tell the bootstrap what to do; after a job-ending
    failure it stays up and *healthy* (Marathon's health check must not kill and relaunch a parked task).
    """

    def __init__(self, ctx: TaskContext, budget: RestartBudget, environ: Mapping[str, str] | None = None, *,
                 keeper=None, reporter=None, wall: Callable[[], float] = time.time):
        super().__init__(ctx.permanent_exit_codes)
        self.ctx, self.budget, self.keeper, self.reporter, self.wall = ctx, budget, keeper, reporter, wall
        self.environ = environ  # None: the logdir is not re-checked after a failure
        self.task_id = (environ or {}).get("MESOS_TASK_ID") or ""
        self.app_version = (environ or {}).get("MARATHON_APP_VERSION") or None
        self.rounds = False
        self._seq = 0
        self._local_preemptions: list[float] = []
        self.counts: dict[str, Any] | None = None  # the job's counts as the last answer said

    def entry(self, kind: str, code: int | None, reason: str, *, final: bool = False) -> Entry:
        self._seq += 1
        return Entry(id=f"{self.task_id or self.ctx.task}#{self._seq}", task=self.ctx.task, kind=kind,
                     time=self.wall(), code=code, reason=reason[:2000], task_id=self.task_id, final=final)

    def _count(self, entry: Entry, generation: int | None, group: bool) -> dict[str, Any]:
        """The job's counts after ``entry`` (the keeper's answer, or this task's own)."""
        answer = None
        if self.keeper is not None:
            answer = self.keeper.record(entry, generation=generation, group=group)
        elif self.reporter is not None:
            answer = self.reporter.report(entry, generation=generation, group=group)
        if answer is None:  # alone: this task's own count (and the logdir's file)
            failures = self.budget.record(entry.code or 0, entry.reason, entry=entry) if entry.kind == FAILURE \
                else self.budget.count()
            if entry.kind == PREEMPTION:
                self._local_preemptions.append(entry.time)
            n, window = self.ctx.preemption_budget
            answer = {"counted": entry.kind != INFRASTRUCTURE, "failures": failures,
                      "max_failures": self.budget.max_failures, "window_seconds": self.budget.window,
                      "preemptions": sum(1 for t in self._local_preemptions if t >= entry.time - window),
                      "max_preemptions": n, "alone": True}
        self.counts = answer
        return answer

    def stopped(self, code: int | None, generation: int | None, reason: str) -> None:
        """The bootstrap was stopped (SIGTERM) and stops its program: tell the keeper, which decides
        whether it was a preemption (not when marathon-tf asked: the job's end, a new app version)."""
        from marathon_tf.task.keeper import group_scope

        entry = self.entry(PREEMPTION, code, reason, final=True)
        group = group_scope(self.ctx.style, self.ctx.role, len(self.ctx.members())) and self.rounds
        if self.keeper is not None:
            self.keeper.stopped(entry, self.app_version, generation=generation, group=group)
        elif self.reporter is not None:
            self.reporter.report(entry, generation=generation, group=group, stopped=True,
                                 app_version=self.app_version)

    def decide(self, code: int, *, stderr_tail: str = "", kind: str = FAILURE, generation: int | None = None,
               killed_by: int | None = None, why: str | None = None) -> Outcome:
        """``kind``: what the bootstrap knows (``preemption``: a preemption exit code it did not
        cause; ``infrastructure``: ``why`` says what died); ``generation``: the restart round the
        program ran in; ``killed_by``: the signal that ended it."""
        ctx = self.ctx
        if code == 0 or ctx.role == "tensorboard":
            action = decide(style=ctx.style, role=ctx.role, code=code, decider=is_decider(ctx),
                            completion=ctx.completion, permanent=False, failures=0, max_failures=0)
            if action == FINISH:
                return Outcome("succeeded", True, 0, True, None, finish=L.SUCCEEDED)
            if action == AWAIT_WORKERS:
                return Outcome("succeeded", True, 0, True, None, finish=L.SUCCEEDED, await_workers=True)
            if action == STAY:
                return Outcome("succeeded", True, 0, True)
            return Outcome("failed", False, code, False, f"training program {ended_text(code, killed_by)}; exiting "
                                                          f"so Marathon relaunches the task (not counted)")
        unusable = None
        if kind == FAILURE and self.environ is not None:
            unusable = logdir_problem(ctx, self.environ)
        unexecutable = kind == FAILURE and code in UNEXECUTABLE_CODES
        keras = keras3.runtime_failure(stderr_tail) if kind == FAILURE else None  # no relaunch fixes it
        permanent = kind == FAILURE and (code in self.permanent_exit_codes or unexecutable or unusable is not None
                                         or keras is not None)
        scope = restart_scope(ctx.style, ctx.role, len(ctx.members()), self.rounds)
        tail = keras or _tail_for_reason(stderr_tail)
        ended = ended_text(code, killed_by)
        said = f"{why}; {ended}" if why else f"{ended} (a preemption exit code)" if kind == PREEMPTION else \
            _with_tail(ended, tail)
        entry = self.entry(kind, code, said, final=scope == "relaunch" and not permanent)
        answer = self._count(entry, generation, scope == "group")
        failures, preemptions = int(answer.get("failures", 0)), int(answer.get("preemptions", 0))
        counted = bool(answer.get("counted", True))
        action = decide(style=ctx.style, role=ctx.role, code=code, decider=is_decider(ctx), completion=ctx.completion,
                        permanent=permanent, failures=failures if counted else 0,
                        max_failures=int(answer.get("max_failures", self.budget.max_failures)), kind=kind,
                        preemptions=preemptions if counted else 0,
                        max_preemptions=int(answer.get("max_preemptions", ctx.preemption_budget[0])), scope=scope)
        whose = "counted by the task alone: the deciding task did not answer" if answer.get("alone") else "job-wide"
        if action == FAIL_JOB:
            if unusable:
                reason = f"{ctx.task} failed (exit {code}): {unusable}"
            elif unexecutable:
                reason = f"{ctx.task} could not run its program (exit {code}, permanent): {tail}"
            elif permanent:
                reason = f"{ctx.task} exited with {code} (permanent): {tail}"
            elif kind == PREEMPTION:
                reason = (f"{ctx.task} was preempted {preemptions} times (restart.max_preemptions "
                          f"{answer.get('max_preemptions')}); last: {entry.reason}")
            elif answer.get("alone"):
                reason = (f"{ctx.task} failed {failures} times in {self.budget.window:g} s, more than "
                          f"restart.max_failures ({self.budget.max_failures}; counted by the task alone: the "
                          f"deciding task did not answer); last: " + _with_tail(ended, tail))
            else:
                reason = (f"the job's programs failed {failures} times in "
                          f"{float(answer.get('window_seconds', self.budget.window)):g} s, more than "
                          f"restart.max_failures ({answer.get('max_failures')}); last: "
                          + _with_tail(f"{ctx.task} {ended}", tail))
            return Outcome("failed", True, code, True, reason, finish=L.FAILED, kind=kind)
        if not counted:
            budget = "not counted" + ("" if kind == INFRASTRUCTURE else ": a consequence of another task's end")
        elif kind == PREEMPTION:
            budget = f"preemption {preemptions} of at most {answer.get('max_preemptions')}, {whose}"
        elif kind == INFRASTRUCTURE:
            budget = "not counted: the runner's machinery"
        else:
            budget = (f"failure {failures} of at most {answer.get('max_failures')} in "
                      f"{float(answer.get('window_seconds', self.budget.window)):g} s, {whose}")
        what = f"was killed: {why}" if kind == INFRASTRUCTURE else "was preempted" if kind == PREEMPTION else ended
        detail = "" if kind == INFRASTRUCTURE else _with_tail("", tail) if kind == FAILURE else f" ({ended})"
        if action == RESTART:
            return Outcome("running", False, code, True, f"training program {what} ({budget}); restarting it in "
                           f"place{detail}", restart=True, kind=kind, counted=counted)
        if action == GROUP_RESTART:
            round_ = answer.get("round") or {}
            return Outcome("running", False, code, True, f"training program {what} ({budget}); the job's group "
                           f"restarts{detail}", restart=True, group=True, kind=kind, counted=counted,
                           round=round_ if round_.get("generation") else None)
        return Outcome("failed", False, code, False,
                       f"training program {what} ({budget}); exiting so Marathon relaunches the task{detail}",
                       kind=kind, counted=counted)
