"""The aiohttp application of the local Marathon (Marathon 1.8's REST API; the version it plays: ``versions.py``).

Wires the runtime (state, event bus, launcher, scheduler, deployments, faults)
and serves: the /v2 resources of ``api.py``, ``/v2/events`` (SSE exactly as
Jetty's EventSourceServlet: exact ``Accept: text/event-stream`` or 405,
``event: X\\r\\ndata: {...}\\r\\n\\r\\n`` frames, a bare ``\\r\\n`` heartbeat, close-
delimited body), ``/v2/info``, ``/v2/leader``, ``/ping``, ``/v2/plugins``, the
admin API under ``/_local/`` (faults, request log, killing a task's process, agents:
``agent_admin.py``), the
Mesos endpoints the UI reads (``mesos_master.py``, ``agent.py``) and optionally
the UI itself (``extras/ui.py``). ``security.py`` guards every route. ``local serve``'s
extras (``extras/``: the state kept on disk, the UI) are imported only when asked for.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from .agent import add_agent_routes
from .agent_admin import AgentAdmin, add_agent_admin_routes
from .agents import Agents
from .api import MarathonApi
from .deployments import DeploymentManager
from .errors import ApiError
from .events import DROPPED, EventBus
from .faults import FaultInjector
from .launcher import Launcher
from .mesos_master import MESOS_PREFIX, add_master_routes
from .revive import DECLINE_OFFER_DURATION, MIN_REVIVE_OFFERS_INTERVAL
from .scheduler import Scheduler
from .security import GRANT_KEY, Security
from .state import FRAMEWORK_ID, State, canonical_path, now_ts
from .taskscope import event_visible, marathon_scope
from .versions import DEFAULT_VERSION, SCALE_APPS_INTERVAL, Played, played

if TYPE_CHECKING:
    from .extras.persist import Store

__all__ = ["Runtime", "create_app", "MARATHON_VERSION", "DEFAULT_FEATURES", "FEATURES"]

#: The Marathon version this runner plays by default (``--marathon-version``: ``versions.py``).
MARATHON_VERSION = DEFAULT_VERSION
#: ``--enable_features`` values Marathon 1.8 knows, and ours by default.
FEATURES = ("vips", "task_killing", "external_volumes", "secrets", "gpu_resources")
DEFAULT_FEATURES = ("gpu_resources",)


class Runtime:
    """Everything one local Marathon owns; build it on the event loop that will run it."""

    def __init__(self, state_dir: Path, host: str = "127.0.0.1", heartbeat: float = 10.0,
                 kill_grace: float = 3.0, kill_grace_cap: float = 30.0, shutdown_grace: float = 2.0,
                 security: Security | None = None, launcher: Launcher | None = None, agents: Agents | None = None,
                 features: Iterable[str] = DEFAULT_FEATURES, gpu_scheduling_behavior: str = "restricted",
                 persist: bool = False, filter_gpu_resources: bool = True,
                 offer_filter: float = DECLINE_OFFER_DURATION,
                 revive_interval: float = MIN_REVIVE_OFFERS_INTERVAL, marathon_version: Played | None = None,
                 scale_apps_interval: float = SCALE_APPS_INTERVAL) -> None:
        self.host = host
        #: The Marathon version played (``versions.py``).
        self.played = marathon_version or played()
        self.security = security or Security(host)
        self.heartbeat = heartbeat
        self.url = ""
        self.ha = False  # several instances over this one state (LocalCluster's marathon_instances)
        #: ``--zk_session_timeout`` (s): how long a dead leader is still named (LocalCluster sets it).
        self.zk_session_timeout = 10.0
        self.offer_filter, self.revive_interval = offer_filter, revive_interval
        self.features = sorted(set(features))
        self.state = State(host, self.played.app_rules(self.features))
        self.bus = EventBus()
        self.bus.listeners.append(self.state.touch)  # nearly every change is an event; the rest touch it
        self.faults = FaultInjector()
        self.launcher = launcher or Launcher(Path(state_dir), host, kill_grace_cap)
        self.agents = agents or Agents(self.launcher.state_dir, host)
        self.scheduler = Scheduler(self.state, self.launcher, self.bus, kill_grace, shutdown_grace, self.agents,
                                   gpu_restricted=gpu_scheduling_behavior == "restricted"
                                   and "gpu_resources" in self.features,
                                   task_killing="task_killing" in self.features,
                                   gpu_capable="gpu_resources" in self.features,
                                   filter_gpu_resources=filter_gpu_resources, offer_filter=offer_filter,
                                   revive_interval=revive_interval, scale_apps_interval=scale_apps_interval)
        self.scheduler.grants = self.security.grants if self.security.issues_tokens else None
        self.scheduler.group_by_even = self.played.group_by_even
        self.scheduler.scalars_grouped = self.played.scalars_grouped
        self.scheduler.gpu_label = self.played.knows_gpu_scheduling_behavior
        self.agent_admin = AgentAdmin(self.scheduler)
        self.deployments = DeploymentManager(self.state, self.scheduler, self.bus,
                                             lock=self.played.deployment_lock, purge=self.played.purge_on_cancel)
        self.api = MarathonApi(self.state, self.scheduler, self.deployments, self.bus)
        self._scheduler_task: asyncio.Task | None = None
        #: ``persist``: the state is kept in the state dir and reloaded at start (``extras/persist.py``).
        self.store: Store | None = None
        if persist:
            from .extras.persist import Store

            self.store = Store(self.launcher.state_dir, self.state, self.deployments)
        self._saver: asyncio.Task | None = None

    def restore(self) -> None:
        """Reload the kept state (with ``persist``; ValueError if unusable): before the API answers."""
        if self.store is not None:
            self.store.load()

    def start(self) -> None:
        """Run: launch tasks (once the launcher knows the runner's addresses), save changes."""
        if self.store is not None:
            self._saver = asyncio.ensure_future(self.store.run())
        self._scheduler_task = asyncio.ensure_future(self.scheduler.run())

    async def stop(self) -> None:
        if self._saver is not None:  # what runs now is what a restart brings back
            self._saver.cancel()
            assert self.store is not None  # the saver runs only with a store
            try:
                self.store.save()
            except OSError:
                pass  # said on the log (Store.save); the file holds the last state that could be saved
        for dep in list(self.deployments.running.values()):
            if dep.runner:
                dep.runner.cancel()
        self.deployments.running.clear()
        self.deployments.readiness.forget(set(self.state.apps))
        await self.scheduler.shutdown()
        if self._scheduler_task:
            self._scheduler_task.cancel()

    def kill_task(self, app_id: str, sig: int = signal.SIGKILL, task_id: str | None = None) -> list[str]:
        """Signal the processes of an app's tasks (or one task) behind Marathon's back."""
        app = self.state.apps.get(canonical_path(app_id))
        if app is None:
            return []
        killed = []
        for task in list(app.active_tasks()):
            if (task_id is None or task.id == task_id) and self.scheduler.signal_task(task, sig):
                killed.append(task.id)
        return killed


class _CloseDelimited(web.StreamResponse):
    """A body ended by closing the connection, without chunked framing (as Jetty sends SSE)."""

    _length_check = False


def _signal(name: str | int) -> int:
    if isinstance(name, int):
        return name
    name = name.upper()
    return int(getattr(signal, name if name.startswith("SIG") else "SIG" + name))


# Over ruff's complexity limit (C901), as one piece: the application's assembly: its middlewares and resources, in the
# order they apply.
def create_app(rt: Runtime, ui_dir: str | Path | None = None) -> web.Application:  # noqa: C901
    """The aiohttp application for ``rt`` (with a Marathon UI build served at ``/ui/`` when given)."""

    @web.middleware
    async def leader_header(request: web.Request, handler: Callable[[web.Request], Awaitable]) -> web.StreamResponse:
        mark = None
        try:
            if rt.store is not None and request.method not in ("GET", "HEAD"):
                await request.read()  # first: between the mark and the save nothing else runs (handlers await only it)
                mark = rt.store.capture()
            response = await handler(request)
        except ApiError as exc:
            response = web.json_response(exc.body, status=exc.status, headers=exc.headers)
        except web.HTTPException as exc:
            if exc.status == 404 and exc.text and exc.text.startswith("404"):
                exc.text = json.dumps({"message": f"Not found: {request.path}"})
                exc.content_type = "application/json"
            response = exc
        if rt.store is not None and mark is not None:
            # a change is on disk before it is answered, as Marathon stores it in ZooKeeper first; one
            # that cannot be kept is undone and refused (extras/persist.py)
            try:
                rt.store.save()
            except OSError as exc:
                status, body = rt.store.refuse(mark, exc)
                response = web.json_response(body, status=status)
        if not request.path.startswith("/_local/") and not response.prepared:
            response.headers["X-Marathon-Leader"] = rt.url
        if isinstance(response, web.HTTPException):
            raise response
        return response

    async def dispatch(request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        resource, rest = parts[1] if len(parts) > 1 else "", parts[2:]
        handlers = {"apps": rt.api.apps, "groups": rt.api.groups, "tasks": rt.api.tasks,
                    "deployments": rt.api.deployments_resource, "queue": rt.api.queue}
        if resource in handlers:
            return await handlers[resource](request, rest)
        if resource == "events" and request.method == "GET" and not rest:
            return await events(request)
        if request.method == "GET" and not rest:
            if resource == "info":
                return web.json_response(info(request))
            if resource == "leader":
                return web.json_response({"leader": rt.url.split("://", 1)[-1]})
            if resource == "plugins":
                return web.json_response({"plugins": []})
        raise web.HTTPNotFound()

    def info(request: web.Request) -> dict:
        return {"name": "marathon", "version": rt.played.text, "buildref": "local", "elected": True,
                "leader": rt.url.split("://", 1)[-1], "frameworkId": FRAMEWORK_ID,
                "marathon_config": {"framework_name": "marathon", "hostname": rt.host, "ha": rt.ha,
                                    "checkpoint": True, "executor": "//cmd", "features": list(rt.features),
                                    "local_port_min": 10000, "local_port_max": 20000, "master": "local",
                                    "mesos_role": "*", "mesos_user": "", "webui_url": rt.url,
                                    "env_vars_prefix": "", "default_network_name": "",
                                    "decline_offer_duration": int(rt.offer_filter * 1000),
                                    "min_revive_offers_interval": int(rt.revive_interval * 1000),
                                    "scale_apps_interval": int(rt.scheduler.scale_apps_interval * 1000),
                                    "mesos_leader_ui_url": f"http://{request.host}{MESOS_PREFIX}"},
                "zookeeper_config": {"zk": "", "zk_timeout": 10000,
                                     "zk_session_timeout": int(rt.zk_session_timeout * 1000),
                                     "zk_max_versions": 50},
                "http_config": {"http_port": int(rt.url.rsplit(":", 1)[-1]) if rt.url else 0, "https_port": 8443}}

    async def events(request: web.Request) -> web.StreamResponse:
        if "text/event-stream" not in request.headers.getall("Accept", []):
            return web.Response(status=405, content_type="text/html",
                                text="<html><body><h2>HTTP ERROR 405</h2><p>Problem accessing /v2/events. "
                                     "Reason:<pre>    HTTP method GET is not supported by this URL</pre>"
                                     "</p></body></html>")
        response = _CloseDelimited(status=200, headers={"Content-Type": "text/event-stream;charset=UTF-8",
                                                        "Connection": "close",
                                                        "X-Marathon-Leader": rt.url})
        response.force_close()
        types = request.query.getall("event_type", [])
        grant = request.get(GRANT_KEY)
        queue = rt.bus.subscribe(types or None)
        await response.prepare(request)
        try:
            attached = {"remoteAddress": request.remote or "", "eventType": "event_stream_attached",
                        "timestamp": now_ts()}
            if not types or "event_stream_attached" in types:
                await response.write(_frame(attached))
            while True:
                try:
                    event = await asyncio.wait_for(queue.get(), rt.heartbeat)
                except asyncio.TimeoutError:
                    await response.write(b"\r\n")
                    continue
                if event is DROPPED:  # too far behind: the connection is dropped, as Marathon does
                    break
                if grant is None or event_visible(grant, event):  # a task's token: its job's events only
                    await response.write(_frame(event))
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            rt.bus.unsubscribe(queue)
        return response

    async def ping(request: web.Request) -> web.Response:
        return web.Response(text="pong", content_type="text/plain")

    # -- admin --------------------------------------------------------------------------
    async def add_fault(request: web.Request) -> web.Response:
        body = await request.json()
        try:
            rules = [rt.faults.add(r) for r in (body if isinstance(body, list) else [body])]
        except ValueError as exc:
            return web.json_response({"message": str(exc)}, status=422)
        return web.json_response(rules if isinstance(body, list) else rules[0], status=201)

    async def list_faults(request: web.Request) -> web.Response:
        return web.json_response(rt.faults.rules())

    async def clear_faults(request: web.Request) -> web.Response:
        rt.faults.clear()
        return web.json_response({})

    async def list_requests(request: web.Request) -> web.Response:
        return web.json_response(rt.faults.requests())

    async def clear_requests(request: web.Request) -> web.Response:
        rt.faults.clear_requests()
        return web.json_response({})

    async def kill(request: web.Request) -> web.Response:
        body = await request.json()
        try:
            sig = _signal(body.get("signal", "KILL"))
        except AttributeError:
            return web.json_response({"message": f"unknown signal {body.get('signal')!r}"}, status=422)
        killed = rt.kill_task(body.get("appId", ""), sig, body.get("taskId"))
        if not killed:
            return web.json_response({"message": f"no running task of {body.get('appId')!r}"}, status=404)
        return web.json_response({"killed": killed})

    app = web.Application(middlewares=[rt.faults.middleware, leader_header], client_max_size=64 * 2 ** 20)
    rt.security.install(app, scope=marathon_scope(  # a task's token checks its constraint changes against the app
        lambda app_id: (lambda a: a.definition if a is not None else None)(rt.state.apps.get(app_id))))
    app.router.add_get("/ping", ping)
    app.router.add_post("/_local/faults", add_fault)
    app.router.add_get("/_local/faults", list_faults)
    app.router.add_delete("/_local/faults", clear_faults)
    app.router.add_get("/_local/requests", list_requests)
    app.router.add_delete("/_local/requests", clear_requests)
    app.router.add_post("/_local/kill", kill)
    add_agent_admin_routes(app, rt.agent_admin)
    app.router.add_route("*", "/v2{tail:.*}", dispatch)
    started = time.time()
    add_agent_routes(app, rt.agents, FRAMEWORK_ID, rt.scheduler.used, started)
    add_master_routes(app, rt.state, rt.agents, rt.scheduler.used, lambda: started)
    if ui_dir is not None:
        from .extras.ui import add_ui_routes

        add_ui_routes(app, ui_dir)
    return app


def _frame(event: dict) -> bytes:
    return f"event: {event['eventType']}\r\ndata: {json.dumps(event, separators=(',', ':'))}\r\n\r\n".encode()
