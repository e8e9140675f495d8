"""A fake Marathon on pytest-httpserver: the job's group GET (with embedded tasks) and the bulk
``PUT /v2/apps`` that records a job's end (the ``fake_marathon`` fixture, tests/conftest.py).

With ``version`` it also says that version in ``/v2/info`` and takes the job's group PUT as that Marathon
would: what its JSON Schema or its ``unreachableStrategy`` validator refuses (tests/marathon_schemas.py)
is answered 422 with Marathon's ``details`` and kept in ``refused``; what it accepts replaces the group's
apps (``GET`` shows them, as after a deployment). So is ``PUT /v2/apps/<job>/<app>`` of one app."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from werkzeug import Request, Response

from marathon_tf.contract import labels as L
from marathon_tf.contract import naming
from marathon_tf.marathon.client import Client, RetryPolicy

JOB = "ml/mnist"


class FakeMarathon:
    """Marathon's group GET (with embedded tasks) and bulk app PUT, over pytest-httpserver.

    ``apps`` maps app id -> app dict (``labels``, ``instances``, ``portDefinitions``, ``tasks``);
    ``calls`` records ``(method, path, query dict of lists, json body)``; ``fail_puts`` makes
    that many PUTs answer 503 first.
    """

    def __init__(self, server, job: str = JOB, version: str | None = None):
        self.server, self.job, self.version = server, job, version
        self.apps: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str, dict, Any]] = []
        self.fail_puts = 0
        self.refused: list[tuple[dict, list[str]]] = []  # (group PUT, what the version refused in it)
        self.queue: list[dict[str, Any]] = []  # GET /v2/queue's entries
        self._lock = threading.Lock()
        server.expect_request(f"/v2/groups{naming.group_id(job)}", method="GET").respond_with_handler(self._group)
        server.expect_request("/v2/queue", method="GET").respond_with_handler(
            lambda request: Response(json.dumps({"queue": self.queue}), 200, content_type="application/json"))
        server.expect_request("/v2/apps", method="PUT").respond_with_handler(self._put_apps)
        if version is not None:
            server.expect_request("/v2/info", method="GET").respond_with_json(
                {"name": "marathon", "version": version, "marathon_config": {"features": ["gpu_resources"]}})
            server.expect_request(f"/v2/groups{naming.group_id(job)}", method="PUT").respond_with_handler(
                self._put_group)
            server.expect_request("/v2/deployments", method="GET").respond_with_json([])
            server.expect_request(re.compile(rf"^/v2/apps{re.escape(naming.group_id(job))}/[^/]+$"),
                                  method="PUT").respond_with_handler(self._put_app)

    @property
    def url(self) -> str:
        return self.server.url_for("").rstrip("/")

    def client(self) -> Client:
        return Client(self.url, retry=RetryPolicy(attempts=3, budget=5, initial=0.01, max_wait=0.05, jitter=0))

    def add_app(self, role: str, index: int, *, labels: dict | None = None, status_port: int | None = None,
                host: str = "127.0.0.1") -> dict:
        app_id = naming.app_id(self.job, role, index)
        app = {"id": app_id, "instances": 1,
               "labels": {L.JOB: self.job, L.ROLE: role, L.INDEX: str(index), **(labels or {})},
               "portDefinitions": [{"port": 0, "name": "tf"}, {"port": 0, "name": "status"}],
               "tasks": []}
        if status_port is not None:
            app["tasks"].append({"id": f"{app_id}.1", "state": "TASK_RUNNING", "host": host,
                                 "ports": [1, status_port], "stagedAt": "2024-01-01T00:00:00.000Z"})
        self.apps[app_id] = app
        return app

    def _record(self, request: Request) -> None:
        body = request.get_json(silent=True)
        with self._lock:
            self.calls.append((request.method, request.path, request.args.to_dict(flat=False), body))

    def _group(self, request: Request) -> Response:
        self._record(request)
        embeds = request.args.getlist("embed")
        apps = []
        for app in self.apps.values():
            shown = {k: v for k, v in app.items() if k != "tasks"}
            if "group.apps.tasks" in embeds:
                shown["tasks"] = app["tasks"]
            apps.append(shown)
        body = {"id": naming.group_id(self.job), "groups": [], "apps": apps if "group.apps" in embeds else []}
        return Response(json.dumps(body), 200, content_type="application/json")

    def _put_apps(self, request: Request) -> Response:
        self._record(request)
        with self._lock:
            if self.fail_puts > 0:
                self.fail_puts -= 1
                return Response(json.dumps({"message": "busy"}), 503, content_type="application/json")
        for item in request.get_json():
            app = self.apps[item["id"]]
            app.update({k: v for k, v in item.items() if k != "id"})
            if item.get("instances") == 0:
                app["tasks"] = []
        return Response(json.dumps({"deploymentId": "d-1", "version": "v"}), 200, content_type="application/json")

    def _put_group(self, request: Request) -> Response:
        from marathon_schemas import errors  # jsonschema: a test dependency

        self._record(request)
        group = request.get_json()
        problems = errors(group, self.version)
        if problems:
            self.refused.append((group, problems))
            return Response(json.dumps({"message": "Object is not valid",
                                        "details": [{"path": "/", "errors": problems}]}), 422,
                            content_type="application/json")
        with self._lock:
            self.apps = {app["id"]: {**app, "tasks": []} for app in group.get("apps") or []}
        return Response(json.dumps({"deploymentId": f"d-{len(self.puts())}", "version": "2026-01-01T00:00:00.000Z"}),
                        200, content_type="application/json")

    def _put_app(self, request: Request) -> Response:
        """``PUT /v2/apps/<id>`` of one app of the job (what 1.4 - 1.7 get apart from the group: user/apart.py),
        checked as the group's apps are."""
        from marathon_schemas import errors

        self._record(request)
        app = request.get_json()
        problems = errors({"id": naming.group_id(self.job), "apps": [app]}, self.version)
        if problems:
            self.refused.append((app, problems))
            return Response(json.dumps({"message": "Object is not valid",
                                        "details": [{"path": "/", "errors": problems}]}), 422,
                            content_type="application/json")
        with self._lock:
            created = request.path[len("/v2/apps"):] not in self.apps
            self.apps[request.path[len("/v2/apps"):]] = {**app, "tasks": []}
        body = {"deploymentId": f"d-app-{len(self.puts())}", "version": "2026-01-01T00:00:01.000Z"}
        return Response(json.dumps(body), 201 if created else 200, content_type="application/json")

    def puts(self) -> list[tuple[str, str, dict, Any]]:
        return [c for c in self.calls if c[0] == "PUT"]

    def gets(self) -> list[tuple[str, str, dict, Any]]:
        return [c for c in self.calls if c[0] == "GET"]
