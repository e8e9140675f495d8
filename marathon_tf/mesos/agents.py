"""A Mesos agent as the offer matcher reads it, and what it has free to offer (pure).

An agent registers with the master with its ``AgentInfo`` (``id``, ``hostname``, ``resources``, ``attributes``); the
master's allocator offers each framework the agent's resources that no task uses and no other framework holds (the
agent's total less its allocation). :class:`AgentInfo` is that view: its id (what an offer names), its total
resources (by role), its attributes, how many GPUs it has (numbered ``0 … gpus-1``) and the roles its resources
carry.

``enforced`` is False only for the local runner's default agent, as large as the machine, whose
resources are not counted (:mod:`marathon_tf.local.agents`); a real agent's always are.

Both the local cluster's agents (:class:`marathon_tf.local.agents.Agent`, which adds the runner's own
address, sandboxes and state) and the agents a real master lists (:mod:`marathon_tf.user.capacity`)
are this.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .resources import Resource, Value, ranges_minus

__all__ = ["AgentInfo", "free_resources"]


@dataclass(kw_only=True)
class AgentInfo:
    """One agent: its ``id``, ``hostname``, total ``resources`` (every role), ``attributes``; ``enforced``
    False for one whose resources are not counted (the local runner's default agent)."""

    id: str = ""
    hostname: str
    resources: list[Resource]
    attributes: dict[str, Value] = field(default_factory=dict)
    enforced: bool = True

    @property
    def gpus(self) -> int:
        """How many GPUs it has (numbered 0 … gpus-1), every role together."""
        return int(sum(r.value for r in self.resources if r.name == "gpus" and isinstance(r.value, float)))

    def roles(self) -> set[str]:
        return {r.role for r in self.resources}


def free_resources(agent: AgentInfo, used: Iterable[Resource]) -> list[Resource]:
    """The agent's total less what its tasks use, per name and role (what it would offer)."""
    scalars: dict[tuple[str, str], float] = {}
    ports: dict[tuple[str, str], list[int]] = {}
    for r in used:
        if isinstance(r.value, float):
            scalars[(r.name, r.role)] = scalars.get((r.name, r.role), 0.0) + r.value
        elif isinstance(r.value, tuple):
            ports.setdefault((r.name, r.role), []).extend(p for b, e in r.value for p in range(b, e + 1))
    out = []
    for r in agent.resources:
        if isinstance(r.value, float):
            out.append(Resource(r.name, max(0.0, round(r.value - scalars.get((r.name, r.role), 0.0), 6)), r.role))
        elif isinstance(r.value, tuple):
            out.append(Resource(r.name, ranges_minus(r.value, ports.get((r.name, r.role), ())), r.role))
        else:
            out.append(r)
    return out
