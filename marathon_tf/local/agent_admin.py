"""Agents joining, lost and found, on request: the runner's fault injection for agents.

Over HTTP, on the admin API (``/_local/``, not Marathon's): ``GET /_local/agents`` lists them,
``POST /_local/agents`` ``{"resources": "...", "attributes": "..."}`` adds one (Mesos syntax;
none: as large as the machine), ``POST /_local/agents/<agent-N | id | 127.0.0.N>`` with
``{"action": "kill" | "unreachable" | "reconnect"}`` loses or finds one (see ``agentloss.py``).
:class:`~marathon_tf.local.LocalCluster` has the same as methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from .agents import Agent

if TYPE_CHECKING:  # pragma: no cover
    from .scheduler import Scheduler

__all__ = ["AgentAdmin", "add_agent_admin_routes"]


class AgentAdmin:
    """What can be done to the agents (on the scheduler's event loop)."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.agents = scheduler.agents

    def find(self, key: str) -> Agent:
        """The agent with this id, name or hostname (KeyError naming them all if none)."""
        agent = self.agents.get(key)
        if agent is None:
            raise KeyError(f"no agent {key!r} (agents: {', '.join(a.name for a in self.agents.all)})")
        return agent

    def add(self, resources: str | None = None, attributes: str | None = None) -> Agent:
        """A new agent joins (ValueError for bad resources or attributes); it is offered at once."""
        agent = self.agents.add(resources, attributes)
        self.scheduler.wake()
        return agent

    def lose(self, key: str, kill: bool = False) -> list[str]:
        """Agent ``key`` is lost (``kill``: it dies, with its tasks' processes); the ids of its tasks
        that became TASK_UNREACHABLE."""
        return self.scheduler.loss.lose(self.find(key), kill)

    def reconnect(self, key: str) -> Agent:
        """A lost agent re-registers (a dead one comes back empty)."""
        agent = self.find(key)
        if not agent.active:
            self.scheduler.loss.back(agent)
        return agent


def add_agent_admin_routes(app: web.Application, admin: AgentAdmin) -> None:
    async def list_agents(request: web.Request) -> web.Response:
        return web.json_response([a.describe() for a in admin.agents.all])

    async def add_agent(request: web.Request) -> web.Response:
        body = await request.json()
        try:
            agent = admin.add(body.get("resources"), body.get("attributes"))
        except (ValueError, AttributeError) as exc:
            return web.json_response({"message": str(exc)}, status=422)
        return web.json_response(agent.describe(), status=201)

    async def agent_action(request: web.Request) -> web.Response:
        body = await request.json()
        action = body.get("action") if isinstance(body, dict) else None
        key = request.match_info["agent"]
        try:
            if action in ("unreachable", "kill"):
                changed = admin.lose(key, kill=action == "kill")
            elif action == "reconnect":
                admin.reconnect(key)
                changed = []
            else:
                return web.json_response({"message": "action must be unreachable, kill or reconnect"}, status=422)
        except KeyError as exc:
            return web.json_response({"message": exc.args[0]}, status=404)
        return web.json_response({"agent": admin.find(key).describe(), "unreachable": changed})

    app.router.add_get("/_local/agents", list_agents)
    app.router.add_post("/_local/agents", add_agent)
    app.router.add_post("/_local/agents/{agent}", agent_action)
