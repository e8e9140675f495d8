"""What may wait is deployed apart from what must start, where a deployment locks its apps (Marathon 1.4 – 1.7).

On 1.4 – 1.7 an app a running deployment holds is locked: a task of it that fails is not relaunched (its
``ScaleRunSpec`` is dropped, "Did not try to scale run spec; it is locked"), and a step's
actor stops relaunching once its own app has started. A deployment ends only when every app of its plan
has started, so one app that waits — an elastic role's standby, which waits in the queue by design; a
task the job's placement holds (:data:`marathon_tf.contract.spread.HOLD`) — would keep the whole job's
group locked for as long as it waits: a ps or chief lost meanwhile is never relaunched, and the job hangs.
1.8 relaunches whatever locks the app (its launch queue takes every scheduled instance).

A lock covers the apps of the plan only: two deployments conflict when their plans share an app
(``DeploymentPlan.isAffectedBy``). So on those versions a new app that may wait is left out
of the group's PUT and created by a PUT of its own (``PUT /v2/apps/<id>``): its deployment holds that app
alone, and the group's deployment ends once the apps that must start have. A standby placed later ends its
own deployment; one removed (``scale``, the job's end) takes its deployment with it.

What is apart: an app that is not on Marathon yet (an app there already is updated by the group's PUT as
before: left out, it would be stopped) and that may wait: a task of an elastic role beyond the role's
minimum (``marathon-tf/elastic`` ``min..max`` and its ``marathon-tf/index``), or one held by the job's
placement. The same for a bulk update that starts apps already there (:func:`update`: a released job submitted
again, an elastic job's ``scale``): each app that may wait is updated by itself. Pure but for :func:`send`,
:func:`existing` and :func:`update`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from marathon_tf.contract import labels as L
from marathon_tf.contract import spread
from marathon_tf.contract.errors import MarathonNotFound
from marathon_tf.marathon import marker, versions
from marathon_tf.marathon.model import App, parse_apps

__all__ = ["may_wait", "split", "send", "existing", "update"]


def may_wait(app: Mapping[str, Any]) -> bool:
    """Whether the app's task may wait in Marathon's queue while the job runs (a standby, a held task): an app
    as rendered or as Marathon has it."""
    parsed = App.parse(app)
    if tuple(str(x) for x in spread.HOLD) in parsed.constraints:
        return True
    low, sep, _ = (parsed.labels.get(L.ELASTIC) or "").partition("..")
    index = parsed.labels.get(L.INDEX) or ""
    return bool(sep) and low.isdigit() and index.isdigit() and int(index) >= int(low)


def _ids(group: Mapping[str, Any] | None) -> set[str]:
    return {(a.id or "").rstrip("/") for a in parse_apps((group or {}).get("apps") or [])}


def split(group: dict[str, Any], current: Mapping[str, Any] | None,
          caps: versions.Capabilities) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(the group to PUT, the apps to PUT one by one after it)``: on a Marathon whose deployments lock
    their apps (:attr:`~marathon_tf.marathon.versions.Capabilities.deployment_locks_relaunch`), the new apps
    that :func:`may_wait` are apart; elsewhere nothing is. ``current``: the group as Marathon has it (None:
    there is none)."""
    if not caps.deployment_locks_relaunch or group.get("apps") is None:
        return group, []
    there = _ids(current)
    apart = [a for a in group["apps"] if str(a.get("id", "")).rstrip("/") not in there and may_wait(a)]
    if not apart or len(apart) == len(group["apps"]):  # (all of them waiting: nothing would end earlier)
        return group, []
    kept = [a for a in group["apps"] if a not in apart]
    return {**group, "apps": kept}, apart


def existing(client: Any, group_id: str) -> dict[str, Any] | None:
    """The group as Marathon has it, or None when there is none."""
    try:
        return client.get_group(group_id)
    except MarathonNotFound:
        return None


def send(client: Any, apps: list[dict[str, Any]], *, force: bool = False) -> list[str]:
    """PUT each app by itself (its own deployment: it locks that app only); the deployment ids. Each app
    carries its ``marathon-tf/digest`` as the group's do (:func:`marathon_tf.marathon.marker.stamp`)."""
    out = []
    for app in marker.stamp({"apps": apps})["apps"]:
        body = client.put_app(app, force=force)
        deployment = body.get("deploymentId") if isinstance(body, dict) else None
        if isinstance(deployment, str):
            out.append(deployment)
    return out


def update(client: Any, items: list[dict[str, Any]], apps: Mapping[str, Mapping[str, Any]],
           caps: versions.Capabilities, *, force: bool = False) -> str | None:
    """A bulk ``PUT /v2/apps`` of ``items`` (``{"id", ...}``; ``apps``: those apps as Marathon has them, by
    id): on a Marathon whose deployments lock their apps, the items whose app :func:`may_wait` are sent
    one by one after the others. The first deployment id (None: no answer named one)."""
    def waits(item: Mapping[str, Any]) -> bool:
        return may_wait(apps.get(str(item.get("id", "")).rstrip("/")) or {})

    later = [i for i in items if waits(i)] if caps.deployment_locks_relaunch else []
    first = [i for i in items if i not in later]
    ids = []
    for batch in ([first] if first else []) + [[i] for i in later]:
        body = client.update_apps(batch, force=force) or {}
        ids.append(body.get("deploymentId") if isinstance(body, dict) else None)
    return next((i for i in ids if isinstance(i, str)), None)
