"""Mesos's and Marathon's JSON of resources and attributes: written, and read back (pure).

Written as Mesos writes them: the summary a master's ``/master/state`` and ``/master/slaves`` and an
agent's ``/state`` write for ``resources``, ``used_resources`` … (``cpus``, ``gpus``, ``mem``, ``disk``
always present as numbers, ranges as ``"[31000-31999, 32005-32010]"``, sets as ``"{a, b}"``), the protobuf
form of ``*_full`` (Mesos's ENDPOINT format: ``role`` set, ``reservations`` for reserved ones), attributes
as ``{"rack": "r1", "level": 2.0}``; and as Marathon writes an offer for ``/v2/queue``'s
``lastUnusedOffers`` (its ``OfferResource`` and ``AgentAttribute``).

Read back from a master's JSON (what :mod:`marathon_tf.user.capacity` reads of ``/master/slaves``):
a summary (roles unknown: given), the ``*_full`` protobuf form (the role of the last reservation,
else ``role``, else ``*``), attributes (numbers as scalars, ``[…]`` as ranges, anything else text); and an
agent's ``/state``'s sandboxes (:func:`sandboxes`: what ``logs`` reads).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .resources import SCALARS, Ranges, Resource, Value, coalesce

__all__ = ["summary_json", "full_json", "attributes_json", "offer_resources_json", "offer_attributes_json", "sandboxes",
           "resources_from_summary", "resources_from_full", "attributes_from_json"]


def _format_scalar(value: float) -> float:
    """Mesos keeps scalars to three decimals (``convertToFixed``)."""
    return round(value * 1000) / 1000


def _ranges_text(ranges: Ranges) -> str:
    return "[" + ", ".join(f"{b}-{e}" for b, e in ranges) + "]"


def summary_json(resources: Iterable[Resource]) -> dict:
    """Mesos's resource summary: ``{"cpus": 4.0, "gpus": 0.0, "mem": 8192.0, "disk": 0.0,
    "ports": "[31000-32000]"}`` (every role added up)."""
    scalars: dict[str, float] = {name: 0.0 for name in SCALARS}
    ranges: dict[str, list[tuple[int, int]]] = {}
    sets: dict[str, set] = {}
    for r in resources:
        if isinstance(r.value, float):
            scalars[r.name] = scalars.get(r.name, 0.0) + r.value
        elif isinstance(r.value, tuple):
            ranges.setdefault(r.name, []).extend(r.value)
        elif isinstance(r.value, frozenset):
            sets.setdefault(r.name, set()).update(r.value)
    out: dict = {k: _format_scalar(v) for k, v in scalars.items()}
    out.update({k: _ranges_text(coalesce(v)) for k, v in ranges.items() if v})
    out.update({k: "{" + ", ".join(sorted(v)) + "}" for k, v in sets.items()})
    return out


def full_json(resources: Iterable[Resource]) -> list[dict]:
    """The protobuf JSON of each resource in the ENDPOINT format (``*_full`` fields)."""
    out = []
    for r in resources:
        item: dict = {"name": r.name, "type": r.kind, "role": r.role}
        if isinstance(r.value, float):
            item["scalar"] = {"value": _format_scalar(r.value)}
        elif isinstance(r.value, tuple):
            item["ranges"] = {"range": [{"begin": b, "end": e} for b, e in r.value]}
        else:
            item["set"] = {"item": sorted(r.value)}
        if r.role != "*":
            item["reservations"] = [{"type": "STATIC", "role": r.role}]
        out.append(item)
    return out


def attributes_json(attributes: dict[str, Value]) -> dict:
    """``{"rack": "r1", "level": 2.0, "slots": "[1-4]"}`` as Mesos writes a SlaveInfo's attributes."""
    return {k: _ranges_text(v) if isinstance(v, tuple) else v for k, v in attributes.items()}


def offer_resources_json(resources: Iterable[Resource]) -> list[dict]:
    """Marathon's ``OfferResource`` list (``name``, ``role``, ``scalar`` | ``ranges`` | ``set``)."""
    out = []
    for r in resources:
        item: dict = {"name": r.name, "role": r.role}
        if isinstance(r.value, float):
            item["scalar"] = r.value
        elif isinstance(r.value, tuple):
            item["ranges"] = [{"begin": b, "end": e} for b, e in r.value]
        else:
            item["set"] = sorted(r.value)
        out.append(item)
    return out


def offer_attributes_json(attributes: dict[str, Value]) -> list[dict]:
    """Marathon's ``AgentAttribute`` list (``name``, ``text`` | ``scalar`` | ``ranges``)."""
    out = []
    for name, v in attributes.items():
        if isinstance(v, float):
            out.append({"name": name, "scalar": v})
        elif isinstance(v, tuple):
            out.append({"name": name, "ranges": [{"begin": b, "end": e} for b, e in v]})
        else:
            out.append({"name": name, "text": v})
    return out


# ----------------------------------------------------------------------------- read back


def _item_value(item: Mapping[str, Any]) -> Value | None:
    if "scalar" in item:
        return float((item.get("scalar") or {}).get("value", 0.0))
    if "ranges" in item:
        return coalesce((int(r["begin"]), int(r["end"])) for r in (item.get("ranges") or {}).get("range") or [])
    if "set" in item:
        return frozenset((item.get("set") or {}).get("item") or [])
    return None


def _item_role(item: Mapping[str, Any]) -> str:
    reservations = item.get("reservations") or []
    if reservations:
        return str(reservations[-1].get("role") or "*")
    return str(item.get("role") or "*")


def resources_from_summary(summary: Mapping[str, Any], role: str = "*") -> list[Resource]:
    """A Mesos resource summary (``{"cpus": 4.0, "ports": "[31000-32000]"}``) as resources of ``role``
    (scalars of 0 left out)."""
    out = []
    for name, value in (summary or {}).items():
        if isinstance(value, (int, float)):
            if value:
                out.append(Resource(name, float(value), role))
        elif isinstance(value, str) and value.startswith("["):
            pairs = [p.strip().split("-") for p in value.strip("[]").split(",") if p.strip()]
            out.append(Resource(name, coalesce((int(b), int(e)) for b, e in pairs), role))
        elif isinstance(value, str) and value.startswith("{"):
            out.append(Resource(name, frozenset(v.strip() for v in value.strip("{}").split(",") if v.strip()), role))
    return out


def resources_from_full(items: Any) -> list[Resource]:
    """The protobuf JSON of ``*_full`` (``[{"name", "type", "scalar"|"ranges"|"set", "role",
    "reservations"}]``) as resources."""
    out = []
    for item in items or []:
        value = _item_value(item) if isinstance(item, Mapping) else None
        if value is not None and item.get("name"):
            out.append(Resource(str(item["name"]), value, _item_role(item)))
    return out


def attributes_from_json(raw: Mapping[str, Any]) -> dict[str, Value]:
    """A SlaveInfo's attributes as Mesos writes them (:func:`attributes_json`) → attributes."""
    out: dict[str, Value] = {}
    for key, value in (raw or {}).items():
        if isinstance(value, (int, float)):
            out[key] = float(value)
        elif isinstance(value, str) and value.startswith("[") and value.endswith("]"):
            out[key] = resources_from_summary({key: value})[0].value if value.strip("[]") else ()
        else:
            out[key] = str(value)
    return out


def sandboxes(state: Mapping[str, Any], prefix: str) -> list[tuple[str, str]]:
    """An agent's ``/state``: (task id, directory) of every executor (running or completed, of any framework)
    one of whose task ids starts with ``prefix``."""
    out = []
    for fw in (state.get("frameworks") or []) + (state.get("completed_frameworks") or []):
        for ex in (fw.get("executors") or []) + (fw.get("completed_executors") or []):
            ids = [ex.get("id")] + [t.get("id") for t in (ex.get("tasks") or []) + (ex.get("completed_tasks") or [])]
            task_id = next((i for i in ids if isinstance(i, str) and i.startswith(prefix)), None)
            if task_id and ex.get("directory"):
                out.append((task_id, ex["directory"]))
    return out
