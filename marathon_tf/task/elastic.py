"""A task's part in an elastic job (docs/elastic.md): follow the membership its deciding task publishes.

An elastic job renders ``max`` apps of its elastic role; the deciding task's
:class:`~marathon_tf.task.resize.Resizer` decides which of them train (the
:class:`~marathon_tf.contract.cluster_spec.Membership` in the rendezvous view) and this module is every
task's side of it, composed into the bootstrap (``boot.elastic``):

* **taken in** (:meth:`ElasticMember.taken_in`): before its program starts (the first time, and after
  each resize round that stops it) a task waits until the membership exists, is not below its
  minimum, and names it (a task of a fixed role only needs the first two). Meanwhile its phase is
  ``standby`` (:class:`~marathon_tf.contract.phases.Phase`): a standby placed while the job does not
  take it in yet, a member while the job waits below its minimum;
* **its peers** (:meth:`ElasticMember.peers`): the fixed roles' tasks and the membership's members;
  it waits until each of them is in the view at the membership's address;
* **its spec** (:meth:`ElasticMember.cluster`): the running workers in TF index order
  (:func:`marathon_tf.contract.cluster_spec.elastic_cluster`), this task's TF index its place there
  (not its app's index), ``MARATHON_TF_WORKERS`` the membership's size;
* the resize rounds that name it stop its program (:mod:`marathon_tf.task.restarts`); the others
  leave it running.

The bootstrap wires both sides (:meth:`ElasticMember.attach` to its rendezvous, then
:meth:`ElasticMember.join`); the deciding task also runs the :class:`~marathon_tf.task.resize.Resizer`. An
elastic job needs the leader rendezvous (the deciding task is where its size is decided): with
``MTF_RENDEZVOUS=direct`` it cannot start. No TensorFlow here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from marathon_tf.contract import naming
from marathon_tf.contract.cluster_spec import Membership, elastic_cluster
from marathon_tf.contract.errors import DiscoveryError
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.task.discovery import PeerKey
from marathon_tf.task.machine import On, TaskMachine
from marathon_tf.task.membership import FixedMembership, Settled
from marathon_tf.task.policy import decider_task
from marathon_tf.task.rendezvous import Rendezvous
from marathon_tf.task.rendezvous.view import Side
from marathon_tf.task.status_server import TaskStatus

__all__ = ["ElasticMember"]


class ElasticMember(FixedMembership):
    """A task's side of an elastic job (see the module): the bootstrap's membership strategy for it
    (:mod:`marathon_tf.task.membership`)."""

    def __init__(self, ctx: TaskContext, status: TaskStatus, stop: threading.Event, *,
                 log: Callable[[str], None] = lambda m: None, clock: Callable[[], float] = time.monotonic,
                 ready: Callable[[], bool] = lambda: True, machine: TaskMachine):
        super().__init__(ctx, log=log)
        self.status, self._stop, self.clock = status, stop, clock
        self.machine = machine
        #: whether the program would start now without waiting for its imports (a pre-warmed interpreter that
        #: said hello): a standby says so, and the deciding task takes it in only then (task.resize)
        self.ready = ready
        self.role, self.bounds = next(iter(ctx.elastic.items()))
        self.side: Side | None = None
        self.current: Membership | None = None  # the membership this task's program runs with
        self.me = naming.task_name(ctx.role, ctx.index)
        self.decider = self.me == decider_task(ctx.completion)

    def attach(self, rendezvous: Rendezvous | None) -> None:
        if not isinstance(rendezvous, Side):
            raise DiscoveryError(f"{self.ctx.task}: an elastic job needs the leader rendezvous (its deciding task "
                                 f"decides its size): unset MTF_RENDEZVOUS=direct",
                                 hint="docs/elastic.md")
        self.side = rendezvous

    def membership(self) -> Membership | None:
        """The membership the view holds now."""
        if self.side is None:
            return None
        with self.side.view.cond:
            return self.side.view.membership

    def _in(self, m: Membership | None) -> bool:
        return m is not None and not m.paused and (self.ctx.role != self.role or self.me in m.members)

    def taken_in(self, timeout: float | None) -> Membership | None:
        """Wait until the job takes this task in (see the module); None when the task is stopped. Before the
        job ever formed, DiscoveryError after ``timeout`` s (a formed job's standby waits as long as it takes)."""
        deadline = None if timeout is None else self.clock() + timeout
        said = None
        assert self.side is not None
        while not self._stop.is_set():
            m = self.membership()
            if self._in(m):
                return m
            if m is not None:  # formed: a standby, or below its minimum
                why = (f"the job waits below its minimum ({m.size} of {self.bounds[0]} workers placed)" if m.paused
                       else f"a standby: the job runs {m.size} of {self.bounds[0]}..{self.bounds[1]} workers")
                ready = self.ready()
                if (why, ready) != said:
                    if said is None or why != said[0]:
                        self.log(f"elastic: {why}; waiting to be taken in")
                    said = (why, ready)
                    self._show(On.STANDBY, m, why)
            elif deadline is not None and self.clock() >= deadline:
                raise DiscoveryError(f"{self.ctx.task}: the job did not form within {timeout:g} s (fewer than "
                                     f"{self.bounds[0]} {self.role} tasks placed)",
                                     hint="check that the job's minimum fits the cluster (marathon-tf status)")
            with self.side.view.cond:
                self.side.view.cond.wait(0.25)
        return None

    def _show(self, on: On, m: Membership, why: str | None = None) -> None:
        fields: dict[str, Any] = {}
        if why is not None:
            fields["last_error"] = why
        if not self.decider:  # the deciding task shows the job's (marathon_tf.task.resize)
            fields["elastic"] = {"role": self.role, "min": self.bounds[0], "max": self.bounds[1], "size": m.size,
                                 "generation": m.generation, "paused": m.paused, "index": m.index_of(self.me),
                                 "standby": self.ctx.role == self.role and self.me not in m.members,
                                 "ready": self.ready()}
        if not self.machine.fire(on, **fields):
            self.status.update(**fields)

    def peers_of(self, me: PeerKey, members: list[PeerKey]) -> list[PeerKey]:
        """The peers of the membership this task's program runs with; every other task before it has one."""
        return super().peers_of(me, members) if self.current is None else self.peers(self.current, members)

    def peers(self, m: Membership, members: list[PeerKey]) -> list[PeerKey]:
        """The peers this task's program needs: the fixed roles' tasks and the membership's."""
        out = [k for k in members if k[0] != self.role]
        out += sorted(k for k in (naming.parse_task_name(t) for t in m.members) if k is not None)
        me = (self.ctx.role, self.ctx.index)
        return [k for k in out if k != me]

    def settle(self, m: Membership, members: list[PeerKey], endpoints: dict[PeerKey, str],
               timeout: float) -> Membership | None:
        """Wait until every peer of ``m`` is in the view (the members at their membership's address); a newer
        membership meanwhile is taken instead (waiting for it to take this task in again). Updates ``endpoints``
        (fixed roles' addresses from the view, the members' from the membership); the membership, or None
        when stopped. DiscoveryError when a fixed role's peer is missing for ``timeout`` s."""
        assert self.side is not None
        began = self.clock()
        while not self._stop.is_set():
            newer = self.membership()
            if newer is not None and newer.generation != m.generation:
                taken = self.taken_in(None)
                if taken is None:
                    return None
                m = taken
            wanted = self.peers(m, members)
            with self.side.view.cond:
                present = self.side.view.peers
            fixed_missing = [k for k in wanted if k[0] != self.role and k not in present]
            moved = [k for k in wanted if k[0] == self.role and present.get(k) != m.members[naming.task_name(*k)][1]]
            if not fixed_missing and not moved:
                endpoints.update({k: present[k] for k in wanted if k[0] != self.role})
                for t, (_, address) in m.members.items():
                    key = naming.parse_task_name(t)
                    if key is not None:
                        endpoints[key] = address
                self.current = m
                self._show(On.TAKEN_IN, m)
                return m
            if fixed_missing and self.clock() - began >= timeout:
                raise DiscoveryError(f"{self.ctx.task}: " + ", ".join(naming.task_name(*k) for k in fixed_missing)
                                     + f" not found within {timeout:g} s")
            with self.side.view.cond:
                self.side.view.cond.wait(0.25)
        return None

    def cluster(self, counts: Mapping[str, int], endpoints: dict[PeerKey, str]
                ) -> tuple[dict[str, int], dict[PeerKey, str], int]:
        """(counts, endpoints by TF index, this task's TF index) of the membership the program starts with."""
        assert self.current is not None
        return elastic_cluster(counts, endpoints, self.current, self.ctx.role, self.ctx.index)

    @property
    def size(self) -> int:
        return self.current.size if self.current is not None else 0

    def size_of(self, spec: Any) -> int:  # noqa: ARG002 (the membership's, whatever the spec lists)
        """``MARATHON_TF_WORKERS``: the membership's size."""
        return self.size

    def moves(self, peers: list[PeerKey]) -> list[PeerKey]:
        """A member's new address is a size change, not a move: only the fixed roles' peers move."""
        return [p for p in peers if p[0] != self.role]

    def again(self, rendezvous: Rendezvous | None, peers: list[PeerKey], endpoints: dict[PeerKey, str],
              timeout: float) -> Settled | None:
        """Before a restart: the job's size may have changed; taken in again, then the membership's peers settled
        (``endpoints`` updated). None: stopped meanwhile."""
        m = self.taken_in(None)
        try:
            m = m and self.settle(m, self.ctx.members(), endpoints, timeout)
        except DiscoveryError as e:
            self.log(f"could not re-check the peers before the restart: {e}")
        return None if m is None else Settled.RESIZED

    def workers(self) -> list[str] | None:
        """The workers that train now (the job is done when they are: not its standbys): the job's membership as
        the plan has it now — a TF1 job grows without restarting the programs already in, so the one this task's
        program started with can be smaller."""
        m = self.membership() or self.current
        return sorted(m.members) if m is not None else []

    def join(self, rendezvous: Rendezvous, peers: list[PeerKey],
             endpoints: dict[PeerKey, str]) -> list[PeerKey] | None:
        """Follow the membership through ``rendezvous``; wait until the job takes this task in, then for the
        membership's peers (``endpoints`` updated); the peers to find (None: stopped meanwhile)."""
        self.attach(rendezvous)
        m = self.taken_in(self.ctx.startup_timeout)
        if m is None:
            return None
        members = self.ctx.members()
        settled = self.settle(m, members, endpoints, self.ctx.startup_timeout)
        return None if settled is None else self.peers(settled, members)

