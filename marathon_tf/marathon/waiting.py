"""Why a job's tasks wait to be placed, per role and in numbers; and whether the job is still starting (pure).

Read from what Marathon says (the job's apps with their tasks, ``group.apps.tasks``, and
``GET /v2/queue?embed=lastUnusedOffers``: :func:`marathon_tf.marathon.queue.fetch`), and, when the
caller could read the Mesos master, each agent's free resources now (``resources`` −
``used_resources`` − ``offered_resources`` of ``/master/slaves``: :mod:`marathon_tf.user.capacity`).

Marathon's offer matcher lists *every* reason an offer did not fit a task (the resources short,
the role, the constraints, the GPU behaviour; ports only once all of that fit), and keeps the
last unused offer of each agent with all its reasons and its resources (``lastUnusedOffers``),
while its summary (``rejectSummaryLastOffers``) counts only the first reason of each offer (the
funnel). So a role's reasons are those of the newest unused offer of each agent, merged across the
role's waiting apps (one app per task), counted per agent; how much an agent has of a resource
it lacks is taken from the agents' free resources when they are known, else from the offer.

``worker: 5/8 placed; 3 waiting 2m10s: InsufficientGpus on 3 agents (need 1 each, 0 free),
UnfulfilledConstraint on 1``.

A job is *starting* (its admission deadline applies) while a task of its TF cluster (chief, ps,
worker: the tasks TensorFlow's cluster spec names) waits to be placed without a task of the app's
current configuration having failed: once every task ran, a task that waits again is a relaunch,
which the restart budget governs, not the deadline.

An elastic role (its apps labelled ``marathon-tf/elastic: MIN..MAX``, docs/elastic.md) is all-or-nothing
only up to its minimum: once ``min`` of its apps are placed, the others that wait are *standbys*
(``worker: 3 of 2..4 placed, 1 standby 13s: InsufficientGpus on 3 agents``), which hold nothing and keep
no job from starting.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from marathon_tf.contract import labels as L
from marathon_tf.contract import naming, spread
from marathon_tf.marathon.model import App, wall
from marathon_tf.marathon.queue import RESOURCES, launch_delay
from marathon_tf.marathon.tasks import ACTIVE as PLACED_STATES

__all__ = ["Reason", "RoleWait", "role_waits", "summary", "attempt_started", "starting_members", "placed",
           "offer_free", "failed_in_this_config", "elastic_bounds", "PLACED_STATES", "RESOURCES", "wall"]

# PLACED_STATES: a task in these states holds its agent's resources (it was placed): tasks.ACTIVE.
# RESOURCES: Marathon's reason → the resource it names (queue.RESOURCES); wall: model.wall.
#: Marathon 1.8's ``NoOfferMatchReason.reasonFunnel``: the order reasons are shown in when counts tie.
_FUNNEL = ("UnfulfilledRole", "UnfulfilledConstraint", "NoCorrespondingReservationFound", "AgentMaintenance",
           "InsufficientCpus", "InsufficientMemory", "InsufficientDisk", "InsufficientGpus", "InsufficientPorts",
           "DeclinedScarceResources")
_UNITS = {"mem": " MiB", "disk": " MiB"}


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.3g}"


@dataclass(frozen=True)
class Reason:
    """One reason a role's tasks are declined: on how many agents; for a resource, the need of
    one task and the least and most any of those agents has free."""

    reason: str
    agents: int
    resource: str | None = None
    need: float | None = None
    free: tuple[float, float] | None = None

    def text(self, first: bool = True) -> str:
        where = f"{self.reason} on {self.agents}" + (f" agent{'s' if self.agents != 1 else ''}" if first else "")
        if self.resource is None or self.need is None:
            return where
        unit = _UNITS.get(self.resource, "")
        numbers = f"need {_num(self.need)}{unit} each"
        if self.free is not None:
            low, high = self.free
            numbers += f", {_num(low)}{unit} free" if low == high else f", {_num(low)}–{_num(high)}{unit} free"
        return f"{where} ({numbers})"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"reason": self.reason, "agents": self.agents}
        if self.resource:
            out.update(resource=self.resource, need=self.need)
            if self.free is not None:
                out.update(freeLeast=self.free[0], freeMost=self.free[1])
        return out


@dataclass(frozen=True)
class RoleWait:
    """A role's placement: tasks in all, placed (holding resources), waiting, for how long, why."""

    role: str
    total: int
    placed: int
    waiting: int
    waiting_seconds: float | None = None
    reasons: tuple[Reason, ...] = ()
    #: Marathon's launch backoff still to wait (after failures), seconds.
    delayed: float | None = None
    #: an elastic role's (min, max): its waiting apps past ``min`` placed are standbys
    elastic: tuple[int, int] | None = None

    @property
    def standby(self) -> bool:
        """Its waiting tasks are an elastic role's standbys (its minimum is placed): they keep nothing waiting."""
        return self.elastic is not None and self.placed >= self.elastic[0]

    def text(self) -> str:
        from marathon_tf.contract.progress import duration

        if self.elastic is not None:
            head = f"{self.role}: {self.placed} of {self.elastic[0]}..{self.elastic[1]} placed"
        else:
            head = f"{self.role}: {self.placed}/{self.total} placed"
        if not self.waiting:
            return head
        head += (f", {self.waiting} standby" if self.standby else f"; {self.waiting} waiting") + (
            f" {duration(self.waiting_seconds)}" if self.waiting_seconds is not None else "")
        why = [r.text(first=i == 0) for i, r in enumerate(self.reasons)]
        if self.delayed:
            why.append(f"delayed {_num(self.delayed)}s by Marathon's launch backoff")
        return head + (": " + ", ".join(why) if why else "")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"placed": self.placed, "total": self.total, "waiting": self.waiting,
                               "reasons": [r.to_dict() for r in self.reasons], "text": self.text()}
        if self.waiting_seconds is not None:
            out["waitingSeconds"] = round(self.waiting_seconds, 1)
        if self.delayed:
            out["delayedSeconds"] = self.delayed
        if self.elastic is not None:
            out.update(min=self.elastic[0], max=self.elastic[1], standby=self.waiting if self.standby else 0)
        return out


def _task_name(app: App) -> str:
    return (app.id or "").rstrip("/").rsplit("/", 1)[-1]


def _role(app: App) -> str | None:
    role = app.labels.get(L.ROLE)
    return role or (naming.parse_task_name(_task_name(app)) or (None, 0))[0]


def elastic_bounds(app: Mapping[str, Any]) -> tuple[int, int] | None:
    """(min, max) of an elastic role's app (its ``marathon-tf/elastic`` label), else None."""
    low, sep, high = (App.parse(app).labels.get(L.ELASTIC) or "").partition("..")
    return (int(low), int(high)) if sep and low.isdigit() and high.isdigit() else None


def placed(app: Mapping[str, Any]) -> bool:
    """Whether the app has a task on an agent (staging, starting or running)."""
    return any(t.state in PLACED_STATES for t in App.parse(app).tasks)


def _need(app: Mapping[str, Any], resource: str) -> float:
    if resource == "ports":
        return float(len(app.get("portDefinitions") or []))
    return float(app.get(resource) or 0)


def offer_free(offer: Mapping[str, Any]) -> dict[str, float]:
    """What an offer (Marathon's ``Offer`` JSON) holds: scalars added up over its roles, ports counted."""
    out: dict[str, float] = {}
    for r in offer.get("resources") or []:
        name = r.get("name")
        if isinstance(r.get("scalar"), (int, float)):
            out[name] = out.get(name, 0.0) + float(r["scalar"])
        elif isinstance(r.get("ranges"), list):
            out[name] = out.get(name, 0.0) + sum(int(x.get("end", 0)) - int(x.get("begin", 0)) + 1
                                                 for x in r["ranges"])
    return out


def _reasons(entries: list[Mapping[str, Any]], app: Mapping[str, Any],
             free: Mapping[str, Mapping[str, float]] | None) -> tuple[Reason, ...]:
    newest: dict[str, tuple[str, list[str], dict[str, float]]] = {}  # agent -> (time, reasons, offered)
    for entry in entries:
        for unused in entry.get("lastUnusedOffers") or []:
            offer = unused.get("offer") or {}
            agent = offer.get("agentId") or offer.get("hostname")
            when = str(unused.get("timestamp") or "")
            if agent and (agent not in newest or when >= newest[agent][0]):
                newest[agent] = (when, list(unused.get("reason") or []), offer_free(offer))
    counted: dict[str, list[str]] = {}
    for agent, (_, reasons, _) in newest.items():
        for reason in dict.fromkeys(reasons):
            counted.setdefault(reason, []).append(agent)
    if not newest:  # no offers embedded: the summary's first reasons, the largest count over the apps
        for entry in entries:
            summary = entry.get("processedOffersSummary") or {}
            for r in summary.get("rejectSummaryLastOffers") or []:
                if (r.get("declined") or 0) > len(counted.get(r.get("reason"), [])):
                    counted[r["reason"]] = [""] * int(r["declined"])
    out = []
    for reason, agents in counted.items():
        resource = RESOURCES.get(reason)
        if resource is None:
            out.append(Reason(reason, len(agents)))
            continue
        frees = []
        for agent in agents:
            known = (free or {}).get(agent)
            if known is not None and resource in known:
                frees.append(float(known[resource]))
            elif agent in newest:
                frees.append(newest[agent][2].get(resource, 0.0))
        out.append(Reason(reason, len(agents), resource, _need(app, resource),
                          (min(frees), max(frees)) if frees else None))
    order = {r: i for i, r in enumerate(_FUNNEL)}
    return tuple(sorted(out, key=lambda r: (-r.agents, order.get(r.reason, len(order)), r.reason)))


def role_waits(apps: Iterable[Mapping[str, Any]], queue: Mapping[str, Mapping[str, Any]], *,
               free: Mapping[str, Mapping[str, float]] | None = None,
               now: float | None = None) -> dict[str, RoleWait]:
    """Per role (in the job's order): tasks, placed, waiting and why. ``queue``: entries by app id;
    ``free``: agent id → free resources (``cpus``, ``mem``, ``disk``, ``gpus``, ``ports``) when known."""
    import time

    now = time.time() if now is None else now
    by_role: dict[str, list[App]] = {}
    for app in map(App.parse, apps):
        role = _role(app)
        if role is not None and app.instances:
            by_role.setdefault(role, []).append(app)
    out = {}
    for role in sorted(by_role, key=lambda r: naming.ROLES.index(r) if r in naming.ROLES else len(naming.ROLES)):
        role_apps = by_role[role]
        waiting = [a for a in role_apps if not placed(a)]
        entries = [queue[a.id] for a in waiting if a.id is not None and a.id in queue]
        since = [w for w in (wall(e.get("since")) for e in entries) if w is not None]
        delays = [float(launch_delay(e)) for e in entries if launch_delay(e) is not None]
        out[role] = RoleWait(role, len(role_apps), len(role_apps) - len(waiting), len(waiting),
                             max(0.0, now - min(since)) if since else None,
                             _reasons(entries, waiting[0], free) if waiting else (),
                             max(delays) if delays and max(delays) > 0 else None,
                             next((b for b in map(elastic_bounds, role_apps) if b is not None), None))
    return out


def summary(waits: Mapping[str, RoleWait]) -> str:
    """The roles that wait, one clause each (``worker: 5/8 placed; 3 waiting …``), joined by `` | ``;
    when every role is placed, each role's count."""
    waiting = [w.text() for w in waits.values() if w.waiting and not w.standby]
    waiting += [w.text() for w in waits.values() if w.waiting and w.standby]
    return " | ".join(waiting) if waiting else ", ".join(w.text() for w in waits.values())


def attempt_started(apps: Iterable[Mapping[str, Any]]) -> float | None:
    """When the job's current attempt was submitted: its apps' latest configuration change
    (``versionInfo.lastConfigChangeAt``: a deploy, a scale, a re-submission all change it). An app whose
    last change was the placement's own write (its leader releasing or moving a task:
    :func:`marathon_tf.contract.spread.placement_write`) is left out: those writes do not postpone the
    admission deadline (unless every app was so written)."""
    parsed = [App.parse(a) for a in apps]
    parsed = [a for a in parsed if not spread.placement_write(a)] or parsed
    walls = [wall(a.config_version) for a in parsed]
    times = [t for t in walls if t is not None]
    return max(times) if times else None


def failed_in_this_config(app: Mapping[str, Any]) -> bool:
    """Whether a task of the app's current configuration failed (``lastTaskFailure.version``)."""
    parsed = App.parse(app)
    failure = parsed.last_failure
    return failure is not None and (failure.version or "") >= parsed.config_version


def starting_members(apps: Iterable[Mapping[str, Any]]) -> list[str]:
    """The TF cluster's tasks (chief, ps, worker) that wait to be placed for the first time in
    their app's current configuration (none of its tasks failed since): while any does, the job
    is still starting and its admission deadline applies. An elastic role's apps wait only while fewer
    than its minimum are placed (past that they are standbys)."""
    parsed = [App.parse(a) for a in apps]
    enough = set()
    for role in {_role(a) for a in parsed}:
        bounds = next((b for b in (elastic_bounds(a) for a in parsed if _role(a) == role) if b is not None), None)
        if bounds is not None and sum(1 for a in parsed if _role(a) == role and placed(a)) >= bounds[0]:
            enough.add(role)
    out = []
    for app in parsed:
        name = _task_name(app)
        role = _role(app)
        if role in naming.CLUSTER_ROLES and role not in enough and app.instances and not placed(app) \
                and not failed_in_this_config(app):
            out.append(name)
    return sorted(out)
