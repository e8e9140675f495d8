"""Fault injection and the request log of the local Marathon (not part of Marathon's API).

A rule matches requests by ``method`` (absent or ``*``: any) and ``path`` (a
prefix on ``/`` boundaries; ``//`` collapsed) and applies ``times`` times
(absent: until removed). Kinds:

* ``status`` (the default when ``status`` is given): answer with that status; a
  503 looks like Marathon without a leader (Jetty's HTML error page), other
  statuses carry ``body`` or ``{"message": "Injected fault"}``;
* ``reset``: drop the connection without an answer;
* ``delay``: wait ``seconds``, then serve the request normally;
* ``lock``: answer 409 AppLocked, as if a deployment held the app.

Every request outside ``/_local/`` is logged (method, path, query, status, fault).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from .errors import app_locked, jetty_error

__all__ = ["FaultInjector", "ADMIN_PREFIX"]

ADMIN_PREFIX = "/_local/"
KINDS = ("status", "reset", "delay", "lock")


def _norm(path: str) -> str:
    return re.sub("/+", "/", path) or "/"


class FaultInjector:
    """Thread-safe rule list + request log, and the aiohttp middleware applying them."""

    def __init__(self, log_size: int = 10000) -> None:
        self._rules: list[dict] = []
        self._log: collections.deque[dict] = collections.deque(maxlen=log_size)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    # -- rules ----------------------------------------------------------------------
    def add(self, rule: dict | None = None, **fields: Any) -> dict:
        """Add a rule (a dict or keyword fields); returns it with its ``id``."""
        rule = {**(rule or {}), **fields}
        kind = rule.get("kind") or ("status" if "status" in rule else None)
        if kind not in KINDS:
            raise ValueError(f"fault kind must be one of {KINDS} (or give 'status'), not {kind!r}")
        if kind == "status" and not isinstance(rule.get("status"), int):
            raise ValueError("a status fault needs an integer 'status'")
        if kind == "delay" and not isinstance(rule.get("seconds"), (int, float)):
            raise ValueError("a delay fault needs 'seconds'")
        times = rule.get("times")
        if times is not None and (not isinstance(times, int) or times < 1):
            raise ValueError("'times' must be a positive integer")
        rule = {**rule, "kind": kind, "path": _norm(rule.get("path") or "/"),
                "method": (rule.get("method") or "*").upper(), "id": next(self._ids), "hits": 0}
        with self._lock:
            self._rules.append(rule)
        return dict(rule)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def rules(self) -> list[dict]:
        with self._lock:
            return [dict(r) for r in self._rules]

    def _take(self, method: str, path: str) -> dict | None:
        path = _norm(path)
        with self._lock:
            for rule in self._rules:
                prefix = rule["path"].rstrip("/")
                if rule["method"] not in ("*", method):
                    continue
                if not (path == rule["path"] or path.startswith(prefix + "/") or prefix == ""):
                    continue
                rule["hits"] += 1
                if rule.get("times") is not None:
                    rule["times"] -= 1
                    if rule["times"] <= 0:
                        self._rules.remove(rule)
                return dict(rule)
        return None

    # -- request log ----------------------------------------------------------------
    def requests(self) -> list[dict]:
        with self._lock:
            return [dict(r) for r in self._log]

    def clear_requests(self) -> None:
        with self._lock:
            self._log.clear()

    def _record(self, request: web.Request, status: int | None, fault: str | None) -> None:
        entry = {"method": request.method, "path": request.path, "query": request.query_string,
                 "status": status, "fault": fault, "time": time.time()}
        with self._lock:
            self._log.append(entry)

    # -- middleware -----------------------------------------------------------------
    @web.middleware
    async def middleware(self, request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        if request.path.startswith(ADMIN_PREFIX):
            return await handler(request)
        rule: dict[str, Any] = self._take(request.method, request.path) or {}
        kind = rule["kind"] if rule else None
        if kind == "reset":
            self._record(request, None, kind)
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError()
        if kind == "delay":
            try:
                await asyncio.sleep(float(rule["seconds"]))
            except asyncio.CancelledError:  # the client hung up during the stall: still logged
                self._record(request, None, kind)
                raise
        elif kind == "lock":
            err = app_locked([rule.get("deploymentId") or str(uuid.uuid4())])
            self._record(request, err.status, kind)
            return web.json_response(err.body, status=err.status)
        elif kind == "status":
            self._record(request, rule["status"], kind)
            if rule["status"] == 503 and "body" not in rule:
                return jetty_error(503, "Could not determine the current leader", request.path)
            body = rule.get("body", {"message": "Injected fault"})
            return web.Response(status=rule["status"], text=json.dumps(body), content_type="application/json")
        entry_status: int | None = None
        try:
            response = await handler(request)
            entry_status = response.status
            return response
        except web.HTTPException as exc:
            entry_status = exc.status
            raise
        finally:
            self._record(request, entry_status if entry_status is not None else 500, kind)
