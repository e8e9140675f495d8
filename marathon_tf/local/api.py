"""Marathon's REST resources: /v2/apps, /v2/groups, /v2/tasks, /v2/deployments, /v2/queue.

Paths are parsed by hand (as Marathon does with ``{id:.+}``), so ids reached
with a double slash (``/v2/apps//job/worker-0``) and ``group/*`` work. Handlers
raise ``ApiError`` for Marathon's error bodies; ``server.py`` renders them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from . import targets
from .deployments import Deployment, DeploymentManager
from .errors import ApiError, app_not_found, group_not_found, invalid_json
from .events import EventBus
from .scheduler import Scheduler
from .security import GRANT_KEY
from .state import AppState, State, canonical_path, parent_path

__all__ = ["MarathonApi", "label_selector"]

#: Embeds whose views change with time, not only with the state: never cached.
_TIMELY = ("taskStats", "readiness")
#: How many distinct GET answers (path and query) are kept per state generation.
CACHE_ENTRIES = 256

_APP_EMBEDS = {"tasks": {"tasks", "deployments"}, "lastTaskFailure": {"lastTaskFailure"},
               "failures": {"tasks", "lastTaskFailure", "deployments"}, "counts": set(),
               "deployments": set(), "readiness": {"readiness"}, "taskStats": {"taskStats"}}


def _flag(request: web.Request, name: str, default: bool = False) -> bool:
    value = request.query.get(name)
    return default if value is None else value.strip().lower() == "true"


def label_selector(selector: str):
    """Marathon's label selector (``key``, ``key==value``, ``key!=value``, comma-joined) -> predicate."""
    terms: list[Callable[..., bool]] = []
    for term in [t.strip() for t in selector.split(",") if t.strip()]:
        if "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            terms.append(lambda labels, k=key, v=value: labels.get(k) != v)
        elif "==" in term:
            key, value = (s.strip() for s in term.split("==", 1))
            terms.append(lambda labels, k=key, v=value: labels.get(k) == v)
        else:
            terms.append(lambda labels, k=term: k in labels)
    return lambda labels: all(t(labels) for t in terms)


def _result(dep: Deployment, status: int = 200, location: str | None = None) -> web.Response:
    headers = {"Marathon-Deployment-Id": dep.id}
    if location:
        headers["Location"] = location
    return web.json_response({"version": dep.version, "deploymentId": dep.id}, status=status, headers=headers)


class MarathonApi:
    """The request handlers, sharing the state, scheduler, deployments and event bus."""

    def __init__(self, state: State, scheduler: Scheduler, deployments: DeploymentManager, bus: EventBus) -> None:
        self.state = state
        self.scheduler = scheduler
        self.deployments = deployments
        self.bus = bus
        self._cache: dict[str, bytes] = {}
        self._cache_generation = -1

    # -- helpers ----------------------------------------------------------------------
    async def _body(self, request: web.Request) -> Any:
        text = await request.text()
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise invalid_json(f"Unexpected character or end of input: {exc}") from exc

    def _cached(self, request: web.Request, build: Callable[[], Any]) -> web.Response:
        """The JSON answer ``build()`` gives, encoded once per state generation (see
        :attr:`State.generation`) and path+query: pollers (the CLI, the web UI, every task's bootstrap)
        ask the same questions many times between two changes, and building and encoding 100 apps
        costs ~10 ms of the one event loop. Answers that change with time are never cached."""
        if any(t in value for value in request.query.getall("embed", []) for t in _TIMELY):
            return web.json_response(build())
        if self._cache_generation != self.state.generation:
            self._cache.clear()
            self._cache_generation = self.state.generation
        key = request.path_qs
        body = self._cache.get(key)
        if body is None:
            body = json.dumps(build()).encode()
            if len(self._cache) >= CACHE_ENTRIES:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = body
        return web.Response(body=body, content_type="application/json", charset="utf-8")

    def _app(self, app_id: str) -> AppState:
        app = self.state.visible_apps().get(canonical_path(app_id))
        if app is None:
            raise app_not_found(canonical_path(app_id))
        return app

    def app_view(self, app: AppState, embed: set[str]) -> dict:
        deps = [d.to_json() for d in self.deployments.for_app(app.id)]
        view = self.state.app_json(app, deps, embed)
        if "readiness" in embed:
            view["readinessCheckResults"] = self.deployments.readiness.results_for(app.id) if deps else []
        return view

    def _deploy(self, request: web.Request, target: targets.Target, restart=()) -> Deployment:
        return self.deployments.deploy(target, force=_flag(request, "force"), restart=restart)

    def _api_post(self, request: web.Request, definition: dict) -> None:
        self.bus.publish("api_post_event", clientIp=request.remote or "", uri=request.path,
                         appDefinition=definition)

    # -- /v2/apps ---------------------------------------------------------------------
    # Over ruff's complexity limit (C901), as one piece: the /v2/apps resource: Marathon's methods and sub-paths,
    # dispatched in one place.
    async def apps(self, request: web.Request, rest: list[str]) -> web.StreamResponse:  # noqa: C901
        method = request.method
        if not rest:
            if method == "GET":
                return self._list_apps(request)
            if method == "POST":
                return await self._create_app(request)
            if method in ("PUT", "PATCH"):
                return await self._bulk_update(request)
            raise web.HTTPMethodNotAllowed(method, ["GET", "POST", "PUT", "PATCH"])
        if len(rest) >= 2 and rest[-2] == "tasks":
            return await self._app_task(request, "/" + "/".join(rest[:-2]), rest[-1])
        if rest[-1] == "tasks":
            return await self._app_tasks(request, "/" + "/".join(rest[:-1]))
        if rest[-1] == "restart" and method == "POST":
            app = self._app("/" + "/".join(rest[:-1]))
            dep = self._deploy(request, targets.current(self.state), restart={app.id})
            return _result(dep)
        if rest[-1] == "versions" and method == "GET":
            app = self._app("/" + "/".join(rest[:-1]))
            return web.json_response({"versions": list(reversed(app.history))})
        if len(rest) >= 2 and rest[-2] == "versions" and method == "GET":
            app = self._app("/" + "/".join(rest[:-2]))
            view = self.state.version_json(app, rest[-1])
            if view is None:
                raise ApiError(404, {"message": f"App '{app.id}' does not exist in version {rest[-1]}"})
            return web.json_response(view)
        app_id = "/" + "/".join(rest)
        if method == "GET":
            if rest[-1] == "*":
                gid = canonical_path("/".join(rest[:-1]))
                apps = [self.app_view(a, {"tasks", "lastTaskFailure"}) for k, a in
                        sorted(self.state.visible_apps().items()) if k.startswith(gid.rstrip("/") + "/")]
                return web.json_response({"*": apps})
            embed = {"tasks", "lastTaskFailure"}  # always, as Marathon does for compatibility
            for value in request.query.getall("embed", []):
                embed |= _APP_EMBEDS.get(value.replace("app.", "", 1), set())
            return self._cached(request, lambda: {"app": self.app_view(self._app(app_id), embed)})
        if method in ("PUT", "PATCH"):
            body = await self._body(request)
            if method == "PATCH":
                self._app(app_id)
            partial = method == "PATCH" or _flag(request, "partialUpdate", True)
            target, created = targets.put_app(self.state, app_id, body, partial)
            dep = self._deploy(request, target)
            self._api_post(request, target[0][canonical_path(app_id)])
            if created:
                return _result(dep, 201, canonical_path(app_id))
            return _result(dep)
        if method == "DELETE":
            dep = self.deployments.deploy(targets.delete_app(self.state, app_id),
                                          force=_flag(request, "force", True))
            return _result(dep)
        raise web.HTTPMethodNotAllowed(method, ["GET", "PUT", "PATCH", "DELETE"])

    def _list_apps(self, request: web.Request) -> web.Response:
        return self._cached(request, lambda: self._apps_json(request))

    def _apps_json(self, request: web.Request) -> dict:
        embed: set[str] = set()
        for value in request.query.getall("embed", []):
            embed |= _APP_EMBEDS.get(value.replace("apps.", "", 1), set())
        wanted_id = request.query.get("id", "").lower()
        wanted_cmd = request.query.get("cmd")
        selector = label_selector(request.query["label"]) if request.query.get("label") else None
        out = []
        for app_id, app in sorted(self.state.visible_apps().items()):
            if wanted_id and wanted_id not in app_id.lower():
                continue
            if wanted_cmd and wanted_cmd not in (app.definition.get("cmd") or ""):
                continue
            if selector and not selector(app.definition.get("labels") or {}):
                continue
            out.append(self.app_view(app, embed))
        return {"apps": out}

    async def _create_app(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        target = targets.post_app(self.state, body)
        app_id = canonical_path(body["id"])
        dep = self._deploy(request, target)
        self._api_post(request, target[0][app_id])
        view = self.app_view(self.state.apps[app_id], set())
        return web.json_response(view, status=201,
                                 headers={"Location": app_id, "Marathon-Deployment-Id": dep.id})

    async def _bulk_update(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        if not isinstance(body, list):
            raise invalid_json([{"path": "/", "errors": ["error.expected.jsarray"]}])
        apps, groups = targets.current(self.state)
        for i, item in enumerate(body):
            if not isinstance(item, dict) or not item.get("id"):
                raise invalid_json([{"path": f"({i})/id", "errors": ["error.path.missing"]}])
            app_id = canonical_path(item["id"])
            if request.method == "PATCH" and app_id not in apps:
                raise app_not_found(app_id)
            existing = apps.get(app_id)
            raw = {**existing, **item} if existing and _flag(request, "partialUpdate", True) else item
            apps[app_id] = targets.prepare_app(raw, app_id, f"({i})", rules=self.state.rules)
            node = parent_path(app_id)
            while node not in groups:
                groups[node] = []
                node = parent_path(node)
        dep = self._deploy(request, targets.check_tree((apps, groups)))
        return _result(dep)

    # -- tasks ------------------------------------------------------------------------
    async def _app_tasks(self, request: web.Request, app_id: str) -> web.Response:
        if app_id.endswith("/*"):
            gid = canonical_path(app_id[:-2])
            apps = [a for k, a in self.state.visible_apps().items() if k.startswith(gid.rstrip("/") + "/")]
        else:
            apps = [self._app(app_id)]
        tasks = [t for a in apps for t in a.active_tasks()]
        if request.method == "GET":
            return web.json_response({"tasks": [self.state.task_json(t) for t in tasks]})
        if request.method == "DELETE":
            host = request.query.get("host")
            tasks = [t for t in tasks if not host or host == t.host]
            return self._kill(request, tasks)
        raise web.HTTPMethodNotAllowed(request.method, ["GET", "DELETE"])

    async def _app_task(self, request: web.Request, app_id: str, task_id: str) -> web.Response:
        app = self._app(app_id)
        if request.method != "DELETE":
            raise web.HTTPMethodNotAllowed(request.method, ["DELETE"])
        task = app.tasks.get(task_id)
        if task is None or not task.active:
            raise ApiError(404, {"message": f"Task '{task_id}' does not exist"})
        response = self._kill(request, [task])
        if not _flag(request, "scale"):
            return web.json_response({"task": self.state.task_json(task)})
        return response

    def _kill(self, request: web.Request, tasks: list) -> web.Response:
        """Kill ``tasks``; with ``scale=true`` also lower the instances (a deployment)."""
        if _flag(request, "scale") and _flag(request, "wipe"):
            raise ApiError(400, {"message": "You cannot use scale and wipe at the same time."})
        for task in tasks:
            self.scheduler.kill(task, "killed by API")
        if _flag(request, "scale"):
            apps, groups = targets.current(self.state)
            for task in tasks:
                if task.app_id in apps:
                    apps[task.app_id]["instances"] = max(0, apps[task.app_id]["instances"] - 1)
            return _result(self.deployments.deploy((apps, groups), force=_flag(request, "force")))
        return web.json_response({"tasks": [self.state.task_json(t) for t in tasks]})

    async def tasks(self, request: web.Request, rest: list[str]) -> web.StreamResponse:
        if rest == ["delete"] and request.method == "POST":
            body = await self._body(request)
            found = []
            for task_id in (body or {}).get("ids") or []:
                task = self.state.find_task(task_id)
                if task is None:
                    raise ApiError(400, {"message": f"Invalid task id {task_id}"})
                found.append(task)
            return self._kill(request, found)
        if rest or request.method != "GET":
            raise web.HTTPNotFound()
        states = {s.lower() for v in request.query.getall("status", []) + request.query.getall("status[]", [])
                  for s in v.split(",")}
        wanted = {"TASK_" + s.upper() for s in states if s in ("running", "staging")}
        tasks = [self.state.task_json(t) for a in self.state.apps.values() for t in a.active_tasks()
                 if not wanted or t.state in wanted]
        return web.json_response({"tasks": tasks})

    # -- /v2/groups -------------------------------------------------------------------
    async def groups(self, request: web.Request, rest: list[str]) -> web.StreamResponse:
        method = request.method
        if rest and rest[-1] == "versions" and method == "GET":
            gid = canonical_path("/".join(rest[:-1]))
            if gid not in self.state.groups:
                raise group_not_found(gid)
            return web.json_response(self.state.group_versions(gid))
        if len(rest) >= 2 and rest[-2] == "versions" and method == "GET":
            gid = canonical_path("/".join(rest[:-2]))
            view = self.state.group_version_json(gid, rest[-1])
            if view is None:
                raise ApiError(404, {"message": f"Group '{gid}' does not exist in version {rest[-1]}"})
            return web.json_response(view)
        gid = canonical_path("/".join(rest))
        if method == "GET":
            if gid not in self.state.groups:
                raise group_not_found(gid)
            return self._cached(request, lambda: self.group_view(gid, request.query.getall("embed", [])))
        if method == "DELETE":
            dep = self._deploy(request, targets.delete_group(self.state, gid))
            return _result(dep)
        body = await self._body(request)
        if method == "POST":
            target = targets.post_group(self.state, gid, body)
            created = targets.group_path(gid, body)
            return _result(self._deploy(request, target), 201, created)
        if method == "PUT":
            target = targets.put_group(self.state, gid, body)
            if _flag(request, "dryRun"):
                return web.json_response(self.deployments.deploy(target, dry_run=True))
            return _result(self._deploy(request, target))
        raise web.HTTPMethodNotAllowed(method, ["GET", "POST", "PUT", "DELETE"])

    def group_view(self, gid: str, embeds: list[str]) -> dict:
        """GroupInfo with Marathon's embed resolution (any embed drops the defaults)."""
        values = set(embeds) if embeds else {"group.groups", "group.apps", "group.pods"}
        group_level = {v for v in values if v in ("group.groups", "group.apps", "group.pods")}
        app_embed: set[str] = set()
        for value in values:
            if value.startswith("group.apps."):
                app_embed |= _APP_EMBEDS.get(value[len("group.apps."):], set())
        return self.state.group_json(gid, lambda a: self.app_view(a, app_embed), group_level)

    # -- /v2/deployments and /v2/queue ------------------------------------------------
    async def deployments_resource(self, request: web.Request, rest: list[str]) -> web.StreamResponse:
        if not rest and request.method == "GET":
            return web.json_response([d.to_json() for d in self.deployments.running.values()])
        if len(rest) == 1 and request.method == "DELETE":
            dep = self.deployments.running.get(rest[0])
            if dep is None:
                raise ApiError(404, {"message": f"DeploymentPlan {rest[0]} does not exist"})
            if _flag(request, "force"):
                self.deployments.cancel(dep)
                return web.Response(status=202)
            return _result(self.deployments.rollback(dep))
        raise web.HTTPNotFound()

    async def queue(self, request: web.Request, rest: list[str]) -> web.StreamResponse:
        if len(rest) >= 2 and rest[-1] == "delay" and request.method == "DELETE":
            app = self._app("/" + "/".join(rest[:-1]))
            app.reset_backoff()
            self.scheduler.wake()
            return web.Response(status=204)
        if rest or request.method != "GET":
            raise web.HTTPNotFound()
        embed_offers = "lastUnusedOffers" in request.query.getall("embed", [])
        grant = request.get(GRANT_KEY)  # a task's token sees its own job's apps only
        items = []
        now = time.monotonic()
        for app in self.state.apps.values():
            if app.run_def is None or app.queued_since is None or app.removed:
                continue
            if grant is not None and not grant.covers(app.id):
                continue
            new = [t for t in app.active_tasks()
                   if not t.killing and not t.inactive and t.config_version == app.run_config_version]
            count = app.target - len(new)
            if count <= 0:
                continue
            left = max(0.0, app.launch_after - now)  # QueueDelay: overdue = waiting for offers, not backed off
            # role (1.9+): the role its instances are launched with, the app's or --mesos_role's ("*")
            items.append({"app": self.app_view(app, {"lastTaskFailure"}), "count": count,
                          "role": str(app.run_def.get("role") or "*"),
                          "delay": {"timeLeftSeconds": int(left), "overdue": left <= 0},
                          "since": app.queued_since, **self.scheduler.offers.summary(app.id, embed_offers)})
        return web.json_response({"queue": items})
