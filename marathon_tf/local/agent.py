"""The Mesos agent endpoints for task sandboxes: ``GET /state`` (which executor
directory holds which task; ``flags.work_dir``, as a Mesos agent names its own: the runner's
state directory), ``GET /files/read`` (``path``, ``offset``, ``length`` →
``{"data", "offset"}``; ``offset=-1`` gives the size), ``GET /files/browse``
(``path`` → the directory's entries, as ``ls -l``) and ``GET /files/download``.
``marathon-tf logs`` uses the first two; the Marathon web UI all of them, as JSONP
(``?jsonp=callback``, which Mesos answers with ``callback(<json>);``) — given only to the server's own
pages: ``security.py`` refuses a JSONP request that does not show it is same-origin.

Served by the local Marathon on its own port (on a cluster they are on each agent,
port 5051). Only files inside the agents' sandbox directories can be read. Each agent N
answers as libprocess routes it, ``/slave(N)/state`` (its pid is ``slave(N)@<host:port>``):
its id, hostname, resources (``resources``, ``reserved_resources``, ``unreserved_resources``,
their ``*_full`` and ``*_allocated`` forms, as a Mesos agent writes them)
and attributes, and its own sandboxes; ``/state`` is every agent's sandboxes together (the
runner's one view, what ``logs`` and the web UI read).
"""

from __future__ import annotations

import grp
import json
import pwd
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from marathon_tf.mesos.resources import Resource
from marathon_tf.mesos.views import attributes_json, full_json, summary_json

from .agents import Agent, Agents
from .taskscope import SECRETS_DIR

__all__ = ["add_agent_routes", "mesos_json", "resource_fields"]

_CALLBACK = re.compile(r"^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$")


def mesos_json(request: web.Request, body: Any, status: int = 200) -> web.Response:
    """JSON, or JSONP when the query has ``jsonp=<callback>`` (as Mesos' HTTP endpoints answer)."""
    callback = request.query.get("jsonp")
    if callback is None:
        return web.json_response(body, status=status)
    if not _CALLBACK.match(callback):
        return web.Response(status=400, text="Invalid JSONP callback")
    return web.Response(status=status, text=f"{callback}({json.dumps(body)});", content_type="text/javascript")


def _owner(uid: int, names: Any, attr: str) -> str:
    try:
        return getattr(names(uid), attr)
    except KeyError:
        return str(uid)


def _entry(path: Path) -> dict:
    st = path.lstat()
    return {"path": str(path), "nlink": st.st_nlink, "size": st.st_size, "mtime": int(st.st_mtime),
            "mode": stat.filemode(st.st_mode), "uid": _owner(st.st_uid, pwd.getpwuid, "pw_name"),
            "gid": _owner(st.st_gid, grp.getgrgid, "gr_name")}

_MAX_LENGTH = 4 * 2 ** 20
#: The Mesos version the endpoints answer as (the UI picks ``/state`` over ``/state.json`` from 0.26 on).
MESOS_VERSION = "1.9.0"


def resource_fields(agent: Agent, used: list[Resource], full: bool = True) -> dict:
    """An agent's resources as Mesos writes them: total (``resources``), per reserved role, the
    unreserved (``*``) part — of the total, not what is free — and what its tasks use."""
    reserved: dict[str, list[Resource]] = {}
    for r in agent.resources:
        if r.role != "*":
            reserved.setdefault(r.role, []).append(r)
    unreserved = [r for r in agent.resources if r.role == "*"]
    out: dict[str, Any] = {"resources": summary_json(agent.resources),
           "reserved_resources": {role: summary_json(rs) for role, rs in reserved.items()},
           "unreserved_resources": summary_json(unreserved)}
    if full:
        allocated: dict[str, list[Resource]] = {}
        for r in used:
            if r.role != "*":
                allocated.setdefault(r.role, []).append(r)
        out.update({"reserved_resources_full": {role: full_json(rs) for role, rs in reserved.items()},
                    "unreserved_resources_full": full_json(unreserved),
                    "reserved_resources_allocated": {role: summary_json(rs) for role, rs in allocated.items()},
                    "unreserved_resources_allocated": summary_json(r for r in used if r.role == "*")})
    return out


# Over ruff's complexity limit (C901), as one piece: the Mesos agent's routes, each a small handler defined here.
def add_agent_routes(app: web.Application, agents: Agents, framework_id: str,  # noqa: C901
                     used: Callable[[Agent], list[Resource]], started: float) -> None:
    def inside(raw: str) -> Path | None:
        try:
            path = Path(raw).resolve()
        except (ValueError, OSError):
            return None
        for agent in agents.all:
            root = agent.sandboxes.resolve()
            if path == root or root in path.parents:
                return None if SECRETS_DIR in path.relative_to(root).parts else path  # a task's token: never served
        return None

    def executors(agent_list: list[Agent]) -> list[dict]:
        boxes = [box for a in agent_list if a.sandboxes.is_dir() for box in a.sandboxes.iterdir()]
        return [{"id": box.name, "name": f"Command Executor (Task: {box.name})", "source": box.name,
                 "framework_id": framework_id, "container": box.name, "directory": str(box),
                 "tasks": [{"id": box.name}], "queued_tasks": [], "completed_tasks": []}
                for box in sorted(boxes, key=lambda p: p.stat().st_mtime)]

    def frameworks(agent_list: list[Agent]) -> list[dict]:
        return [{"id": framework_id, "name": "marathon", "executors": executors(agent_list),
                 "completed_executors": []}]

    async def state(request: web.Request) -> web.Response:
        host = request.host
        return mesos_json(request, {"id": agents.all[0].id, "hostname": host.rsplit(":", 1)[0],
                                    "pid": f"slave(1)@{host}", "version": MESOS_VERSION,
                                    "flags": {"work_dir": str(agents.all[0].work_dir)},  # the runner's state directory
                                    "frameworks": frameworks(agents.all), "completed_frameworks": []})

    async def agent_state(request: web.Request) -> web.Response:
        index = int(request.match_info["n"])
        if not 1 <= index <= len(agents.all) or not agents.all[index - 1].active:
            return web.Response(status=404, text="Not found")  # an agent that is gone answers nothing
        agent = agents.all[index - 1]
        return mesos_json(request, {
            "version": MESOS_VERSION, "build_user": "marathon-tf", "start_time": started,
            "id": agent.id, "pid": f"slave({agent.index})@{request.host}", "hostname": agent.hostname,
            "capabilities": [], **resource_fields(agent, used(agent)),
            "attributes": attributes_json(agent.attributes), "master_hostname": request.host.rsplit(":", 1)[0],
            "flags": {"work_dir": str(agent.work_dir), "hostname": agent.hostname},
            "frameworks": frameworks([agent]), "completed_frameworks": []})

    async def browse(request: web.Request) -> web.Response:
        path = inside(request.query.get("path", ""))
        if path is None or not path.is_dir():
            return web.Response(status=404, text="Path not found")
        return mesos_json(request, [_entry(p) for p in sorted(path.iterdir()) if p.name != SECRETS_DIR])

    async def download(request: web.Request) -> web.StreamResponse:
        path = inside(request.query.get("path", ""))
        if path is None or not path.is_file():
            return web.Response(status=404, text="File not found")
        return web.FileResponse(path, headers={"Content-Type": "application/octet-stream",
                                               "Content-Disposition": f'attachment; filename="{path.name}"'})

    async def read(request: web.Request) -> web.Response:
        q = request.query
        try:
            path = inside(q.get("path", ""))
            offset = int(q.get("offset", "0"))
            length = min(int(q.get("length", str(_MAX_LENGTH))), _MAX_LENGTH)
        except ValueError:
            return web.Response(status=400, text="Failed to parse offset/length")
        if path is None or not path.is_file():
            return web.Response(status=404, text="File not found")
        size = path.stat().st_size
        if offset < 0:
            return mesos_json(request, {"data": "", "offset": size})
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(max(0, length))
        return mesos_json(request, {"data": data.decode("utf-8", "replace"), "offset": offset})

    app.router.add_get("/state", state)
    app.router.add_get(r"/slave({n:\d+})/state", agent_state)
    app.router.add_get("/files/read", read)
    app.router.add_get("/files/browse", browse)
    app.router.add_get("/files/download", download)
