"""The Mesos master endpoints the Marathon web UI reads to find task sandboxes.

``/v2/info``'s ``marathon_config.mesos_leader_ui_url`` points at ``/mesos`` on the
local Marathon's own origin; the UI then asks (as JSONP) for ``/mesos/version``
and ``/mesos/master/state``, takes the agent's address from the agent's ``pid``
(``slave(1)@host:port`` = this same server, see ``agent.py``), and reads its
``/state`` and ``/files/browse``. The one agent is this machine.
"""

from __future__ import annotations

from typing import Callable

from aiohttp import web

from .agent import MESOS_VERSION, mesos_json
from .state import AGENT_ID, FRAMEWORK_ID, State

__all__ = ["add_master_routes", "MESOS_PREFIX"]

MESOS_PREFIX = "/mesos"


def _task(state: State, task) -> dict:
    definition = state.apps[task.app_id].definition if task.app_id in state.apps else {}
    return {"id": task.id, "name": task.app_id.strip("/").replace("/", "."), "framework_id": FRAMEWORK_ID,
            "executor_id": "", "slave_id": AGENT_ID, "state": task.state,
            "resources": {k: definition.get(k, 0) for k in ("cpus", "mem", "disk", "gpus")},
            "statuses": [{"state": task.state, "timestamp": 0}]}


def add_master_routes(app: web.Application, state: State, started: Callable[[], float]) -> None:
    async def version(request: web.Request) -> web.Response:
        return mesos_json(request, {"version": MESOS_VERSION, "build_user": "marathon-tf", "build_date": ""})

    async def master_state(request: web.Request) -> web.Response:
        host = request.host
        hostname = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        tasks = [t for a in state.apps.values() for t in a.tasks.values()]
        active = [_task(state, t) for t in tasks if t.active]
        done = [_task(state, t) for t in tasks if not t.active]
        return mesos_json(request, {
            "version": MESOS_VERSION, "id": "local", "pid": f"master@{host}", "hostname": hostname,
            "leader": f"master@{host}", "activated_slaves": 1, "start_time": started(),
            "slaves": [{"id": AGENT_ID, "pid": f"slave(1)@{host}", "hostname": hostname, "active": True}],
            "frameworks": [{"id": FRAMEWORK_ID, "name": "marathon", "active": True, "hostname": hostname,
                            "webui_url": f"http://{host}", "tasks": active, "completed_tasks": done}],
            "completed_frameworks": []})

    app.router.add_get(MESOS_PREFIX + "/version", version)
    app.router.add_get(MESOS_PREFIX + "/master/state", master_state)
