"""Keeps every app's tasks at its target: launches, relaunches with backoff, kills.

Marathon's scheduler in miniature. A reconcile pass per app compares the tasks
of the current run spec (``AppState.run_def``/``target``, set by deployment
steps) with the target: it kills tasks of an old config (all at once when the
upgrade strategy allows no over-capacity, else after the new ones are healthy)
and surplus tasks (``killSelection``), and launches missing ones once the
backoff delay has passed. Every exit, even code 0, is relaunched; TASK_FAILED
and TASK_FINISHED grow the delay, TASK_KILLED does not (FACTS §5.7).
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Optional

from .events import EventBus
from .health import HealthMonitor
from .launcher import FetchError, Launcher, last_line, task_env
from .state import AGENT_ID, AppState, State, Task, now_ts

__all__ = ["Scheduler"]

_CONDITION = {"TASK_STAGING": "Staging", "TASK_RUNNING": "Running", "TASK_KILLING": "Killing",
              "TASK_FINISHED": "Finished", "TASK_FAILED": "Failed", "TASK_KILLED": "Killed",
              "TASK_ERROR": "Error"}


class Scheduler:
    """Runs on the server's event loop; all state changes happen there."""

    def __init__(self, state: State, launcher: Launcher, bus: EventBus, kill_grace: float = 3.0,
                 shutdown_grace: float = 2.0) -> None:
        self.state = state
        self.launcher = launcher
        self.bus = bus
        self.kill_grace = kill_grace
        self.shutdown_grace = shutdown_grace
        self._procs: dict[str, asyncio.subprocess.Process] = {}
        self._monitors: dict[str, HealthMonitor] = {}
        self._watchers: dict[str, asyncio.Task] = {}
        self._terminating: dict[str, asyncio.Future] = {}
        self._wake = asyncio.Event()
        self.stopping = False
        #: Variables every task gets unless its app sets its own credentials (auth of ``local serve``).
        self.extra_env: dict[str, str] = {}

    # -- loop -------------------------------------------------------------------------
    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        """Reconcile every 100 ms or when woken, until ``shutdown``."""
        while not self.stopping:
            for app in list(self.state.apps.values()):
                self.reconcile(app)
            try:
                await asyncio.wait_for(self._wake.wait(), 0.1)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()

    def reconcile(self, app: AppState) -> None:
        if app.run_def is None or self.stopping:
            return
        strategy = app.run_def.get("upgradeStrategy") or {}
        live = [t for t in app.active_tasks() if not t.killing]
        new = [t for t in live if t.config_version == app.run_config_version]
        old = [t for t in live if t.config_version != app.run_config_version]
        no_overcap = strategy.get("maximumOverCapacity", 1) == 0 or strategy.get("minimumHealthCapacity", 1) == 0
        if old:
            n_checks = len(app.run_def.get("healthChecks") or [])
            ready = [t for t in new if t.running and (n_checks == 0 or t.healthy(n_checks))]
            if no_overcap or app.target == 0 or len(ready) >= app.target:
                for task in old:
                    self.kill(task, "upgrade")
        if len(new) > app.target:
            oldest_first = app.run_def.get("killSelection") == "OLDEST_FIRST"
            surplus = sorted(new, key=lambda t: t.staged_at, reverse=not oldest_first)[: len(new) - app.target]
            for task in surplus:
                self.kill(task, "scale down")
        missing = app.target - len(new)
        if missing <= 0:
            app.queued_since = None
            return
        app.queued_since = app.queued_since or now_ts()
        if no_overcap and any(t.killing and t.config_version != app.run_config_version for t in app.active_tasks()):
            return
        if time.monotonic() < app.launch_after:
            return
        for _ in range(missing):
            self._launch(app)

    # -- launching --------------------------------------------------------------------
    def _launch(self, app: AppState) -> None:
        run_def = app.run_def
        task_id, instance_id = self.state.new_task_id(app.id)
        try:
            ports = self.launcher.ports.allocate(len(run_def.get("portDefinitions") or []))
        except OSError:
            return
        task = Task(task_id, app.id, instance_id, app.version, app.run_config_version or app.version, ports,
                    str(self.launcher.sandbox(task_id)))
        app.tasks[task_id] = task
        self._status(task, "TASK_STAGING", "")
        self._watchers[task_id] = asyncio.ensure_future(self._start(app, task, run_def))

    async def _start(self, app: AppState, task: Task, run_def: dict) -> None:
        try:
            box = self.launcher.prepare(run_def, task.id)
            env = task_env(run_def, task.id, task.version, task.ports, str(box), self.state.host)
            own = run_def.get("env") or {}
            if not {"MARATHON_TOKEN", "MARATHON_USER"} & set(own):
                env.update(self.extra_env)  # credentials to call the runner back (local/security.py)
            if task.killing or self.stopping:
                raise FetchError("Task killed before it was started")
            proc = await self.launcher.spawn(run_def, env, box)
        except (FetchError, OSError) as exc:
            state = "TASK_KILLED" if task.killing else "TASK_FAILED"
            self._finish(app, task, state, str(exc))
            return
        self._procs[task.id] = proc
        task.pid = proc.pid
        task.started_at = now_ts()
        task.started_mono = time.monotonic()
        self._status(task, "TASK_RUNNING", "")
        if task.killing:
            asyncio.ensure_future(self.launcher.terminate(proc, self.shutdown_grace))
        checks = run_def.get("healthChecks") or []
        if checks:
            monitor = HealthMonitor(task, checks, self.state.host, env, self._health_changed, self._unhealthy)
            self._monitors[task.id] = monitor
            monitor.start()
        code = await proc.wait()
        if task.killing and task.id in self._terminating:
            await self._terminating[task.id]  # the rest of its group gets the grace period too
        else:
            self.launcher.reap_group(proc.pid)
        if task.killing:
            state, message = "TASK_KILLED", "Command terminated with signal Terminated" if code < 0 else \
                f"Command exited with status {code}"
        elif code == 0:
            state, message = "TASK_FINISHED", "Command exited with status 0"
        elif code < 0:
            state, message = "TASK_FAILED", f"Command terminated with signal {signal.strsignal(-code) or -code}"
        else:
            state, message = "TASK_FAILED", f"Command exited with status {code}"
            if code in (126, 127):  # the command could not be run: say why (the shell's last words)
                why = last_line(Path(task.sandbox) / "stderr")
                message += f": {why}" if why else ""
        self._finish(app, task, state, message)

    def _finish(self, app: AppState, task: Task, state: str, message: str) -> None:
        monitor = self._monitors.pop(task.id, None)
        if monitor:
            monitor.stop()
        self._procs.pop(task.id, None)
        self._watchers.pop(task.id, None)
        self._status(task, state, message)
        if state in ("TASK_FAILED", "TASK_KILLED", "TASK_ERROR"):
            app.last_task_failure = {"appId": app.id, "host": self.state.host, "message": message,
                                     "state": state, "taskId": task.id, "timestamp": now_ts(),
                                     "version": task.version, "slaveId": AGENT_ID}
        if state in ("TASK_FAILED", "TASK_FINISHED") and task.config_version == app.run_config_version \
                and app.run_def is not None:
            spec = app.run_def
            base, factor = float(spec.get("backoffSeconds", 1)), float(spec.get("backoffFactor", 1.15))
            cap = float(spec.get("maxLaunchDelaySeconds", 300))
            app.backoff = base if app.backoff is None else min(app.backoff * factor, cap)
            app.launch_after = time.monotonic() + app.backoff
        app.tasks.pop(task.id, None)
        self.wake()

    def _status(self, task: Task, state: str, message: str) -> None:
        task.state = state
        self.bus.publish("status_update_event", slaveId=AGENT_ID, taskId=task.id, taskStatus=state,
                         message=message, appId=task.app_id, host=self.state.host,
                         ipAddresses=[{"ipAddress": self.state.host, "protocol": "IPv4"}],
                         ports=list(task.ports), version=task.version)
        self.bus.publish("instance_changed_event", instanceId=task.instance_id,
                         condition=_CONDITION.get(state, "Unknown"), runSpecId=task.app_id, agentId=AGENT_ID,
                         host=self.state.host, runSpecVersion=task.version)

    # -- health -----------------------------------------------------------------------
    def _health_changed(self, task: Task, alive: bool) -> None:
        self.bus.publish("health_status_changed_event", appId=task.app_id, instanceId=task.instance_id,
                         version=task.version, alive=alive)
        self.wake()

    def _unhealthy(self, task: Task, reason: str) -> None:
        self.bus.publish("unhealthy_instance_kill_event", appId=task.app_id, taskId=task.id,
                         instanceId=task.instance_id, version=task.version, reason=reason,
                         host=self.state.host, slaveId=AGENT_ID)
        self.kill(task, "unhealthy")

    # -- killing ----------------------------------------------------------------------
    def kill(self, task: Task, reason: str, grace: Optional[float] = None) -> None:
        """Kill a task: TASK_KILLING now, SIGTERM then SIGKILL after the grace period."""
        if task.killing or not task.active:
            return
        task.killing = True
        if task.state == "TASK_STAGING":
            return
        self._status(task, "TASK_KILLING", reason)
        proc = self._procs.get(task.id)
        if proc is not None:
            app = self.state.apps.get(task.app_id)
            spec = (app.run_def or app.definition) if app else {}
            if grace is None:
                grace = float(spec.get("taskKillGracePeriodSeconds") or self.kill_grace)
            done = asyncio.ensure_future(self.launcher.terminate(proc, grace))
            self._terminating[task.id] = done
            done.add_done_callback(lambda _f, task_id=task.id: self._terminating.pop(task_id, None))

    def signal_task(self, task: Task, sig: int) -> bool:
        """Send ``sig`` to a task's process group without Marathon knowing (a simulated crash)."""
        proc = self._procs.get(task.id)
        if proc is None:
            return False
        self.launcher.signal_group(proc.pid, sig)
        return True

    async def shutdown(self) -> None:
        """Stop every task with its grace period (the app's ``taskKillGracePeriodSeconds``, else the
        short ``shutdown_grace``; capped by the launcher) and wait until all are gone."""
        self.stopping = True
        longest = self.shutdown_grace
        for app in self.state.apps.values():
            spec = app.run_def or app.definition or {}
            grace = min(float(spec.get("taskKillGracePeriodSeconds") or self.shutdown_grace),
                        self.launcher.kill_grace_cap)
            for task in list(app.tasks.values()):
                task.killing = False
                self.kill(task, "shutdown", grace=grace)
                longest = max(longest, grace)
        watchers = list(self._watchers.values())
        if watchers:
            await asyncio.wait(watchers, timeout=longest + 5)
        self.launcher.kill_all_now()
