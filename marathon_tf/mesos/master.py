"""A Mesos master's JSON read: its agents with their total and free resources, and what it offers a framework (pure).

``GET /master/slaves`` (or ``/master/state``): every registered agent as the Mesos master writes it, the total
(``resources``; per role in ``unreserved_resources_full`` and ``reserved_resources_full``), what its tasks use
(``used_resources``) and what is offered to a framework now (``offered_resources``), each with its ``*_full``
form (roles and reservations). What an agent has free *for Marathon* is
``resources − used_resources − offered_resources`` + what of it is offered to Marathon itself
(:func:`parse_agents`). ``GET /master/frameworks``: each framework's ``offers`` (:func:`marathon_offers`).
Unreachable agents are not listed; deactivated ones are left out. Where these are read and with which
credentials: :mod:`marathon_tf.user.capacity`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .agents import AgentInfo, free_resources
from .resources import Resource, Value, ranges_minus, ranges_size
from .views import attributes_from_json, resources_from_full, resources_from_summary

__all__ = ["ClusterAgent", "parse_agents", "offers_anywhere", "marathon_offers"]


@dataclass
class ClusterAgent:
    """One registered agent: its id, hostname, the name shown (``agent-3`` on the local runner, else
    the hostname), its total and free resources (Mesos's, by role) and attributes."""

    id: str
    hostname: str
    name: str
    total: list[Resource]
    free: list[Resource]
    attributes: dict[str, Value] = field(default_factory=dict)

    def as_agent(self, resources: list[Resource]) -> AgentInfo:
        """The agent as the offer matcher (:mod:`marathon_tf.mesos.placement`: Marathon 1.8's) reads it."""
        return AgentInfo(id=self.id, hostname=self.hostname, resources=resources, attributes=dict(self.attributes),
                         enforced=True)

    def free_summary(self) -> dict[str, float]:
        """Free scalars added up over the roles, and the free ports counted (for the waits' numbers)."""
        out: dict[str, float] = {}
        for r in self.free:
            if isinstance(r.value, float):
                out[r.name] = out.get(r.name, 0.0) + r.value
            elif isinstance(r.value, tuple):
                out[r.name] = out.get(r.name, 0.0) + ranges_size(r.value)
        return out


def _total(slave: Mapping[str, Any]) -> list[Resource]:
    if "unreserved_resources_full" in slave:
        reserved = slave.get("reserved_resources_full") or {}
        items = list(slave.get("unreserved_resources_full") or [])
        for role_items in (reserved.values() if isinstance(reserved, Mapping) else []):
            items += list(role_items or [])
        return resources_from_full(items)
    total = resources_from_summary(slave.get("unreserved_resources") or slave.get("resources") or {})
    for role, summary in (slave.get("reserved_resources") or {}).items():
        total += resources_from_summary(summary, role)
    return total


def _taken(slave: Mapping[str, Any], name: str) -> list[Resource]:
    if f"{name}_full" in slave:
        return resources_from_full(slave.get(f"{name}_full"))
    return resources_from_summary(slave.get(name) or {})  # roles unknown: counted against the unreserved part


def _minus(offered: list[Resource], own: list[Resource]) -> list[Resource]:
    """``offered`` (an agent's offers to every framework, by role) less Marathon's own offers of it (whose
    summaries carry no reservation: taken from their allocation role first, then unreserved, then any)."""
    left: list[list[Any]] = [[r.name, r.value, r.role] for r in offered]
    for mine in own:
        order = sorted(left, key=lambda x: (x[2] != mine.role, x[2] != "*"))
        if isinstance(mine.value, float):
            need = mine.value
            for item in order:
                if item[0] == mine.name and isinstance(item[1], float) and need > 1e-9:
                    part = min(item[1], need)
                    item[1], need = round(item[1] - part, 6), need - part
        elif isinstance(mine.value, tuple):
            ports = [p for b, e in mine.value for p in range(b, e + 1)]
            for item in order:
                if item[0] == mine.name and isinstance(item[1], tuple):
                    item[1] = ranges_minus(item[1], ports)
    return [Resource(n, v, role) for n, v, role in left if v not in (0.0, ())]


def parse_agents(body: Mapping[str, Any], names: Mapping[str, str] | None = None,
                 own_offers: Mapping[str, list[Resource]] | None = None) -> list[ClusterAgent]:
    """``/master/slaves`` (or ``/master/state``) → the active agents (``names``: id → name shown;
    ``own_offers``: agent id → what of it is offered to Marathon now, which stays free for it)."""
    out = []
    for slave in (body or {}).get("slaves") or []:
        if not isinstance(slave, Mapping) or slave.get("active") is False or slave.get("deactivated"):
            continue
        total = _total(slave)
        agent = AgentInfo(id=str(slave.get("id") or ""), hostname=str(slave.get("hostname") or ""), resources=total)
        others = _minus(_taken(slave, "offered_resources"), list((own_offers or {}).get(agent.id, ())))
        free = free_resources(agent, _taken(slave, "used_resources") + others)
        out.append(ClusterAgent(agent.id, agent.hostname, (names or {}).get(agent.id) or agent.hostname or agent.id,
                                total, free, attributes_from_json(slave.get("attributes") or {})))
    return out


def offers_anywhere(body: Mapping[str, Any]) -> bool:
    for slave in (body or {}).get("slaves") or []:
        if not isinstance(slave, Mapping):
            continue
        full = slave.get("offered_resources_full")
        if full or any(v for v in (slave.get("offered_resources") or {}).values()
                       if isinstance(v, (int, float)) or (isinstance(v, str) and v.strip("[]{}"))):
            return True
    return False


def marathon_offers(body: Mapping[str, Any], framework_id: str | None,
                    framework_name: str | None) -> dict[str, list[Resource]]:
    """``/master/frameworks`` → agent id → the resources offered to Marathon (the framework with
    ``framework_id``; without one, the only active framework named ``framework_name``)."""
    frameworks = [f for f in (body or {}).get("frameworks") or [] if isinstance(f, Mapping)]
    if framework_id:
        mine = [f for f in frameworks if f.get("id") == framework_id]
    else:
        mine = [f for f in frameworks if framework_name and f.get("name") == framework_name and f.get("active", True)]
        mine = mine if len(mine) == 1 else []
    out: dict[str, list[Resource]] = {}
    for framework in mine:
        for offer in framework.get("offers") or []:
            if not isinstance(offer, Mapping):
                continue
            role = str((offer.get("allocation_info") or {}).get("role") or "*")
            out.setdefault(str(offer.get("slave_id") or ""), []).extend(
                resources_from_summary(offer.get("resources") or {}, role))
    return out
