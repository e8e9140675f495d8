"""What a task's own credentials may do on the local Marathon: read its job, record its end, nothing else.

With ``--auth``, every task the runner starts (whose app does not bring its own credentials) gets a
token of its own, in a file of its sandbox (:data:`TOKEN_FILE`, named by ``MARATHON_TOKEN_FILE``;
never in its environment, where ``env`` would print it into the logs). A token is issued when the
task is launched and revoked when it ends. It grants what marathon-tf's bootstrap does, within the
task's *job*: its app's group (``/ml/mnist`` for ``/ml/mnist/worker-0``):

* reads: ``GET /v2/groups/<job>[/…]`` and ``/v2/apps/<job>/…`` (the group, its apps, their tasks and
  versions), ``/v2/queue`` and ``/v2/events`` filtered to the job's apps, ``/v2/info``,
  ``/v2/leader``, ``/ping``; the Mesos-DNS HTTP API (read-only; what DNS answers anyone anyway);
* the job's record: ``PUT /v2/apps`` (bulk, ``force`` allowed) of the job's apps setting nothing but
  ``labels`` and ``instances: 0`` (:func:`marathon_tf.marathon.record.finish_job`);
* the job's placement (:mod:`marathon_tf.task.placer`): the same bulk ``PUT`` may also set an app's
  ``constraints``, when they differ from the app's current ones only in ``LIKE`` / ``UNLIKE`` entries
  (the values its siblings hold, or the hold ``["hostname", "UNLIKE", ".*"]``): every other constraint
  stays as the user deployed it, so a task can move its siblings between agents, never widen where
  the job may run (no ``IS``, ``CLUSTER``, ``UNIQUE`` … added or removed); and read the agents'
  hostnames and attributes (``GET /mesos/master/slaves``, what ``/v2/info`` names as the master), which
  a rule on an attribute needs.

Everything else — creating, changing or deleting apps and groups, killing tasks, deployments,
another job, the admin API, the agents' sandboxes — is 403. A real cluster does this with its own
machinery: DC/OS Enterprise gives a task a service account (``dcos:service:marathon:marathon:services:/ml``
permissions scoped to a group, ``read`` or ``full``) whose secret reaches it through Marathon's
``secrets`` (as an environment variable or, DC/OS 1.10+, a file in the sandbox); open-source
Marathon has only one set of ``--http_credentials`` for everyone. DC/OS cannot scope a permission to
fields: the record already needs ``dcos:service:marathon:marathon:services:/<job> update``, which the
placement's constraint writes use too; only a rule on an attribute adds the master's agents
(``dcos:adminrouter:ops:mesos`` ``read``, or leave such rules unenforced: the leader says so once).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from marathon_tf.contract.taskenv import TOKEN_FILE_VAR

from .state import canonical_path, parent_path

__all__ = ["Grant", "Grants", "refusal", "marathon_scope", "read_only", "event_visible", "TOKEN_FILE",
           "TOKEN_FILE_VAR", "MASTER_AGENTS"]

#: Where, in its sandbox, a task finds its token (the agent's file API never serves it).
SECRETS_DIR = ".secrets"
TOKEN_FILE = f"{SECRETS_DIR}/marathon-token"
#: What a task's bulk ``PUT /v2/apps`` may set on its job's apps.
_RECORD_FIELDS = {"id", "labels", "instances", "constraints"}
#: The master's list of agents (their hostnames and attributes): a placement rule on an attribute reads it.
MASTER_AGENTS = "/mesos/master/slaves"
#: app id → its current definition (None: no such app), for checking what a task may change of it
Definitions = Callable[[str], dict | None]


def _canonical(parts: list[str]) -> str:
    """The id the API resolves these segments to (``..`` included: Marathon's ``PathId.canonicalPath``,
    which is what the handlers apply; a check on the raw segments could be walked out of)."""
    return canonical_path("/" + "/".join(parts))


@dataclass(frozen=True)
class Grant:
    """What one task's token stands for: the task and its app (whose group is the job)."""

    task_id: str
    app_id: str

    @property
    def group(self) -> str:
        return parent_path(self.app_id)

    def covers(self, marathon_id: str) -> bool:
        """Whether ``marathon_id`` (an app or group id) is the job's group or inside it."""
        group = self.group
        return group != "/" and (marathon_id.rstrip("/") == group or marathon_id.startswith(group + "/"))


class Grants:
    """The tokens issued to tasks: token (kept as its SHA-256) -> :class:`Grant`."""

    def __init__(self) -> None:
        self._by_digest: dict[str, Grant] = {}
        self._by_task: dict[str, str] = {}

    @staticmethod
    def _digest(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    def issue(self, task_id: str, app_id: str, sandbox: Path) -> str:
        """A new token for this task, written to ``<sandbox>/``:data:`TOKEN_FILE` (mode 0600);
        returns the file's path (the task's ``MARATHON_TOKEN_FILE``)."""
        token = "task-" + secrets.token_urlsafe(32)
        self.revoke(task_id)
        digest = self._digest(token)
        self._by_digest[digest], self._by_task[task_id] = Grant(task_id, app_id), digest
        directory = Path(sandbox) / SECRETS_DIR
        directory.mkdir(mode=0o700, exist_ok=True)
        path = Path(sandbox) / TOKEN_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token)
        return str(path)

    def revoke(self, task_id: str, sandbox: Path | None = None) -> None:
        """The task ended: its token is refused from now on (and its file removed)."""
        digest = self._by_task.pop(task_id, None)
        if digest is not None:
            self._by_digest.pop(digest, None)
        if sandbox is not None:
            try:
                (Path(sandbox) / TOKEN_FILE).unlink()
            except OSError:
                pass

    def find(self, token: str) -> Grant | None:
        return self._by_digest.get(self._digest(token))

    def __len__(self) -> int:
        return len(self._by_digest)


def _app_path(rest: list[str]) -> str:
    """The app id of ``/v2/apps/<rest>`` (without ``/tasks[/<id>]``, ``/versions[/<v>]``, ``/restart``)."""
    if len(rest) >= 2 and rest[-2] in ("tasks", "versions"):
        rest = rest[:-2]
    elif rest and rest[-1] in ("tasks", "versions", "restart", "*"):
        rest = rest[:-1]
    return _canonical(rest)


def marathon_scope(definitions: Definitions):
    """The Marathon API's scope for task tokens, checking constraint changes against ``definitions``."""
    async def scope(request: web.Request, grant: Grant) -> str | None:
        return await refusal(request, grant, definitions)
    return scope


async def refusal(request: web.Request, grant: Grant, definitions: Definitions | None = None) -> str | None:
    """Why the Marathon API refuses this request to ``grant``'s token (None: allowed). ``definitions``:
    the apps' current definitions (without: no constraint may be changed)."""
    parts = [p for p in request.path.split("/") if p]
    method = "GET" if request.method == "HEAD" else request.method
    resource, rest = (parts[1] if len(parts) > 1 and parts[0] == "v2" else ""), parts[2:]
    if method == "GET":
        if request.path in ("/ping", "/v2/info", "/v2/leader", "/v2/events", "/v2/queue", MASTER_AGENTS):
            return None
        if resource == "groups":
            if rest and rest[-1] == "versions" or len(rest) >= 2 and rest[-2] == "versions":
                rest = rest[:-1] if rest[-1] == "versions" else rest[:-2]
            if grant.covers(_canonical(rest)):
                return None
        if resource == "apps" and rest and grant.covers(_app_path(rest)):
            return None
    elif method == "PUT" and resource == "apps" and not rest:
        partial = request.query.get("partialUpdate", "true").strip().lower() != "false"
        why = _record_refusal(await _json(request), grant, definitions) if partial else "not with partialUpdate=false"
        if why is None:
            return None
        return f"a task's token may only record its job's end and move its tasks ({why})"
    return (f"{method} {request.path} is not allowed to task {grant.task_id}'s token: it may read job "
            f"{grant.group}, record its end and place its tasks, nothing else")


async def read_only(request: web.Request, grant: Grant) -> str | None:
    """The Mesos-DNS HTTP API's scope: any read (its records are what its DNS answers anyone)."""
    if request.method in ("GET", "HEAD"):
        return None
    return f"{request.method} {request.path} is not allowed to a task's token"


async def _json(request: web.Request) -> Any:
    try:
        return json.loads(await request.read())
    except (ValueError, UnicodeDecodeError):
        return None


def _record_refusal(body: Any, grant: Grant, definitions: Definitions | None = None) -> str | None:
    if not isinstance(body, list) or not body:
        return "the body must be a list of the job's apps"
    for item in body:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            return "every item needs its app id"
        app_id = _canonical(item["id"].split("/"))
        if not grant.covers(parent_path(app_id)):
            return f"{item['id']} is not an app of job {grant.group}"
        extra = sorted(set(item) - _RECORD_FIELDS)
        if extra:
            return f"it may set labels, instances 0 and LIKE/UNLIKE constraints, not {', '.join(extra)}"
        if "instances" in item and item["instances"] != 0:
            return "it may stop the job (instances 0), not scale it"
        if "constraints" in item:
            why = _constraints_refusal(item["constraints"], (definitions(app_id) if definitions else None))
            if why is not None:
                return f"{item['id']}: {why}"
    return None


_MOVABLE = ("LIKE", "UNLIKE")


def _constraints_refusal(new: Any, current: dict | None) -> str | None:
    """Whether ``new`` differs from the app's current constraints only in LIKE / UNLIKE entries."""
    if current is None:
        return "its constraints cannot be checked (no such app here)"
    if not isinstance(new, list) or not all(isinstance(c, list) and 2 <= len(c) <= 3
                                            and all(isinstance(x, str) for x in c) for c in new):
        return "constraints must be [field, OPERATOR(, value)] lists"
    if any(c[1] in _MOVABLE and len(c) != 3 for c in new):
        return "a LIKE or UNLIKE constraint needs its value"
    kept = [list(c) for c in current.get("constraints") or [] if len(c) < 2 or c[1] not in _MOVABLE]
    if [c for c in new if c[1] not in _MOVABLE] != kept:
        return "it may change only LIKE and UNLIKE constraints (where its siblings are), not the others"
    return None


def _event_ids(event: dict) -> list[str]:
    ids = [event.get("appId"), event.get("runSpecId"), (event.get("appDefinition") or {}).get("id"),
           event.get("groupId")]
    plan = event.get("plan") or {}
    ids += [a.get("app") for step in plan.get("steps") or [] for a in step.get("actions") or []]
    return [i for i in ids if isinstance(i, str) and i]


def event_visible(grant: Grant, event: dict) -> bool:
    """Whether ``grant``'s token sees this event: only events about its job's apps (and the stream's
    own ``event_stream_attached``)."""
    if event.get("eventType") == "event_stream_attached":
        return True
    ids = _event_ids(event)
    return bool(ids) and all(grant.covers(i) for i in ids)
