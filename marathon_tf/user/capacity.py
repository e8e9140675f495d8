"""The cluster's capacity as the Mesos master tells it: every registered agent's total and free resources.

Where the master is: ``--mesos`` / ``MESOS_URL``, else Marathon's ``/v2/info``
``marathon_config.mesos_leader_ui_url`` (the leading master's URL; read as
:class:`marathon_tf.marathon.model.Info`). One ``GET <master>/master/slaves`` (its agents, what they use and
what is offered now: :func:`marathon_tf.mesos.master.parse_agents`); what of those offers is Marathon's own
(it declines what it cannot use, and a launch takes from it):
``GET <master>/master/frameworks?framework_id=<id>`` (each framework's ``offers``), Marathon's framework id
from its ``/v2/info`` ``frameworkId`` (1.4 – 1.11), else the framework named
``marathon_config.framework_name``; asked only when some agent has resources offered, and when it cannot be
read every offer counts as taken.

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

from dataclasses import dataclass
from typing import Any

import requests

from marathon_tf.contract.errors import MarathonError
from marathon_tf.marathon import shapes, transport
from marathon_tf.marathon.model import Info
from marathon_tf.mesos.master import ClusterAgent, marathon_offers, offers_anywhere, parse_agents
from marathon_tf.mesos.resources import Resource

__all__ = ["Capacity", "Unknown", "read", "registered", "mesos_url", "TIMEOUT"]

#: (connect, read) seconds for the master: a refusal is said within 2 s, a slow master is skipped.
TIMEOUT = (1.5, 5.0)


class Unknown(Exception):
    """The capacity could not be read (one line: why); the check is skipped with a note."""


@dataclass
class Capacity:
    """The registered agents, the roles whose resources Marathon is offered, and where it was read."""

    agents: list[ClusterAgent]
    roles: set[str]
    url: str

    def free_by_agent(self) -> dict[str, dict[str, float]]:
        return {a.id: a.free_summary() for a in self.agents}


def _info(client: Any) -> Info:
    """What Marathon's ``/v2/info`` says of its Mesos master and framework (nothing when it cannot be read)."""
    if client is None:
        return Info()
    try:
        return Info.parse(client.info())
    except MarathonError:
        return Info()


def mesos_url(client: Any, given: str | None = None, info: Info | None = None) -> str | None:
    """The master's base URL: ``given`` (``--mesos`` / ``MESOS_URL``), else Marathon's ``mesos_leader_ui_url``."""
    if given:
        return given.rstrip("/")
    return (info if info is not None else _info(client)).mesos_url


def _session(client: Any, url: str) -> requests.Session:
    """Marathon's session (its credentials) for a master at Marathon's origin; else one without, bounded
    as Marathon's."""
    if client is not None and transport.same_origin(url, getattr(client, "urls", [])):
        return client.session
    return transport.session(max_bytes=getattr(client, "max_bytes", None),
                             deadline=lambda: getattr(client, "deadline", None),
                             verify=getattr(client, "verify", True), headers={"User-Agent": "marathon-tf"})


def _own_offers(session: requests.Session, url: str, info: Info) -> dict[str, list[Resource]]:
    """What the master offers Marathon now, per agent ({} when it cannot be told)."""
    framework_id, framework_name = info.framework_id, info.framework_name
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
    url = mesos_url(client, given, info)
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
    own = _own_offers(session, url, info) if offers_anywhere(body) else {}
    agents = parse_agents(body, names, own)
    roles = {"*"}
    if local is not None:  # the local Marathon is offered every role its agents have
        roles |= {r.role for a in agents for r in a.total}
    elif info.mesos_role:
        roles.add(info.mesos_role)
    return Capacity(agents, roles, url)
