"""Deployment plans and their execution, as Marathon 1.4 plans, runs and cancels them.

``plan_steps`` diffs the current root group against a target: a StopApplication
step for removed apps, a StartApplication step for new ones, then one step per
dependency layer with ScaleApplication (new app or scale-only change) or
RestartApplication (any other change). Unchanged apps get no action. The
``DeploymentManager`` locks apps (409 unless ``force``, which cancels the other
deployment with ``deployment_failed``), applies the target to the state at once
(as Marathon does) and walks the steps: a step is done when its apps have
exactly their target of tasks running, and healthy when health checks exist
(without health checks a task counts once it has run for ``settle`` seconds, so
a command that dies at once keeps the deployment open, like a crash loop), and
ready when readiness checks exist (``readiness.py``).

Playing Marathon 1.4 – 1.7 (``lock``, ``versions.py``): an action is over once its app first reached its
target (the step's actor for that app stops, as ``TaskStartActor`` does), though the step waits for its
other actions; meanwhile the deployment still holds the app, so a task of it that dies is not
relaunched (``Scheduler.unqueued``). A cancelled deployment purges its apps' queued tasks (``purge``).
"""

from __future__ import annotations

import asyncio
import copy
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, overload

from .errors import app_locked
from .events import EventBus
from .readiness import Readiness
from .scheduler import Scheduler
from .state import AppState, State, is_scale_only, now_ts
from .targets import Target, current
from .validation import dependency_edges

__all__ = ["plan_steps", "Deployment", "DeploymentManager"]


def plan_steps(now: dict[str, dict], target: Target, restart: Iterable[str] = ()) -> list[list[dict]]:
    """The steps (lists of ``{"action", "app"}``) that move ``now`` to ``target``."""
    apps, groups = target
    restart = set(restart)
    stop = [{"action": "StopApplication", "app": a} for a in sorted(now) if a not in apps]
    start = [{"action": "StartApplication", "app": a} for a in sorted(apps) if a not in now]
    kinds: dict[str, str] = {}
    for app_id, definition in apps.items():
        old = now.get(app_id)
        if old is None or (is_scale_only(old, definition) and app_id not in restart):
            kinds[app_id] = "ScaleApplication"
        elif old != definition or app_id in restart:
            kinds[app_id] = "RestartApplication"
    edges = dependency_edges(groups, apps)
    depth: dict[str, int] = {}

    def longest(node: str, seen: frozenset = frozenset()) -> int:
        if node not in depth:
            depth[node] = 1 + max((longest(d, seen | {node}) for d in edges[node] if d not in seen), default=0)
        return depth[node]

    layers: dict[int, list[dict]] = {}
    for app_id in sorted(kinds):
        layers.setdefault(longest(app_id), []).append({"action": kinds[app_id], "app": app_id})
    steps = [stop, start] + [layers[k] for k in sorted(layers)]
    return [s for s in steps if s]


@dataclass
class Deployment:
    """A running deployment plan."""

    id: str
    version: str
    steps: list[list[dict]]
    original: dict[str, dict | None]
    current_step: int = 0
    runner: asyncio.Task | None = None
    affected: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    readiness: Readiness | None = None
    #: Apps whose action in the current step is over (1.4 – 1.7: its actor has stopped).
    over: set[str] = field(default_factory=set)

    def acting_on(self, app_id: str) -> bool:
        """Whether an action of the current step is still acting on ``app_id`` (its actor runs)."""
        step = self.steps[self.current_step - 1] if 0 < self.current_step <= len(self.steps) else []
        return any(a["app"] == app_id and a["action"] != "StopApplication" and app_id not in self.over
                   for a in step)

    def plan_json(self) -> dict:
        """The light plan of 1.8 events: ``{id, steps, version}``."""
        return {"id": self.id, "steps": [{"actions": s} for s in self.steps], "version": self.version}

    def to_json(self) -> dict:
        """``GET /v2/deployments`` item."""
        actions = self.steps[self.current_step - 1] if self.current_step else []
        return {"id": self.id, "version": self.version, "affectedApps": list(self.affected),
                "affectedPods": [], "steps": [{"actions": s} for s in self.steps],
                "currentActions": [{**a, "readinessCheckResults":
                                    self.readiness.results_for(a["app"]) if self.readiness else []}
                                   for a in actions],
                "currentStep": self.current_step, "totalSteps": len(self.steps)}


class DeploymentManager:
    """Creates, runs, cancels and lists deployments."""

    def __init__(self, state: State, scheduler: Scheduler, bus: EventBus, poll: float = 0.05,
                 settle: float = 0.15, lock: bool = False, purge: bool = False) -> None:
        self.state = state
        #: 1.4 – 1.7: the deployment lock keeps a finished action's app from relaunching; a cancel purges.
        self.lock, self.purge = lock, purge
        scheduler.locked = lambda app_id: bool(self.for_app(app_id))
        scheduler.starting = lambda app_id: any(d.acting_on(app_id) for d in self.for_app(app_id))
        scheduler.deployment_lock = lock
        self.settle = settle
        self.scheduler = scheduler
        self.bus = bus
        self.poll = poll
        self.running: dict[str, Deployment] = {}
        self.readiness = Readiness(state.host)

    def for_app(self, app_id: str) -> list[Deployment]:
        return [d for d in self.running.values() if app_id in d.affected]

    @overload
    def deploy(self, target: Target, force: bool = ..., dry_run: Literal[False] = ...,
               restart: Iterable[str] = ...) -> Deployment: ...

    @overload
    def deploy(self, target: Target, force: bool = ..., *, dry_run: Literal[True],
               restart: Iterable[str] = ...) -> dict: ...

    def deploy(self, target: Target, force: bool = False, dry_run: bool = False,
               restart: Iterable[str] = ()) -> Deployment | dict:
        """Start a deployment to ``target`` (or, with ``dry_run``, return ``{"steps": ...}``)."""
        restart = set(restart)
        steps = plan_steps(self.state.definitions(), target, restart)
        if dry_run:
            return {"steps": [{"actions": s} for s in steps]}
        affected = sorted({a["app"] for s in steps for a in s})
        conflicts = [d for d in self.running.values() if set(d.affected) & set(affected)]
        if conflicts and not force:
            raise app_locked([d.id for d in conflicts])
        for other in conflicts:
            self.cancel(other, "Deployment was forcefully overridden by another deployment")
        version = now_ts()
        original = {a: copy.deepcopy(self.state.definitions().get(a)) for a in affected}
        self.state.apply(target[0], target[1], version)
        for app_id in restart:
            app = self.state.apps[app_id]
            app.version = app.last_scaling_at = app.last_config_change_at = version
            app.record_version()
        dep = Deployment(str(uuid.uuid4()), version, steps, original, affected=affected, readiness=self.readiness)
        self.running[dep.id] = dep
        self.bus.publish("group_change_success", groupId="/", version=version)
        dep.runner = asyncio.ensure_future(self._run(dep))
        return dep

    def resume(self, dep_id: str, version: str, steps: list[list[dict]], original: dict[str, dict | None],
               affected: list[str], step: int) -> Deployment:
        """Go on with a deployment a previous run of this runner started (``persist.py``), at ``step``
        (1-based: its actions are applied again, as Marathon resumes a stored plan after a failover)."""
        dep = Deployment(dep_id, version, steps, original, affected=affected, readiness=self.readiness)
        self.running[dep.id] = dep
        dep.runner = asyncio.ensure_future(self._run(dep, first=step))
        return dep

    def cancel(self, dep: Deployment, reason: str = "The upgrade has been cancelled") -> None:
        """Stop executing ``dep`` (``deployment_failed``); apps stay where they are."""
        if self.running.pop(dep.id, None) is None:
            return
        if dep.runner is not None:
            dep.runner.cancel()
        self.readiness.forget(set(dep.affected))
        if self.purge:  # deploymentFailed on 1.4 – 1.7 purges the launch queue of the plan's apps
            self.scheduler.purge(dep.affected)
        self.bus.publish("deployment_failed", id=dep.id, plan=dep.plan_json(), reason=reason)

    def rollback(self, dep: Deployment) -> Deployment:
        """Cancel ``dep`` and deploy (forced) the affected apps' definitions from before it."""
        self.cancel(dep)
        apps, groups = current(self.state)
        for app_id, definition in dep.original.items():
            if definition is None:
                apps.pop(app_id, None)
            else:
                apps[app_id] = definition
        return self.deploy((apps, groups), force=True)

    # -- execution --------------------------------------------------------------------
    async def _run(self, dep: Deployment, first: int = 1) -> None:
        try:
            for number, step in enumerate(dep.steps[first - 1:], start=first):
                dep.current_step = number
                dep.over = set()
                self.bus.publish("deployment_info", plan=dep.plan_json(), currentStep={"actions": step})
                for action in step:
                    self._apply(action)
                self.scheduler.wake()
                while not self._step_done(step, dep):
                    await asyncio.sleep(self.poll)
                for action in step:
                    if action["action"] == "StopApplication":
                        self._remove(action["app"])
                self.bus.publish("deployment_step_success", plan=dep.plan_json(), currentStep={"actions": step})
            if self.running.pop(dep.id, None) is not None:
                self.readiness.forget(set(dep.affected))
                self.bus.publish("deployment_success", id=dep.id, plan=dep.plan_json())
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug must not leave the deployment hanging silently
            if self.running.pop(dep.id, None) is not None:
                self.bus.publish("deployment_failed", id=dep.id, plan=dep.plan_json(), reason=repr(exc))
            raise

    def _step_done(self, step: list[dict], dep: Deployment) -> bool:
        if not self.lock:
            return all(self._done(a, dep) for a in step)
        for action in step:  # 1.4 – 1.7: an action, once over, stays over
            if action["app"] not in dep.over and self._done(action, dep):
                dep.over.add(action["app"])
        return all(a["app"] in dep.over for a in step)

    def _apply(self, action: dict) -> None:
        app = self.state.apps.get(action["app"])
        if app is None:
            return
        kind = action["action"]
        if kind == "StopApplication":
            app.target = 0
            return
        self.scheduler.queued(app.id)  # the step's actor queues what the app lacks
        if kind == "StartApplication" or kind == "RestartApplication" or app.run_config_version is None:
            app.run_config_version = app.last_config_change_at
            app.reset_backoff()
        app.run_def = app.definition
        app.target = 0 if kind == "StartApplication" else int(app.definition.get("instances", 1))

    def _done(self, action: dict, dep: Deployment) -> bool:
        app: AppState | None = self.state.apps.get(action["app"])
        if app is None:
            return True
        active = app.active_tasks()
        if action["action"] == "StopApplication":
            return not active
        if action["action"] == "StartApplication":
            return True
        n_checks = len((app.run_def or {}).get("healthChecks") or [])
        settled = time.monotonic() - self.settle
        good = [t for t in active if t.config_version == app.run_config_version and t.running
                and (t.healthy(n_checks) is True if n_checks else (t.started_mono or settled + 1) <= settled)
                and ((t.started_mono or dep.started) < dep.started or self.readiness.ready(app, t))]
        return len(good) == app.target and len(active) == app.target

    def _remove(self, app_id: str) -> None:
        app = self.state.apps.get(app_id)
        if app is not None and app.removed and not app.active_tasks():
            del self.state.apps[app_id]
            self.bus.publish("app_terminated_event", appId=app_id)

