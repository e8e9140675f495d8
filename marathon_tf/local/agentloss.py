"""An agent lost and found: its tasks' TASK_UNREACHABLE, the app's ``unreachableStrategy``, the return.

What a Mesos master and Marathon 1.4+ do (as Marathon documents unreachable tasks):

* the master declares an agent unreachable (a real one after ``--agent_ping_timeout`` ×
  ``--max_agent_ping_timeouts``, 75 s by default; here at once) and sends TASK_UNREACHABLE for
  each of its tasks; Marathon keeps the instance (condition ``Unreachable``), counting it;
* after ``inactiveAfterSeconds`` the instance is ``UnreachableInactive``: no longer counted, so a
  replacement is launched (on another agent, this one offers nothing); after
  ``expungeAfterSeconds`` it is expunged (forgotten). ``"disabled"`` never does either. (A real
  Marathon checks non-zero values only every ``--reconciliation_interval``, 10 min by default;
  here every scheduler pass.)
* an agent that comes back re-registers: its tasks that still run are TASK_RUNNING again (one
  already replaced is killed once ``expungeAfterSeconds`` has passed, at once if it has; an
  expunged one is killed as an unknown task), those that ended meanwhile report how, and, when the
  agent itself had died, those it no longer has are TASK_GONE.

An app that sets no ``unreachableStrategy`` gets the played version's default (0/0 from 1.4.9 and 1.5.1,
300/600 s on 1.4.0 – 1.4.8 and 1.5.0: ``versions.Played.unreachable_default``).

``unreachable`` (a partition) leaves an agent's processes running; ``down`` (the agent died) kills
them. Killing a task whose agent is lost expunges it (Mesos cannot reach it).
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Protocol

from .agents import Agent, Agents
from .events import EventBus
from .health import HealthMonitor
from .launcher import Launcher
from .offers import OfferStats
from .state import AppState, State, Task
from .taskscope import Grants

__all__ = ["AgentLoss", "Host", "strategy_seconds"]


class Host(Protocol):
    """What the scheduler (:class:`marathon_tf.local.scheduler.Scheduler`) lends its side of lost agents: the
    cluster's state, the task processes and health checks it keeps, and what it does to a task."""

    state: State
    agents: Agents
    offers: OfferStats
    launcher: Launcher
    bus: EventBus
    grants: Grants | None
    procs: dict[str, asyncio.subprocess.Process]
    monitors: dict[str, HealthMonitor]
    watchers: dict[str, asyncio.Task]
    launched: dict[str, tuple[dict, dict[str, str]]]

    def wake(self) -> None: ...
    def agent_registered(self, agent_id: str) -> None: ...
    def monitor(self, task: Task) -> None: ...
    def set_status(self, task: Task, state: str, message: str) -> None: ...
    def finish(self, app: AppState, task: Task, state: str, message: str) -> None: ...
    def instance_changed(self, task: Task, condition: str) -> None: ...
    def scale_run_spec(self, app_id: str) -> None: ...
    def kill(self, task: Task, reason: str, grace: float | None = None, decommission: bool = False) -> None: ...


def strategy_seconds(spec: dict) -> tuple[float, float] | None:
    """``(inactiveAfterSeconds, expungeAfterSeconds)`` of an app, None when ``"disabled"``."""
    strategy = spec.get("unreachableStrategy")
    if strategy == "disabled":
        return None
    strategy = strategy if isinstance(strategy, dict) else {}
    return float(strategy.get("inactiveAfterSeconds") or 0), float(strategy.get("expungeAfterSeconds") or 0)


class AgentLoss:
    """The scheduler's side of lost agents (all on its event loop)."""

    def __init__(self, scheduler: Host) -> None:
        self.s = scheduler
        #: task id -> (state, message) of a task that ended while its agent was lost.
        self._exits: dict[str, tuple[str, str]] = {}
        #: task id -> (task, process): expunged tasks whose processes still run on a lost agent.
        self._orphans: dict[str, tuple[Task, asyncio.subprocess.Process]] = {}
        #: task id -> when (monotonic) a task that came back after it was replaced is killed.
        self._doomed: dict[str, float] = {}

    def orphan_tasks(self) -> list[Task]:
        return [task for task, _ in self._orphans.values()]

    def _tasks_on(self, agent: Agent) -> list[Task]:
        return [t for a in self.s.state.apps.values() for t in a.tasks.values() if t.agent_id == agent.id and t.active]

    def lose(self, agent: Agent, kill: bool) -> list[str]:
        """The master lost contact with ``agent`` (``kill``: it died, with its processes); the ids
        of the tasks that became TASK_UNREACHABLE."""
        now = time.monotonic()
        changed = []
        agent.state = "down" if kill or agent.state == "down" else "unreachable"
        agent.lost_at = agent.lost_at or now
        for task in self._tasks_on(agent):
            if task.unreachable_since is None:
                task.unreachable_since = now
                monitor = self.s.monitors.pop(task.id, None)
                if monitor:
                    monitor.stop()
                self.s.set_status(task, "TASK_UNREACHABLE", f"Agent {agent.hostname} ({agent.id}) is unreachable")
                changed.append(task.id)
            if kill:
                self._kill(self.s.procs.get(task.id))
        if kill:
            for task_id, (task, proc) in list(self._orphans.items()):
                if task.agent_id == agent.id:
                    self._kill(proc)
                    del self._orphans[task_id]
        self.s.offers.forget_agent(agent.id)
        self.s.agent_registered(agent.id)  # the master removes the agent, and its offer filters with it
        self.s.wake()
        return changed

    def _kill(self, proc: asyncio.subprocess.Process | None) -> None:
        if proc is not None:
            self.s.launcher.signal_group(proc.pid, signal.SIGKILL)

    def back(self, agent: Agent) -> None:
        """``agent`` re-registered with the master."""
        died = agent.state == "down"
        agent.state, agent.lost_at = "active", None
        self.s.agent_registered(agent.id)  # offered at once
        agent.reregistered_time = time.time()
        for task_id, (task, proc) in list(self._orphans.items()):
            if task.agent_id == agent.id:  # Marathon forgot it: an unknown task is killed
                del self._orphans[task_id]
                self._kill(proc)
                self.s.bus.publish("unknown_instance_terminated_event", instanceId=task.instance_id,
                                   runSpecId=task.app_id, condition="Killed")
        for task in self._tasks_on(agent):
            if task.unreachable_since is None:
                continue
            app = self.s.state.apps[task.app_id]
            ended = self._exits.pop(task.id, None)
            if died or ended is None and task.id not in self.s.procs:
                ended = ("TASK_GONE", f"Agent {agent.hostname} re-registered without this task")
            if ended is not None:
                self.s.finish(app, task, *ended)
                continue
            since, task.unreachable_since = task.unreachable_since, None
            self.s.set_status(task, "TASK_RUNNING", "")
            self.s.monitor(task)
            if task.inactive:  # replaced meanwhile: killed once expungeAfterSeconds has passed
                seconds = strategy_seconds(app.run_def or app.definition) or (0.0, 0.0)
                self._doomed[task.id] = since + seconds[1]
        self.s.wake()

    def expire(self, app: AppState) -> None:
        """Apply ``app``'s unreachableStrategy to its lost tasks (every scheduler pass)."""
        now = time.monotonic()
        seconds = strategy_seconds(app.run_def or app.definition)
        for task in list(app.tasks.values()):
            if task.unreachable_since is not None and seconds is not None:
                elapsed = now - task.unreachable_since
                if not task.inactive and elapsed >= seconds[0]:
                    task.inactive = True
                    self.s.instance_changed(task, "UnreachableInactive")
                    self.s.scale_run_spec(app.id)  # 1.4 - 1.7: dropped while a deployment holds the app
                if task.inactive and elapsed >= seconds[1]:
                    self.expunge(task)
            elif task.id in self._doomed and now >= self._doomed[task.id]:
                del self._doomed[task.id]
                self.s.kill(task, "expunged: it came back after it was replaced")

    def expunge(self, task: Task) -> None:
        """Forget a task of a lost agent; a process of it that still runs is killed when the agent is back."""
        app = self.s.state.apps.get(task.app_id)
        if app is not None:
            app.tasks.pop(task.id, None)
            self.s.state.touch()
        proc = self.s.procs.pop(task.id, None)
        self.s.launched.pop(task.id, None)
        if self.s.grants is not None:
            self.s.grants.revoke(task.id, Path(task.sandbox))
        self._exits.pop(task.id, None)
        if proc is not None and proc.returncode is None:
            self._orphans[task.id] = (task, proc)
        self.s.wake()

    def started_while_lost(self, task: Task, proc: asyncio.subprocess.Process) -> None:
        """A task's process started after its agent was lost: a dead agent's dies."""
        agent = self.s.agents.by_id(task.agent_id)
        if agent is not None and agent.state == "down":
            self._kill(proc)

    def exited_while_lost(self, task: Task, state: str, message: str) -> None:
        """A lost agent's task ended: told when the agent is back (if Marathon still knows it)."""
        self.s.procs.pop(task.id, None)
        self.s.watchers.pop(task.id, None)
        app = self.s.state.apps.get(task.app_id)
        if self._orphans.pop(task.id, None) is None and app is not None and task.id in app.tasks:
            self._exits[task.id] = (state, message)

    async def stop_orphans(self, grace: float) -> None:
        """At shutdown: every process of an expunged task stops too."""
        await asyncio.gather(*(self.s.launcher.terminate(proc, grace) for _, proc in self._orphans.values()),
                             return_exceptions=True)
        self._orphans.clear()
