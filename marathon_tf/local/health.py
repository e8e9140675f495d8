"""Health checks of a running task: MESOS_HTTP/HTTP(S), MESOS_TCP/TCP and COMMAND.

One coroutine per check. It waits ``delaySeconds``, then probes every
``intervalSeconds`` with ``timeoutSeconds``. Failures while the task is inside
``gracePeriodSeconds`` and has never been healthy are ignored (Marathon's
``HealthCheckActor``). After ``maxConsecutiveFailures`` failures outside the
grace period the ``on_unhealthy`` callback kills the task.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import aiohttp

from .state import Task, now_ts

__all__ = ["HealthMonitor", "probe"]


async def probe(check: dict, host: str, ports: list[int], env: dict[str, str], cwd: str) -> str | None:
    """Run one probe; ``None`` when it passed, else the failure cause."""
    protocol = check.get("protocol", "HTTP")
    timeout = float(check.get("timeoutSeconds", 20))
    if protocol == "COMMAND":
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", (check.get("command") or {}).get("value", "false"), cwd=cwd, env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL, start_new_session=True)
        try:
            code = await asyncio.wait_for(proc.wait(), timeout)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            return f"Command timed out after {timeout} seconds"
        return None if code == 0 else f"Command exited with status {code}"
    port = check.get("port")
    if port is None:
        index = check.get("portIndex", 0)
        if not 0 <= index < len(ports):
            return f"portIndex {index} does not address a port"
        port = ports[index]
    if protocol.endswith("TCP"):
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
            writer.close()
            return None
        except (OSError, asyncio.TimeoutError) as exc:
            return f"TCP connection to {host}:{port} failed: {exc or 'timeout'}"
    scheme = "https" if protocol.endswith("HTTPS") else "http"
    url = f"{scheme}://{host}:{port}{check.get('path', '/')}"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
            async with session.get(url, ssl=False) as resp:
                if 200 <= resp.status < 400:
                    return None
                return f"HTTP {resp.status} from {url}"
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
        return f"{type(exc).__name__} from {url}: {exc}"


class HealthMonitor:
    """Runs an app's health checks against one task and records results on ``task.health``."""

    def __init__(self, task: Task, checks: list[dict], host: str, env: dict[str, str],
                 on_change: Callable[[Task, bool], None], on_unhealthy: Callable[[Task, str], None],
                 on_result: Callable[[], None] = lambda: None) -> None:
        self.task = task
        self.on_result = on_result  # every result recorded (the task's healthCheckResults changed)
        self.checks = checks
        self.host = host
        self.env = env
        self.on_change = on_change
        self.on_unhealthy = on_unhealthy
        self._runners: list[asyncio.Task] = []

    def start(self) -> None:
        self._runners = [asyncio.ensure_future(self._run(i, c)) for i, c in enumerate(self.checks)]

    def stop(self) -> None:
        for runner in self._runners:
            runner.cancel()

    async def _run(self, index: int, check: dict) -> None:
        protocol = check.get("protocol", "HTTP")
        mesos_level = protocol.startswith("MESOS_") or protocol == "COMMAND"
        started = time.monotonic()
        await asyncio.sleep(float(check.get("delaySeconds", 15)))
        while self.task.running:
            cause = await probe(check, self.host, self.task.ports, self.env, self.task.sandbox)
            if not self.task.running:
                return
            self._record(index, check, cause, started, mesos_level)
            await asyncio.sleep(float(check.get("intervalSeconds", 60)))

    def _record(self, index: int, check: dict, cause: str | None, started: float, mesos_level: bool) -> None:
        previous = self.task.health.get(index)
        now = now_ts()
        result: dict[str, Any]
        if cause is None:
            result = {"alive": True, "consecutiveFailures": 0,
                      "firstSuccess": (previous or {}).get("firstSuccess") or now,
                      "lastFailure": (previous or {}).get("lastFailure"), "lastSuccess": now,
                      "lastFailureCause": (previous or {}).get("lastFailureCause"),
                      "instanceId": self.task.instance_id}
        else:
            in_grace = time.monotonic() - started < float(check.get("gracePeriodSeconds", 300))
            if in_grace and not (previous or {}).get("firstSuccess"):
                return
            failures = (previous or {}).get("consecutiveFailures", 0) + 1
            result = {"alive": False, "consecutiveFailures": failures,
                      "firstSuccess": (previous or {}).get("firstSuccess"), "lastFailure": now,
                      "lastSuccess": (previous or {}).get("lastSuccess"), "lastFailureCause": cause,
                      "instanceId": self.task.instance_id}
        self.task.health[index] = result
        self.on_result()
        if previous is None or previous["alive"] != result["alive"]:
            self.on_change(self.task, result["alive"])
        limit = int(check.get("maxConsecutiveFailures", 3))
        if cause is not None and (limit > 0 or mesos_level) and result["consecutiveFailures"] >= max(limit, 1):
            self.on_unhealthy(self.task, cause)
