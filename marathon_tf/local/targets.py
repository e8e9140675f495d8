"""Request bodies -> the next root group (the *target* a deployment moves to).

A target is ``(apps, groups)``: app id -> normalized definition, and group id ->
its dependency list (every group, ``/`` included). Every write endpoint builds
one from the current state and hands it to the deployment manager, which diffs
it against the current state into a plan. Implements Marathon 1.4's GroupUpdate semantics (replacement
rules, relative ids, ``mkdir -p``, ``scaleBy``).
"""

from __future__ import annotations

import copy
from typing import Any

from .errors import ApiError, app_not_found, group_not_found, invalid_json, not_valid
from .state import State, canonical_path, ceil_scale, normalize_app, parent_path
from .validation import NEWEST_RULES, AppRules, group_details, id_errors, shape_errors, validate_app

__all__ = ["Target", "current", "put_group", "post_group", "delete_group", "put_app", "post_app",
           "delete_app", "check_tree", "prepare_app", "group_path"]

Target = tuple[dict[str, dict], dict[str, list]]


def current(state: State) -> Target:
    """A deep copy of the current root group as a target."""
    return (copy.deepcopy(state.definitions()),
            {gid: list(g["dependencies"]) for gid, g in state.groups.items()})


def _under(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")


def _mkdir_p(groups: dict[str, list], gid: str) -> None:
    path = gid
    while True:
        groups.setdefault(path, [])
        if path == "/":
            return
        path = parent_path(path)


def prepare_app(raw: Any, app_id: str, prefix: str, group: str | None = None,
                rules: AppRules = NEWEST_RULES) -> dict:
    """Check ``raw`` (400 for wrong types, 422 for rules; ``rules``: the played version's) and return its
    normalized definition."""
    bad_shape = shape_errors(raw, prefix)
    if bad_shape:
        raise invalid_json(bad_shape)
    details = validate_app({**raw, "id": raw.get("id", app_id) if group is not None else app_id}, prefix, group,
                           rules)
    if details:
        raise not_valid(details)
    definition = normalize_app(raw, app_id, rules.unreachable_default)
    definition["dependencies"] = [canonical_path(d, parent_path(app_id)) for d in definition["dependencies"]]
    return definition


def check_tree(target: Target) -> Target:
    """Whole-tree validation (dependency cycles); returns ``target``."""
    details = group_details(target[1], target[0])
    if details:
        raise not_valid(details)
    return target


# Over ruff's complexity limit (C901), as one piece: Marathon's GroupUpdate rules: a branch per field it takes.
def _update_group(apps: dict, groups: dict, gid: str, body: dict, prefix: str,  # noqa: C901
                  rules: AppRules) -> None:
    _mkdir_p(groups, gid)
    if "dependencies" in body:
        groups[gid] = [canonical_path(d, gid) for d in body.get("dependencies") or []]
    if body.get("apps") is not None:
        for app_id in [a for a in apps if parent_path(a) == gid]:
            del apps[app_id]
        for i, raw in enumerate(body["apps"]):
            where = f"{prefix}/apps({i})"
            if not isinstance(raw, dict):
                raise invalid_json([{"path": where, "errors": ["error.expected.jsobject"]}])
            if not raw.get("id"):
                raise not_valid([{"path": f"{where}/id", "errors": ["error.path.missing"]}])
            app_id = canonical_path(raw["id"], gid)
            apps[app_id] = prepare_app(raw, app_id, where, gid, rules)
    if body.get("groups") is not None:
        wanted = {}
        for j, sub in enumerate(body["groups"]):
            if not isinstance(sub, dict) or not sub.get("id"):
                raise not_valid([{"path": f"{prefix}/groups({j})/id", "errors": ["error.path.missing"]}])
            wanted[canonical_path(sub["id"], gid)] = (j, sub)
        for old in [g for g in groups if g != gid and parent_path(g) == gid and g not in wanted]:
            for g in [g for g in groups if _under(g, old)]:
                del groups[g]
            for a in [a for a in apps if _under(a, old)]:
                del apps[a]
        for sid, (j, sub) in wanted.items():
            if not _under(sid, gid) or sid == gid:
                raise not_valid([{"path": f"{prefix}/groups({j})/id",
                                  "errors": [f"Identifier is not child of '{gid}'"]}])
            _update_group(apps, groups, sid, sub, f"{prefix}/groups({j})", rules)
    if body.get("scaleBy") is not None:
        factor = body["scaleBy"]
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor < 0:
            raise not_valid([{"path": f"{prefix}/scaleBy", "errors": ["got {factor}, expected 0.0 or more"]}])
        for app_id, app in apps.items():
            if _under(app_id, gid):
                app["instances"] = ceil_scale(app["instances"], factor)


def group_path(url_id: str, body: dict) -> str:
    gid = canonical_path(body.get("id", url_id) if body.get("id") else url_id, url_id)
    if gid != "/":
        for err in id_errors(gid):
            raise not_valid([{"path": "/id", "errors": [err]}])
    return gid


def put_group(state: State, url_id: str, body: Any) -> Target:
    """PUT /v2/groups[/{id}]: create or update, as Marathon 1.4 does."""
    if not isinstance(body, dict):
        raise invalid_json([{"path": "/", "errors": ["error.expected.jsobject"]}])
    if body.get("version") is not None:
        return _group_rollback(state, canonical_path(url_id), body)
    gid = group_path(url_id, body)
    if gid in state.visible_apps():
        raise ApiError(409, {"message": f"An app with the path {gid} already exists."})
    apps, groups = current(state)
    _update_group(apps, groups, gid, body, "", state.rules)
    return check_tree((apps, groups))


def _group_rollback(state: State, gid: str, body: dict) -> Target:
    """``{"version": v}``: the group's apps and subgroups as they were at that version."""
    if set(body) - {"id", "version"}:
        raise not_valid([{"path": "/version",
                          "errors": ["The 'version' field may only be combined with the 'id' field."]}])
    kept = state.group_at(gid, str(body["version"]))
    if kept is None:
        raise ApiError(404, {"message": f"Group '{gid}' does not exist in version {body['version']}"})
    apps, groups = current(state)
    for a in [a for a in apps if _under(a, gid)]:
        del apps[a]
    for g in [g for g in groups if _under(g, gid) and g != gid]:
        del groups[g]
    apps.update(kept[0])
    groups.update(kept[1])
    _mkdir_p(groups, gid)
    return check_tree((apps, groups))


def post_group(state: State, url_id: str, body: Any) -> Target:
    """POST /v2/groups[/{id}]: create only; 409 when the group exists."""
    if not isinstance(body, dict):
        raise invalid_json([{"path": "/", "errors": ["error.expected.jsobject"]}])
    gid = group_path(url_id, body)
    if gid in state.groups:
        raise ApiError(409, {"message": f"Group {gid} is already created. Use PUT to change this group."})
    if gid in state.visible_apps():
        raise ApiError(409, {"message": f"An app with the path {gid} already exists."})
    return put_group(state, url_id, body)


def delete_group(state: State, gid: str) -> Target:
    """DELETE /v2/groups[/{id}]: remove the group, its subgroups and apps (root: clear)."""
    if gid not in state.groups:
        raise group_not_found(gid)
    apps, groups = current(state)
    for a in [a for a in apps if _under(a, gid)]:
        del apps[a]
    for g in [g for g in groups if _under(g, gid) and g != "/"]:
        del groups[g]
    if gid == "/":
        groups["/"] = []
    return apps, groups


def put_app(state: State, app_id: str, body: Any, partial: bool = True) -> tuple[Target, bool]:
    """PUT /v2/apps/{id} (and one item of the bulk PUT): update, or create (then ``True``)."""
    if not isinstance(body, dict):
        raise invalid_json([{"path": "/", "errors": ["error.expected.jsobject"]}])
    app_id = canonical_path(app_id)
    apps, groups = current(state)
    existing = apps.get(app_id)
    if body.get("version") is not None and set(body) <= {"id", "version"}:  # rollback to a kept version
        if existing is None:
            raise app_not_found(app_id)
        kept = state.apps[app_id].history.get(str(body["version"]))
        if kept is None:
            raise ApiError(404, {"message": f"App '{app_id}' does not exist in version {body['version']}"})
        body, partial = kept["definition"], False
    raw = {**existing, **body} if (existing and partial) else dict(body)
    raw["id"] = app_id
    apps[app_id] = prepare_app(raw, app_id, "", rules=state.rules)
    _mkdir_p(groups, parent_path(app_id))
    if app_id in groups:
        raise ApiError(409, {"message": f"A group with the path {app_id} already exists."})
    return check_tree((apps, groups)), existing is None


def post_app(state: State, body: Any) -> Target:
    """POST /v2/apps: create; 409 when it exists."""
    if not isinstance(body, dict):
        raise invalid_json([{"path": "/", "errors": ["error.expected.jsobject"]}])
    if not body.get("id"):
        raise not_valid([{"path": "/id", "errors": ["error.path.missing"]}])
    app_id = canonical_path(body["id"])
    for err in id_errors(body["id"]):
        raise not_valid([{"path": "/id", "errors": [err]}])
    if app_id in state.visible_apps():
        raise ApiError(409, {"message": f"An app with id [{app_id}] already exists."})
    target, _ = put_app(state, app_id, body, partial=False)
    return target


def delete_app(state: State, app_id: str) -> Target:
    """DELETE /v2/apps/{id}."""
    app_id = canonical_path(app_id)
    if app_id not in state.visible_apps():
        raise app_not_found(app_id)
    apps, groups = current(state)
    del apps[app_id]
    return apps, groups
