"""The Mesos agent endpoints for task sandboxes: ``GET /state`` (which executor
directory holds which task; ``flags.work_dir``, as a Mesos agent names its own: the runner's
state directory), ``GET /files/read`` (``path``, ``offset``, ``length`` →
``{"data", "offset"}``; ``offset=-1`` gives the size), ``GET /files/browse``
(``path`` → the directory's entries, as ``ls -l``) and ``GET /files/download``.
``marathon-tf logs`` uses the first two; the Marathon web UI all of them, as JSONP
(``?jsonp=callback``, which Mesos answers with ``callback(<json>);``).

Served by the local Marathon on its own port (on a cluster they are on each agent,
port 5051). Only files inside the sandboxes directory can be read.
"""

from __future__ import annotations

import grp
import json
import pwd
import re
import stat
from pathlib import Path
from typing import Any, Optional

from aiohttp import web

__all__ = ["add_agent_routes", "mesos_json"]

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


def add_agent_routes(app: web.Application, sandboxes: Path, framework_id: str, agent_id: str = "") -> None:
    root = Path(sandboxes).resolve()

    def inside(raw: str) -> Optional[Path]:
        try:
            path = Path(raw).resolve()
        except (ValueError, OSError):
            return None
        return path if path == root or root in path.parents else None

    async def state(request: web.Request) -> web.Response:
        executors = []
        if root.is_dir():
            for box in sorted(root.iterdir(), key=lambda p: p.stat().st_mtime):
                executors.append({"id": box.name, "name": f"Command Executor (Task: {box.name})",
                                  "source": box.name, "framework_id": framework_id, "container": box.name,
                                  "directory": str(box), "tasks": [{"id": box.name}],
                                  "queued_tasks": [], "completed_tasks": []})
        host = request.host
        return mesos_json(request, {"id": agent_id, "hostname": host.rsplit(":", 1)[0],
                                    "pid": f"slave(1)@{host}", "version": MESOS_VERSION,
                                    "flags": {"work_dir": str(root.parent)},  # the runner's state directory
                                    "frameworks": [{"id": framework_id, "name": "marathon",
                                                    "executors": executors, "completed_executors": []}],
                                    "completed_frameworks": []})

    async def browse(request: web.Request) -> web.Response:
        path = inside(request.query.get("path", ""))
        if path is None or not path.is_dir():
            return web.Response(status=404, text="Path not found")
        return mesos_json(request, [_entry(p) for p in sorted(path.iterdir())])

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
    app.router.add_get("/files/read", read)
    app.router.add_get("/files/browse", browse)
    app.router.add_get("/files/download", download)
