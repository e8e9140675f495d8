"""Does an agent's offer fit a task? Marathon 1.8's offer matching, with its reasons.

Modelled on Marathon 1.8's resource matcher and constraint checks:

* the resources of the app's ``acceptedResourceRoles`` are considered (default: the roles Marathon
  is offered, ``default_roles``, as ``--default_accepted_resource_roles`` defaults to); an offer with
  none of them adds ``UnfulfilledRole``;
* ``cpus``, ``mem``, ``gpus``, ``disk`` (those asked for) each add ``Insufficient<X>`` when the
  offer lacks them;
* constraints are checked against the app's instances of its current configuration (``hostname``
  or ``@hostname`` is the agent's hostname, any other field an attribute):
  ``UNIQUE``, ``CLUSTER``, ``GROUP_BY``, ``LIKE``, ``UNLIKE`` (whole-string regular expressions),
  ``MAX_PER``, ``IS``; a failure adds ``UnfulfilledConstraint``; ``GROUP_BY`` as 1.4 – 1.10.33
  and 1.11.0 – 1.11.17 check it (a value no instance has yet always fits), or, asked to
  (``group_by_even``), as 1.10.34+ and 1.11.18+ do (the app's instances spread evenly over its ``n``
  values);
* with ``gpu_resources`` enabled and ``--gpu_scheduling_behavior restricted`` (1.8's default; the
  app's ``GPU_SCHEDULING_BEHAVIOR`` label overrides it) a task without GPUs declines an offer with
  GPUs: ``DeclinedScarceResources``;
* only when all of that fits are ports matched (``InsufficientPorts``); dynamic host ports come
  from the offer's port ranges.

Marathon keeps one reason per declined offer, the first in ``NoOfferMatchReason.reasonFunnel``
(:data:`REASON_FUNNEL`). An agent that is not enforced (the local runner's default one,
:class:`~marathon_tf.mesos.agents.AgentInfo`) is never short of anything but ports.

The offer is the agent's free resources (:func:`marathon_tf.mesos.agents.free_resources`). The local
cluster's scheduler places its tasks with :func:`match`; the user's admission check
(:mod:`marathon_tf.user.admission`) asks it the same question of a real master's agents.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

from .agents import AgentInfo
from .resources import Resource, Value, attribute_text

__all__ = ["REASON_FUNNEL", "FreePorts", "Match", "NoMatch", "match", "funnel", "meets_constraint", "field_value"]

#: ``mesosphere.mesos.NoOfferMatchReason.reasonFunnel`` (Marathon 1.6-1.11; 1.4-1.5 lack
#: ``AgentMaintenance`` and ``DeclinedScarceResources``).
REASON_FUNNEL = ("UnfulfilledRole", "UnfulfilledConstraint", "NoCorrespondingReservationFound", "AgentMaintenance",
                 "InsufficientCpus", "InsufficientMemory", "InsufficientDisk", "InsufficientGpus",
                 "InsufficientPorts", "DeclinedScarceResources")
_SCALAR_REASON = {"cpus": "InsufficientCpus", "mem": "InsufficientMemory", "disk": "InsufficientDisk",
                  "gpus": "InsufficientGpus"}


class FreePorts(Sequence[int]):
    """The ports of an offer's ``ranges`` (``(begin, end)``, inclusive, not overlapping) less ``taken``, in
    order; counted without being listed, and listed only when read by index: an agent's 10,000-port range
    listed for each app and agent cost ~0.5 ms each, and the admission check, which reads the first few, asks
    it a dozen times per ``deploy`` or ``scale``. Equal to a list of the same ports."""

    def __init__(self, ranges: Iterable[tuple[int, int]], taken: Iterable[int] = ()) -> None:
        self._ranges = tuple(ranges)
        self._taken = frozenset(taken)
        inside = sum(1 for p in self._taken if any(b <= p <= e for b, e in self._ranges))
        self._len = sum(e - b + 1 for b, e in self._ranges) - inside
        self._listed: list[int] | None = None

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[int]:
        taken = self._taken
        for b, e in self._ranges:
            yield from (p for p in range(b, e + 1) if p not in taken) if taken else range(b, e + 1)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice) and index.step in (None, 1) and (index.start or 0) >= 0 \
                and index.stop is not None and index.stop >= 0:
            return list(itertools.islice(self, index.start, index.stop))  # the first few: no list of them all
        if self._listed is None:
            self._listed = list(self)
        return self._listed[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (FreePorts, list, tuple)):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # (equal to a list, as mutable as one's value: unhashable)

    def __repr__(self) -> str:
        return f"FreePorts({list(self._ranges)!r}, {len(self)} free)"


@dataclass
class Match:
    agent: AgentInfo
    #: What the task takes of the agent (scalars by role; ports are added once allocated).
    consumed: list[Resource]
    #: The ports it may take (enforced agents: free ports of its roles' ranges; None: any free port).
    port_candidates: Sequence[int] | None
    port_role: str = "*"
    gpus: tuple[int, ...] = ()


@dataclass
class NoMatch:
    agent: AgentInfo
    reasons: list[str]
    offer: list[Resource] = field(default_factory=list)


def funnel(reasons: Iterable[str]) -> str | None:
    """The one reason Marathon counts for a declined offer (the first of the funnel)."""
    known = [r for r in reasons if r in REASON_FUNNEL]
    return min(known, key=REASON_FUNNEL.index) if known else None


def field_value(agent: AgentInfo, name: str, grouped: bool = False) -> str | None:
    """A constraint field's value on ``agent`` (``Constraints.readerForField``): its hostname for
    ``hostname`` / ``@hostname``, else the attribute's text (None: the agent has none; ``grouped``: a
    scalar with thousands separators, :func:`~marathon_tf.mesos.resources.attribute_text`)."""
    if name in ("hostname", "@hostname"):
        return agent.hostname
    if name in ("@region", "@zone"):
        return None  # no fault domain is modelled
    value: Value | None = agent.attributes.get(name)
    return None if value is None else attribute_text(value, grouped)


def _as_int(text: str, default: int) -> int:
    if text == "inf":
        return 2 ** 31 - 1
    try:
        return int(text)
    except ValueError:
        return default


def _group_by_even(offered: str, counts: dict[str | None, int], groups: int, instances: int) -> bool:
    """``GROUP_BY`` of Marathon 1.10.34+ and 1.11.18+ (``checkGroupBy``): each of the ``groups`` values
    gets ``instances // groups`` instances, the remainder one more each; a new value only while fewer
    than ``groups`` are taken. Without a value (``groups`` 0) the division fails: nothing fits."""
    if groups < 1:
        return False
    per_group, remainder = divmod(instances, groups)
    consumed = sum(max(0, n - per_group) for n in counts.values())
    if offered not in counts:
        return len(counts) < groups
    count = counts[offered]
    return count < per_group or (count == per_group and remainder - consumed > 0)


def meets_constraint(agent: AgentInfo, placed: Sequence[AgentInfo], constraint: Sequence[str], *,
                     instances: int | None = None, grouped: bool = False) -> bool:
    """``Constraints.meetsConstraint``: may one more instance go to ``agent``, with the app's other
    instances on ``placed`` (one entry per instance)?

    ``instances`` (the app's): ``GROUP_BY`` as Marathon 1.10.34+ and 1.11.18+ check it, spreading the
    app's instances evenly over at most ``n`` values; None: as 1.4 – 1.10.33 and 1.11.0 – 1.11.17 do,
    where a value no instance has yet always fits and a taken one only while it has the fewest (once
    ``n`` are taken). ``grouped``: scalar attributes read as Marathon up to 1.6.0 formats them (``1,024``)."""
    name, operator = constraint[0], constraint[1]
    value = constraint[2] if len(constraint) > 2 else ""
    offered = field_value(agent, name, grouped)
    if offered is None:
        return operator == "UNLIKE"
    values = [field_value(p, name, grouped) for p in placed]
    if operator == "UNIQUE":
        return all(v != offered for v in values)
    if operator == "CLUSTER":
        return (not values or values[0] == offered) if not value else offered == value
    if operator in ("LIKE", "UNLIKE"):
        if not value:
            return False
        try:
            hit = re.fullmatch(value, offered) is not None
        except re.error:
            return False
        return hit if operator == "LIKE" else not hit
    counts: dict[str | None, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    if operator == "GROUP_BY":
        minimum = max(0, _as_int(value, 0))
        if instances is not None:
            return _group_by_even(offered, counts, minimum, instances)
        if offered not in counts:
            return True
        return len(counts) >= minimum and counts[offered] == min(counts.values())
    if operator == "MAX_PER":
        return counts.get(offered, 0) < _as_int(value, 0)
    if operator == "IS":
        try:
            wanted = attribute_text(float(value)) if re.fullmatch(r"[0-9]+(\.[0-9]+)?", value) else value
        except ValueError:
            wanted = value
        return offered == wanted
    return False


def _take(offer: list[Resource], name: str, amount: float, roles: set[str]) -> list[Resource] | None:
    """``amount`` of scalar ``name`` from the offer's resources of ``roles`` (in offer order), or None."""
    taken: list[Resource] = []
    left = amount
    for r in offer:
        if left <= 1e-9:
            break
        if r.name == name and r.role in roles and isinstance(r.value, float) and r.value > 0:
            part = min(r.value, left)
            taken.append(Resource(name, part, r.role))
            left -= part
    return taken if left <= 1e-9 else None


def match(spec: dict, agent: AgentInfo, offer: list[Resource], placed: Sequence[AgentInfo], *, default_roles: set[str],
          used_gpus: Iterable[int] = (), taken_ports: Iterable[int] = (),
          gpu_restricted: bool = False, group_by_even: bool = False,
          scalars_grouped: bool = False, gpu_label: bool = True) -> Match | NoMatch:
    """Whether one task of app ``spec`` fits ``offer`` (the agent's free resources); ``group_by_even``:
    ``GROUP_BY`` as Marathon 1.10.34+ and 1.11.18+ check it; ``scalars_grouped``: scalar attributes as 1.4 – 1.6.0
    format them (:func:`meets_constraint`); ``gpu_label``: the app's ``GPU_SCHEDULING_BEHAVIOR`` label is read
    (1.5.7+, as the option it overrides)."""
    roles = set(spec.get("acceptedResourceRoles") or default_roles)
    reasons: list[str] = []
    consumed: list[Resource] = []
    asked = {name: float(spec.get(name) or 0) for name in ("cpus", "mem", "gpus", "disk")}
    for name, amount in asked.items():
        if amount <= 0:
            continue
        if not agent.enforced:
            consumed.append(Resource(name, amount, "*"))
            continue
        taken = _take(offer, name, amount, roles)
        if taken is None:
            reasons.append(_SCALAR_REASON[name])
        else:
            consumed += taken
    if not any(r.role in roles for r in offer):
        reasons.append("UnfulfilledRole")
    instances = int(spec.get("instances", 1) or 0) if group_by_even else None
    if not all(meets_constraint(agent, placed, c, instances=instances, grouped=scalars_grouped)
               for c in spec.get("constraints") or [] if len(c) >= 2):
        reasons.append("UnfulfilledConstraint")
    behaviour = (spec.get("labels") or {}).get("GPU_SCHEDULING_BEHAVIOR") if gpu_label else None
    restricted = gpu_restricted if behaviour not in ("restricted", "unrestricted") else behaviour == "restricted"
    offered_gpus = sum(r.value for r in offer if r.name == "gpus" and isinstance(r.value, float))
    if restricted and agent.enforced and offered_gpus > 0 and asked["gpus"] == 0:
        reasons.append("DeclinedScarceResources")
    if reasons:
        return NoMatch(agent, reasons, offer)
    gpus: tuple[int, ...] = ()
    if agent.enforced and asked["gpus"]:
        busy = set(used_gpus)
        gpus = tuple(i for i in range(agent.gpus) if i not in busy)[: int(asked["gpus"])]
        if len(gpus) < asked["gpus"]:  # the counts said yes: only a bookkeeping slip gets here
            return NoMatch(agent, ["InsufficientGpus"], offer)
    wanted = len(spec.get("portDefinitions") or [])
    if not agent.enforced or not wanted:
        return Match(agent, consumed, None, gpus=gpus)
    ports_taken = set(taken_ports)
    for r in offer:
        if r.name == "ports" and r.role in roles and isinstance(r.value, tuple):
            candidates = FreePorts(r.value, ports_taken)
            if len(candidates) >= wanted:
                return Match(agent, consumed, candidates, port_role=r.role, gpus=gpus)
    return NoMatch(agent, ["InsufficientPorts"], offer)
