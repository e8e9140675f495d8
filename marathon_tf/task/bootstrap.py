"""In the container: rendezvous with the peers, write the spec, run and supervise the trainer.

Usage (the ``cmd`` of every rendered task)::

    marathon-tf bootstrap [--watch-interval S] [--grace S] -- python3 train.py ...
    python -m marathon_tf.bootstrap -- "python3 train.py --steps 100 && echo done"

One argument after ``--`` that contains spaces or shell syntax runs through ``/bin/sh -c``;
otherwise the arguments are executed as they are. The settings come from the ``MTF_*``
environment (:class:`marathon_tf.contract.taskenv.TaskContext`) and Marathon's ``HOST``,
``PORT_<NAME>``/``PORT0``/``PORT1``; ``MTF_STATUS_BIND`` (default ``0.0.0.0``) is the
address the status endpoint binds to.

Order of work: start the status endpoint (so health checks pass during rendezvous) -> check that the
logdir is usable and that a task given GPUs (``MTF_GPUS``) sees them (:mod:`marathon_tf.task.gpucheck`;
either failing fails the job at once, with one line) ->
discover every cluster member (deadline ``MTF_STARTUP_TIMEOUT``; exit 1 naming the
missing peers; the job's leader reads the backend, the others long-poll it:
:mod:`marathon_tf.task.rendezvous`; meanwhile the job's admission deadline is watched: peers
still not placed then release the job, NotPlaced: :mod:`marathon_tf.task.admission`) -> TF_CONFIG /
flags / ``cluster_spec.json`` -> run the program, pass its output through -> watch for peers that
moved and restart the program with the rewritten spec -> on its exit, the policy decides
(:class:`marathon_tf.task.jobpolicy.JobPolicy` in ``main``; :mod:`marathon_tf.task.policy` is the
table, its :class:`~marathon_tf.task.policy.Action` leads to the task's next
:class:`~marathon_tf.contract.phases.Phase`): restart the program in place (after a short
backoff, with a freshly checked spec; :class:`~marathon_tf.task.restarts.Restarter`), exit for
Marathon to relaunch the task, stay up, or end the job (wait for the other workers under
``all_workers``, then record Succeeded/Failed on every app and scale them to 0, through a
:class:`~marathon_tf.task.jobcontrol.JobControl`). With a JobControl, a passed startup deadline
fails the job (naming the missing peers) instead of exiting into a relaunch loop.
After the job's end the bootstrap stays up and healthy until Marathon stops it.

Which roles restart when a peer moves: every cluster member, the ps included (:func:`restarts_on_move`).
Tensorboard is not a cluster member: no discovery, no TF_CONFIG, no flags. This module never imports TensorFlow.

Assembly: :class:`Bootstrap`'s constructor makes the task's parts in the order they need each other, each
given what it writes to when it is made: the status and its phase's machine, the events, the job's plan's
coordinator (the deciding task: it leads the rendezvous), then the job's restart ledger and control
(``lifecycle``: :func:`~marathon_tf.task.jobcontrol.job_lifecycle`, whose keeper writes to those three), the
observer, the save rounds and the restarter; the rendezvous, made once the status endpoint serves, takes the
coordinator and the keeper's listener. Nothing is wired into a part after it was made.

Over 600 lines, as one concept: the task's assembly (every part it wires: the status endpoint and its
guard, the rendezvous, the save rounds, the keeper, the restarter, the space wait) and its main loop. Each
part lives in its own module; splitting the assembly would only scatter the order of work above. The
task side's coordinator and reconcile loop (docs/architecture.md) is where it shrinks.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from marathon_tf.contract import cluster_spec, joblock, naming, savehook
from marathon_tf.contract import labels as L
from marathon_tf.contract.errors import DiscoveryError, UsageError
from marathon_tf.contract.progress import StepRate
from marathon_tf.contract.shellexec import exec_form
from marathon_tf.contract.taskauth import KEY_FILE_VAR, KEY_VAR, Guard, install, task_key
from marathon_tf.contract.taskenv import TOKEN_FILE_VAR, WORKERS_VAR, TaskContext
from marathon_tf.task import stderr
from marathon_tf.task.admission import AdmissionWatch, watch_admission
from marathon_tf.task.budget import BACKOFF
from marathon_tf.task.checkpoints import newest_checkpoint
from marathon_tf.task.discovery import Backend, PeerKey, make_backend, watch_interval
from marathon_tf.task.elastic import ElasticMember
from marathon_tf.task.gpucheck import gpu_problem
from marathon_tf.task.invocation import (
    DEFAULT_WATCH_INTERVAL,
    USAGE,
    own_address,
    parse_args,
    shell_command,
    status_port,
)
from marathon_tf.task.jobcontrol import JobControl, RecordParts, job_lifecycle
from marathon_tf.task.jobpolicy import JobPolicy
from marathon_tf.task.keeper import PATH as LEDGER_PATH
from marathon_tf.task.logdir import (
    announce_resume,
    events_path,
    lock_logdir,
    logdir_path,
    logdir_problem,
    resume_point,
    space_problem,
)
from marathon_tf.task.machine import On, TaskMachine
from marathon_tf.task.membership import FixedMembership, Settled
from marathon_tf.task.observer import TaskObserver
from marathon_tf.task.policy import Decision, ExitPolicy, decider_task, is_decider, startup_reason
from marathon_tf.task.prewarm import ForkedProcess, Prewarmer
from marathon_tf.task.reconcile import Seen, Step, next_step
from marathon_tf.task.rendezvous import (
    Coordinator,
    DirectRendezvous,
    LeaderRendezvous,
    Rendezvous,
    View,
    leader_of,
    make_rendezvous,
)
from marathon_tf.task.restarts import Restarter, program_grace
from marathon_tf.task.restoring import STYLES as RESTORE_WAIT_STYLES
from marathon_tf.task.restoring import RestoreGate
from marathon_tf.task.saving import HOLD_PATH, SAVE_PATH, Saving, hold_limit
from marathon_tf.task.status_server import StatusServer, TaskStatus
from marathon_tf.task.supervisor import Trainer, die_with_parent, relay_stop_signals
from marathon_tf.task.timeline import TaskEvents
from marathon_tf.task.watchdog import ProgressWatchdog

if TYPE_CHECKING:
    from marathon_tf.task.jobview import JobView
    from marathon_tf.task.resize import Resizer

__all__ = ["main", "exit_now", "Bootstrap", "job_lifecycle", "parse_args", "shell_command", "own_address",
           "status_port", "restarts_on_move", "SPEC_FILE"]

SPEC_FILE = "cluster_spec.json"
RESTART_BACKOFF = BACKOFF  # repeated failures: in-place restarts wait 1, 2, 4 ... s, at most 30 s (the first: none)


#: Seconds a task's first program waits at most for the new address of a peer whose task a deployment replaced.
ADDRESS_WAIT = 10.0


def _log(message: str) -> None:
    stderr.log(message)  # every credential the task holds scrubbed


def restarts_on_move(role: str) -> bool:
    """Whether a task of ``role`` restarts its program when a peer moves: every cluster member.
    A ps holds the workers' addresses too: in TF1 between-graph training it receives tensors
    from a worker at the address in its own cluster spec, so a ps left with a moved worker's old
    address hangs that worker's first step (measured). Restarting it loses its variables, which
    the chief restores from the last checkpoint."""
    return role in ("chief", "ps", "worker", "evaluator")


class Bootstrap:
    """One task's bootstrap. ``run()`` returns the process exit code; ``request_stop`` is what
    the SIGTERM/SIGINT handlers call (from any thread). ``control`` (None: nothing is done to
    the job as a whole) waits for the workers and records the job's end when the policy says so;
    ``restarts`` (a :class:`~marathon_tf.task.restarts.Restarter`) is its restart half."""

    def __init__(self, ctx: TaskContext, environ: Mapping[str, str], command: Sequence[str], *,
                 backend: Backend | None = None, policy: ExitPolicy | None = None,
                 control: JobControl | None = None, lifecycle: Callable[..., Mapping[str, Any]] | None = None,
                 restart_backoff: tuple[float, float] = RESTART_BACKOFF,
                 watch_interval: float = DEFAULT_WATCH_INTERVAL, grace: float | None = None,
                 clock: Callable[[], float] = time.monotonic, rng: random.Random | None = None,
                 tick: float = 0.2, stdout=None, stderr=None):
        self.ctx, self.environ, self.command = ctx, dict(environ), list(command)
        self.shell = shell_command(self.command)
        self._backend = backend
        self.status = TaskStatus(job=ctx.job, task=ctx.task, role=ctx.role, index=ctx.index)
        self.machine = TaskMachine(self.status)  # the one writer of the task's phase (task.machine)
        events = TaskEvents(ctx.task, events_path(ctx, self.environ))
        me = (ctx.role, ctx.index) if ctx.role != "tensorboard" else None
        #: the one writer of the job's plan, where this task leads the rendezvous (the deciding task)
        self.coordinator = Coordinator(View()) if me is not None and me == leader_of(ctx) else None
        if lifecycle is not None:  # the job's restart ledger and control (job_lifecycle), with what they write to
            made = lifecycle(ctx, self.environ, status=self.status, events=events, coordinator=self.coordinator,
                             locate=self._leader_address)
            policy, control = made["policy"], made["control"]
        self.policy = policy or ExitPolicy(ctx.permanent_exit_codes)
        self.control = control
        self.grace = program_grace(ctx.grace_seconds) if grace is None else grace
        self.watch_interval, self.clock, self.tick = watch_interval, clock, tick
        self.rng = rng or random.Random()
        self.stdout, self.stderr = stdout, stderr
        self.server: StatusServer | None = None
        self._stop = threading.Event()
        self._signum: int | None = None
        self.endpoints: dict[PeerKey, str] = {}
        self.rendezvous: Rendezvous | None = None
        self.spec: cluster_spec.RenderedSpec | None = None
        self.watchdog = ProgressWatchdog.for_role(
            ctx.role, ctx.progress_timeouts, ctx.style, clock=clock,
            prints_steps=bool(ctx.target_step and (ctx.role == "chief" or ctx.style != "parameter_server")))
        self.observer = TaskObserver(ctx, self.status, self.watchdog, clock=clock, decider=control is not None and
                                     is_decider(ctx), logdir=logdir_path(ctx, self.environ),
                                     events=events, machine=self.machine)
        self._lock: joblock.Lock | None = None
        self._rate = StepRate(clock=clock)
        self._printed_steps = False
        self._next_logdir_look = 0.0
        self.prewarmer = None if self.shell or ctx.role == "tensorboard" else Prewarmer.for_command(
            self.command, ctx.prewarm, self.environ, cwd=self.environ.get("MESOS_SANDBOX") or None, log=_log)
        #: the deciding task's view of its job (marathon_tf.task.jobview; made and started by :meth:`watch_job`)
        self.view: JobView | None = None
        #: an elastic job's deciding task decides its size (marathon_tf.task.resize; made by :meth:`_decide_size`)
        self.resizer: Resizer | None = None
        # a full logdir: a save round is refused while full; a wait for room lasts until the next checkpoint fits
        self.saving = Saving(ctx, self.status, self.observer.events, self.observer.logdir, decider=is_decider(ctx),
                             log=_log, clock=clock, machine=self.machine,
                             locate=self._leader_address,
                             peer_urls=lambda: self.view.status_urls() if self.view is not None else {},
                             space=lambda: space_problem(self.ctx, self.environ))
        self.restarts = Restarter(ctx, self.policy, control, self.status, self.observer, self._stop,
                                  lambda: self._signum, grace=self.grace, restart_backoff=restart_backoff, clock=clock,
                                  log=_log, machine=self.machine, saving=self.saving,
                                  space=lambda: space_problem(self.ctx, self.environ, checkpoint_room=True))
        self.restarts.count_earlier()
        #: which tasks train and with which spec (marathon_tf.task.membership): the job file's, or an elastic job's
        #: members as its deciding task publishes them (marathon_tf.task.elastic)
        self.membership = ElasticMember(ctx, self.status, self._stop, log=_log, clock=clock, ready=lambda: (
            self.prewarmer is None or self.prewarmer.warm()), machine=self.machine) \
            if ctx.elastic and ctx.role != "tensorboard" else FixedMembership(ctx, log=_log)
        #: no worker that trains on its own starts while the deciding program restores (marathon_tf.task.restoring)
        self.restore_gate = RestoreGate(
            coordinator=self.coordinator, rendezvous=lambda: self.rendezvous,
            waits=ctx.style in RESTORE_WAIT_STYLES and ctx.role == "worker", leader=decider_task(ctx.completion),
            limit=hold_limit(ctx.grace_seconds), stop=self._stop, log=_log,
            prints_steps=lambda: self.watchdog.prints_steps, clock=clock)
        self.rendezvous_options: dict = {"placement": control.placement} if control and control.placement else {}
        self.admission: AdmissionWatch | None = None
        self.gpu_check_options: dict = {}  # extra gpu_problem arguments (tests inject dev_dir/which/run)

    def _leader_address(self) -> str | None:
        """The rendezvous leader's status address (the deciding task's: its keeper, its save rounds), once known."""
        return getattr(self.rendezvous, "leader_address", None)

    # -- control ---------------------------------------------------------------------------
    def watch_job(self) -> None:
        """The deciding task with a JobControl: fail the job when a task can never start, and keep the job's
        view (tasks per role, its start, stragglers; the other trainers a save round holds) and its goodput for
        its record. The first other tasks of the job look at the deciding task's own app instead (Marathon 1.4-1.7:
        one its relaunch was dropped for is restarted, marathon_tf.task.jobview)."""
        if self.control is None:
            return
        from marathon_tf.task.jobview import JobView, watch_decider, watches_decider

        if not is_decider(self.ctx):
            if watches_decider(self.ctx):
                watch_decider(self.ctx, self.control.client, self.observer.events, self._stop, log=_log)
            return

        self.control.watch_hopeless(self._stop, lambda verdict: self._end_job(L.FAILED, verdict))
        self.view = JobView(self.ctx, self.control.client, self.status, self.observer.events, log=_log)
        self.view.start(self._stop)

    def request_stop(self, signum: int = signal.SIGTERM) -> None:
        self.saving.keep_held()  # first: the agent's kill has just continued every process of the task
        if self._signum is None:
            self._signum = signum
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # -- the run -----------------------------------------------------------------------------
    # Over ruff's complexity limit (C901), as one piece: the task's order of work (the module's docstring), step by
    # step.
    def run(self) -> int:  # noqa: C901
        try:
            if self.prewarmer:
                self.prewarmer.start()  # the import runs while the peers are discovered
            self._start_server()
            self.observer.task_started()
            unusable = logdir_problem(self.ctx, self.environ) if self.ctx.role != "tensorboard" else None
            if unusable:  # a full logdir of a job with a checkpoint: room is waited for (bounded)
                waited = self._room_to_resume(unusable)
                if waited is None:
                    return self.restarts.stop_code()
                unusable = waited or None
            if not unusable and self.ctx.gpus:  # GPUs it cannot see: the agent's setup, the same on a relaunch
                unusable = gpu_problem(self.ctx.gpus, self.environ, **self.gpu_check_options)
            if not unusable and self.control is not None and is_decider(self.ctx):
                self._lock, unusable = lock_logdir(self.ctx, self.environ)  # one run of a job per logdir
            if unusable:  # hopeless: fail the job now instead of after N restarts
                reason = self.observer.start_failed(f"{self.ctx.task}: {unusable}")  # an event too
                _log(f"FAILED: {reason}")
                self.machine.fire(On.BROKE, last_error=reason)
                if self.control is None:
                    return 1
                self._end_job(L.FAILED, reason)  # then parked, healthy, until Marathon stops it
                self._stop.wait()
                return 1
            self.admission = watch_admission(self.ctx, self.control, bool(self._members()[1]), self.observer.events,
                                             log=_log, rng=self.rng)
            try:
                if not self._discover():
                    return self.restarts.stop_code()
            finally:
                if self.admission is not None:
                    self.admission.done()
            self._render()
            return self._supervise()
        except (DiscoveryError, UsageError, ValueError, OSError) as e:
            self._no_more_starts()
            message = getattr(e, "message", None) or str(e)
            self.machine.fire(On.BROKE, last_error=message)
            self.status.set_healthy(False)
            _log(f"FAILED: {message}")
            if isinstance(e, DiscoveryError) and self.control is not None:
                # TensorFlow would wait silently forever; a relaunch would not find the peers either.
                reason = startup_reason(self.ctx.startup_timeout, self.status.snapshot()["missing"])
                self.status.set_healthy(True)  # parked: Marathon must not kill and relaunch it
                if not (self.admission is not None and self.admission.placement_problem()):
                    self._end_job(L.FAILED, self.observer.start_failed(reason))  # (else released: NotPlaced)
                self._stop.wait()
            return getattr(e, "exit_code", 1)
        finally:
            if self._lock is not None:
                self._lock.release()
            self._no_more_starts()
            if self.rendezvous is not None:
                self.rendezvous.close()
            if self.server:
                self.server.close()

    def _room_to_resume(self, unusable: str) -> str | None:
        """The logdir is ``unusable`` at this task's start: why the job fails at once, '' when it was only full
        and room came, None when the task was stopped meanwhile. A full logdir is a refusal before the job's
        first checkpoint; once there is one to resume from (this task relaunched: a scale, a preemption, a
        peer's group restart) room is waited for, bounded, as after a program's failure on it
        (:meth:`Restarter.wait_for_room`)."""
        space = space_problem(self.ctx, self.environ)
        logdir = logdir_path(self.ctx, self.environ)
        if space is None or logdir is None or newest_checkpoint(logdir) is None:
            return unusable
        reason = f"{self.ctx.task}: {space}: waiting for room before the training program starts from the job's " \
                 f"last checkpoint"
        _log(f"{reason} (at most {self.restarts.space_wait:g} s)")
        waited = self.restarts.wait_for_room(space, reason)
        if waited is None:
            return None
        room, said = waited
        if not room:
            return said
        _log(f"{self.ctx.task}: {said}")
        self.status.update(last_error=None)
        return logdir_problem(self.ctx, self.environ) or ""

    def _start_server(self) -> None:
        port = status_port(self.ctx, self.environ)
        if port is None:
            _log(f"no PORT_{self.ctx.status_port_name.upper()}/PORT1: not serving status")
            return
        bind = self.environ.get("MTF_STATUS_BIND") or "0.0.0.0"
        # the job's key guards the control routes (contract.taskauth); without one, the hosts of its tasks
        guard = Guard(task_key(self.environ), lambda: self._named(dict(self.endpoints)))
        self.server = StatusServer(self.status, bind, port, routes={"/events": self.observer.events.route},
                                   guard=guard).start()
        keeper = self.policy.keeper if isinstance(self.policy, JobPolicy) else None
        if keeper is not None:  # the job's restart ledger (marathon_tf.task.keeper)
            self.server.add_route(LEDGER_PATH, keeper.get)
            self.server.add_post_route(LEDGER_PATH, keeper.post)
        self.server.add_post_route(SAVE_PATH if self.saving.decider else HOLD_PATH,  # save rounds (task.saving)
                                   self.saving.post_save if self.saving.decider else self.saving.post_hold)
        _log(f"status on http://{bind}:{self.server.port}/status")

    def _members(self) -> tuple[PeerKey | None, list[PeerKey]]:
        """(this task if it is a member, the peers to discover)."""
        if self.ctx.role == "tensorboard":
            return None, []
        me = (self.ctx.role, self.ctx.index)
        members = self.ctx.members()
        return (me if me in members else None), self.membership.peers_of(me, members)

    def _discover(self) -> bool:
        me, peers = self._members()
        if me is not None:
            self.endpoints[me] = own_address(self.ctx, self.environ)
        if not peers:
            return True
        leads = self.coordinator is not None  # a Marathon backend also reads the followers' status ports (hints)
        self._backend = self._backend or make_backend(self.ctx, self.environ,
                                                      also_port=self.ctx.status_port_name if leads else None)
        keeper = self.policy.keeper if isinstance(self.policy, JobPolicy) else None
        # (in its plan from its first answer: its program will restore the job's checkpoint)
        self.restore_gate.program_starts(resume_point(self.ctx, self.environ) is not None)
        # The job's leader reads the backend for everyone; the others long-poll it (marathon_tf.task.rendezvous).
        self.rendezvous = make_rendezvous(
            self.ctx, self.environ, self._backend, me=me, address=self.endpoints.get(me) if me else None,
            server=self.server, slow=watch_interval(sum(self.ctx.cluster.values()), self.watch_interval),
            stop=self._stop, rng=self.rng, log=_log, coordinator=self.coordinator,
            listeners=(keeper.observe_events,) if keeper is not None else (), **self.rendezvous_options) or \
            DirectRendezvous(
            self._backend, clock=self.clock, sleep=self._stop.wait, rng=self.rng, stop=self._stop.is_set)
        _log(f"{self.ctx.task} of {self.ctx.job}: discovering {len(peers)} peer(s) via {self.ctx.discovery}")

        def progress(found: dict[PeerKey, str], missing: dict[PeerKey, str]) -> None:
            self.status.update(peers=self._named({**self.endpoints, **found}), missing=self._named(missing))

        self.restarts.attach(self.rendezvous)
        began = self.clock()
        self._decide_size(self.rendezvous)
        taken = self.membership.join(self.rendezvous, peers, self.endpoints)  # (elastic: once the job takes it in)
        if taken is None:
            return False
        peers = taken
        found = self.rendezvous.wait(peers, self.ctx.startup_timeout, on_progress=progress)
        if found is None:
            return False
        self.endpoints.update(found)
        self.observer.peers_found(len(peers), self.clock() - began)
        _log(f"all {len(peers)} peer(s) found after {self.rendezvous.polls} poll(s)")
        return True

    def _decide_size(self, rendezvous: Rendezvous) -> None:
        """The deciding task of a job whose membership changes (an elastic one: marathon_tf.task.elastic) decides
        it: its :class:`~marathon_tf.task.resize.Resizer`, published by its coordinator."""
        if self.membership.role is None or not isinstance(rendezvous, LeaderRendezvous):
            return
        from marathon_tf.task.resize import ReadyCheck, Resizer

        keeper = self.policy.keeper if isinstance(self.policy, JobPolicy) else None
        release = None
        if self.control is not None:
            watch = AdmissionWatch(self.ctx, self.control.client, events=self.observer.events, log=_log)
            release = lambda: watch.release(watch._apps())  # noqa: E731 - one call, said where it is wired
        self.resizer = Resizer(self.ctx, rendezvous.view, self.saving, self.observer.events, self.status,
                               stop=self._stop, machine=self.machine, coordinator=rendezvous.coordinator,
                               publish_round=keeper.resize_round if keeper is not None else None,
                               release=release, log=_log,
                               ready=ReadyCheck(lambda: self.saving.peer_urls())).start()

    def _peer_addresses(self) -> dict[str, str]:
        return {n: a for n, a in self._named(self.endpoints).items() if n != self.ctx.task}

    @staticmethod
    def _named(mapping: Mapping[PeerKey, str]) -> dict[str, str]:
        return {naming.task_name(*k): v for k, v in sorted(mapping.items())}

    def _render(self) -> None:
        user = self.environ.get("TF_CONFIG")
        counts, endpoints, index = self.membership.cluster(self.ctx.cluster, self.endpoints)  # (elastic: by TF index)
        self.spec = cluster_spec.render(counts, endpoints, self.ctx.role, index,
                                        style=self.ctx.spec_style, argv=self.command, shell=self.shell,
                                        user_tf_config=user)
        for warning in self.spec.warnings:
            if warning not in self.status.snapshot()["warnings"]:
                _log(f"WARNING: {warning}")
                self.status.warn(warning)
        self.status.update(cluster=self.spec.cluster, tf_config=self.spec.tf_config,
                           peers=self._named(self.endpoints), missing={})
        self._write_spec_file(self.spec)

    def _write_spec_file(self, spec: cluster_spec.RenderedSpec) -> None:
        directory = self.environ.get("MESOS_SANDBOX") or os.getcwd()
        path = os.path.join(directory, SPEC_FILE)
        tmp = f"{path}.tmp.{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(spec.document(self.ctx.role, self.ctx.index), f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)

    def _rounds_need_it(self) -> bool:
        """Whether the program starts with SIGTERM ignored (supervisor.ignore_sigterm): every member's in a job
        with save rounds. A real agent's SIGTERM reaches the program with its bootstrap, and the round needs
        them all: the deciding task's saves, a ps serves the variables saved, a ParameterServerStrategy
        coordinator reaches the step boundary it saves at only when its workers finish the steps in flight,
        a synchronous group saves together. The bootstrap ends its program after the round."""
        return self.saving.members_save()

    def _child_env(self, spec: cluster_spec.RenderedSpec) -> dict[str, str]:
        env = dict(self.environ)
        env.pop(TOKEN_FILE_VAR, None)  # the bootstrap's credentials (a local runner's task token), not the program's
        env.pop(KEY_FILE_VAR, None)  # nor the job's key (contract.taskauth)
        env.pop(KEY_VAR, None)
        if self.saving.members_save():
            env[savehook.ROUNDS_VAR] = "1"  # it leaves SIGTERM to the bootstrap's save rounds (contract.savehook)
        if spec.tf_config_env is not None:
            env["TF_CONFIG"] = spec.tf_config_env
        elif not env.get("TF_CONFIG"):
            env.pop("TF_CONFIG", None)  # never an empty TF_CONFIG
        env.setdefault("PYTHONUNBUFFERED", "1")
        env[WORKERS_VAR] = str(self.membership.size_of(spec))
        return env

    def _on_step(self, step: int) -> None:
        """A ``step=N`` line of the program: the step and its rate (steps/s over the last minute)."""
        self._printed_steps = True
        self.restarts.stepped()
        self.saving.stepped()
        self.restore_gate.program_back()
        rate = self._rate.add(step)
        self.status.update(step=step, steps_per_second=None if rate is None else round(rate, 3))
        if self.watchdog.step(step):
            self.observer.on_step(step)
        if self.prewarmer:
            self.prewarmer.note_step()  # past its start: time to look at the pre-warmed interpreter's memory

    def _on_text(self, text: str) -> None:
        self.observer.on_text(text)  # TensorFlow naming a peer it waits for
        self.saving.on_text(text)  # the save hook's lines

    def _logdir_step(self) -> None:
        """For programs that print no ``step=N``: the step TensorFlow wrote into the logdir (event files,
        else the newest checkpoint), looked at every 10 s."""
        if self._printed_steps or not self.ctx.logdir or self.clock() < self._next_logdir_look:
            return
        self._next_logdir_look = self.clock() + 10.0
        from marathon_tf.task.checkpoints import training_step

        step = training_step(os.path.join(self.environ.get("MESOS_SANDBOX") or os.getcwd(), self.ctx.logdir))
        if step is not None and step != self.status.snapshot()["step"]:
            rate = self._rate.add(step)
            self.status.update(step=step, steps_per_second=None if rate is None else round(rate, 3))
            if self.watchdog.step(step):
                self.observer.on_step(step, printed=False)

    def _start_trainer(self) -> Trainer:
        self.saving.start_hold.wait(self._stop)  # a save round's hold that came before it started
        self.restore_gate.wait()  # a worker of its own: not while the deciding program restores the checkpoint
        resumes = announce_resume(self.ctx, self.environ, self.status, _log)  # the checkpoint it will find, if any
        self.restore_gate.program_starts(resumes is not None)  # the deciding task's: it says so in the plan
        assert self.spec is not None  # rendered (_render) before any start
        argv = ["/bin/sh", "-c", exec_form(self.spec.argv[0])] if self.shell else self.spec.argv
        trainer = Trainer(argv, self._child_env(self.spec), cwd=self.environ.get("MESOS_SANDBOX") or None,
                          on_step=self._on_step, on_text=self._on_text, stdout=self.stdout, stderr=self.stderr,
                          ignore_term=self._rounds_need_it(),
                          **({"spawn": self.prewarmer.spawn} if self.prewarmer else {}))
        self.saving.program_started(trainer)
        self.watchdog.started()
        self.restarts.program_started()
        me, _ = self._members()
        self.observer.program_started(self.status.snapshot()["restarts"], self.endpoints.get(me) if me else None)
        trainer.start()
        self.machine.fire(On.STARTED, exit_code=None)
        if trainer.pid is not None and not isinstance(trainer.proc, ForkedProcess):  # (a fork's: prewarm says it)
            _log(f"started training program (pid {trainer.pid})")
        return trainer

    def _no_more_starts(self) -> None:
        """The program will not be started again: stop the pre-warmed interpreter (its memory)."""
        if self.prewarmer:
            self.prewarmer.close()

    def _next_watch(self) -> float:
        every = self.rendezvous.watch_every if self.rendezvous is not None else None  # a leader's view: every tick
        if every is not None:
            return self.clock() + every
        mean = watch_interval(sum(self.ctx.cluster.values()), self.watch_interval)  # longer for big jobs
        return self.clock() + mean * self.rng.uniform(0.5, 1.5)

    def _supervise(self) -> int:
        """Run the program until this task's part in the job is over; the bootstrap's exit code.
        The task's reconcile loop (:mod:`marathon_tf.task.reconcile`): every tick, one look (:meth:`_look`: the
        task stopped, the plan's round it has not followed, its program's end, a hang, a peer restarted under it,
        a watch due), one :class:`~marathon_tf.task.reconcile.Step` from it, and that step's effects."""
        restarts = self.restarts
        restarts.begin()  # rounds before this program are not ours to follow
        me, _ = self._members()
        if me is not None:  # relaunched elsewhere, or a scale: the peers restart for the new spec first
            relaunched = restarts.await_peers_took(self.ctx.task, self.endpoints[me])
            self._await_addresses(relaunched)  # a peer that restarted meanwhile: its new address, not the old
        trainer: Trainer | None = self._start_trainer()
        watching = len(self.endpoints) > 1 and self._backend is not None
        next_watch = self._next_watch()
        while trainer is not None:
            code = trainer.wait(timeout=self.tick)
            self._logdir_step()
            self.observer.tick(code is None, self._peer_addresses)
            seen = self._look(code, watching and self.clock() >= next_watch)
            step = next_step(seen)
            if step is Step.RUN:
                continue
            if step is Step.STOP:
                return self._stopped(trainer)
            if step is Step.FOLLOW:  # the keeper restarts the job's group: not this program's failure
                assert seen.round is not None
                trainer = self._again(restarts.stop_for_round(trainer, seen.round))
            elif step is Step.PEER:
                assert seen.peer_restarted is not None
                trainer = self._again(restarts.stop_for_peer(trainer, seen.peer_restarted))
            elif step is Step.WATCH:
                trainer = self._watch(trainer)
            else:  # HUNG, ENDED: the program's end, as the policy decides it
                hung = None
                if step is Step.HUNG:  # the progress watchdog: a hang is a failure like any other
                    hung = self.observer.hang(seen.hung or "")  # names the peer it waits for, when known
                    _log(f"{hung}: stopping the training program")
                    code = trainer.stop(self.grace)
                assert code is not None
                after = self._ended(trainer, code, hung)
                if isinstance(after, int):
                    return after
                trainer = after
            next_watch = self._next_watch()
        return restarts.stop_code()  # stopped while the program waited to start again

    def _await_addresses(self, relaunched: frozenset[str], timeout: float = ADDRESS_WAIT) -> None:
        """Before the first program starts: the peers that moved meanwhile, and a new address for each of
        ``relaunched`` (a deployment replaced its task: the rendezvous may still show the old task's, as Mesos-DNS
        does until its next refresh), at most ``timeout`` s; the spec rewritten. A program started with the old
        address would only be restarted at the first watch (a MultiWorkerMirrored group's collectives are fixed
        at its start)."""
        waiting = set(relaunched)
        deadline, said = self.clock() + timeout, False
        while True:
            waiting -= {naming.task_name(*peer) for peer in self._take_moves()}
            if not waiting or self._backend is None or self._stop.is_set():
                return
            if self.clock() >= deadline:
                _log(f"no new address of {', '.join(sorted(waiting))} within {timeout:g} s: starting with the one "
                     f"the rendezvous has")
                return
            if not said:
                _log(f"waiting for the new address of {', '.join(sorted(waiting))} (its task was replaced; at most "
                     f"{timeout:g} s)")
                said = True
            self._stop.wait(0.1)

    def _look(self, code: int | None, watch_due: bool) -> Seen:
        """What the loop sees now, its program's exit code ``code`` given (None: it runs). The plan's round is
        not read once the task is stopped (its stop reports the round its program ran in)."""
        stopping = self._stop.is_set()
        running = code is None
        return Seen(stopping=stopping, round=None if stopping else self.restarts.new_round(), exit_code=code,
                    hung=self.watchdog.overdue() if running else None,
                    peer_restarted=self.restarts.peer_restarted_under() if running else None, watch_due=watch_due)

    def _ended(self, trainer: Trainer, code: int, hung: str | None) -> Trainer | None | int:
        """The program ended with ``code`` (stopped as ``hung``, or by itself): the program started again
        (None: the task was stopped meanwhile), or the bootstrap's exit code."""
        restarts = self.restarts
        self.restore_gate.program_back()  # (ended without a step: nothing restores now)
        decision = restarts.ended(trainer, code, hung)
        if decision is None:  # the program's 143 came from the task's own stop
            return self._stopped(trainer)
        if decision.space:  # it failed on a full logdir: room first (bounded), then as decided
            decision = restarts.await_space(decision)
            if decision is None:
                return restarts.stop_code()
        if not decision.restart:
            return self._finished(code, decision)
        return self._again(restarts.prepare(trainer, decision))

    def _stopped(self, trainer: Trainer) -> int:
        """The task was stopped while its program ran: the program's stop (a save round first), then the
        bootstrap's own code, that of the signal (143 for SIGTERM), whatever the program's: Marathon's word for the
        task is then a stop, not the program's end (a program its grace ran out on exits with 137, a failure
        for anyone who reads the task's status without the bootstrap's own report: a relaunched deciding
        task counted its predecessor's preemption as a failure)."""
        self.restore_gate.handing_over()  # the deciding task's: no worker starts until its successor's program is back
        self.restarts.stopped(trainer)
        return self.restarts.stop_code()

    def _again(self, go_on: bool) -> Trainer | None:
        """The program started again once its peers are settled, if ``go_on`` (None: stopped meanwhile)."""
        return self._settle_and_start() if go_on else None

    def _settle_and_start(self) -> Trainer | None:
        """Look the peers up once (a peer that moved meanwhile is in the new spec; one that is down is
        waited for: a restart with its stale address would hang), then start the program again."""
        _, peers = self._members()
        settled = self.membership.again(self.rendezvous if self._backend is not None else None, peers,
                                        self.endpoints, self.ctx.startup_timeout)
        if settled is None:
            return None
        if settled is not Settled.SAME:
            self._render()
        if settled is Settled.RESIZED:
            self.restarts.begin()  # the rounds published meanwhile: this start follows them
        restarts = self.status.add_restart()
        _log(f"restarting the training program in place (restart {restarts})")
        return self._start_trainer()

    def _take_moves(self) -> dict[PeerKey, str]:
        """The peers the rendezvous now sees elsewhere than this task's spec: said, and the spec rewritten."""
        _, peers = self._members()
        peers = self.membership.moves(peers)  # (an elastic member's new address is a size change, not a move)
        if not peers or self.rendezvous is None or self._backend is None:
            return {}
        moved = self.rendezvous.moved({p: self.endpoints[p] for p in peers})
        for peer, address in sorted(moved.items()):
            _log(f"peer {naming.task_name(*peer)} moved: {self.endpoints[peer]} -> {address}")
            self.observer.peer_moved(naming.task_name(*peer), self.endpoints[peer], address)
        if moved:
            self.endpoints.update(moved)
            self._render()
        return moved

    def _watch(self, trainer: Trainer) -> Trainer:
        """One low-rate watch poll; a moved peer rewrites the spec (and restarts the program)."""
        assert self.rendezvous is not None  # watching: discovery made one
        moved = self._take_moves()
        if not moved:
            return trainer
        if not restarts_on_move(self.ctx.role):
            return trainer
        self.saving.before_move([naming.task_name(*peer) for peer in sorted(moved)])  # the job's checkpoint first
        # A job with a ps loses its variables on any move: every member restarts, the ps included (see
        # restarts_on_move), so whatever could be saved was saved just now; a program given SIGTERM would
        # only wait on the ps (TF1's chief recovering its session to save at its stop) until the grace ends.
        code = trainer.stop(0.0 if any(role == "ps" for role, _ in self.ctx.members()) else self.grace)
        self.observer.planned_restart("peer_moved", code, "the rewritten cluster spec")
        restarts = self.status.add_restart()
        _log(f"restarting the training program with the rewritten spec (restart {restarts}; "
             f"the previous run exited with {code})")
        return self._start_trainer()

    def _end_job(self, state: str, reason: str) -> None:
        """Record the job's end through the JobControl (retried until done or stopped)."""
        if self.control is None:
            _log(f"job {state} ({reason}), but there is no Marathon to record it in (MTF_MARATHON_URL "
                 f"is not set): staying up")
            return
        if self.coordinator is not None:  # the followers read the job's verdict in its plan
            self.coordinator.verdict(L.JobState(state))
        view, resizer = self.view, self.resizer
        parts = RecordParts(extra_labels=view.end_labels if view is not None else self.observer.end_labels,
                            counts=self.restarts.record_counts,
                            goodput=self.observer.goodput if view is not None else lambda: None,
                            elastic=resizer.record if resizer is not None else lambda: None)
        self.control.finish(state, reason, self.status.snapshot()["step"], self._stop, parts)

    def _finished(self, code: int, decision: Decision) -> int:
        """The program will not start again in this task: the phase the decision leads to, the job's
        end when it records one, then stay up until stopped (or exit, for a relaunch)."""
        self._no_more_starts()
        self.machine.ended(decision.phase, exit_code=code, last_error=decision.reason)
        self.status.set_healthy(decision.healthy)
        _log(f"training program exited with {code}: {decision.phase}"
             + (f" ({decision.reason})" if decision.reason else "")
             + ("; staying up until stopped" if decision.stay_up else ""))
        if code == 0:
            self.observer.finished(f"training program finished (exit 0): {decision.phase}")
        if decision.finish:
            state: str | None = decision.finish
            reason: str | None = decision.reason or f"{self.ctx.task} finished"
            if decision.await_workers and self.control is not None:
                _log("waiting for the other workers to finish")
                waited = self.control.await_workers(self._stop, self.membership.workers)
                state, reason = waited if waited else (None, None)
            elif decision.finish == L.SUCCEEDED:
                reason = f"{self.ctx.task} finished"
            if state == L.FAILED and decision.finish == L.SUCCEEDED:
                self.status.update(last_error=reason)
            if state is not None and reason is not None and not self._stop.is_set():
                self._end_job(state, reason)
        if decision.stay_up:
            self._stop.wait()
        return decision.exit_code


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``marathon-tf bootstrap`` / ``python -m marathon_tf.bootstrap``.

    ``argv`` is what follows ``bootstrap`` (``["--", "python3", "train.py"]``); default
    ``sys.argv[1:]``. Returns the exit code of ``--help`` or of a usage error; a bootstrap that ran ends its
    process with its code (:func:`exit_now`). Installs SIGTERM/SIGINT handlers while it runs.
    """
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0
    die_with_parent()  # the task dies with whatever started it (the local runner's sh, an executor)
    try:
        options, command = parse_args(args)
        ctx = TaskContext.from_env(os.environ)
    except (UsageError, ValueError) as e:
        _log(f"error: {getattr(e, 'message', e)}")
        return 2
    stderr.hold(os.environ)  # none of its credentials is ever written (task/stderr.py)
    install(task_key(os.environ))  # its requests to the job's other tasks carry the job's key (contract.taskauth)
    boot = Bootstrap(ctx, os.environ, command, watch_interval=options["watch_interval"], grace=options["grace"],
                     lifecycle=job_lifecycle)
    boot.watch_job()
    restore = relay_stop_signals(boot.request_stop)
    try:
        code = boot.run()
    finally:
        restore()
    exit_now(code)


def exit_now(code: int) -> NoReturn:
    """End the bootstrap's process with ``code`` once its run is over (its program stopped, its record
    written, its servers and lock closed): a thread of a pool still in a lookup or a request to Marathon
    (the rendezvous' group read, a peer's hint, a DNS query), which Python's exit would wait for, must not
    keep a stopped task alive into its grace period."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
