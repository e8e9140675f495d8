"""The app-definition rules marathon-tf depends on, with Marathon's 422/400 detail shapes.

Not the whole schema: ids, cmd/args/container, gpus vs DOCKER, instances, port
names, health-check port indices, upgrade strategy bounds and field types. Each
check returns ``details`` entries ``{"path": "/apps(0)/id", "errors": [...]}``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ID_SEGMENT", "AppRules", "NEWEST_RULES", "validate_app", "shape_errors", "group_details", "id_errors",
           "dependency_edges"]

#: Marathon's ``PathId.ID_PATH_SEGMENT_PATTERN``.
ID_SEGMENT = re.compile(r"^(([a-z0-9]|[a-z0-9][a-z0-9\-]*[a-z0-9])\.)*([a-z0-9]|[a-z0-9][a-z0-9\-]*[a-z0-9])"
                        r"|(\.|\.\.)$")
_RESERVED = ("restart", "tasks", "versions")
_CMD_RULE = "AppDefinition must either contain one of 'cmd' or 'args', and/or a 'container'."
#: Marathon's text for a feature not enabled (the unbalanced ")" is Marathon's).
_FEATURE_RULE = "Feature {feature} is not enabled. Enable with --enable_features {feature})"
_NUMBER_FIELDS = ("instances", "cpus", "mem", "disk", "gpus", "backoffSeconds", "backoffFactor",
                  "maxLaunchDelaySeconds", "taskKillGracePeriodSeconds")


def _add(details: dict[str, list[str]], path: str, error: str) -> None:
    details.setdefault(path or "/", []).append(error)


@dataclass(frozen=True)
class AppRules:
    """What the app rules of the Marathon played depend on (``versions.Played.app_rules``)."""

    #: Marathon's ``--enable_features`` (validation refuses GPUs without ``gpu_resources``).
    features: frozenset[str] = frozenset({"gpu_resources"})
    #: The ``unreachableStrategy`` an app that sets none gets.
    unreachable_default: dict[str, int] = field(
        default_factory=lambda: {"inactiveAfterSeconds": 0, "expungeAfterSeconds": 0})
    #: 1.4.0 – 1.4.5's validator: ``inactiveAfter >= 1 second`` and ``< expungeAfter`` (else ``>= 0``, ``<=``).
    unreachable_strict: bool = False


#: The newest version's rules with GPUs enabled (what a plain ``State`` validates with).
NEWEST_RULES = AppRules()


def _seconds(value: float) -> str:
    """A whole number of seconds as a Scala ``FiniteDuration`` prints it (``0 seconds``, ``1 second``)."""
    return f"{value:g} second" + ("" if value == 1 else "s")


def _unreachable_errors(details: dict[str, list[str]], prefix: str, strategy: Any, strict: bool) -> None:
    if not isinstance(strategy, dict):
        return
    inactive, expunge = strategy.get("inactiveAfterSeconds", 0), strategy.get("expungeAfterSeconds", 0)
    if not (isinstance(inactive, (int, float)) and isinstance(expunge, (int, float))):
        return
    if strict:  # two accord rules on the duration, both reported, under the model's field name
        path = f"{prefix}/unreachableStrategy/inactiveAfter"
        if inactive < 1:
            _add(details, path, f"got {_seconds(inactive)}, expected 1 second or more")
        if not inactive < expunge:
            _add(details, path, f"got {_seconds(inactive)}, expected less than {_seconds(expunge)}")
    elif inactive < 0:
        _add(details, f"{prefix}/unreachableStrategy/inactiveAfterSeconds",
             f"inactiveAfterSeconds ({inactive:g}) must be greater than or equal to 0")
    elif inactive > expunge:
        _add(details, f"{prefix}/unreachableStrategy/inactiveAfterSeconds",
             f"inactiveAfterSeconds ({inactive:g}) must be less or equal to expungeAfterSeconds, "
             f"which is {expunge:g}")


def id_errors(path_id: Any) -> list[str]:
    """Why ``path_id`` is not a valid app/group id (empty when it is)."""
    if not isinstance(path_id, str) or not path_id.strip("/"):
        return ["Path must contain at least one path element"]
    errors = []
    for seg in [s for s in path_id.split("/") if s]:
        if not ID_SEGMENT.fullmatch(seg):
            errors.append(f"must fully match regular expression '{ID_SEGMENT.pattern}'")
            break
    last = [s for s in path_id.split("/") if s][-1]
    if last in _RESERVED:
        errors.append("must not end with any of the following reserved keywords: " + ", ".join(_RESERVED))
    return errors


def shape_errors(app: Any, prefix: str = "") -> list[dict]:
    """Wrong JSON types (Marathon answers these with 400 ``Invalid JSON``)."""
    if not isinstance(app, dict):
        return [{"path": prefix or "/", "errors": ["error.expected.jsobject"]}]
    out = []
    for key in _NUMBER_FIELDS:
        value = app.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            out.append({"path": f"{prefix}/{key}", "errors": ["error.expected.jsnumber"]})
    for key, kind, name in (("cmd", str, "jsstring"), ("args", list, "jsarray"), ("env", dict, "jsobject"),
                            ("labels", dict, "jsobject"), ("portDefinitions", list, "jsarray"),
                            ("healthChecks", list, "jsarray"), ("fetch", list, "jsarray"),
                            ("container", dict, "jsobject"), ("dependencies", list, "jsarray")):
        if key in app and app[key] is not None and not isinstance(app[key], kind):
            out.append({"path": f"{prefix}/{key}", "errors": [f"error.expected.{name}"]})
    return out


# Over ruff's complexity limit (C901), as one piece: Marathon's app-definition rules, in Marathon's order: a branch per
# rule.
def validate_app(app: dict, prefix: str = "", group: str | None = None,  # noqa: C901
                 rules: AppRules = NEWEST_RULES) -> list[dict]:
    """Validation failures of a (raw or normalized) app definition, as 422 ``details``.
    ``group``: the enclosing group when the app came inside a group body; ``rules``: the played
    version's."""
    details: dict[str, list[str]] = {}
    app_id = app.get("id")
    for err in id_errors(app_id):
        _add(details, f"{prefix}/id", err)
    if group is not None and isinstance(app_id, str) and app_id.startswith("/") and group != "/" \
            and not app_id.startswith(group.rstrip("/") + "/"):
        _add(details, f"{prefix}/id", f"Identifier is not child of '{group}'")
    container = app.get("container") or {}
    has_image = bool(((container.get("docker") or {}).get("image")) or
                     ((container.get("appc") or {}).get("image")))
    has_cmd, has_args = app.get("cmd") is not None, app.get("args") is not None
    if (has_cmd and has_args) or not (has_cmd or has_args or has_image):
        _add(details, prefix, _CMD_RULE)
    if has_cmd and isinstance(app.get("cmd"), str) and not app["cmd"]:
        _add(details, f"{prefix}/cmd", "error.minLength")
    gpus = app.get("gpus") or 0
    if isinstance(gpus, (int, float)) and gpus > 0 and container and container.get("type", "DOCKER") == "DOCKER":
        _add(details, prefix, "GPU resources only work with the Mesos containerizer")
    if isinstance(gpus, (int, float)) and gpus > 0 and "gpu_resources" not in rules.features:
        _add(details, prefix, _FEATURE_RULE.format(feature="gpu_resources"))
    _unreachable_errors(details, prefix, app.get("unreachableStrategy"), rules.unreachable_strict)
    instances = app.get("instances", 1)
    if isinstance(instances, (int, float)) and instances < 0:
        _add(details, f"{prefix}/instances", f"got {instances}, expected 0 or more")
    for key in ("cpus", "mem", "disk"):
        value = app.get(key)
        if isinstance(value, (int, float)) and value < 0:
            _add(details, f"{prefix}/{key}", f"got {value}, expected 0.0 or more")
    ports = app.get("portDefinitions")
    if ports is None and not container.get("portMappings"):
        ports = [{"port": 0, "name": "default"}]
    ports = ports or container.get("portMappings") or []
    names = [p.get("name") for p in ports if isinstance(p, dict) and p.get("name")]
    if len(names) != len(set(names)):
        _add(details, f"{prefix}/portDefinitions", "Port names must be unique.")
    fixed = [p.get("port") for p in ports if isinstance(p, dict) and p.get("port")]
    if len(fixed) != len(set(fixed)):
        _add(details, f"{prefix}/portDefinitions", "Ports must be unique.")
    mesos_checks = 0
    for i, hc in enumerate(app.get("healthChecks") or []):
        protocol = hc.get("protocol", "HTTP")
        if protocol.startswith("MESOS_") or protocol == "COMMAND":
            mesos_checks += protocol != "COMMAND"
        if protocol == "COMMAND":
            if not (hc.get("command") or {}).get("value"):
                _add(details, f"{prefix}/healthChecks({i})/command", "error.path.missing")
            continue
        if "port" in hc:
            continue
        index = hc.get("portIndex", 0)
        if not isinstance(index, int) or not 0 <= index < len(ports):
            _add(details, f"{prefix}/healthChecks({i})",
                 "Health check port indices must address an element of the ports array or container port mappings.")
    if mesos_checks > 1:
        _add(details, f"{prefix}/healthChecks", "AppDefinition can contain at most one Mesos health check")
    strategy = app.get("upgradeStrategy") or {}
    for key in ("minimumHealthCapacity", "maximumOverCapacity"):
        value = strategy.get(key)
        if value is not None and not (isinstance(value, (int, float)) and 0 <= value <= 1):
            _add(details, f"{prefix}/upgradeStrategy/{key}", f"got {value}, expected between 0.0 and 1.0")
    if app.get("backoffFactor") is not None and isinstance(app["backoffFactor"], (int, float)) \
            and app["backoffFactor"] < 1:
        _add(details, f"{prefix}/backoffFactor", f"got {app['backoffFactor']}, expected 1.0 or more")
    if app.get("fetch") and app.get("uris"):
        _add(details, prefix, "Fetch and uris can not be combined")
    return [{"path": p, "errors": e} for p, e in details.items()]


def dependency_edges(groups: dict[str, list], apps: dict[str, dict]) -> dict[str, set[str]]:
    """app id -> the app ids it depends on (app and group dependencies; unknown ids are ignored)."""
    def under(dep: str) -> set[str]:
        return {x for x in apps if x == dep or x.startswith(dep.rstrip("/") + "/")}

    edges: dict[str, set[str]] = {a: set() for a in apps}
    for app_id, app in apps.items():
        for dep in app.get("dependencies") or []:
            edges[app_id] |= under(dep)
        for gid, deps in groups.items():
            if app_id.startswith(gid.rstrip("/") + "/"):
                for dep in deps:
                    edges[app_id] |= under(dep)
    return edges


def group_details(groups: dict[str, list], apps: dict[str, dict]) -> list[dict]:
    """Whole-tree checks: cyclic dependencies."""
    edges = dependency_edges(groups, apps)
    visiting, done = set(), set()

    def cyclic(node: str) -> bool:
        if node in done:
            return False
        if node in visiting:
            return True
        visiting.add(node)
        if any(cyclic(n) for n in edges[node]):
            return True
        visiting.discard(node)
        done.add(node)
        return False

    if any(cyclic(a) for a in apps):
        return [{"path": "/", "errors": ["Dependency graph has cyclic dependencies."]}]
    return []
