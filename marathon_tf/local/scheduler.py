"""Keeps every app's tasks at its target: launches, relaunches with backoff, kills.

Modelled on Marathon 1.11 and Mesos 1.11 (the tests under tests/local/ cite their code).

Marathon's scheduler in miniature. A reconcile pass per app compares the tasks
of the current run spec (``AppState.run_def``/``target``, set by deployment
steps) with the target: it kills tasks of an old config (all at once when the
upgrade strategy allows no over-capacity, else after the new ones are healthy)
and surplus tasks (``killSelection``), and launches missing ones once the
backoff delay has passed. Every exit, even code 0, is relaunched; TASK_FAILED
and TASK_FINISHED grow the delay, TASK_KILLED does not (as Marathon 1.11's rate limiter counts them).

A task is launched on the first agent whose offer fits it (:mod:`marathon_tf.mesos.placement`; agents with
fewer tasks first), or waits in the queue with the offers' reasons counted (``offers.py``). Which agents offer is
Mesos's and Marathon 1.11's (``revive.py``): an offer nobody used is declined with a filter (``offer_filter``
seconds, Marathon's ``--decline_offer_duration``), Marathon suppresses offers while nothing wants them and revives
them (clearing the filters) when a task is queued, at most once per ``revive_interval``
(``--min_revive_offers_interval``); the master offers agents with GPUs only to a Marathon with ``gpu_resources``
(``filter_gpu_resources``, the Mesos master's ``--filter_gpu_resources``). Surplus tasks are killed in Marathon
1.11's order (``scaling.py``), and a kill is a ``TASK_KILLING`` first only with the ``task_killing`` feature
(Marathon's ``--enable_features task_killing`` gives its framework the ``TASK_KILLING_STATE`` capability; without it
Mesos's command executor sends none): the task stays TASK_RUNNING, in ``/v2/apps`` and Mesos-DNS, until it is
TASK_KILLED. An agent that is lost (``agentloss.py``) turns its tasks TASK_UNREACHABLE; the app's
``unreachableStrategy`` then decides when they are replaced and forgotten.

Playing Marathon 1.4 – 1.7 (``versions.py``), an app's missing tasks are not always in the launch
queue (``unqueued``): a task of an app a deployment holds that dies after the app's own step is done is
not relaunched (its ``ScaleRunSpec`` is dropped for the lock), and a cancelled deployment purges its
apps' queued tasks; a deployment step that starts the app, a task exit while no deployment holds it, or
the periodic scale check (``scale_apps_interval``, which skips locked apps) queues them again.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

from marathon_tf.contract import taskauth
from marathon_tf.mesos.agents import free_resources
from marathon_tf.mesos.placement import Match, NoMatch, match
from marathon_tf.mesos.resources import Resource, ports_resource

from .agentloss import AgentLoss
from .agents import Agent, Agents, gpu_env
from .events import EventBus
from .health import HealthMonitor
from .launcher import FetchError, Launcher, last_line, task_env, wants_gpus
from .offers import OfferStats
from .revive import DECLINE_OFFER_DURATION, MIN_REVIVE_OFFERS_INTERVAL, OfferFilters, ReviveOffers
from .scaling import surplus
from .state import FRAMEWORK_ID, AppState, State, Task, now_ts, parent_path
from .taskscope import TOKEN_FILE_VAR, Grants
from .versions import SCALE_APPS_INTERVAL

__all__ = ["Scheduler", "ALLOCATION_INTERVAL", "SCALE_APPS_INTERVAL"]

#: The Mesos master's ``--allocation_interval`` (1 s by default): an agent whose offer was used or declined
#: is offered again at the next batch allocation.
ALLOCATION_INTERVAL = 1.0

_CONDITION = {"TASK_STAGING": "Staging", "TASK_RUNNING": "Running", "TASK_KILLING": "Killing",
              "TASK_FINISHED": "Finished", "TASK_FAILED": "Failed", "TASK_KILLED": "Killed",
              "TASK_ERROR": "Error", "TASK_UNREACHABLE": "Unreachable", "TASK_GONE": "Gone"}


class Scheduler:
    """Runs on the server's event loop; all state changes happen there."""

    def __init__(self, state: State, launcher: Launcher, bus: EventBus, kill_grace: float = 3.0,
                 shutdown_grace: float = 2.0, agents: Agents | None = None, gpu_restricted: bool = True, *,
                 task_killing: bool = False, gpu_capable: bool = True, filter_gpu_resources: bool = True,
                 offer_filter: float = DECLINE_OFFER_DURATION,
                 revive_interval: float = MIN_REVIVE_OFFERS_INTERVAL,
                 scale_apps_interval: float = SCALE_APPS_INTERVAL) -> None:
        self.state = state
        self.launcher = launcher
        self.bus = bus
        self.agents = agents or Agents(launcher.state_dir, state.host)
        self.offers = OfferStats()
        #: ``--gpu_scheduling_behavior restricted`` with ``gpu_resources`` enabled (mesos/placement.py).
        self.gpu_restricted = gpu_restricted
        #: Marathon's ``task_killing`` feature: a kill is TASK_KILLING first.
        self.task_killing = task_killing
        #: Agents with GPUs are offered only to a Marathon with ``gpu_resources`` (``gpu_capable``) while
        #: the master filters them (``--filter_gpu_resources``, its default).
        self.gpu_capable, self.filter_gpu_resources = gpu_capable, filter_gpu_resources
        #: Declined offers: filtered for ``offer_filter`` seconds; suppressed and revived by ``revive``.
        self.offer_filter = offer_filter
        self.filters = OfferFilters()
        self.revive = ReviveOffers(revive_interval, time.monotonic())
        self._changed = False  # an instance changed since the last pass (a state for the revive stream)
        self._round: _Round | None = None
        #: agent id -> when its last offer was made: the master offers an agent again at its next batch
        #: allocation (``--allocation_interval``), at once after a revive or when the agent (re)registers.
        self._offered_at: dict[str, float] = {}
        self.kill_grace = kill_grace
        self.shutdown_grace = shutdown_grace
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self.monitors: dict[str, HealthMonitor] = {}
        self.watchers: dict[str, asyncio.Task] = {}
        self._terminating: dict[str, asyncio.Future] = {}
        #: task id -> (its app's run spec, its environment) as launched (health checks after a return).
        self.launched: dict[str, tuple[dict, dict[str, str]]] = {}
        self.loss = AgentLoss(self)
        self._wake = asyncio.Event()
        self.stopping = False
        #: With auth on (``local serve --auth``): every task gets a token of its own, scoped to its job,
        #: unless its app brings its own credentials (:mod:`~marathon_tf.local.taskscope`).
        self.grants: Grants | None = None
        #: The owner key of whoever runs this runner (``() -> bytes | None``): each task gets its job's key,
        #: derived from it, in a file of its sandbox (:mod:`marathon_tf.contract.taskauth`); its owner's CLI
        #: derives the same key to steer the job (``checkpoint``, ``scale``'s save).
        self.owner_key: Callable[[], bytes | None] = taskauth.owner_key
        #: Apps whose missing tasks Marathon (1.4 – 1.7) has not queued (see the module).
        self.unqueued: set[str] = set()
        #: Whether a deployment holds the app (``locked``), and whether a step of it is starting the app
        #: now (``starting``: its actor queues the app's tasks itself); the deployments tell (server.py).
        self.locked: Callable[[str], bool] = lambda app_id: False
        self.starting: Callable[[str], bool] = lambda app_id: False
        #: The deployment lock of 1.4 – 1.7 (``versions.Played.deployment_lock``).
        self.deployment_lock = False
        #: ``GROUP_BY`` as 1.10.34+ / 1.11.18+ check it (``versions.Played.group_by_even``).
        self.group_by_even = False
        #: an app's ``GPU_SCHEDULING_BEHAVIOR`` label is read (1.5.7+: ``Played.knows_gpu_scheduling_behavior``)
        self.gpu_label = True
        #: scalar attributes as 1.4 – 1.6.0 compare them, ``1,024`` (``versions.Played.scalars_grouped``).
        self.scalars_grouped = False
        #: Marathon's ``--scale_apps_interval`` (s): the periodic scale check.
        self.scale_apps_interval = scale_apps_interval
        self._next_scale_check = time.monotonic() + scale_apps_interval

    # -- loop -------------------------------------------------------------------------
    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        """A pass every 100 ms or when woken, until ``shutdown``."""
        while not self.stopping:
            if time.monotonic() >= self._next_scale_check:
                self.scale_check()
            self.run_pass()
            try:
                await asyncio.wait_for(self._wake.wait(), 0.1)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()

    def run_pass(self) -> None:
        """Every app: its kills, then Marathon's suppress/revive told what wants offers, then launches on
        this pass's offers; the offers no launch used are declined (filtered), also those made while
        every waiting app is backed off (Marathon declines an offer no launcher wants)."""
        if self.stopping:
            return
        now = time.monotonic()
        queued = {app.id: self.reconcile(app) for app in list(self.state.apps.values())}
        # the instances wanting offers, by app and configuration: a new configuration's are new instances
        # (Marathon's replace step decommissions the old scheduled ones and schedules new ones, which its
        # revive logic sees as a new version: a revive)
        keys = {a: f"{a}@{getattr(self.state.apps.get(a), 'run_config_version', '')}" for a in queued}
        wanting = {keys[a]: n for a, (n, _) in queued.items() if n > 0}
        changed, self._changed = self._changed, False
        self.apply(self.revive.observe(wanting, [keys[a] for a, (n, d) in queued.items() if n > 0 and d], now,
                                       changed=changed))
        self._round = _Round(now)
        try:
            for app_id, (missing, delayed) in queued.items():
                app = self.state.apps.get(app_id)
                if app is not None and missing > 0 and not delayed:
                    for i in range(missing):
                        if not self._launch(app, count_offers=i == 0):
                            break
            if self._round.offered is None and wanting:  # offers made while every waiting app is backed off
                self._round.offer(self)
            for agent in self._round.offered or []:  # what no launch used is declined
                self._offered_at[agent.id] = now
                if agent.id not in self._round.used:
                    self.filters.decline(agent.id, self._round.free[agent.id], now, self.offer_filter)
        finally:
            self._round = None

    def scale_check(self) -> None:
        """Marathon's periodic ``ScaleRunSpecs``: every app no deployment holds gets its missing tasks
        queued (a locked one is skipped, as Marathon's ``withLockFor`` does)."""
        self._next_scale_check = time.monotonic() + self.scale_apps_interval
        for app_id in sorted(self.unqueued):
            if not self.locked(app_id):
                self.unqueued.discard(app_id)
                self.wake()

    def purge(self, app_ids: list[str]) -> None:
        """``launchQueue.purge``: these apps' missing tasks leave the queue until something queues them."""
        self.unqueued.update(a for a in app_ids if a in self.state.apps)
        self.wake()

    def queued(self, app_id: str) -> None:
        """A deployment step queues the app's missing tasks (``TaskStartActor`` / ``TaskReplaceActor``)."""
        if app_id in self.unqueued:
            self.unqueued.discard(app_id)
            self.wake()

    def apply(self, calls: list[str]) -> None:
        """Marathon's calls to Mesos: a revive or an unsuppress clears the offer filters, and the master
        makes its offers at once (``reviveOffers`` → ``generateOffers``)."""
        if any(c in ("revive", "unsuppress") for c in calls):
            self.filters.clear()
            self._offered_at.clear()

    def agent_registered(self, agent_id: str) -> None:
        """An agent (re)registered or was removed: no filter, no wait for the next batch allocation
        (``addSlave`` → ``generateOffers(slaveId)``; ``removeSlave`` → ``removeFilters``)."""
        self.filters.forget(agent_id)
        self._offered_at.pop(agent_id, None)

    def leader_elected(self) -> None:
        """A new Marathon leader (after a failover): its revive stream starts over."""
        self.apply(self.revive.restart(time.monotonic()))
        self.wake()

    def reconcile(self, app: AppState) -> tuple[int, bool]:
        """Kill what ``app`` has too many of; (tasks that want offers, whether it is backed off)."""
        if app.run_def is None or self.stopping:
            return 0, False
        self.loss.expire(app)
        strategy = app.run_def.get("upgradeStrategy") or {}
        live = [t for t in app.active_tasks() if not t.killing and not t.inactive]
        new = [t for t in live if t.config_version == app.run_config_version]
        old = [t for t in live if t.config_version != app.run_config_version]
        no_overcap = strategy.get("maximumOverCapacity", 1) == 0 or strategy.get("minimumHealthCapacity", 1) == 0
        if old:
            n_checks = len(app.run_def.get("healthChecks") or [])
            ready = [t for t in new if t.running and (n_checks == 0 or t.healthy(n_checks))]
            if no_overcap or app.target == 0 or len(ready) >= app.target:
                for task in old:
                    self.kill(task, "upgrade", decommission=True)
        for task in surplus(app.run_def, new, app.target, lambda t: self.agents.by_id(t.agent_id)):
            self.kill(task, "scale down", decommission=True)
        missing = app.target - len(new)
        if missing <= 0:
            app.queued_since = None
            self.offers.finished(app.id)
            return 0, False
        if app.id in self.unqueued:  # not in the launch queue (1.4 – 1.7: a lock, a purge)
            app.queued_since = None
            return 0, False
        app.queued_since = app.queued_since or now_ts()
        if no_overcap and any(t.killing and t.config_version != app.run_config_version for t in app.active_tasks()):
            return 0, False
        return missing, time.monotonic() < app.launch_after

    # -- placement --------------------------------------------------------------------
    def active_tasks(self) -> list[Task]:
        return [t for a in self.state.apps.values() for t in a.tasks.values() if t.active]

    def used(self, agent: Agent) -> list[Resource]:
        """What the tasks on ``agent`` take of it."""
        return [r for t in self.active_tasks() if t.agent_id == agent.id for r in t.consumed]

    def _offer(self, app: AppState, agent: Agent, tasks: list[Task], held_ports: list[int]) -> Match | NoMatch:
        """Match one task of ``app`` against ``agent``'s free resources (``held_ports``: the ports the runner's tasks,
        orphans included, hold)."""
        on_agent = [t for t in tasks if t.agent_id == agent.id]
        placed = [self.agents.by_id(t.agent_id) for t in app.active_tasks()
                  if t.config_version == app.run_config_version and not t.killing]
        return match(app.run_def or {}, agent, free_resources(agent, [r for t in on_agent for r in t.consumed]),
                     [a for a in placed if a is not None], default_roles=self.agents.roles(),
                     used_gpus=[g for t in on_agent for g in t.gpus],
                     taken_ports=held_ports,
                     gpu_restricted=self.gpu_restricted, group_by_even=self.group_by_even,
                     scalars_grouped=self.scalars_grouped, gpu_label=self.gpu_label)

    # -- launching --------------------------------------------------------------------
    def offered(self, now: float) -> list[Agent]:
        """The agents that offer Marathon their free resources now: active ones, none while Marathon
        suppresses offers, none with GPUs unless Marathon may have them, each at most once per
        allocation interval, none whose declined offer is filtered."""
        if self.revive.suppressed:
            return []
        out = []
        for agent in self.agents.active():
            if self.filter_gpu_resources and not self.gpu_capable and agent.gpus > 0:
                continue
            if now < self._offered_at.get(agent.id, -ALLOCATION_INTERVAL) + ALLOCATION_INTERVAL:
                continue
            if not self.filters.filtered(agent.id, free_resources(agent, self.used(agent)), now):
                out.append(agent)
        return out

    def _launch(self, app: AppState, count_offers: bool = True) -> bool:
        """Launch one task on the first agent whose offer fits (agents with fewer tasks first);
        False when none does (the task stays in the queue)."""
        run_def = app.run_def
        assert run_def is not None  # reconcile launches only apps with a run spec
        tasks = self.active_tasks()
        load = {a.id: 0 for a in self.agents.all}
        for t in tasks:
            load[t.agent_id] = load.get(t.agent_id, 0) + 1
        round_ = self._round or _Round(time.monotonic())
        if round_.offered is None:
            round_.offer(self)
        offered = [a for a in round_.offered or [] if a.active]
        held_ports = [p for t in tasks + self.loss.orphan_tasks() for p in t.ports]
        results = [self._offer(app, agent, tasks, held_ports)
                   for agent in sorted(offered, key=lambda a: (load[a.id], a.index))]
        if count_offers:
            self.offers.record(app.id, results)
        chosen = next((r for r in results if isinstance(r, Match)), None)
        if chosen is None:
            return False
        agent = cast(Agent, chosen.agent)  # _offer matched one of self.agents
        round_.used.add(agent.id)
        try:
            ports = self.launcher.ports.allocate(len(run_def.get("portDefinitions") or []),
                                                 candidates=chosen.port_candidates, host=agent.hostname,
                                                 keep=held_ports)
        except OSError:
            return False
        task_id, instance_id = self.state.new_task_id(app.id)
        consumed = list(chosen.consumed) + ([ports_resource(ports, chosen.port_role)] if ports else [])
        task = Task(task_id, app.id, instance_id, app.version, app.run_config_version or app.version, ports,
                    str(agent.sandboxes / task_id), agent_id=agent.id, host=agent.hostname,
                    consumed=tuple(consumed), gpus=chosen.gpus)
        app.tasks[task_id] = task
        self.set_status(task, "TASK_STAGING", "")
        self.watchers[task_id] = asyncio.ensure_future(self._start(app, task, run_def))
        return True

    async def _start(self, app: AppState, task: Task, run_def: dict) -> None:
        try:
            agent = self.agents.by_id(task.agent_id)
            box = self.launcher.prepare(run_def, task.id, Path(task.sandbox).parent)
            env = task_env(run_def, task.id, task.version, task.ports, str(box), task.host, agent_id=task.agent_id,
                           framework_id=FRAMEWORK_ID)
            if wants_gpus(run_def) and agent is not None and agent.gpus:
                env.update(gpu_env(task.gpus))  # what the agent's GPU isolator leaves visible
            own = run_def.get("env") or {}
            if self.grants is not None and not {"MARATHON_TOKEN", TOKEN_FILE_VAR, "MARATHON_USER"} & set(own):
                # a token of its own to call the runner back with, scoped to its job (local/taskscope.py)
                env[TOKEN_FILE_VAR] = self.grants.issue(task.id, task.app_id, box)
            owner = self.owner_key()
            if owner is not None:  # the job's key: only its tasks and its owner steer it (contract/taskauth.py)
                env[taskauth.KEY_FILE_VAR] = taskauth.write_task_key(taskauth.job_key(owner, parent_path(task.app_id)),
                                                                     box)
            if task.killing or self.stopping:
                raise FetchError("Task killed before it was started")
            if task.unreachable_since is not None:  # its agent was lost while the task was staged
                self.watchers.pop(task.id, None)
                return
            proc = await self.launcher.spawn(run_def, env, box)
        except (FetchError, OSError) as exc:
            state = "TASK_KILLED" if task.killing else "TASK_FAILED"
            self.finish(app, task, state, str(exc))
            return
        self.procs[task.id] = proc
        self.launched[task.id] = (run_def, env)
        task.pid = proc.pid
        task.started_at = now_ts()
        task.started_mono = time.monotonic()
        if task.unreachable_since is not None:  # lost while it was being started
            self.loss.started_while_lost(task, proc)
        else:
            self.set_status(task, "TASK_RUNNING", "")
            if task.killing:
                asyncio.ensure_future(self.launcher.terminate(proc, self.shutdown_grace))
            self.monitor(task)
        code = await proc.wait()
        if task.killing and task.id in self._terminating:
            await self._terminating[task.id]  # the rest of its group gets the grace period too
        else:
            self.launcher.reap_group(proc.pid)
        state, message = self._exit_status(task, code)
        if task.unreachable_since is not None:  # nobody hears of it until the agent is back
            self.loss.exited_while_lost(task, state, message)
            return
        self.finish(app, task, state, message)

    def monitor(self, task: Task) -> None:
        """Start the health checks of a running task."""
        spec, env = self.launched.get(task.id, ({}, {}))
        checks = spec.get("healthChecks") or []
        if checks:
            monitor = HealthMonitor(task, checks, task.host, env, self._health_changed, self._unhealthy,
                                    on_result=self.state.touch)
            self.monitors[task.id] = monitor
            monitor.start()

    def _exit_status(self, task: Task, code: int) -> tuple[str, str]:
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
        return state, message

    def finish(self, app: AppState, task: Task, state: str, message: str) -> None:
        """``task`` ended in ``state``: its health checks, process and grant go, its status update is sent,
        the app's last failure and launch backoff are kept, and its app is scaled back to its target."""
        if self.grants is not None:
            self.grants.revoke(task.id, Path(task.sandbox))
        monitor = self.monitors.pop(task.id, None)
        if monitor:
            monitor.stop()
        self.procs.pop(task.id, None)
        self.watchers.pop(task.id, None)
        self.launched.pop(task.id, None)
        self.set_status(task, state, message)
        if state in ("TASK_FAILED", "TASK_KILLED", "TASK_ERROR", "TASK_GONE"):
            app.last_task_failure = {"appId": app.id, "host": task.host, "message": message,
                                     "state": state, "taskId": task.id, "timestamp": now_ts(),
                                     "version": task.version, "slaveId": task.agent_id}
        if state in ("TASK_FAILED", "TASK_FINISHED") and task.config_version == app.run_config_version \
                and app.run_def is not None:
            spec = app.run_def
            base, factor = float(spec.get("backoffSeconds", 1)), float(spec.get("backoffFactor", 1.15))
            cap = float(spec.get("maxLaunchDelaySeconds", 300))
            app.backoff = base if app.backoff is None else min(app.backoff * factor, cap)
            app.launch_after = time.monotonic() + app.backoff
        app.tasks.pop(task.id, None)
        if task.config_version == app.run_config_version:
            self.scale_run_spec(app.id)
        self.wake()

    def scale_run_spec(self, app_id: str) -> None:
        """A task of ``app_id`` became terminal or UnreachableInactive: Marathon 1.4 – 1.7 send
        ``ScaleRunSpec``, which is dropped while a deployment holds the app and no step of it is starting the
        app, else queues every missing task."""
        if not self.deployment_lock:
            return
        if self.locked(app_id) and not self.starting(app_id):
            self.unqueued.add(app_id)
        else:
            self.unqueued.discard(app_id)

    def set_status(self, task: Task, state: str, message: str) -> None:
        """``task`` is now in ``state``: the status update and the instance change Marathon publishes."""
        task.state = state
        self._changed = True
        self.bus.publish("status_update_event", slaveId=task.agent_id, taskId=task.id, taskStatus=state,
                         message=message, appId=task.app_id, host=task.host,
                         ipAddresses=[{"ipAddress": task.host, "protocol": "IPv4"}],
                         ports=list(task.ports), version=task.version)
        self.instance_changed(task, _CONDITION.get(state, "Unknown"))

    def instance_changed(self, task: Task, condition: str) -> None:
        self.bus.publish("instance_changed_event", instanceId=task.instance_id, condition=condition,
                         runSpecId=task.app_id, agentId=task.agent_id, host=task.host, runSpecVersion=task.version)

    # -- health -----------------------------------------------------------------------
    def _health_changed(self, task: Task, alive: bool) -> None:
        self.bus.publish("health_status_changed_event", appId=task.app_id, instanceId=task.instance_id,
                         version=task.version, alive=alive)
        self.wake()

    def _unhealthy(self, task: Task, reason: str) -> None:
        self.bus.publish("unhealthy_instance_kill_event", appId=task.app_id, taskId=task.id,
                         instanceId=task.instance_id, version=task.version, reason=reason,
                         host=task.host, slaveId=task.agent_id)
        self.kill(task, "unhealthy")

    # -- killing ----------------------------------------------------------------------
    def kill(self, task: Task, reason: str, grace: float | None = None, decommission: bool = False) -> None:
        """Kill a task: SIGTERM then SIGKILL after the grace period, TASK_KILLING first only with the
        ``task_killing`` feature (one whose agent is lost cannot be reached: it is expunged).
        ``decommission``: Marathon changed the instance's goal (a scale down, an upgrade), which it
        publishes as an ``instance_changed_event`` of the unchanged condition (a goal change is a state
        change for Marathon 1.11's event generator)."""
        if task.killing or not task.active:
            return
        if task.unreachable_since is not None:
            self.loss.expunge(task)
            return
        task.killing = True
        self._changed = True
        if task.state == "TASK_STAGING":
            return
        if decommission:
            self.instance_changed(task, _CONDITION.get(task.state, "Unknown"))
        if self.task_killing:
            self.set_status(task, "TASK_KILLING", reason)
        proc = self.procs.get(task.id)
        if proc is not None:
            app = self.state.apps.get(task.app_id)
            spec = (app.run_def or app.definition) if app else {}
            if grace is None:
                grace = float(spec.get("taskKillGracePeriodSeconds") or self.kill_grace)
            done = asyncio.ensure_future(self.launcher.terminate(proc, grace))
            task_id = task.id
            self._terminating[task_id] = done
            done.add_done_callback(lambda _f: self._terminating.pop(task_id, None))

    def signal_task(self, task: Task, sig: int) -> bool:
        """Send ``sig`` to a task's process group without Marathon knowing (a simulated crash)."""
        proc = self.procs.get(task.id)
        if proc is None:
            return False
        self.launcher.signal_group(proc.pid, sig)
        return True

    def _shutdown_grace(self, app: AppState) -> float:
        """The grace ``app``'s tasks get when the runner stops: its ``taskKillGracePeriodSeconds``, else
        the short ``shutdown_grace``; capped by the launcher."""
        spec = app.run_def or app.definition or {}
        return min(float(spec.get("taskKillGracePeriodSeconds") or self.shutdown_grace), self.launcher.kill_grace_cap)

    def shutdown_plan(self) -> tuple[int, float]:
        """(active tasks, the longest grace one of them gets) if the runner stopped now."""
        graces = [self._shutdown_grace(app) for app in self.state.apps.values()
                  for task in app.tasks.values() if task.active]
        return len(graces), max(graces, default=0.0)

    async def shutdown(self) -> None:
        """Stop every task with its grace period (:meth:`_shutdown_grace`) and wait until all are gone."""
        self.stopping = True
        longest = self.shutdown_grace
        for app in self.state.apps.values():
            grace = self._shutdown_grace(app)
            for task in list(app.tasks.values()):
                task.killing = False
                self.kill(task, "shutdown", grace=grace)
                longest = max(longest, grace)
        await self.loss.stop_orphans(longest)
        watchers = list(self.watchers.values())
        if watchers:
            await asyncio.wait(watchers, timeout=longest + 5)
        self.launcher.kill_all_now()


class _Round:
    """One pass's offers: the agents offering (looked up on the first launch attempt, or at the end of
    a pass in which every waiting app is backed off), what each had free, which were used."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.offered: list[Agent] | None = None
        self.free: dict[str, list] = {}
        self.used: set[str] = set()

    def offer(self, scheduler: Scheduler) -> None:
        self.offered = scheduler.offered(self.now)
        self.free = {a.id: free_resources(a, scheduler.used(a)) for a in self.offered}
