"""What the bootstrap watches besides the program's exit: progress, hangs, its TF server, events.

:class:`TaskObserver` is told what happens (the bootstrap calls ``task_started``, ``peers_found``,
``program_started``, ``on_step``, ``on_text`` for every output line, ``program_exited``,
``hang``, ``peer_moved``, ``finished``, and ``tick`` from its loop) and keeps the task's
:class:`~marathon_tf.task.status_server.TaskStatus` up to date with what ``/status``,
``/progress`` and ``/metrics`` show:

* the rate of step reports (``report_rate``: how often the program printed a new step, per second
  over the last :data:`REPORT_WINDOW` s; the deciding task compares the workers' to find
  stragglers: a program that prints the shared global step reports it less often when it is slow);
* how long since the last step (``stall_seconds``) and the progress watchdog's current limit;
* the peer a stalled task waits for (``waiting_for``, :class:`marathon_tf.task.peers.PeerDiagnosis`),
  which the watchdog's verdict names too;
* whether the program's TF server answers yet (``server_up``: a look at its own port, as at a peer's);
* the newest checkpoint (the deciding task only: one look at the logdir every 10 s);
* the job's goodput (the deciding task only: :func:`marathon_tf.contract.goodput.goodput` of the
  job's events, every :data:`_GOODPUT_EVERY` s, and once more for the record at the job's end);

and records the task's events (:class:`marathon_tf.task.timeline.TaskEvents`) for the job's
timeline and goodput: an end of the program carries the step it had reached, its rate and how long
it had not stepped (``step``, ``rate``, ``stalled``); a start the checkpoint step it resumes from
(``resumed``); steps that come again after a pause far longer than usual (:data:`STALL_MIN` s and
:data:`STALL_FACTOR` × the usual interval) a ``stalled`` event with the seconds lost. Clocks and the
probe are injected.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, cast

from marathon_tf.contract import timeline as T
from marathon_tf.contract.goodput import goodput
from marathon_tf.contract.phases import Phase
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.task import peers as P
from marathon_tf.task.machine import TaskMachine
from marathon_tf.task.status_server import TaskStatus
from marathon_tf.task.tflog import TFLogWatcher
from marathon_tf.task.timeline import TaskEvents
from marathon_tf.task.watchdog import WATCHED_ROLES, ProgressWatchdog

__all__ = ["TaskObserver", "REPORT_WINDOW", "STALL_MIN", "STALL_FACTOR"]

#: Step reports are counted over this many seconds.
REPORT_WINDOW = 20.0
#: A pause between two steps is a stall when it lasts this many seconds and this many usual intervals.
STALL_MIN, STALL_FACTOR = 2.0, 10.0
_UPDATE_EVERY = 1.0
_CHECKPOINT_EVERY = 10.0
_GOODPUT_EVERY = 5.0


class TaskObserver:
    def __init__(self, ctx: TaskContext, status: TaskStatus, watchdog: ProgressWatchdog, *,
                 events: TaskEvents | None = None, logdir: str | None = None, decider: bool = False,
                 probe: Callable[[str], str] = P.probe, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time, machine: TaskMachine):
        self.ctx, self.status, self.watchdog = ctx, status, watchdog
        self.machine = machine
        self.events = events or TaskEvents(ctx.task, wall=wall)
        self.logdir, self.decider, self.probe, self.clock, self.wall = logdir, decider, probe, clock, wall
        self.tflog = TFLogWatcher(ctx.task, clock=wall)
        self.diagnosis = P.PeerDiagnosis(self.tflog, probe=probe, clock=clock, wall=wall)
        self._lock = threading.Lock()
        self._reports: deque[float] = deque()
        self._run_started: float | None = None
        self._first_step_seen = False
        self._first_own_step = False  # a step the program printed, this run
        self._run = 0
        self._next_update = self._next_checkpoint = self._next_goodput = 0.0
        self._last_step_at: float | None = None
        self._waiting_peer: str | None = None
        #: the ps the last hang's evidence names as frozen (:func:`marathon_tf.task.peers.frozen_ps`), or None
        self.hung_on: str | None = None
        self._own_address: str | None = None
        self._server_look: int | None = None  # the run whose TF server is being looked for
        self._server_up: bool | None = None  # None: no TF server to look for
        status.update(target_step=ctx.target_step)

    # -- what happened -------------------------------------------------------------------------
    def task_started(self) -> None:
        host = os.environ.get("HOST") or ""
        self.events.record(T.TASK_STARTED, f"{self.ctx.task} started" + (f" on {host}" if host else ""))

    def start_failed(self, reason: str) -> str:
        """The program cannot be started: the job fails with ``reason`` (whole, returned)."""
        self.events.record(T.START_FAILED, reason)
        return reason

    def end_labels(self, state: str, reason: str) -> dict[str, dict[str, str]]:
        """This task's events for the job's record, when it writes it (:meth:`TaskEvents.end_labels`)."""
        from marathon_tf.contract import naming

        return self.events.end_labels(naming.app_id(self.ctx.job, self.ctx.role, self.ctx.index), state, reason)

    def peers_found(self, count: int, seconds: float) -> None:
        self.events.record(T.PEERS_FOUND, f"all {count} peer(s) found in {seconds:.1f} s")

    def program_started(self, restarts: int, own_address: str | None) -> None:
        with self._lock:
            self._run += 1
            self._run_started, self._first_step_seen, self._first_own_step = self.clock(), False, False
            self._last_step_at = None
            self._reports.clear()
        self.hung_on = None
        self.tflog.clear()
        self._server_up = False if own_address and self.ctx.role != "tensorboard" else None
        self.status.update(first_step_at=None, waiting_for=None, server_up=self._server_up)
        self.events.record(T.PROGRAM_STARTED, "training program started" + (f" (restart {restarts})" if restarts
                                                                           else ""), restart=restarts,
                           resumed=self.status.light().get("resumed_from"))
        if own_address and self.ctx.role != "tensorboard":
            self._own_address, self._server_look = own_address, self._run
            threading.Thread(target=self._await_server, args=(self._run,), name="server-look", daemon=True).start()

    def on_step(self, step: int, *, printed: bool = True) -> None:
        """A new step of the program (the watchdog saw it change); ``printed``: the program printed it
        (else it was read from the logdir: the job's step, which says nothing of this task's program).

        ``FirstStep`` is this task's first step of this run of its program: one it printed (a ps's, or a
        ParameterServerStrategy worker's, step is the logdir's), after its ``ServerUp``: a program that
        trains has its TF server up, so a step that comes before the look at its port says so first."""
        now = self.clock()
        with self._lock:
            first, own = not self._first_step_seen, printed and not self._first_own_step
            self._first_step_seen, self._first_own_step = True, self._first_own_step or printed
            self._reports.append(now)
            gap, self._last_step_at = (now - self._last_step_at if self._last_step_at is not None else 0.0), now
        usual = self.watchdog.usual_interval() or 0.0
        if gap >= STALL_MIN and gap >= STALL_FACTOR * usual and self.ctx.role in WATCHED_ROLES:
            self.events.record(T.STALLED, f"step {step} came after {gap:.1f} s without a step (usually {usual:.2f} s)",
                               seconds=round(gap - usual, 3), step=step)
        if first:
            self.status.update(first_step_at=round(self.wall(), 3))
        if own and self.ctx.role in WATCHED_ROLES:
            if self._server_up is False and self._server_look == self._run:
                self._server_is_up(" (it trains: its first step came before the look at its port)")
            self.events.record(T.FIRST_STEP, f"first step: {step}" + (f" (run {self._run})" if self._run > 1 else ""),
                               step=step)

    def on_text(self, text: str) -> None:
        self.tflog.feed(text)

    def program_exited(self, code: int, message: str | None, *, failure: bool = True, kind: str = "failure") -> None:
        """The program ended; ``kind``: ``failure``, ``preemption`` or ``infrastructure``; ``failure``:
        whether it counts as one of the task's failures (a consequence of another end does not)."""
        self._server_look = None
        where = self._where()
        self.status.update(stall_seconds=None, waiting_for=None, report_rate=None)
        if code == 0:
            return  # (its finish is an event of its own)
        if kind == "preemption":
            self.status.add("preemptions")
            self.events.record(T.PREEMPTED, message or f"training program preempted (exit {code})", code=code, **where)
            return
        if failure and kind == "failure":
            self.status.add("failures")
        self.events.record(T.PROGRAM_EXITED, message or f"training program exited with {code}", code=code, **where)

    def _where(self) -> dict[str, Any]:
        """Where the program was when it ended: its step, rate and seconds since its last step (goodput)."""
        light = self.status.light()
        with self._lock:
            stalled = None if self._last_step_at is None else round(self.clock() - self._last_step_at, 3)
        return {"step": light.get("step"), "rate": light.get("steps_per_second"), "stalled": stalled}

    def planned_restart(self, why: str, code: int, detail: str = "") -> None:
        """The program was stopped on purpose, to start again (``why``: one of
        :data:`marathon_tf.contract.timeline.PLANNED`): an event of its own kind, never a failure."""
        where = self._where()
        self._server_look = None
        self.status.update(stall_seconds=None, waiting_for=None, report_rate=None)
        self.events.record(T.RESTARTING, f"training program stopped for {T.PLANNED.get(why, why)}"
                           + (f" ({detail})" if detail else "") + f"; it starts again (exit {code})",
                           code=code, why=why, **where)

    def hang(self, verdict: str) -> str:
        """The watchdog's verdict, with the peer this task waits for when it is known; recorded."""
        waiting = self.diagnosis.waiting_for()
        if waiting:
            verdict = f"{verdict}; waiting for {waiting['peer']} ({waiting['why']})"
        self.hung_on = P.frozen_ps(waiting)
        self.events.record(T.HANG, verdict, peer=(waiting or {}).get("peer"), **self._where())
        return verdict

    def peer_moved(self, peer: str, old: str, new: str) -> None:
        self.events.record(T.PEER_MOVED, f"peer {peer} moved: {old} -> {new}", peer=peer)

    def finished(self, message: str) -> None:
        self.events.record(T.FINISHED, message)

    # -- the loop --------------------------------------------------------------------------------
    def tick(self, running: bool, peers: Callable[[], Mapping[str, str]]) -> None:
        """From the bootstrap's loop (every few hundred ms): at most once a second, the status.
        ``peers()``: the other cluster members' TF addresses by task name."""
        now = self.clock()
        if now < self._next_update:
            return
        self._next_update = now + _UPDATE_EVERY
        fields: dict[str, Any] = {}
        running = running and self.machine.phase is not Phase.SAVING  # held for a save round: no stall
        if running:
            stalled, step = self.watchdog.stalled_for()
            limit = self.watchdog.progress_limit() if step is not None else None
            # a task waits for a peer once its own TF server is up (before, it is still starting itself)
            watched = self.ctx.role in WATCHED_ROLES and self._server_up is not False
            fields.update(stall_seconds=round(stalled, 1), progress_limit=self.watchdog.progress_limit(),
                          report_rate=self._report_rate(now))
            self.diagnosis.update(stalled if watched else None, self.watchdog.usual_interval(), peers(), limit)
            waiting = self.diagnosis.waiting_for()
            fields["waiting_for"] = waiting
            peer = (waiting or {}).get("peer")
            if waiting and peer and peer != self._waiting_peer:
                self.events.record(T.WAITING, f"waiting {waiting['seconds']:.0f}s for {peer}: {waiting['why']}",
                                   peer=peer)
            self._waiting_peer = peer
        else:
            fields.update(stall_seconds=None, waiting_for=None, report_rate=None)
        if self.decider and self.logdir and now >= self._next_checkpoint:
            self._next_checkpoint = now + _CHECKPOINT_EVERY
            from marathon_tf.task.checkpoints import newest_checkpoint

            found = newest_checkpoint(self.logdir)
            fields["checkpoint"] = {"step": found[0], "written_at": round(found[1], 3)} if found else None
        if self.decider and now >= self._next_goodput:
            self._next_goodput = now + _GOODPUT_EVERY
            fields["goodput"] = self.goodput()
        self.status.update(**fields)

    def goodput(self) -> dict[str, Any] | None:
        """The job's goodput now, from its events (the deciding task's: see :mod:`marathon_tf.contract.goodput`)."""
        return goodput(self.events.shared() or self.events.mine(), self.ctx.task, self.wall())

    def _report_rate(self, now: float) -> float | None:
        with self._lock:
            while self._reports and self._reports[0] < now - REPORT_WINDOW:
                self._reports.popleft()
            if not self._first_step_seen or self._run_started is None:
                return None
            span = min(REPORT_WINDOW, now - self._run_started)
            return round(len(self._reports) / span, 3) if span > 0 else None

    def _server_is_up(self, how: str = "") -> None:
        """The program's TF server answers (once per run: the look stops)."""
        with self._lock:
            if self._server_up is not False:
                return
            self._server_up, self._server_look = True, None
        self.status.update(server_up=True)
        self.events.record(T.SERVER_UP, f"TF server up at {self._own_address}{how}")

    def _await_server(self, run: int) -> None:
        """Look at the program's own TF server until it answers (every 0.5 s, then every 5 s)."""
        started = self.clock()
        while self._server_look == run and self.clock() - started < 3600:
            if self.probe(cast(str, self._own_address)) == P.ANSWERS:  # set before this thread starts
                if self._server_look == run:
                    self._server_is_up()
                return
            time.sleep(0.5 if self.clock() - started < 30 else 5.0)
