"""Peers' addresses -> the cluster spec a TensorFlow program reads. Pure: no I/O.

Three ways to hand a program its cluster (``MTF_SPEC_STYLE``):

* ``tf_config``: the ``TF_CONFIG`` environment variable,
  ``{"cluster": {"chief": [...], "ps": [...], "worker": [...]}, "task": {"type", "index"}}``;
* ``flags``: the classic TF1 flags ``--ps_hosts --worker_hosts --job_name --task_index``
  (plus ``--chief_hosts`` when the job has a chief) appended to the command;
* ``both``.

Whatever the style, a command that contains any of the placeholders ``{ps_hosts}``
``{worker_hosts}`` ``{chief_hosts}`` ``{job_name}`` ``{task_index}`` gets them
substituted and nothing appended. Roles with count 0 are left out of the cluster;
``evaluator`` is not a member but gets TF_CONFIG with the cluster and its own task;
``tensorboard`` gets nothing.

An elastic job (docs/elastic.md) has more apps of its elastic role than TensorFlow tasks: the
deciding task publishes a :class:`Membership` (which apps train now, each with its TF index and
address) and every member renders its spec from it (:func:`elastic_cluster`): the running workers
in TF index order, contiguous after every change that restarts the programs; a worker TensorFlow
lets go without a restart (a ParameterServerStrategy or TF1 worker lost) leaves its index *vacant*
(its last address stays in that place of the list the running programs already hold) until the next
change fills or compacts it.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from marathon_tf.contract import naming

__all__ = [
    "PLACEHOLDERS",
    "SPEC_STYLES",
    "PeerKey",
    "RenderedSpec",
    "build_cluster",
    "tf_config",
    "classic_flags",
    "has_placeholders",
    "apply_flags",
    "render",
    "Membership",
    "elastic_cluster",
]

PLACEHOLDERS = ("ps_hosts", "worker_hosts", "chief_hosts", "job_name", "task_index")
SPEC_STYLES = ("tf_config", "flags", "both")

#: A cluster member: (role, index), e.g. ("worker", 3).
PeerKey = tuple[str, int]


def build_cluster(counts: Mapping[str, int], endpoints: Mapping[PeerKey, str]) -> dict[str, list[str]]:
    """The ``cluster`` dict: every member role with count > 0, its addresses in index order.

    Raises KeyError naming the first member that has no address.
    """
    cluster: dict[str, list[str]] = {}
    for role in naming.CLUSTER_ROLES:
        count = int(counts.get(role, 0))
        if count <= 0:
            continue
        hosts = []
        for i in range(count):
            if (role, i) not in endpoints:
                raise KeyError(f"no address for {naming.task_name(role, i)}")
            hosts.append(endpoints[(role, i)])
        cluster[role] = hosts
    return cluster


@dataclass(frozen=True)
class Membership:
    """Who trains now in an elastic job (the deciding task publishes it, every member reads it).

    ``members``: app task name (``worker-2``) -> (TF index, ``host:port``); ``vacant``: TF index -> the
    address of the worker that left it (see the module); ``paused``: fewer than the role's minimum are
    there: every program is stopped until enough are placed again; ``generation`` goes up with each change."""

    role: str
    generation: int
    members: Mapping[str, tuple[int, str]]
    vacant: Mapping[int, str] = field(default_factory=dict)
    paused: bool = False
    cause: str = ""

    @property
    def size(self) -> int:
        return len(self.members)

    def index_of(self, task: str) -> int | None:
        member = self.members.get(task)
        return member[0] if member is not None else None

    def hosts(self) -> list[str]:
        """The role's TF addresses in index order, vacancies at their place."""
        top = max([i for i, _ in self.members.values()] + list(self.vacant), default=-1)
        by_index = {i: a for i, a in self.members.values()}
        return [by_index.get(i) or self.vacant.get(i, "") for i in range(top + 1)]

    def to_dict(self) -> dict:
        return {"role": self.role, "generation": self.generation, "paused": self.paused, "cause": self.cause,
                "members": {t: {"index": i, "address": a} for t, (i, a) in sorted(self.members.items())},
                "vacant": {str(i): a for i, a in sorted(self.vacant.items())}}

    @classmethod
    def from_dict(cls, data: object) -> Membership | None:
        """Read one back (None for anything that is not one)."""
        if not isinstance(data, dict) or not isinstance(data.get("generation"), int):
            return None
        try:
            members = {str(t): (int(m["index"]), str(m["address"])) for t, m in (data.get("members") or {}).items()}
            vacant = {int(i): str(a) for i, a in (data.get("vacant") or {}).items()}
        except (TypeError, ValueError, KeyError):
            return None
        return cls(str(data.get("role") or "worker"), data["generation"], members, vacant, bool(data.get("paused")),
                   str(data.get("cause") or ""))


def elastic_cluster(counts: Mapping[str, int], endpoints: Mapping[PeerKey, str], membership: Membership,
                    role: str, index: int) -> tuple[dict[str, int], dict[PeerKey, str], int]:
    """An elastic job's cluster as TensorFlow sees it: (counts, endpoints by TF index, the TF index of task
    (``role``, ``index``)). ``counts``/``endpoints``: the job's apps (the elastic role's from ``membership``)."""
    tf_counts = {r: int(n) for r, n in counts.items() if r != membership.role}
    tf_endpoints = {k: a for k, a in endpoints.items() if k[0] != membership.role}
    hosts = membership.hosts()
    tf_counts[membership.role] = len(hosts)
    tf_endpoints.update({(membership.role, i): a for i, a in enumerate(hosts)})
    own = membership.index_of(naming.task_name(role, index)) if role == membership.role else index
    return tf_counts, tf_endpoints, index if own is None else own


def tf_config(cluster: Mapping[str, Sequence[str]], role: str, index: int) -> dict | None:
    """The TF_CONFIG dict of task (role, index); None for roles that get none (tensorboard)."""
    if role == "tensorboard":
        return None
    return {"cluster": {r: list(h) for r, h in cluster.items()}, "task": {"type": role, "index": int(index)}}


def classic_flags(cluster: Mapping[str, Sequence[str]], role: str, index: int) -> dict[str, str]:
    """The classic flag values (also the placeholder values), as ordered name -> value."""
    flags = {
        "ps_hosts": ",".join(cluster.get("ps", [])),
        "worker_hosts": ",".join(cluster.get("worker", [])),
    }
    if cluster.get("chief"):
        flags["chief_hosts"] = ",".join(cluster["chief"])
    flags["job_name"] = role
    flags["task_index"] = str(int(index))
    return flags


def has_placeholders(argv: Sequence[str]) -> bool:
    """Whether any argument contains one of :data:`PLACEHOLDERS` (``{ps_hosts}`` ...)."""
    return any("{" + p + "}" in arg for arg in argv for p in PLACEHOLDERS)


def _substitute(text: str, values: Mapping[str, str]) -> str:
    for name in PLACEHOLDERS:
        text = text.replace("{" + name + "}", values.get(name, ""))
    return text


def apply_flags(argv: Sequence[str], flags: Mapping[str, str], *, shell: bool, append: bool) -> list[str]:
    """The command with its placeholders substituted, or (``append`` and no placeholder)
    the flags appended. ``shell``: ``argv`` is one shell string (appended flags are quoted)."""
    if has_placeholders(argv):
        return [_substitute(a, flags) for a in argv]
    if not append:
        return list(argv)
    extra = [f"--{k}={v}" for k, v in flags.items()]
    if shell:
        return [argv[0] + " " + " ".join(shlex.quote(e) for e in extra)]
    return list(argv) + extra


@dataclass(frozen=True)
class RenderedSpec:
    """Everything the bootstrap hands the program, and what it shows in status."""

    cluster: dict[str, list[str]]
    argv: list[str]
    tf_config: dict | None          # the TF_CONFIG the program sees (the user's, when kept)
    tf_config_env: str | None       # the value to export, or None: leave TF_CONFIG as it is
    warnings: list[str] = field(default_factory=list)

    def document(self, role: str, index: int) -> dict:
        """The content of ``cluster_spec.json``."""
        return {"cluster": self.cluster, "task": {"type": role, "index": int(index)},
                "tf_config": self.tf_config, "argv": self.argv}


def render(counts: Mapping[str, int], endpoints: Mapping[PeerKey, str], role: str, index: int, *,
           style: str, argv: Sequence[str], shell: bool, user_tf_config: str | None) -> RenderedSpec:
    """Work out the cluster, TF_CONFIG and command for task (role, index).

    ``user_tf_config`` is the TF_CONFIG already in the environment (None or "" when unset):
    it is kept, never overwritten, and a warning says so.
    """
    if style not in SPEC_STYLES:
        raise ValueError(f"MTF_SPEC_STYLE must be one of {', '.join(SPEC_STYLES)}, not {style!r}")
    cluster = build_cluster(counts, endpoints) if role != "tensorboard" else {}
    warnings: list[str] = []
    if role == "tensorboard":
        return RenderedSpec(cluster, list(argv), _parse(user_tf_config), None, warnings)
    ours = tf_config(cluster, role, index)
    wants_tf_config = style in ("tf_config", "both")
    if user_tf_config:
        warnings.append("TF_CONFIG is already set in the environment: keeping it, not writing the "
                        "discovered cluster (unset TF_CONFIG in the app's env to let marathon-tf write it)")
        shown, export = _parse(user_tf_config), None
    elif wants_tf_config:
        shown, export = ours, json.dumps(ours, sort_keys=True, separators=(",", ":"))
    else:
        shown, export = None, None
    flags = classic_flags(cluster, role, index)
    out_argv = apply_flags(argv, flags, shell=shell, append=style in ("flags", "both"))
    return RenderedSpec(cluster, out_argv, shown, export, warnings)


def _parse(value: str | None) -> dict | None:
    if not value:
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        return {"unparsable": value}
    return parsed if isinstance(parsed, dict) else {"unparsable": value}
