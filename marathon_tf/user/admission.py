"""Before anything is sent (``deploy``, ``scale``, ``--dry-run`` too): does the job fit the cluster?

From the registered agents (:mod:`marathon_tf.user.capacity`) and one rendered app per role, with
Marathon 1.8's offer matcher (:func:`marathon_tf.mesos.placement.match`: the resources of the roles
Marathon is offered, cpus, mem, disk, gpus, the constraints, ports):

* a task that fits on no agent even when the cluster is empty can never start: refused in one line,
  exit 2, nothing sent: ``worker needs gpus 4; the largest agent has 2 (agent-3)``;
* so can a job whose tasks cannot all be held at once even by the empty cluster (the gang never
  fits): its total need of a resource is more than every agent has together (``job big needs mem
  27136 in all; the cluster has 20000 in all (1 agent)``), or a role's tasks do not all fit the
  agents at once (``worker: 4 tasks of gpus 3 each; the agents hold at most 3 at once (agent-1 1, …)``):
  refused alike, exit 2, nothing sent (:func:`too_large`);
* a job whose tasks do not all fit what is free now (its tasks placed one by one, as offers would
  be used) is said with the shortfall per resource, and waits for its admission deadline, or
  with ``wait=False`` (``--no-wait-for-resources``) is refused with exit 4, nothing sent;
* a master that cannot be read skips the check with a note (Marathon decides, the deadline holds);
* a job whose placement rules no set of the registered agents can satisfy (more ``UNIQUE`` tasks than
  hosts, ``MAX_PER n`` × hosts < tasks, ``GROUP_BY n`` over fewer values: :func:`infeasible_rules`)
  is refused in one line naming the rule and the agents, exit 2, nothing sent — also on the local
  runner's machine-sized agents; the packing places a rule's tasks as its leader would.

An agent that is lost now is not registered, so not counted; GPU scheduling behaviour
(``DeclinedScarceResources``) is left to Marathon: ``/v2/info`` does not say which it runs with.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from marathon_tf.contract import naming, spread
from marathon_tf.contract.errors import NotPlaced, UsageError
from marathon_tf.mesos.master import ClusterAgent
from marathon_tf.mesos.placement import Match, field_value, match
from marathon_tf.mesos.resources import Resource, attribute_text, ranges_minus
from marathon_tf.user import capacity
from marathon_tf.user.spec import JobSpec

__all__ = ["Verdict", "check", "impossible", "too_large", "pack", "infeasible_rules", "effective", "TIMEOUT_ENV"]

#: Overrides the job file's ``admission.timeout`` at deploy (seconds, or 90s, 5m, 1h).
TIMEOUT_ENV = "MARATHON_TF_ADMISSION_TIMEOUT"
_SCALARS = ("cpus", "mem", "disk", "gpus")


@dataclass
class Verdict:
    """What the check found: ``checked`` (the capacity was read), a ``note`` (why it was not),
    the ``shortfall`` line (the job does not fit what is free now) and the tasks that would wait."""

    checked: bool = False
    note: str | None = None
    shortfall: str | None = None
    waiting: dict[str, int] = field(default_factory=dict)


def effective(spec: JobSpec, timeout: float | None = None, environ: Mapping[str, str] = os.environ) -> JobSpec:
    """The spec with ``admission.timeout`` from ``timeout`` or, when not given, :data:`TIMEOUT_ENV`."""
    if timeout is None and environ.get(TIMEOUT_ENV):
        from marathon_tf.contract.progress import parse_duration

        try:
            timeout = parse_duration(environ[TIMEOUT_ENV])
        except ValueError as e:
            raise UsageError(f"{TIMEOUT_ENV}={environ[TIMEOUT_ENV]!r}: {e}") from None
    if timeout is None or timeout == spec.admission.timeout:
        return spec
    if not 1 <= timeout <= 7 * 86400:
        raise UsageError(f"admission timeout {timeout:g} s: must be between 1 s and 7 days")
    return spec.with_overrides(admission=replace(spec.admission, timeout=float(timeout)))


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.3g}"


def _amount(resources: Sequence[Resource], name: str, roles: set[str]) -> float:
    if name == "ports":
        return float(sum(e - b + 1 for r in resources if r.name == name and r.role in roles
                         and isinstance(r.value, tuple) for b, e in r.value))
    return sum(r.value for r in resources if r.name == name and r.role in roles and isinstance(r.value, float))


def _needs(app: Mapping[str, Any]) -> dict[str, float]:
    out = {name: float(app.get(name) or 0) for name in _SCALARS}
    out["ports"] = float(len(app.get("portDefinitions") or []))
    return {k: v for k, v in out.items() if v > 0}


def _fits(app: Mapping[str, Any], agent: ClusterAgent, resources: list[Resource], roles: set[str]):
    return match(dict(app), agent.as_agent(resources), resources, [], default_roles=roles, gpu_restricted=False)


def impossible(apps: Mapping[str, Mapping[str, Any]], cap: capacity.Capacity) -> str | None:
    """The first role whose task fits on no agent even with the cluster empty, in one line; None."""
    for role, app in apps.items():
        results = [(agent, _fits(app, agent, agent.total, cap.roles)) for agent in cap.agents]
        if any(isinstance(r, Match) for _, r in results):
            continue
        if not cap.agents:
            return f"{role} cannot be placed: the Mesos master at {cap.url} has no registered agent"
        roles = set(app.get("acceptedResourceRoles") or cap.roles)
        too_big = []
        for name, need in _needs(app).items():
            largest = max(cap.agents, key=lambda a: _amount(a.total, name, roles))
            have = _amount(largest.total, name, roles)
            if have < need:
                too_big.append((name, need, have, largest.name))
        if len(too_big) == 1:
            name, need, have, where = too_big[0]
            return f"{role} needs {name} {_num(need)}; the largest agent has {_num(have)} ({where})"
        if too_big:
            return (f"{role} needs " + ", ".join(f"{n} {_num(need)}" for n, need, _, _ in too_big)
                    + "; the largest agents have " + ", ".join(f"{n} {_num(have)} ({where})"
                                                               for n, _, have, where in too_big))
        kinds = {reason for _, r in results for reason in r.reasons}
        if kinds == {"UnfulfilledConstraint"}:
            return f"{role}'s constraints {json.dumps(app.get('constraints'))} match no agent" + _attributes(cap)
        if kinds == {"UnfulfilledRole"}:
            return (f"{role} fits on no agent: none has resources of the roles Marathon takes "
                    f"({', '.join(sorted(roles))})")
        why = "; ".join(f"{agent.name}: {', '.join(r.reasons)}" for agent, r in results[:5])
        more = f" (and {len(results) - 5} more agents)" if len(results) > 5 else ""
        needs = ", ".join(f"{n} {_num(v)}" for n, v in _needs(app).items())
        constraints = app.get("constraints") or []
        return (f"{role} fits on no agent ({needs}" + (f", constraints {constraints}" if constraints else "")
                + f"; Marathon takes resources of the roles {', '.join(sorted(roles))}): {why}{more}")
    return None


def _attributes(cap: capacity.Capacity) -> str:
    """`` (agents' attributes: agent-1 rack:r1; …)`` for a constraint that matches no agent."""
    shown = [f"{a.name} " + (",".join(f"{k}:{attribute_text(v)}" for k, v in a.attributes.items()) or "none")
             for a in cap.agents[:5]]
    return f" (agents' attributes: {'; '.join(shown)}" + (" …)" if len(cap.agents) > 5 else ")")


def _take(free: list[Resource], taken: Match, ports: int) -> list[Resource]:
    """``free`` less what a placed task takes (its scalars by role, its first ``ports`` ports)."""
    left: dict[tuple[str, str], float] = {}
    for r in taken.consumed:
        left[(r.name, r.role)] = left.get((r.name, r.role), 0.0) + float(cast(float, r.value))  # scalars
    used_ports = (taken.port_candidates or [])[:ports]
    out = []
    for r in free:
        if isinstance(r.value, float) and (r.name, r.role) in left:
            out.append(Resource(r.name, max(0.0, r.value - left[(r.name, r.role)]), r.role))
        elif isinstance(r.value, tuple) and r.name == "ports" and r.role == taken.port_role:
            out.append(Resource(r.name, ranges_minus(r.value, used_ports), r.role))
        else:
            out.append(r)
    return out


def pack(apps: Sequence[tuple[str, Mapping[str, Any]]], cap: capacity.Capacity, *,
         scopes: Sequence[spread.Scope | None] | None = None) -> dict[str, int]:
    """Place the tasks ``(role, app)`` one by one on the agents' free resources (the first that fits,
    as offers are taken); role → how many find no room now. ``scopes``: each task's placement scope
    (or None), whose rules add the per-app constraints its leader would write, given where the
    scope's earlier tasks went (:func:`marathon_tf.contract.spread.translate`)."""
    free = {a.id: list(a.free) for a in cap.agents}
    waiting: dict[str, int] = {}
    held: dict[str, list[ClusterAgent]] = {}
    for i, (role, app) in enumerate(apps):
        scope = scopes[i] if scopes is not None else None
        if scope is not None:
            siblings = held.setdefault(scope.name, [])
            added = [list(c) for rule in scope.rules for c in spread.translate(
                rule, [field_value(a.as_agent(a.total), rule.field) for a in siblings], len(scope.tasks))]
            app = {**app, "constraints": list(app.get("constraints") or []) + added}
        for agent in cap.agents:
            result = _fits(app, agent, free[agent.id], cap.roles)
            if isinstance(result, Match):
                free[agent.id] = _take(free[agent.id], result, int(_needs(app).get("ports", 0)))
                if scope is not None:
                    held[scope.name].append(agent)
                break
        else:
            waiting[role] = waiting.get(role, 0) + 1
    return waiting


def _held(app: Mapping[str, Any], agent: ClusterAgent, cap: capacity.Capacity, most: int) -> int:
    """How many tasks of ``app`` the empty ``agent`` holds at once (at most ``most``)."""
    free, n = list(agent.total), 0
    while n < most:
        result = _fits(app, agent, free, cap.roles)
        if not isinstance(result, Match):
            break
        free, n = _take(free, result, int(_needs(app).get("ports", 0))), n + 1
    return n


def too_large(job: str, apps: Sequence[tuple[str, Mapping[str, Any]]], cap: capacity.Capacity) -> str | None:
    """Why the job's tasks ``(role, app)`` can never all run at once on this cluster, even empty, in one
    line with the numbers; None when they might. Certain, never a guess: a resource the job needs more
    of in all than the agents have together, or a role more of whose tasks than the agents can hold
    (the tasks of one role are alike, so filling agent after agent is the most they hold)."""
    need: dict[str, float] = {}
    for _, app in apps:
        for name, value in _needs(app).items():
            need[name] = need.get(name, 0.0) + value
    agents = f"{len(cap.agents)} agent{'s' if len(cap.agents) != 1 else ''}"
    over = [(name, total, sum(_amount(a.total, name, cap.roles) for a in cap.agents))
            for name, total in need.items()]
    over = [(n, t, w) for n, t, w in over if t > w]
    if over:
        return (f"job {job} needs " + ", ".join(f"{n} {_num(t)}" for n, t, _ in over) + " in all; the cluster has "
                + ", ".join(f"{_num(w)}" + (f" {n}" if len(over) > 1 else "") for n, _, w in over)
                + f" in all ({agents}): its tasks can never all run at once")
    counts: dict[str, int] = {}
    first: dict[str, Mapping[str, Any]] = {}
    for role, app in apps:
        counts[role] = counts.get(role, 0) + 1
        first.setdefault(role, app)
    for role, count in counts.items():
        held = {a.name: _held(first[role], a, cap, count) for a in cap.agents}
        if sum(held.values()) < count:
            each = ", ".join(f"{n} {_num(v)}" for n, v in _needs(first[role]).items() if n != "ports")
            shown = ", ".join(f"{name} {n}" for name, n in list(held.items())[:5]) + (" …" if len(held) > 5 else "")
            return (f"job {job}: {role} has {count} tasks of {each} each; the agents hold at most "
                    f"{sum(held.values())} of them at once ({shown}): its tasks can never all run at once")
    return None


def infeasible_rules(spec: JobSpec, cap: capacity.Capacity) -> str | None:
    """The first placement rule of the job no placement on these agents can satisfy, in one line
    (:func:`marathon_tf.contract.spread.infeasible`: more UNIQUE tasks than hosts or values, MAX_PER n ×
    values < tasks, GROUP_BY n over fewer values); None when every rule can hold."""
    from marathon_tf.user.render import placement_scopes

    for scope in placement_scopes(spec):
        for rule in scope.rules:
            if rule.field in ("@region", "@zone"):  # fault domains are not in the Mesos model: Marathon decides
                continue
            values = [field_value(a.as_agent(a.total), rule.field) for a in cap.agents]
            line = spread.infeasible(rule, scope.name, len(scope.tasks), values)
            if line:
                return line
    return None


def _shortfall(job: str, apps: Sequence[tuple[str, Mapping[str, Any]]], waiting: dict[str, int],
               cap: capacity.Capacity) -> str:
    need: dict[str, float] = {}
    for _, app in apps:
        for name, value in _needs(app).items():
            need[name] = need.get(name, 0.0) + value
    short = []
    for name, total in need.items():
        free = sum(_amount(a.free, name, cap.roles) for a in cap.agents)
        whole = sum(_amount(a.total, name, cap.roles) for a in cap.agents)
        if total > free:
            short.append(f"{name} {_num(total)} ({_num(free)} free" + (f", {_num(whole)} in all" if total > whole
                                                                        else "") + ")")
    counts: dict[str, int] = {}
    for role, _ in apps:
        counts[role] = counts.get(role, 0) + 1
    tasks = ", ".join(f"{n} of {counts[r]} {r}" for r, n in waiting.items())
    line = f"job {job} does not fit what the cluster has free now: {tasks} would wait"
    if short:
        line += "; it needs " + ", ".join(short)
    return line


def check(client: Any, spec: JobSpec, *, mesos: str | None = None, wait: bool = True,
          starting: Sequence[tuple[str, int]] | None = None, templates_dir: str | None = None,
          group: Mapping[str, Any] | None = None) -> Verdict:
    """The check of a job before it is sent (see the module). ``starting``: the tasks that would
    start (default every task the job cannot start without, an elastic role's ``min``; ``scale``: the new
    ones). ``group``: the job's group as the deploy rendered it (else one app per role is rendered here).
    Raises :class:`UsageError` (exit 2) for a task that can never be placed, :class:`NotPlaced` (exit 4)
    for a shortfall when not ``wait``."""
    from marathon_tf.marathon.model import job_apps
    from marathon_tf.user.render import placement_scopes, render_app

    scopes = {t: scope for scope in placement_scopes(spec) for t in scope.tasks}
    rules_note = None
    if scopes:  # rules no placement can satisfy: refused whatever the agents' sizes
        try:
            everyone = capacity.registered(client, mesos)
        except capacity.Unknown as e:
            rules_note = f"placement rules not checked against the agents: {e}"
        else:
            refused = infeasible_rules(spec, everyone)
            if refused:
                raise UsageError(refused + "; nothing was sent",
                                 hint="add agents, ask for fewer tasks, or loosen the rule (MAX_PER n); for "
                                      "Marathon's per-app meaning write it in constraints_per_task")
    try:
        cap = capacity.read(client, mesos)
    except capacity.Unknown as e:
        return Verdict(note=rules_note or f"cluster capacity not checked: {e}")
    if cap is None:
        return Verdict(note=rules_note)
    roles = [r for r in spec.counts()]
    rendered = job_apps(dict(group)) if group is not None else {}
    apps = {r: spread.strip(rendered.get(f"{r}-0") or render_app(spec, r, 0, templates_dir=templates_dir))
            for r in roles}  # what every task of the role asks, without its place in the placement's turn
    refused = impossible(apps, cap)
    if refused:
        raise UsageError(refused + "; nothing was sent",
                         hint=f"ask for less per task, or add agents that have it (the Mesos master at {cap.url} "
                              f"lists {len(cap.agents)} registered agent{'s' if len(cap.agents) != 1 else ''})")
    tasks = list(starting) if starting is not None else spec.required_tasks()  # (an elastic role: its min)
    order = [(role, apps[role]) for role, _ in tasks if role in apps]
    whole = [(role, apps[role]) for role, _ in spec.required_tasks() if role in apps]
    refused = too_large(spec.name, whole, cap)
    if refused:
        raise UsageError(refused + "; nothing was sent",
                         hint=f"ask for fewer or smaller tasks, or add agents (the Mesos master at {cap.url} lists "
                              f"{len(cap.agents)} registered agent{'s' if len(cap.agents) != 1 else ''})")
    waiting = pack(order, cap, scopes=[scopes.get(naming.task_name(role, i)) for role, i in tasks if role in apps])
    if not waiting:
        return Verdict(checked=True, note=rules_note)
    line = _shortfall(spec.name, order, waiting, cap)
    if not wait:
        raise NotPlaced(line + "; nothing was sent",
                        hint=f"without --no-wait-for-resources it waits up to admission.timeout "
                             f"({_num(spec.admission.timeout)} s) for room, then holds nothing")
    return Verdict(checked=True, shortfall=line, waiting=waiting, note=rules_note)
