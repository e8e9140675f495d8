"""The shape of what we read from Marathon: every answer is checked before anyone reads it, so that
a server that is not Marathon (or a proxy's page, or a broken answer) is one clear line — "does not
answer like Marathon: apps[0].labels is a list, not an object" — and never an ``AttributeError``
deep in a verb.

A shape names only the fields marathon-tf reads (Marathon 1.4–1.11's JSON as its REST API documents it,
and the answers recorded in ``tests/data/marathon-examples/``); others are not looked at. A field may be absent or
``null`` (Marathon 1.4 writes ``null`` for unset options); when present it must have its type.
Readers may then use ``.get(...) or default`` safely. Pure.
"""

from __future__ import annotations

import re
from typing import Any

from marathon_tf.marathon.transport import oneline

__all__ = ["ShapeError", "MapOf", "Required", "NotNull", "NullAs", "check", "message", "INFO", "GROUP", "APP",
           "TASK", "APPS", "APP_ONE", "DEPLOYMENTS", "QUEUE", "DEPLOYED", "PLAN", "OBJECT", "LOCAL_AGENTS",
           "MESOS_SLAVES", "MESOS_FRAMEWORKS", "MESOS_AGENT_STATE", "EVENT"]

NUMBER = (int, float)


class ShapeError(ValueError):
    """``where``: the field path (``apps[0].labels``); ``what``: what is wrong with it."""

    def __init__(self, where: str, what: str):
        super().__init__(f"{where or 'the answer'} {what}")
        self.where, self.what = where, what


class MapOf:
    """An object whose keys are strings and whose values all have ``shape``."""

    def __init__(self, shape: Any):
        self.shape = shape


class Required:
    """A field that must be there and not ``null`` (an id that readers key on), with ``shape``."""

    def __init__(self, shape: Any):
        self.shape = shape


class NotNull:
    """A field that may be absent but, when there, is not ``null`` and has ``shape`` (what a server
    never writes as ``null``: readers would take it for "none")."""

    def __init__(self, shape: Any):
        self.shape = shape


class NullAs:
    """A field whose ``null`` stands for ``default`` (written in its place: readers that count it
    read a number); when present it has ``shape``."""

    def __init__(self, shape: Any, default: Any):
        self.shape, self.default = shape, default


_NAMES = {dict: "an object", list: "a list", str: "a string", bool: "true/false", int: "an integer",
          float: "a number", type(None): "null"}


def kind(value: Any) -> str:
    """What ``value`` is, in words (``an object``, ``a list``...)."""
    return _NAMES.get(type(value), type(value).__name__)


def _want(shape: Any) -> str:
    if isinstance(shape, tuple):
        return " or ".join(_NAMES.get(t, t.__name__) for t in shape)
    return _NAMES.get(shape, getattr(shape, "__name__", str(shape)))


# Over ruff's complexity limit (C901), as one piece: the one recursive walk of a shape: a branch per kind of shape.
def check(value: Any, shape: Any, where: str = "") -> Any:  # noqa: C901
    """``value`` if it has ``shape`` (see the module), else :class:`ShapeError`; returns ``value``."""
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            raise ShapeError(where, f"is {kind(value)}, not an object")
        for key, sub in shape.items():
            at = f"{where}.{key}" if where else key
            if isinstance(sub, NullAs):
                if key in value and value[key] is None:
                    value[key] = sub.default
                sub = sub.shape
            if isinstance(sub, Required):
                if value.get(key) is None:
                    raise ShapeError(at, "is missing" if key not in value else "is null")
                sub = sub.shape
            elif isinstance(sub, NotNull):
                if key in value and value[key] is None:
                    raise ShapeError(at, "is null")
                sub = sub.shape
            if value.get(key) is not None:
                check(value[key], sub, at)
    elif isinstance(shape, list):
        if not isinstance(value, list):
            raise ShapeError(where, f"is {kind(value)}, not a list")
        for i, item in enumerate(value):
            check(item, shape[0], f"{where}[{i}]")
    elif isinstance(shape, MapOf):
        if not isinstance(value, dict):
            raise ShapeError(where, f"is {kind(value)}, not an object")
        for key, item in value.items():
            check(item, shape.shape, f"{where}.{key}")
    elif shape is not object:
        types = shape if isinstance(shape, tuple) else (shape,)
        if isinstance(value, bool) and bool not in types or not isinstance(value, types):
            raise ShapeError(where, f"is {kind(value)}, not {_want(shape)}")
    return value


def message(body: Any) -> str:
    """What an error answer says, on one line: Marathon's ``message``, or the gist of an HTML page
    (Jetty's error pages, e.g. 503 "Could not determine the current leader")."""
    if isinstance(body, dict):
        return oneline(str(body.get("message") or ""))[:300]
    if isinstance(body, str):
        m = re.search(r"<title>(.*?)</title>", body[:65536], re.S | re.I)
        return oneline(m.group(1) if m else re.sub(r"<[^>]+>", " ", body[:4096]))[:200]
    return ""


OBJECT: dict = {}
INFO = {"version": str, "buildref": str, "name": str, "marathon_config": {"features": [str]}}
HEALTH = {"alive": bool}
TASK = {"id": Required(str), "appId": str, "state": str, "host": str, "ports": [int], "stagedAt": str, "startedAt": str,
        "version": str, "healthCheckResults": [HEALTH]}
FAILURE = {"message": str, "state": str, "timestamp": str, "version": str, "taskId": str}
APP = {"id": Required(str), "instances": int, "labels": MapOf(str), "tasks": [TASK],
       "deployments": [{"id": Required(str)}], "lastTaskFailure": FAILURE, "version": str,
       "versionInfo": {"lastConfigChangeAt": str},
       "portDefinitions": [{"name": str, "port": int}], "tasksRunning": NullAs(int, 0), "tasksStaged": NullAs(int, 0),
       "tasksHealthy": NullAs(int, 0), "env": dict, "cmd": str}
GROUP: dict = {"id": str, "version": str, "apps": NotNull([APP])}
GROUP["groups"] = [GROUP]
APPS = {"apps": [APP]}
APP_ONE = {"app": APP}
DEPLOYMENT = {"id": str, "version": str, "affectedApps": [str], "currentStep": int, "totalSteps": int,
              "steps": [{"actions": [{"action": str, "app": str}]}]}
DEPLOYMENTS = [DEPLOYMENT]
#: An offer as ``/v2/queue``'s ``lastUnusedOffers`` writes it.
OFFER = {"agentId": str, "hostname": str,
         "resources": [{"name": str, "role": str, "scalar": NUMBER, "ranges": [{"begin": int, "end": int}],
                        "set": [str]}]}
QUEUE_ENTRY = {"app": {"id": str}, "count": int, "since": str, "delay": {"timeLeftSeconds": NUMBER, "overdue": bool},
               "processedOffersSummary": {"processedOffersCount": int, "unusedOffersCount": int,
                                          "rejectSummaryLastOffers": [{"reason": str, "declined": int,
                                                                       "processed": int}]},
               "lastUnusedOffers": [{"reason": [str], "timestamp": str, "offer": OFFER}]}
QUEUE = {"queue": [QUEUE_ENTRY]}
DEPLOYED = {"deploymentId": str, "version": str}
PLAN = {"steps": [{"actions": [{"action": str, "app": str}]}]}
#: The local runner's agents (``/_local/agents``, marathon-tf's own admin API: ``local/agent_admin.py``).
LOCAL_AGENTS = [{"id": str, "name": str, "state": str, "enforced": bool}]

# The Mesos master's endpoints we read (Mesos 1.x ``/master/slaves``; the ``*_full`` lists are the protobuf
# JSON of ``Resource``).
_MESOS_RESOURCES = NotNull(MapOf((int, float, str)))
_MESOS_FULL = NotNull([{"name": Required(str), "role": str, "scalar": NotNull({"value": Required(NUMBER)}),
                        "ranges": NotNull({"range": [{"begin": Required(int), "end": Required(int)}]}),
                        "set": NotNull({"item": [str]}), "reservations": [{"role": str}]}])
_KINDS = ("resources", "used_resources", "offered_resources", "unreserved_resources")
MESOS_SLAVE = {"id": str, "hostname": str, "active": bool, "deactivated": bool,
               "attributes": MapOf((int, float, str)),
               **{name: _MESOS_RESOURCES for name in _KINDS}, **{f"{name}_full": _MESOS_FULL for name in _KINDS},
               "reserved_resources": NotNull(MapOf(_MESOS_RESOURCES.shape)),
               "reserved_resources_full": NotNull(MapOf(_MESOS_FULL.shape))}
MESOS_SLAVES = {"slaves": Required([MESOS_SLAVE])}
#: A Mesos agent's ``/state`` as ``logs`` reads it: where each executor's sandbox is.
_EXECUTOR = {"id": str, "directory": str, "tasks": NotNull([{"id": str}]), "completed_tasks": NotNull([{"id": str}])}
_AGENT_FRAMEWORK = {"executors": NotNull([_EXECUTOR]), "completed_executors": NotNull([_EXECUTOR])}
MESOS_AGENT_STATE = {"frameworks": NotNull([_AGENT_FRAMEWORK]), "completed_frameworks": NotNull([_AGENT_FRAMEWORK])}
MESOS_FRAMEWORKS = {"frameworks": NotNull([{"id": str, "name": str, "active": bool, "offers": NotNull([{
    "slave_id": str, "allocation_info": NotNull({"role": str}), "resources": _MESOS_RESOURCES}])}])}
#: An event of ``/v2/events`` (Marathon 1.11's event classes): the fields the
#: deployment watch and the task side's rendezvous read; an event without ``eventType`` is left out (the stream
#: names every event).
EVENT = {"eventType": Required(str), "id": str, "appId": str, "taskId": str, "taskStatus": str, "host": str,
         "ports": [int], "reason": str, "version": str, "timestamp": str, "message": str, "groupId": str,
         "runSpecId": str, "instanceId": str, "plan": {"id": str}}
