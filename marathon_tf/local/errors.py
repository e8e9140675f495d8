"""Marathon's API error responses (1.4 – 1.11: its exception mapper's and validation's bodies) as exceptions
the server turns into JSON."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

__all__ = ["ApiError", "not_valid", "invalid_json", "app_not_found", "group_not_found", "app_locked",
           "jetty_error"]


class ApiError(Exception):
    """An HTTP error with Marathon's JSON body."""

    def __init__(self, status: int, body: dict[str, Any] | None, headers: dict[str, str] | None = None):
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body
        self.headers = headers or {}


def not_valid(details: list[dict]) -> ApiError:
    """422 ``Object is not valid``."""
    return ApiError(422, {"message": "Object is not valid", "details": details})


def invalid_json(details: Any) -> ApiError:
    """400 ``Invalid JSON`` (``details`` is the parser message string, or a list for wrong shapes)."""
    return ApiError(400, {"message": "Invalid JSON", "details": details})


def app_not_found(app_id: str) -> ApiError:
    return ApiError(404, {"message": f"App '{app_id}' does not exist"})


def group_not_found(group_id: str) -> ApiError:
    return ApiError(404, {"message": f"Group '{group_id}' does not exist"})


def app_locked(deployment_ids: list[str]) -> ApiError:
    """409 AppLocked with the list of blocking deployments."""
    first = deployment_ids[0] if deployment_ids else ""
    return ApiError(409, {
        "message": "App is locked by one or more deployments. Override with the option '?force=true'. "
                   f"View details at '/v2/deployments/{first}'.",
        "deployments": [{"id": d} for d in deployment_ids]})


def jetty_error(status: int, reason: str, path: str, headers: Mapping[str, str] | None = None) -> web.Response:
    """What Jetty 9.4 (Marathon 1.4–1.11's server) answers for ``sendError(status, reason)``: its HTML
    error page. No leader (503 in 1.4–1.6, 502 since), basic auth's 401 ``Unauthorized``, a refused
    proxy (502)."""
    reason, path = _html(reason), _html(path)
    page = ("<html>\n<head>\n<meta http-equiv=\"Content-Type\" content=\"text/html;charset=ISO-8859-1\"/>\n"
            f"<title>Error {status} {reason}</title>\n</head>\n<body><h2>HTTP ERROR {status}</h2>\n"
            f"<p>Problem accessing {path}. Reason:\n<pre>    {reason}</pre></p><hr>"
            "<a href=\"http://eclipse.org/jetty\">Powered by Jetty:// 9.4.8.v20171121</a><hr/>\n</body>\n</html>\n")
    return web.Response(status=status, text=page, content_type="text/html", charset="ISO-8859-1",
                        headers=dict(headers or {}))


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
