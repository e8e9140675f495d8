"""Recognising our own write when its answer was lost (a proxy's 502/504, a timeout, a reset): the
marker every group PUT carries, and the looks at Marathon's state that tell whether a write went
through.

Each app of a group we send carries the label ``marathon-tf/digest``: a hash of the app's definition as
sent (without that label). It changes only when the app's definition changes — which restarts the app
anyway — so it never restarts a task by itself (a label that changed on every deploy would: Marathon
restarts an app whose labels change). Marathon stores labels as given, and a group PUT replaces the
group's apps at once (the deployment then works towards it), so "every app we sent is there with our digest, and
no other app" means the PUT was applied. The job's record (:mod:`marathon_tf.marathon.record`) drops the
label, since it changes the apps.

The looks return what the write would have answered (``{"deploymentId", "version", "adopted": True}``),
or None while Marathon shows no sign of it. The deployment is the one in ``/v2/deployments`` that touches
our apps at the version they now carry (Marathon gives the changed apps and the plan the same version);
None when it has already finished.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from marathon_tf.contract import labels as L
from marathon_tf.contract import spread
from marathon_tf.contract.errors import MarathonError, MarathonNotFound, Timeout

__all__ = ["digest", "stamp", "group_applied", "app_applied", "group_gone", "deployment_for", "settle", "SETTLE_POLL"]

log = logging.getLogger("marathon_tf.marathon")

#: How often a write whose answer was lost looks at Marathon's state while it may still be applied.
SETTLE_POLL = 1.0


def digest(app: Mapping[str, Any]) -> str:
    """16 hex digits of SHA-256 over the app's canonical JSON, without its digest label and without what
    the job's placement added to its constraints (:func:`marathon_tf.contract.spread.strip`: the leader
    writes that to waiting apps; it is no change of the job)."""
    app = spread.strip(app)
    labels = {k: v for k, v in (app.get("labels") or {}).items() if k != L.DIGEST}
    bare = {k: v for k, v in app.items() if k != "labels"}
    if labels:
        bare["labels"] = labels
    text = json.dumps(bare, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def stamp(group: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``group`` whose every app (also in subgroups) carries its :func:`digest`."""
    out = dict(group)
    if group.get("apps") is not None:
        out["apps"] = [{**app, "labels": {**{k: v for k, v in (app.get("labels") or {}).items() if k != L.DIGEST},
                                          L.DIGEST: digest(app)}} for app in group["apps"]]
    if group.get("groups") is not None:
        out["groups"] = [stamp(g) for g in group["groups"]]
    return out


def _canonical(item_id: str, parent: str) -> str:
    """A group or app id as Marathon stores it: absolute, relative ones under ``parent``."""
    item_id = str(item_id).rstrip("/")
    return item_id if item_id.startswith("/") else parent.rstrip("/") + "/" + item_id


def _apps(group: Mapping[str, Any], parent: str, subgroups: bool) -> Iterable[tuple[str, Mapping[str, Any]]]:
    gid = _canonical(group.get("id") or parent, parent)
    for app in group.get("apps") or []:
        yield _canonical(app.get("id") or "", gid), app
    if subgroups:
        for sub in group.get("groups") or []:
            yield from _apps(sub, gid, True)


def group_applied(client: Any, sent: Mapping[str, Any]) -> dict[str, Any] | None:
    """Whether Marathon's group is the stamped group ``sent`` (each app there with its digest, no
    other app; subgroups compared only when ``sent`` names them, as a PUT keeps them otherwise)."""
    gid = _canonical(sent["id"], "/")
    try:
        current = client.get_group(gid, embed=("group.groups", "group.apps"))
    except MarathonNotFound:
        return None
    subgroups = sent.get("groups") is not None
    want = {app_id: (app.get("labels") or {}).get(L.DIGEST) for app_id, app in _apps(sent, "/", subgroups)}
    have = dict(_apps(current, "/", subgroups))
    if set(have) != set(want) or any((have[a].get("labels") or {}).get(L.DIGEST) != d for a, d in want.items()):
        return None
    version = max((str(a.get("version") or "") for a in have.values()), default="") or current.get("version")
    return {"deploymentId": deployment_for(client, set(want), version), "version": version, "adopted": True}


def app_applied(client: Any, sent: Mapping[str, Any]) -> dict[str, Any] | None:
    """Whether Marathon's app is the stamped app ``sent`` (there, with its digest): a ``PUT /v2/apps/<id>``."""
    app_id = _canonical(sent["id"], "/")
    try:
        current = client.get_app(app_id)
    except MarathonNotFound:
        return None
    if (current.get("labels") or {}).get(L.DIGEST) != (sent.get("labels") or {}).get(L.DIGEST):
        return None
    version = str(current.get("version") or "") or None
    return {"deploymentId": deployment_for(client, {app_id}, version), "version": version, "adopted": True}


def group_gone(client: Any, group_id: str) -> dict[str, Any] | None:
    """Whether the group is gone (a DELETE went through): its deployment (removing its apps), if any."""
    gid = _canonical(group_id, "/")
    try:
        client.get_group(gid, embed=("group.apps",))
        return None
    except MarathonNotFound:
        pass
    mine = [d for d in client.deployments()
            if any(str(a).startswith(gid + "/") for a in d.get("affectedApps") or [])]
    return {"deploymentId": mine[0].get("id") if len(mine) == 1 else None, "adopted": True}


def deployment_for(client: Any, app_ids: set[str], version: str | None) -> str | None:
    """The running deployment that touches ``app_ids`` at ``version`` (else the only one touching
    them); None when none does (it has finished)."""
    mine = [d for d in client.deployments() if set(d.get("affectedApps") or []) & app_ids]
    exact = [d for d in mine if version and d.get("version") == version]
    pick = exact or (mine if len(mine) == 1 else [])
    return pick[0].get("id") if pick else None


def settle(client: Any, error: MarathonError, reconcile: Callable[[], dict[str, Any] | None] | None, *,
           in_flight: bool) -> dict[str, Any]:
    """A write that may have been applied (``error``: why its answer is unknown): look at Marathon's
    state with ``reconcile`` — for the client's ``retry.settle`` seconds while the write may still be in
    flight, else once — and return what the write would have answered; else raise ``error``, saying it
    was sent once and not again."""
    looks = max(1, int(client.retry.settle / SETTLE_POLL)) if in_flight else 1
    answered = False
    for n in range(looks if reconcile is not None else 0):
        try:
            found, told = client.look_answered(reconcile)
            answered = answered or told
        except Timeout:
            raise Timeout(f"{error.message}; the time limit ({client.limit_shown}) passed before Marathon showed "
                          f"it; it was sent once (it may have been applied)",
                          hint="look at the job (marathon-tf status); give it more time: --timeout") from None
        if found is not None:
            log.debug("%s; Marathon shows it applied: adopted", error.message)
            return found
        left = client.time_left()
        if n + 1 == looks or (left is not None and left <= SETTLE_POLL):
            break
        client.sleep(SETTLE_POLL)
    seen = "" if reconcile is None else "; Marathon could not be asked whether it was (no leader answered)" \
        if not answered else (f"; Marathon shows no sign of it after {client.retry.settle:g} s"
                              if looks > 1 else "; Marathon shows no sign of it")
    raise type(error)(f"{error.message}{seen}; it was sent once and not again (it may have been applied)",
                      status=error.status, body=error.body,
                      hint="look at the job (marathon-tf status), then run the command again: what went through "
                           "is recognised and not sent twice") from None
