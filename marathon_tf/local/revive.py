"""How offers reach the local Marathon: Mesos's filters on declined offers, Marathon 1.11's suppress and revive.

Pure (the time is passed in); the scheduler (``scheduler.py``) asks it which agents offer now.
tests/local/test_local_stock.py cites the Marathon 1.11 and Mesos 1.11 code of each point.

**Mesos 1.11** (its hierarchical allocator):

* an offer the framework declines is *filtered* for the ``refuse_seconds`` it declined it with: that
  agent is not offered again while what it has free is contained in what was declined
  (``RefusedOfferFilter::filter``: "Refused resources are superset"). An agent whose free resources
  grew (a task on it ended) is offered at once, so is a new agent, and an agent the master removes
  (lost) loses its filters (``removeSlave`` → ``removeFilters``);
* ``reviveOffers``, and an ``UPDATE_FRAMEWORK`` that unsuppresses a role, clear the framework's filters
  of that role (``reviveRoles``: ``framework.offerFilters.erase(role)``); a suppressed role gets no offers
  (``suppressRoles``).

**Marathon 1.11**:

* an offer it has no use for is declined with ``refuse_seconds`` = ``--decline_offer_duration``, 120 s;
  what is left of an offer it used gets no filter (accepted with ``refuse_seconds`` 0);
* it suppresses and revives offers from the stream of its instance changes and backoff delays
  (``--suppress_offers`` is on by default):
  every instance change and every delay change is a new state. A state in which no scheduled instance
  outside a backoff wants offers *suppresses* the role; one in which some do, after one in which none
  did, *unsuppresses* it (``UpdateFramework``, which clears the filters); one in which an instance
  began wanting offers since the last (a new instance, a backoff that ended: a higher version)
  *revives* it (``IssueRevive``, which clears them too);
* the states pass a rate limiter first (behind a buffer of one that drops the older state: the latest
  state waits), one pull per
  ``--min_revive_offers_interval`` (5 s): after a quiet spell two states pass at once, then one per
  interval;
* every revive (and unsuppress) is repeated at the second tick of a timer of that interval, if the role
  still wants offers then (``ReviveRepeaterLogic``).

So on a real cluster a newly queued task gets offers at once (its revive clears the filters) unless
the rate limiter holds its state back, at most one interval; a task that declines every offer waits:
after the repeated revive its offers stay filtered for ``--decline_offer_duration``, unless an agent
frees resources, a new agent joins, or another task is queued (another revive). And a task that
failed is relaunched only when a state after its backoff's end passes the rate limiter: its failure
unsuppresses offers, which arrive while it is backed off and are declined (filtered), and the delay
takes the next pass; so with the default 1 s backoff it is offered again up to one interval (5 s)
after it failed, not when the backoff ends.

Modelled for the one role the local Marathon uses (its filters are per agent, not per role and agent).
Not modelled: offers Marathon holds while nothing wants them (with suppression there are none for long).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from marathon_tf.mesos.resources import Resource

__all__ = ["OfferFilters", "ReviveOffers", "contains", "DECLINE_OFFER_DURATION", "MIN_REVIVE_OFFERS_INTERVAL"]

#: ``--decline_offer_duration`` (ms in Marathon: 120000).
DECLINE_OFFER_DURATION = 120.0
#: ``--min_revive_offers_interval`` (ms in Marathon: 5000).
MIN_REVIVE_OFFERS_INTERVAL = 5.0


def contains(outer: Iterable[Resource], inner: Iterable[Resource]) -> bool:
    """Mesos's ``Resources::contains``: every resource of ``inner`` (of its name and role) is within
    ``outer`` — scalars no larger, ranges and sets subsets."""
    scalars: dict[tuple[str, str], float] = {}
    ranges: dict[tuple[str, str], list[tuple[int, int]]] = {}
    sets: dict[tuple[str, str], set] = {}
    for r in outer:
        key = (r.name, r.role)
        if isinstance(r.value, float):
            scalars[key] = scalars.get(key, 0.0) + r.value
        elif isinstance(r.value, tuple):
            ranges.setdefault(key, []).extend(r.value)
        elif isinstance(r.value, frozenset):
            sets.setdefault(key, set()).update(r.value)
    for r in inner:
        key = (r.name, r.role)
        if isinstance(r.value, float):
            if r.value > scalars.get(key, 0.0) + 1e-9:
                return False
        elif isinstance(r.value, tuple):
            have = ranges.get(key, [])
            if any(not any(b >= hb and e <= he for hb, he in have) for b, e in r.value):
                return False
        elif isinstance(r.value, frozenset):
            if not r.value <= sets.get(key, set()):
                return False
    return True


class OfferFilters:
    """The framework's filters on declined offers, per agent: (the resources declined, until when)."""

    def __init__(self) -> None:
        self._filters: dict[str, list[tuple[tuple[Resource, ...], float]]] = {}

    def decline(self, agent_id: str, offered: Iterable[Resource], now: float, seconds: float) -> None:
        """The offer of ``agent_id`` (``offered``: what it had free) was declined for ``seconds`` (0: no filter)."""
        if seconds > 0:
            self._filters.setdefault(agent_id, []).append((tuple(offered), now + seconds))

    def filtered(self, agent_id: str, free: Iterable[Resource], now: float) -> bool:
        """Whether ``agent_id``'s offer of ``free`` is filtered now (expired filters are dropped)."""
        kept = [(declined, until) for declined, until in self._filters.get(agent_id, ()) if until > now]
        if not kept:
            self._filters.pop(agent_id, None)
            return False
        self._filters[agent_id] = kept
        free = list(free)
        return any(contains(declined, free) for declined, _ in kept)

    def clear(self) -> None:
        """A revive (or unsuppress): every filter goes."""
        self._filters.clear()

    def forget(self, agent_id: str) -> None:
        """The master removed the agent (it is lost): its filters go."""
        self._filters.pop(agent_id, None)

    def __len__(self) -> int:
        return sum(len(v) for v in self._filters.values())


@dataclass(frozen=True)
class _RoleState:
    """``VersionedRoleState``: offers wanted or not, and the newest version among the instances that want them."""

    wanted: bool
    version: int


class ReviveOffers:
    """Marathon's suppress and revive stream for its one role, and what Mesos was told last.

    :meth:`observe` is told, at every scheduler pass, how many tasks of each app want offers, which
    apps are backed off and whether any instance changed since; it returns the calls made to Mesos
    now: ``"revive"``, ``"unsuppress"`` (both clear the filters) or ``"suppress"``. ``interval`` 0: no
    rate limiter and no repeat (every state passes at once).
    """

    def __init__(self, interval: float = MIN_REVIVE_OFFERS_INTERVAL, now: float = 0.0) -> None:
        self.interval = max(0.0, float(interval))
        #: What Mesos was told last: the role suppressed (no offers at all).
        self.suppressed = True
        self._version = 0
        self._wanting: dict[str, tuple[int, int]] = {}  # app -> (tasks wanting offers, newest version)
        self._delayed: frozenset[str] = frozenset()
        self._last = _RoleState(False, 0)  # the last state past the rate limiter (sliding(2)'s left side)
        self._current_wanted = False       # the repeater's role state (from the last UpdateFramework)
        # the rate limiter, as if Marathon had been leader for longer than an interval
        self._pulled, self._next_pull, self._pending = True, -math.inf, False
        self._pull_at: float | None = None
        self._tick0, self._ticks, self._repeat_in = now, 0, 0

    # -- what the launch queue tells it ------------------------------------------------------
    def observe(self, wanting: Mapping[str, int], delayed: Iterable[str], now: float,
                changed: bool = False) -> list[str]:
        """The launch queue now: ``wanting`` app → tasks that want offers (backed off or not), ``delayed``
        the apps in a backoff; ``changed``: some instance changed since the last look (a status update).
        The instance changes are one state, the delay changes the next one."""
        calls: list[str] = []
        for app, count in wanting.items():
            before, version = self._wanting.get(app, (0, 0))
            if count > before:  # new instances want offers: a new version
                self._version += 1
                version = self._version
            if count != before:
                changed = True
                self._wanting[app] = (count, version)
        for app in [a for a in self._wanting if a not in wanting]:
            del self._wanting[app]
            changed = True
        if changed:
            calls += self._push(now)
        delayed = frozenset(delayed)
        if delayed != self._delayed:
            for app in self._delayed - delayed:  # a delay ended: its instances' versions are bumped
                if app in self._wanting:
                    self._version += 1
                    self._wanting[app] = (self._wanting[app][0], self._version)
            self._delayed = delayed
            calls += self._push(now)
        return calls + self._flow(now)

    def restart(self, now: float) -> list[str]:
        """A new leader: its stream starts over (its first state, the snapshot, takes the first pull and
        makes no call; the next state waits an interval), and it subscribes with no role suppressed
        (Mesos's ``updateFramework``: a role no longer suppressed is revived)."""
        self._last = self._state()
        self._pending = False
        if self.interval:
            self._pulled, self._pull_at, self._next_pull = False, now + self.interval, now + self.interval
        self._tick0, self._ticks, self._repeat_in, self._current_wanted = now, 0, 0, False
        calls = ["unsuppress"] if self.suppressed else []
        self.suppressed = False
        return calls

    # -- the stream ----------------------------------------------------------------------------
    def _state(self) -> _RoleState:
        versions = [v for app, (n, v) in self._wanting.items() if n > 0 and app not in self._delayed]
        return _RoleState(True, max(versions)) if versions else _RoleState(False, self._version)

    def _push(self, now: float) -> list[str]:
        """A new state: through the rate limiter at once if it has pulled, else it waits (the latest)."""
        self._pending = True
        return self._flow(now)

    def _flow(self, now: float) -> list[str]:
        calls = self._tick(now)  # the ticks up to now first, in time order
        if self._pull_at is not None and now >= self._pull_at:  # the limiter's timer pulled (at its time)
            self._pulled, self._next_pull, self._pull_at = True, self._pull_at + self.interval, None
        if self._pending and (self._pulled or not self.interval):
            self._pending = False
            calls += self._emit(self._state())
            if not self.interval or now >= self._next_pull:  # downstream pulls again at once
                self._pulled, self._next_pull = True, now + self.interval
            else:
                self._pulled, self._pull_at = False, self._next_pull
        return calls

    def _emit(self, state: _RoleState) -> list[str]:
        """``ReviveDirectiveFlowLogicWithSuppression.directivesForDiff`` of the last state and this one."""
        last, self._last = self._last, state
        if state.wanted and not last.wanted:
            return self._call("unsuppress", repeat=True)
        if last.wanted and not state.wanted:
            return self._call("suppress")
        if state.wanted and last.version < state.version:
            return self._call("revive", repeat=True)
        return []

    def _call(self, call: str, repeat: bool = False) -> list[str]:
        if call in ("unsuppress", "suppress"):
            self._current_wanted = call == "unsuppress"
        self.suppressed = call == "suppress"
        if repeat and self.interval:
            self._repeat_in = 2
        return [call]

    def _tick(self, now: float) -> list[str]:
        """The repeater's timer ticks every interval from the stream's start."""
        calls: list[str] = []
        if not self.interval:
            return calls
        while self._tick0 + (self._ticks + 1) * self.interval <= now:
            self._ticks += 1
            if self._repeat_in >= 1:
                self._repeat_in -= 1
                if self._repeat_in == 0 and self._current_wanted:
                    calls.append("revive")
        return calls

