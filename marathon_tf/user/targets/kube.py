"""Kubernetes' vocabulary for the export targets: names, labels, quantities, the ``$(VAR)``
references of a container's command and env, and Marathon's constraints as pod scheduling. Pure.

Kubernetes 1.3x's rules (their sources are cited in tests/user/test_export_jobset.py): DNS-1035 / DNS-1123
names, qualified names, label values; ``$(VAR)`` in ``command``, ``args`` and ``env[].value`` (``$$`` is
one ``$``, a defined ``$(NAME)`` its value, anything else as written); quantities.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["dns1035_label_problem", "dns1123_label_ok", "dns1123_subdomain_ok", "qualified_name_ok",
           "label_value_ok", "cpu_quantity", "memory_quantity", "literal", "var_ref", "Scheduling",
           "scheduling", "HOSTNAME_LABEL"]

MAX_LABEL = 63
_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: Marathon's constraint fields that name a Kubernetes well-known node label; any other field is a
#: Mesos agent attribute, taken for the node label of the same name
_FIELDS = {"hostname": HOSTNAME_LABEL, "@hostname": HOSTNAME_LABEL,
           "@region": "topology.kubernetes.io/region", "@zone": "topology.kubernetes.io/zone"}


def dns1035_label_problem(name: str) -> str | None:
    """Why ``name`` is not an RFC 1035 label (what a JobSet's, a Service's name must be), or None."""
    if len(name) > MAX_LABEL:
        return f"{len(name)} characters, more than {MAX_LABEL}"
    if not _DNS1035.fullmatch(name):
        return "lowercase letters, digits and '-', starting with a letter and ending with a letter or digit"
    return None


def dns1123_label_ok(name: str) -> bool:
    return len(name) <= MAX_LABEL and bool(_DNS1123_LABEL.fullmatch(name))


def dns1123_subdomain_ok(name: str) -> bool:
    return 0 < len(name) <= 253 and all(_DNS1123_LABEL.fullmatch(p) for p in name.split("."))


def qualified_name_ok(key: str) -> bool:
    """A label or annotation key: ``[prefix/]name``, the prefix a DNS subdomain, the name at most 63."""
    prefix, _, name = key.rpartition("/")
    if prefix and not dns1123_subdomain_ok(prefix):
        return False
    return 0 < len(name) <= MAX_LABEL and bool(_QUALIFIED_NAME.fullmatch(name))


def label_value_ok(value: str) -> bool:
    return value == "" or (len(value) <= MAX_LABEL and bool(_QUALIFIED_NAME.fullmatch(value)))


def cpu_quantity(cpus: float) -> str:
    """Marathon's ``cpus`` (a float of cores) as a CPU quantity: ``"1"``, ``"500m"``."""
    milli = max(1, round(cpus * 1000))
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def memory_quantity(mib: float) -> str:
    """Marathon's ``mem`` / ``disk`` (MiB, maybe fractional) as a quantity: ``"1536Mi"``, else whole KiB."""
    if float(mib).is_integer():
        return f"{int(mib)}Mi"
    return f"{math.ceil(mib * 1024)}Ki"


def literal(text: str) -> str:
    """``text`` as Kubernetes passes it to the container: every ``$`` doubled, so no ``$(NAME)`` in
    a user's command or value is ever taken for a reference (Marathon expands none)."""
    return text.replace("$", "$$")


def var_ref(name: str) -> str:
    """A reference Kubernetes replaces by the container's variable ``name``: ``$(name)``."""
    return f"$({name})"


# --- Marathon's constraints as scheduling ------------------------------------------------------------


@dataclass
class Scheduling:
    """A role's constraints as a pod's ``affinity`` and ``topologySpreadConstraints``, and what could
    not be translated, as (job-file path, why)."""

    node_expressions: list[dict[str, Any]] = field(default_factory=list)
    pod_anti_affinity: list[dict[str, Any]] = field(default_factory=list)
    spread: list[dict[str, Any]] = field(default_factory=list)
    untranslated: list[tuple[str, str]] = field(default_factory=list)

    def affinity(self) -> dict[str, Any] | None:
        out: dict[str, Any] = {}
        if self.node_expressions:
            out["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": self.node_expressions}]}}
        if self.pod_anti_affinity:
            out["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": self.pod_anti_affinity}
        return out or None


def _node_label(fld: str) -> str | None:
    return _FIELDS.get(fld) or (fld if not fld.startswith("@") and qualified_name_ok(fld) else None)


def _literal_values(regex: str) -> list[str] | None:
    """The values a Marathon LIKE / UNLIKE regular expression (a whole-string match) lists, when it
    is only plain values joined by ``|`` (``rack-1|rack-2``, dots escaped); else None."""
    values = []
    for part in regex.split("|"):
        if not re.fullmatch(r"(?:[A-Za-z0-9_-]|\\\.)+", part):
            return None
        values.append(part.replace("\\.", "."))
    return sorted(set(values)) if all(label_value_ok(v) for v in values) else None


def scheduling(constraints: Sequence[Sequence[str]], key: str, selector: dict[str, Any]) -> Scheduling:
    """Constraints (``key``: where they are in the job file) for the pods the label selector ``selector``
    (``{"matchLabels": …, "matchExpressions": …}``) matches: the pods of the constraints' scope, as
    marathon-tf's placement holds them on Marathon (the job's rules over every role without constraints
    of its own, a role's over its pods: :func:`marathon_tf.user.render.placement_scopes`). Marathon
    checks a constraint against the other instances of the same app; marathon-tf runs one app per task,
    so ``UNIQUE``, ``GROUP_BY`` and ``MAX_PER`` hold across the scope's tasks, and here across its pods."""
    out = Scheduling()
    for i, constraint in enumerate(constraints):
        fld, op, value = constraint[0], constraint[1], (constraint[2] if len(constraint) > 2 else None)
        path = f"{key}[{i}]"
        label = _node_label(fld)
        if label is None:
            out.untranslated.append((path, f"{fld!r} names no node label Kubernetes can select on "
                                           f"(a node label key is [prefix/]name, e.g. 'rack')"))
            continue
        if op == "UNIQUE":
            out.pod_anti_affinity.append({"labelSelector": copy.deepcopy(selector), "topologyKey": label})
        elif op == "GROUP_BY":
            out.spread.append({"maxSkew": 1, "topologyKey": label, "whenUnsatisfiable": "DoNotSchedule",
                               "labelSelector": copy.deepcopy(selector)})
        elif op in ("IS", "CLUSTER") and value is not None and label_value_ok(value):
            out.node_expressions.append({"key": label, "operator": "In", "values": [value]})
        elif op in ("LIKE", "UNLIKE") and _literal_values(value or "") is not None:
            out.node_expressions.append({"key": label, "operator": "In" if op == "LIKE" else "NotIn",
                                         "values": _literal_values(value or "")})
        elif op in ("LIKE", "UNLIKE"):
            out.untranslated.append((path, f"{op} {value!r} is a regular expression; node affinity matches "
                                           "lists of values only (write it as 'a|b|c')"))
        elif op == "MAX_PER":
            out.untranslated.append((path, "MAX_PER has no Kubernetes counterpart (topology spread bounds the "
                                           "skew between domains, not the pods in one)"))
        else:
            out.untranslated.append((path, f"{op} {'without a value' if value is None else repr(value)} has no "
                                           "node-affinity counterpart (a node label value: letters, digits, "
                                           "'-', '_', '.', at most 63)"))
    return out
