"""The cluster's capacity as the Mesos master tells it: every registered agent's total and free resources.

Where the master is: ``--mesos`` / ``MESOS_URL``, else Marathon's ``/v2/info``
``marathon_config.mesos_leader_ui_url`` (the leading master's URL: ``M@1.8:src/main/scala/mesosphere/
marathon/api/v2/InfoResource.scala``). One ``GET <master>/master/slaves``: every registered agent as
apache/mesos ``src/master/readonly_handler.cpp`` ``SlaveWriter``/``SlavesWriter`` write it, the total
(``resources``; per role in ``unreserved_resources_full`` and ``reserved_resources_full``), what its
tasks use (``used_resources``) and what is offered to a framework now (``offered_resources``), each
with its ``*_full`` form (roles and reservations). What an agent has free *for Marathon* is
``resources − used_resources − offered_resources`` + what of it is offered to Marathon itself: an offer
Marathon holds is Marathon's to use (it declines what it cannot use, and a launch takes from it), one
held by another framework is not. Which offers are Marathon's: ``GET <master>/master/frameworks
?framework_id=<id>`` (apache/mesos@1.11.x:src/master/readonly_handler.cpp ``frameworks``,
``FullFrameworkWriter``: each framework's ``offers``, every offer's ``slave_id``, ``resources`` (a summary)
and ``allocation_info.role``, src/common/http.cpp ``json(…, const Offer&)``), Marathon's framework id from
its ``/v2/info`` ``frameworkId`` (mesosphere/marathon@releases/1.11:src/main/scala/mesosphere/marathon/api/
v2/InfoResource.scala; 1.4 too), else the framework named ``marathon_config.framework_name``; asked only
when some agent has resources offered, and when it cannot be read every offer counts as taken, as
before. (``unreserved_resources`` is the unreserved part of the *total*: ``totalResources.unreserved()``,
not what is free.) Unreachable agents are not listed.

Credentials: Marathon's (a token, basic auth) go to the master only when it is at Marathon's own
origin (DC/OS's admin router serves both); another host gets none, and a master that wants some is
skipped with a note. The local runner's agents without ``--agent-resources`` are as large as the
machine and never short (its admin API ``/_local/agents`` says ``enforced: false``): such a cluster
is not checked. Returns data; never prints.

The master the user named (``--mesos`` / ``MESOS_URL``) is passed to every look (``given``): the
callers hold it (:class:`marathon_tf.user.api.Marathon`'s ``mesos``), nothing here remembers it.
What an agent has and what fits it is the Mesos model's (:mod:`marathon_tf.mesos`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import requests

from marathon_tf.contract.errors import MarathonError
from marathon_tf.marathon import shapes, transport
from marathon_tf.mesos.agents import AgentInfo, free_resources
from marathon_tf.mesos.resources import Resource, Value, ranges_minus, ranges_size
from marathon_tf.mesos.views import attributes_from_json, resources_from_full, resources_from_summary

__all__ = ["ClusterAgent", "Capacity", "Unknown", "read", "registered", "parse_agents", "marathon_offers",
           "mesos_url", "TIMEOUT"]

#: (connect, read) seconds for the master: a refusal is said within 2 s, a slow master is skipped.
TIMEOUT = (1.5, 5.0)


class Unknown(Exception):
    """The capacity could not be read (one line: why); the check is skipped with a note."""


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


@dataclass
class Capacity:
    """The registered agents, the roles whose resources Marathon is offered, and where it was read."""

    agents: list[ClusterAgent]
    roles: set[str]
    url: str

    def free_by_agent(self) -> dict[str, dict[str, float]]:
        return {a.id: a.free_summary() for a in self.agents}


def _info(client: Any) -> dict[str, Any]:
    """Marathon's ``/v2/info`` ({} when it cannot be read)."""
    if client is None:
        return {}
    try:
        info = client.info() or {}
    except MarathonError:
        return {}
    return info if isinstance(info, dict) else {}


def _config(client: Any, info: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Marathon's ``/v2/info`` ``marathon_config`` ({} when it cannot be read)."""
    info = _info(client) if info is None else info
    return dict(info.get("marathon_config") or {})


def mesos_url(client: Any, given: str | None = None, config: Mapping[str, Any] | None = None) -> str | None:
    """The master's base URL: ``given`` (``--mesos`` / ``MESOS_URL``), else Marathon's ``mesos_leader_ui_url``."""
    if given:
        return given.rstrip("/")
    url = (config if config is not None else _config(client)).get("mesos_leader_ui_url")
    return str(url).rstrip("/") if url else None


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(parts.scheme)


def _session(client: Any, url: str) -> requests.Session:
    """Marathon's session (its credentials) for a master at Marathon's origin; else one without, bounded
    as Marathon's."""
    if client is not None and any(_origin(u) == _origin(url) for u in getattr(client, "urls", [])):
        return client.session
    return transport.session(max_bytes=getattr(client, "max_bytes", None),
                             deadline=lambda: getattr(client, "deadline", None),
                             verify=getattr(client, "verify", True), headers={"User-Agent": "marathon-tf"})


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


def _offers_anywhere(body: Mapping[str, Any]) -> bool:
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


def _own_offers(session: requests.Session, url: str, info: Mapping[str, Any]) -> dict[str, list[Resource]]:
    """What the master offers Marathon now, per agent ({} when it cannot be told)."""
    framework_id = info.get("frameworkId")
    framework_name = (info.get("marathon_config") or {}).get("framework_name") or info.get("name")
    if not framework_id and not framework_name:
        return {}
    params = {"framework_id": framework_id} if framework_id else None
    try:
        r = session.get(url + "/master/frameworks", params=params, timeout=TIMEOUT)
        body = r.json() if r.status_code == 200 else None
    except (requests.RequestException, ValueError):
        return {}
    try:
        shapes.check(body, shapes.MESOS_FRAMEWORKS)
    except shapes.ShapeError:
        return {}  # (as when it cannot be read: the agents' offers count as taken)
    return marathon_offers(body, framework_id, framework_name) if isinstance(body, dict) else {}


def _local_agents(client: Any) -> list[dict[str, Any]] | None:
    """The local runner's agents (``/_local/agents``), None elsewhere."""
    if client is None or not client.is_local():
        return None
    try:
        return client.local_agents()
    except MarathonError:
        return None


def read(client: Any, given: str | None = None) -> Capacity | None:
    """The cluster's agents now; None when there is nothing to check (the local runner's agents are
    not enforced); :class:`Unknown` (one line) when the master cannot be read."""
    local = _local_agents(client)
    if local is not None and any(a.get("state") == "active" and a.get("enforced") is False for a in local):
        return None
    return _read(client, given, local)


def registered(client: Any, given: str | None = None) -> Capacity:
    """Every registered agent (hostname, attributes) whatever its size — the local runner's
    machine-sized ones too: what a job's placement rules can use (:func:`marathon_tf.user.admission.check`);
    :class:`Unknown` when the master cannot be read."""
    return _read(client, given, _local_agents(client))


def _read(client: Any, given: str | None, local: list[dict[str, Any]] | None) -> Capacity:
    info = _info(client)
    config = _config(client, info)
    url = mesos_url(client, given, config)
    if not url:
        raise Unknown("Marathon names no Mesos master (/v2/info mesos_leader_ui_url); give --mesos URL or MESOS_URL")
    session = _session(client, url)
    try:
        r = session.get(url + "/master/slaves", timeout=TIMEOUT)
        body = r.json() if r.status_code == 200 else None
    except (requests.RequestException, ValueError) as e:
        raise Unknown(f"the Mesos master at {url} cannot be read ({type(e).__name__})") from None
    if not isinstance(body, dict) or not isinstance(body.get("slaves"), list):
        raise Unknown(f"the Mesos master at {url} answered GET /master/slaves with HTTP {r.status_code}"
                      + (" (it wants credentials)" if r.status_code in (401, 403) else ""))
    try:
        shapes.check(body, shapes.MESOS_SLAVES)
    except shapes.ShapeError as e:
        raise Unknown(f"the Mesos master at {url} does not answer GET /master/slaves like Mesos: {e}") from None
    names: dict[Any, Any] = {a.get("id"): a.get("name") for a in local or []}  # agent id -> hostname
    own = _own_offers(session, url, info) if _offers_anywhere(body) else {}
    agents = parse_agents(body, names, own)
    roles = {"*"}
    if local is not None:  # the local Marathon is offered every role its agents have
        roles |= {r.role for a in agents for r in a.total}
    elif config.get("mesos_role"):
        roles.add(str(config["mesos_role"]))
    return Capacity(agents, roles, url)
