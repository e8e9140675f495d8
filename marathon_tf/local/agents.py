"""The local cluster's Mesos agents: how many, their resources, attributes, addresses and state.

One machine plays every agent. Agent *N* (``agent-N``, id ``<master id>-S<N-1>``) is a Mesos agent of
the model (:class:`marathon_tf.mesos.agents.AgentInfo`: hostname, resources, attributes) and:

* has its own address, the loopback address ``127.0.0.N`` (agent 1: the runner's own host),
  which is also its ``hostname``, as DC/OS names agents by their IP: Marathon's ``host`` of its
  tasks, their ``HOST``, Mesos-DNS's A records and ``hostname`` constraints all use it, and every
  task reaches every other one there without any resolver change (Linux answers the whole of
  127.0.0.0/8 on the loopback interface);
* has its own sandbox root: ``<state>/sandboxes`` for agent 1 (where it always was),
  ``<state>/agents/agent-N/sandboxes`` for the others;
* offers the resources it was given in the Mesos agent's ``--resources`` syntax
  (:mod:`marathon_tf.mesos.resources`); what is not given is detected as a Mesos agent does (every
  CPU, memory less 1 GiB, the state directory's disk less 5 GiB, ports ``[31000-32000]``, no GPUs).
  Without any ``--resources`` (the default) the agent is this machine as before: it reports the
  machine's resources, its ports are those just below the kernel's ephemeral range
  (:func:`marathon_tf.local.ports.dynamic_range`: no outgoing connection takes one before its task binds
  it), and no task is declined for its size (only for its constraints and roles);
* is ``active``, ``unreachable`` (the master lost contact: its processes run on) or ``down``
  (it died: its processes were killed); the latter two are left out of the master's ``slaves``.

``per_agent`` spreads option values over the agents: ``a|b`` (or the option given twice) gives
agent 1 ``a``, agent 2 ``b``, agent 3 ``a`` …
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from marathon_tf.mesos.agents import AgentInfo
from marathon_tf.mesos.resources import Ranges, Resource, parse_attributes, parse_resources
from marathon_tf.mesos.views import attributes_json, summary_json

from .ports import dynamic_range, ephemeral_range
from .state import AGENT_ID

__all__ = ["Agent", "Agents", "per_agent", "MAX_AGENTS"]

#: 127.0.0.2 … 127.0.0.254 are the other agents' addresses.
MAX_AGENTS = 254
_ID_PREFIX = AGENT_ID.rsplit("-", 1)[0]
_MIB = 1024 * 1024
_GIB = 1024 * _MIB


def per_agent(values: Sequence[str], count: int, what: str) -> list[str | None]:
    """The value of each of ``count`` agents: every ``|``-separated part of every value, in turn
    (cycling); ``[None] * count`` when none is given."""
    parts = [p.strip() for v in values for p in v.split("|")]
    if not parts:
        return [None] * count
    if len(parts) > count:
        raise ValueError(f"{what}: {len(parts)} agent values for {count} agent{'s' if count != 1 else ''} "
                         f"(give --agents {len(parts)})")
    return [parts[i % len(parts)] for i in range(count)]


def _check_address(address: str) -> None:
    """Whether this machine answers on ``address`` (Linux does on all of 127/8; macOS only 127.0.0.1)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((address, 0))
    except OSError as e:
        raise ValueError(f"the agents' addresses 127.0.0.2 … need the whole loopback network, and {address} "
                         f"cannot be used here ({e.strerror or e}): run one agent") from None


def machine_resources(work_dir: Path) -> list[Resource]:
    """cpus, mem and disk as a Mesos agent detects them (every CPU; memory less 1 GiB when there
    are 2 GiB or more, else half; the work directory's disk less 5 GiB from 10 GiB, else half)."""
    cpus = float(os.cpu_count() or 1)
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        mem = _GIB
    mem = mem - _GIB if mem >= 2 * _GIB else mem // 2
    path = Path(work_dir)
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        disk = shutil.disk_usage(path).total
    except OSError:
        disk = 10 * _GIB
    disk = disk - 5 * _GIB if disk >= 10 * _GIB else disk // 2
    return [Resource("cpus", cpus), Resource("mem", float(mem // _MIB)), Resource("disk", float(disk // _MIB))]


def default_ports() -> Ranges:
    """The default agent's ports: :func:`~marathon_tf.local.ports.dynamic_range`, else the kernel's ephemeral range
    (where the runner then takes the kernel's choice)."""
    return (dynamic_range() or ephemeral_range(),)


@dataclass
class Agent(AgentInfo):
    """One agent: ``index`` (agent-N) and ``work_dir`` (its sandboxes' root), then, by keyword, what
    the model has of it (``hostname``, ``resources``: its total, ``attributes``, ``enforced``: False
    for the default, machine-sized one)."""

    index: int
    work_dir: Path
    state: str = "active"
    registered_time: float = field(default_factory=time.time)
    reregistered_time: float | None = None
    #: When the master last lost contact (``time.monotonic()``), None while active.
    lost_at: float | None = None

    def __post_init__(self) -> None:
        self.id = self.id or f"{_ID_PREFIX}-S{self.index - 1}"

    @property
    def name(self) -> str:
        return f"agent-{self.index}"

    @property
    def sandboxes(self) -> Path:
        return self.work_dir / "sandboxes"

    @property
    def active(self) -> bool:
        return self.state == "active"

    def describe(self) -> dict:
        """What ``GET /_local/agents`` and :meth:`LocalCluster.agents` tell about it."""
        return {"id": self.id, "name": self.name, "hostname": self.hostname, "state": self.state,
                "enforced": self.enforced, "sandboxes": str(self.sandboxes),
                "resources": summary_json(self.resources), "attributes": attributes_json(self.attributes)}


class Agents:
    """Every agent the runner has had (they keep their index when lost)."""

    def __init__(self, state_dir: Path, host: str = "127.0.0.1", count: int = 1,
                 resources: Sequence[str] = (), attributes: Sequence[str] = ()) -> None:
        if not 1 <= count <= MAX_AGENTS:
            raise ValueError(f"agents: {count} is not between 1 and {MAX_AGENTS}")
        self.state_dir = Path(state_dir)
        self.host = host
        self.all: list[Agent] = []
        for res, attrs in zip(per_agent(resources, count, "--agent-resources"),
                              per_agent(attributes, count, "--agent-attributes")):
            self.add(res, attrs)

    def add(self, resources: str | None = None, attributes: str | None = None) -> Agent:
        """A new agent (next index, next address) with these resources and attributes (Mesos syntax;
        ``resources`` None: as large as the machine, not enforced). Raises ValueError for bad syntax."""
        index = len(self.all) + 1
        if index > MAX_AGENTS:
            raise ValueError(f"at most {MAX_AGENTS} agents")
        work_dir = self.state_dir if index == 1 else self.state_dir / "agents" / f"agent-{index}"
        hostname = self.host if index == 1 else f"127.0.0.{index}"
        if index > 1:
            _check_address(hostname)
        attrs = parse_attributes(attributes) if attributes else {}
        if resources is None:
            total = machine_resources(work_dir) + [Resource("ports", default_ports())]
            agent = Agent(index, work_dir, hostname=hostname, resources=total, attributes=attrs, enforced=False)
        else:
            given = parse_resources(resources)
            names = {r.name for r in given}
            detected = [r for r in machine_resources(work_dir) if r.name not in names]
            ports = [] if "ports" in names else [Resource("ports", ((31000, 32000),))]
            agent = Agent(index, work_dir, hostname=hostname, resources=given + detected + ports, attributes=attrs,
                          enforced=True)
        self.all.append(agent)
        return agent

    def get(self, key: str) -> Agent | None:
        """The agent with this id, name (``agent-2``) or hostname."""
        return next((a for a in self.all if key in (a.id, a.name, a.hostname)), None)

    def by_id(self, agent_id: str) -> Agent | None:
        return next((a for a in self.all if a.id == agent_id), None)

    def active(self) -> list[Agent]:
        return [a for a in self.all if a.active]

    def roles(self) -> set[str]:
        """Every role some agent's resources carry (the local Marathon is offered all of them)."""
        return set().union(*(a.roles() for a in self.all)) if self.all else {"*"}


def gpu_env(indices: Sequence[int]) -> dict[str, str]:
    """What a task given these GPUs of an agent that has GPUs sees (docs/local-mode.md, "GPUs"); a task
    without GPUs gets ``CUDA_VISIBLE_DEVICES=""`` on any agent (:func:`marathon_tf.local.launcher.task_env`)."""
    visible = ",".join(str(i) for i in indices)
    return {"CUDA_VISIBLE_DEVICES": visible, **({"NVIDIA_VISIBLE_DEVICES": visible} if indices else {})}

