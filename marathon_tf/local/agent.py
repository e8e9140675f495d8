"""The two Mesos agent endpoints ``marathon-tf logs`` reads task sandboxes with:
``GET /state`` (which executor directory holds which task) and ``GET /files/read``
(``path``, ``offset``, ``length`` → ``{"data", "offset"}``; ``offset=-1`` gives the size).

Served by the local Marathon on its own port (on a cluster they are on each agent,
port 5051). Only files inside the sandboxes directory can be read.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

__all__ = ["add_agent_routes"]

_MAX_LENGTH = 4 * 2 ** 20


def add_agent_routes(app: web.Application, sandboxes: Path, framework_id: str) -> None:
    root = Path(sandboxes).resolve()

    async def state(request: web.Request) -> web.Response:
        executors = []
        if root.is_dir():
            for box in sorted(root.iterdir(), key=lambda p: p.stat().st_mtime):
                executors.append({"id": box.name, "directory": str(box), "tasks": [{"id": box.name}]})
        return web.json_response({"frameworks": [{"id": framework_id, "name": "marathon",
                                                  "executors": executors, "completed_executors": []}],
                                  "completed_frameworks": []})

    async def read(request: web.Request) -> web.Response:
        q = request.query
        try:
            path = Path(q.get("path", "")).resolve()
            offset = int(q.get("offset", "0"))
            length = min(int(q.get("length", str(_MAX_LENGTH))), _MAX_LENGTH)
        except ValueError:
            return web.Response(status=400, text="Failed to parse offset/length")
        if root not in path.parents or not path.is_file():
            return web.Response(status=404, text="File not found")
        size = path.stat().st_size
        if offset < 0:
            return web.json_response({"data": "", "offset": size})
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(max(0, length))
        return web.json_response({"data": data.decode("utf-8", "replace"), "offset": offset})

    app.router.add_get("/state", state)
    app.router.add_get("/files/read", read)
