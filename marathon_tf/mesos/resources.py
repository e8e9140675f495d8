"""Mesos resources and attributes: the agents' text syntax and their arithmetic (pure).

The syntax is the Mesos agent's ``--resources`` and ``--attributes``, as Mesos parses them:

* resources ``cpus:4;mem:8192;disk:20000;gpus:2;ports:[31000-32000]``: ``;``-separated
  ``name:value`` or ``name(role):value`` (a static reservation for ``role``; no role: ``*``);
  a value is a scalar (``4``, ``0.5``), ranges (``[31000-31999,32005-32010]``) or a set (``{a,b}``);
* attributes ``rack:r1;level:2;slots:[1-4]``: the values are text, scalars or ranges.

The arithmetic is Mesos's on ranges (kept sorted and merged, single values taken out) and the text Marathon's
constraints compare an attribute by (``Constraints.getValueString``). Their JSON, Mesos's and Marathon's, is
:mod:`marathon_tf.mesos.views`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Ranges", "Resource", "Value", "parse_resources", "parse_attributes", "attribute_text", "coalesce",
           "ranges_minus", "ranges_size", "ports_resource", "SCALARS"]

#: The scalar resources Mesos always writes in a summary (and the ones placement knows).
SCALARS = ("cpus", "gpus", "mem", "disk")

Ranges = tuple[tuple[int, int], ...]
Value = float | Ranges | frozenset | str


@dataclass(frozen=True)
class Resource:
    """One resource: a scalar (float), ranges or a set, of one role (``*`` = unreserved)."""

    name: str
    value: Value
    role: str = "*"

    @property
    def kind(self) -> str:
        return "SCALAR" if isinstance(self.value, float) else "RANGES" if isinstance(self.value, tuple) else "SET"


def coalesce(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """Sorted, merged ranges (``[1-3, 4-6]`` → ``[1-6]``), as Mesos keeps them."""
    out: list[list[int]] = []
    for begin, end in sorted(ranges):
        if out and begin <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([begin, end])
    return tuple((b, e) for b, e in out)


def ranges_minus(ranges: Ranges, values: Iterable[int]) -> Ranges:
    """``ranges`` without the single values ``values``."""
    taken = sorted(set(values))
    out: list[tuple[int, int]] = []
    for begin, end in ranges:
        start = begin
        for v in taken:
            if start <= v <= end:
                if v > start:
                    out.append((start, v - 1))
                start = v + 1
        if start <= end:
            out.append((start, end))
    return tuple(out)


def ranges_size(ranges: Ranges) -> int:
    return sum(e - b + 1 for b, e in ranges)


def ports_resource(ports: Iterable[int], role: str = "*") -> Resource:
    """Single ports as one ranges resource."""
    return Resource("ports", coalesce((p, p) for p in ports), role)


def _value(text: str, what: str) -> Value:
    """Mesos's ``values::parse``: ``[a-b,...]`` ranges, ``{a,...}`` set, a number, else text."""
    text = text.replace(" ", "")
    if not text:
        raise ValueError(f"{what}: expecting a non-empty value")
    if text.startswith("["):
        if not text.endswith("]") or text.count("[") != 1:
            raise ValueError(f"{what}: mismatched brackets in {text!r}")
        tokens = [t for t in text[1:-1].replace("-", ",").split(",") if t]
        if not tokens or len(tokens) % 2:
            raise ValueError(f"{what}: expecting one or more ranges like [31000-32000], got {text!r}")
        try:
            pairs = [(int(tokens[i]), int(tokens[i + 1])) for i in range(0, len(tokens), 2)]
        except ValueError:
            raise ValueError(f"{what}: expecting non-negative integers in {text!r}") from None
        if any(b < 0 or e < b for b, e in pairs):
            raise ValueError(f"{what}: a range must be begin-end with begin <= end, got {text!r}")
        return coalesce(pairs)
    if text.startswith("{"):
        if not text.endswith("}"):
            raise ValueError(f"{what}: mismatched braces in {text!r}")
        return frozenset(t for t in text[1:-1].split(",") if t)
    try:
        number = float(text)
    except ValueError:
        return text
    if math.isnan(number) or math.isinf(number) or number < 0:
        raise ValueError(f"{what}: {text!r} is not a non-negative number")
    return number


def parse_resources(text: str) -> list[Resource]:
    """``cpus:4;mem(ml):8192;ports:[31000-32000]`` → resources (same name and role added up).
    Raises ValueError with one line naming the bad part."""
    merged: dict[tuple[str, str], Value] = {}
    for token in [t for t in text.split(";") if t.strip()]:
        pair = token.split(":")
        if len(pair) != 2:
            raise ValueError(f"bad resource {token.strip()!r}: expecting name:value or name(role):value")
        head = pair[0].strip()
        role = "*"
        if "(" in head:
            if not head.endswith(")") or head.index("(") == 0:
                raise ValueError(f"bad resource {token.strip()!r}: mismatched parentheses")
            head, role = head[:head.index("(")].strip(), head[head.index("(") + 1:-1].strip()
            if not role or any(c in role for c in "/\\ ") or role in (".", ".."):
                raise ValueError(f"bad resource {token.strip()!r}: invalid role {role!r}")
        if not head:
            raise ValueError(f"bad resource {token.strip()!r}: the name is empty")
        value = _value(pair[1], f"resource {head}")
        if isinstance(value, str):
            raise ValueError(f"resource {head}: {pair[1].strip()!r} is not a number, [ranges] or {{set}}")
        if head in SCALARS and not isinstance(value, float):
            raise ValueError(f"resource {head}: must be a number, got {pair[1].strip()!r}")
        if head == "ports" and not isinstance(value, tuple):
            raise ValueError(f"resource ports: must be ranges like [31000-32000], got {pair[1].strip()!r}")
        if head == "gpus" and isinstance(value, float) and value != int(value):  # a float: gpus is in SCALARS
            raise ValueError(f"resource gpus: must be a whole number, got {pair[1].strip()!r}")
        key = (head, role)
        before = merged.get(key)
        if before is None:
            merged[key] = value
        elif isinstance(value, float) and isinstance(before, float):
            merged[key] = before + value
        elif isinstance(value, tuple) and isinstance(before, tuple):
            merged[key] = coalesce(before + value)
        elif isinstance(value, frozenset) and isinstance(before, frozenset):
            merged[key] = before | value
        else:
            raise ValueError(f"resource {head}: given twice with different kinds of value")
    return [Resource(name, value, role) for (name, role), value in merged.items()]


def parse_attributes(text: str) -> dict[str, Value]:
    """``rack:r1;level:2;slots:[1-4]`` → ``{"rack": "r1", "level": 2.0, "slots": ((1, 4),)}``
    (Mesos's ``Attributes::parse``: text, scalar or ranges; the first ``:`` splits)."""
    out: dict[str, Value] = {}
    for token in [t for t in text.replace("\n", ";").split(";") if t.strip()]:
        name, sep, raw = token.partition(":")
        name = name.strip()
        if not sep or not name or not raw.strip():
            raise ValueError(f"bad attribute {token.strip()!r}: expecting name:value")
        value = _value(raw, f"attribute {name}")
        if isinstance(value, frozenset):
            raise ValueError(f"attribute {name}: sets are not attribute values (text, number or [ranges])")
        out[name] = value
    return out


def attribute_text(value: Value, grouped: bool = False) -> str:
    """An attribute's value as Marathon's constraints compare it (``Constraints.getValueString``):
    scalars with up to three decimals (``2``, ``0.5``), ranges ``[1-4,6-8]``, text as it is; ``grouped``:
    scalars with thousands separators (``1,024``), as Marathon up to 1.6.0 formats them (its JVM's
    ``NumberFormat.getInstance``, an English locale's)."""
    if isinstance(value, float):
        text = (f"{round(value, 3):,.3f}" if grouped else f"{round(value, 3):.3f}").rstrip("0").rstrip(".")
        return text or "0"
    if isinstance(value, tuple):
        return "[" + ",".join(f"{b}-{e}" for b, e in sorted(value)) + "]"
    if isinstance(value, frozenset):
        return "{" + ",".join(sorted(value)) + "}"
    return value
