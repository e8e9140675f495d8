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


#: Where the UI's "Mesos details" link (``/mesos/#/slaves/<agent>/frameworks/<fw>/executors/<task>``)
#: lands: no Mesos UI, but the task's sandbox files, read from this server's agent endpoints.
_LANDING = """<!doctype html><html><head><meta charset="utf-8"><title>Mesos (marathon-tf local)</title><link rel="icon" href="data:,"></head>
<body style="font-family: sans-serif"><h1>marathon-tf local runner</h1>
<p>This machine is the only Mesos agent; there is no Mesos web UI. <a href="/ui/">Marathon UI</a></p>
<div id="box"></div><script>
(async () => {
  const m = /executors[/]([^/?#]+)/.exec(location.hash), box = document.getElementById("box");
  if (!m) { return; }
  const id = decodeURIComponent(m[1]), state = await (await fetch("/state")).json();
  const ex = state.frameworks.flatMap(f => f.executors).find(e => e.id === id);
  if (!ex) { box.textContent = "No sandbox for " + id; return; }
  const files = await (await fetch("/files/browse?path=" + encodeURIComponent(ex.directory))).json();
  const h = document.createElement("h2"); h.textContent = "Sandbox of " + id; box.appendChild(h);
  for (const f of files) {
    const a = document.createElement("a"), p = document.createElement("p");
    a.href = "/files/download?path=" + encodeURIComponent(f.path);
    a.textContent = f.path.split("/").pop() + " (" + f.size + " bytes)";
    p.appendChild(a); box.appendChild(p);
  }
})();
</script></body></html>
"""


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

    async def landing(request: web.Request) -> web.Response:
        return web.Response(text=_LANDING, content_type="text/html")

    app.router.add_get(MESOS_PREFIX + "/", landing)
    app.router.add_get(MESOS_PREFIX + "/version", version)
    app.router.add_get(MESOS_PREFIX + "/master/state", master_state)
