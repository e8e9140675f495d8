"""``local serve --ui DIR``: a Marathon web UI build served same-origin at ``/ui/``.

The UI calls the API relative to its own URL (``../v2/...``), so it must share the
API's origin; ``/`` redirects to ``/ui/`` as real Marathon does. ``DIR`` is the
build of mesosphere/marathon-ui (the folder holding ``index.html`` and ``main.js``).
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

__all__ = ["add_ui_routes", "check_ui_dir"]


def check_ui_dir(ui_dir: str | Path) -> Path:
    """The build folder, or ValueError saying why it is not one."""
    path = Path(ui_dir).expanduser().resolve()
    if not (path / "index.html").is_file():
        raise ValueError(f"--ui {ui_dir}: no index.html there (give the marathon-ui build folder)")
    return path


def add_ui_routes(app: web.Application, ui_dir: str | Path) -> None:
    root = check_ui_dir(ui_dir)

    async def to_ui(request: web.Request) -> web.Response:
        raise web.HTTPFound("/ui/")

    async def index(request: web.Request) -> web.FileResponse:
        return web.FileResponse(root / "index.html", headers={"Cache-Control": "no-cache"})

    app.router.add_get("/", to_ui)
    app.router.add_get("/ui", to_ui)
    app.router.add_get("/ui/", index)
    app.router.add_static("/ui/", root, follow_symlinks=False)
