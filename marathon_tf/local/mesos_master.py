"""The Mesos master endpoints the Marathon web UI reads to find task sandboxes.

``/v2/info``'s ``marathon_config.mesos_leader_ui_url`` points at ``/mesos`` on the
local Marathon's own origin; the UI then asks (as JSONP) for ``/mesos/version``
and ``/mesos/master/state``, takes the agent's address from the agent's ``pid``
(``slave(1)@host:port`` = this same server, see ``agent.py``), and reads its
``/state`` and ``/files/browse``.

``/mesos/master/state`` and ``/mesos/master/slaves`` list the registered (reachable) agents as the
Mesos master writes them: ``id``,
``hostname``, ``port``, ``attributes``, ``pid`` (``slave(N)@<this server>``: its ``/slave(N)/state``),
``registered_time``, ``resources`` (the total), ``used_resources``, ``offered_resources`` (none:
offers are not held), ``reserved_resources`` (per role), ``unreserved_resources`` (the ``*``
part of the total, not what is free: free = ``resources`` − ``used_resources``), ``active`` …;
``/master/slaves`` adds the ``*_full`` forms. Unreachable agents are counted in
``unreachable_slaves`` and left out, as Mesos does; their tasks are ``unreachable_tasks``.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from marathon_tf.mesos.resources import Resource
from marathon_tf.mesos.views import attributes_json, full_json, summary_json

from .agent import MESOS_VERSION, mesos_json, resource_fields
from .agents import Agent, Agents
from .state import FRAMEWORK_ID, State, Task

__all__ = ["add_master_routes", "MESOS_PREFIX"]

MESOS_PREFIX = "/mesos"


#: Where the UI's "Mesos details" link (``/mesos/#/slaves/<agent>/frameworks/<fw>/executors/<task>``)
#: lands: no Mesos UI, but the task's sandbox files, read from this server's agent endpoints.
_LANDING = """<!doctype html><html><head><meta charset="utf-8"><title>Mesos (marathon-tf local)</title>\
<link rel="icon" href="data:,"></head>
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


def _task(state: State, task: Task) -> dict:
    return {"id": task.id, "name": task.app_id.strip("/").replace("/", "."), "framework_id": FRAMEWORK_ID,
            "executor_id": "", "slave_id": task.agent_id, "state": task.state,
            "resources": summary_json(task.consumed), "statuses": [{"state": task.state, "timestamp": 0}]}


def slave_json(agent: Agent, used: list[Resource], address: str, full: bool = False) -> dict:
    """One registered agent as the master writes it (``full``: with ``*_full``, as ``/master/slaves``)."""
    port = int(address.rsplit(":", 1)[1]) if ":" in address.rsplit("]", 1)[-1] else 80
    fields = resource_fields(agent, used, full)
    out = {"id": agent.id, "hostname": agent.hostname, "port": port,
           "attributes": attributes_json(agent.attributes), "pid": f"slave({agent.index})@{address}",
           "registered_time": agent.registered_time}
    if agent.reregistered_time is not None:
        out["reregistered_time"] = agent.reregistered_time
    out.update({"resources": fields["resources"], "used_resources": summary_json(used),
                "offered_resources": summary_json([]), "reserved_resources": fields["reserved_resources"],
                "unreserved_resources": fields["unreserved_resources"], "active": True, "deactivated": False,
                "version": MESOS_VERSION, "capabilities": []})
    if full:
        out.update({"reserved_resources_full": fields["reserved_resources_full"],
                    "unreserved_resources_full": fields["unreserved_resources_full"],
                    "used_resources_full": full_json(used), "offered_resources_full": []})
    return out


def add_master_routes(app: web.Application, state: State, agents: Agents, used: Callable[[Agent], list[Resource]],
                      started: Callable[[], float]) -> None:
    async def version(request: web.Request) -> web.Response:
        return mesos_json(request, {"version": MESOS_VERSION, "build_user": "marathon-tf", "build_date": ""})

    async def master_state(request: web.Request) -> web.Response:
        host = request.host
        hostname = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        tasks = [t for a in state.apps.values() for t in a.tasks.values()]
        active = [_task(state, t) for t in tasks if t.active and t.state != "TASK_UNREACHABLE"]
        unreachable = [_task(state, t) for t in tasks if t.state == "TASK_UNREACHABLE"]
        done = [_task(state, t) for t in tasks if not t.active]
        registered = agents.active()
        return mesos_json(request, {
            "version": MESOS_VERSION, "id": "local", "pid": f"master@{host}", "hostname": hostname,
            "leader": f"master@{host}", "start_time": started(), "activated_slaves": len(registered),
            "deactivated_slaves": 0, "unreachable_slaves": len(agents.all) - len(registered),
            "slaves": [slave_json(a, used(a), host) for a in registered], "recovered_slaves": [],
            "frameworks": [{"id": FRAMEWORK_ID, "name": "marathon", "active": True, "hostname": hostname,
                            "webui_url": f"http://{host}", "tasks": active, "unreachable_tasks": unreachable,
                            "completed_tasks": done}],
            "completed_frameworks": []})

    async def master_slaves(request: web.Request) -> web.Response:
        return mesos_json(request, {"slaves": [slave_json(a, used(a), request.host, full=True)
                                               for a in agents.active()], "recovered_slaves": []})

    async def landing(request: web.Request) -> web.Response:
        return web.Response(text=_LANDING, content_type="text/html")

    app.router.add_get(MESOS_PREFIX + "/", landing)
    app.router.add_get(MESOS_PREFIX + "/version", version)
    app.router.add_get(MESOS_PREFIX + "/master/state", master_state)
    app.router.add_get(MESOS_PREFIX + "/master/slaves", master_slaves)
