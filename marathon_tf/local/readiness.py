"""Readiness checks during deployments, as Marathon 1.11's deployment steps wait for them.

While a deployment step starts, scales or restarts an app with ``readinessChecks``,
each task it waits for is probed over HTTP(S) on the port named ``portName``
every ``intervalSeconds``; the task is ready once the answer's status is in
``httpStatusCodesForReady`` (default ``[200]``). The step is done only when its
target count is running, healthy (with health checks) and ready. Tasks that
were already running when the deployment began count as ready (a scale-up waits
for the new ones only). Results are ``{"name", "taskId", "ready", "lastResponse"}``
(``lastResponse`` only with ``preserveLastResponse``), shown in the deployment's
``currentActions`` and in ``embed=app.readiness`` while the deployment runs.
"""

from __future__ import annotations

import asyncio

import aiohttp

from .state import AppState, Task

__all__ = ["Readiness", "READINESS_DEFAULTS"]

READINESS_DEFAULTS = {"name": "readinessCheck", "protocol": "HTTP", "path": "/", "portName": "http-api",
                      "intervalSeconds": 30, "timeoutSeconds": 10, "httpStatusCodesForReady": [200],
                      "preserveLastResponse": False}


class Readiness:
    """The readiness probes of running deployments, and their latest results per task."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.results: dict[str, dict] = {}  # task id -> result
        self._app_of: dict[str, str] = {}  # task id -> app id
        self._probes: dict[str, asyncio.Task] = {}

    def ready(self, app: AppState, task: Task) -> bool:
        """Is ``task`` ready? Starts probing it (once) when the app has a readiness check."""
        checks = (app.run_def or {}).get("readinessChecks") or []
        if not checks:
            return True
        if task.id not in self._probes:
            self._app_of[task.id] = app.id
            self._probes[task.id] = asyncio.ensure_future(self._probe(app, task, {**READINESS_DEFAULTS,
                                                                                  **checks[0]}))
        return bool(self.results.get(task.id, {}).get("ready"))

    def results_for(self, app_id: str) -> list[dict]:
        return [dict(r) for tid, r in self.results.items() if self._app_of.get(tid) == app_id]

    def forget(self, app_ids: set[str]) -> None:
        """Stop probing and drop the results of these apps (their deployment ended)."""
        for tid in [t for t, a in self._app_of.items() if a in app_ids]:
            probe = self._probes.pop(tid, None)
            if probe is not None:
                probe.cancel()
            self.results.pop(tid, None)
            self._app_of.pop(tid, None)

    async def _probe(self, app: AppState, task: Task, check: dict) -> None:
        names = [pd.get("name") for pd in (app.run_def or {}).get("portDefinitions") or []]
        port: int | None = None
        if check["portName"] in names and names.index(check["portName"]) < len(task.ports):
            port = task.ports[names.index(check["portName"])]
        scheme = "https" if check["protocol"] == "HTTPS" else "http"
        timeout = aiohttp.ClientTimeout(total=float(check["timeoutSeconds"]))
        while task.running:
            result = {"name": check["name"], "taskId": task.id, "ready": False}
            if port is not None:
                try:
                    async with aiohttp.ClientSession(timeout=timeout) as session:
                        async with session.get(f"{scheme}://{task.host}:{port}{check['path']}", ssl=False) as r:
                            body = await r.text(errors="replace")
                            result["ready"] = r.status in check["httpStatusCodesForReady"]
                            if check["preserveLastResponse"]:
                                result["lastResponse"] = {"status": r.status, "body": body,
                                                          "contentType": r.headers.get("Content-Type", "")}
                except (aiohttp.ClientError, asyncio.TimeoutError, OSError, UnicodeError):
                    pass
            self.results[task.id] = result
            if result["ready"]:
                return
            await asyncio.sleep(float(check["intervalSeconds"]))
