"""Offer statistics per app and ``/v2/queue``'s JSON, as Marathon 1.8 keeps and writes them.

Marathon counts, for each app it is launching: processed and unused offers, the last used and unused offer, one
reject reason per unused offer (the first of the funnel) since the launch attempt began, and the last unused offer
of each agent; all of it is dropped when the launch is finished (nothing left to launch). ``/v2/queue`` writes
``rejectSummaryLastOffers`` from the last unused offer of each agent and ``rejectSummaryLaunchAttempt`` from every
offer, both as the whole funnel: ``{"reason", "declined", "processed"}`` where ``processed`` is what was left after
the reasons before it; ``?embed=lastUnusedOffers`` adds ``lastUnusedOffers`` (``{"offer", "reason", "timestamp"}``,
every reason of the offer).

Mesos offers each agent's free resources at most once per allocation interval (1 s by default; at
once after a revive), and the local scheduler makes its offers so (``scheduler.py``, ``revive.py``):
every offer an app looks at is counted (:data:`OFFER_INTERVAL`, 0, is the least time between two
counted rounds of one app; a used offer is always counted).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from marathon_tf.mesos.placement import REASON_FUNNEL, Match, NoMatch, funnel
from marathon_tf.mesos.views import offer_attributes_json, offer_resources_json

from .state import now_ts

__all__ = ["OfferStats", "OFFER_INTERVAL"]

OFFER_INTERVAL = 0.0


@dataclass
class _NoMatchRecord:
    offer: dict
    reasons: list[str]
    timestamp: str


@dataclass
class _AppStats:
    processed: int = 0
    unused: int = 0
    reject: dict[str, int] = field(default_factory=dict)
    last_match_at: str | None = None
    last_no_match_at: str | None = None
    last_no_matches: dict[str, _NoMatchRecord] = field(default_factory=dict)  # agent id -> record
    counted_at: float = -1e9


def _offer_json(result: NoMatch) -> dict:
    """Marathon's ``Offer`` as ``lastUnusedOffers`` writes it; Mesos offers no resource that is used up."""
    agent = result.agent
    return {"id": str(uuid.uuid4()), "hostname": agent.hostname, "agentId": agent.id,
            "resources": offer_resources_json(r for r in result.offer if r.value not in (0.0, ())),
            "attributes": offer_attributes_json(agent.attributes)}


class OfferStats:
    """The offer statistics of every app being launched (app id -> counts)."""

    def __init__(self, interval: float = OFFER_INTERVAL) -> None:
        self.interval = interval
        self._apps: dict[str, _AppStats] = {}

    def record(self, app_id: str, results: list[Match | NoMatch], now: float | None = None) -> None:
        """One round of offers for ``app_id`` (one result per agent)."""
        now = time.monotonic() if now is None else now
        stats = self._apps.setdefault(app_id, _AppStats())
        if now - stats.counted_at < self.interval and not any(isinstance(r, Match) for r in results):
            return
        stats.counted_at = now
        stamp = now_ts()
        for result in results:
            stats.processed += 1
            if isinstance(result, Match):
                stats.last_match_at = stamp
                continue
            stats.unused += 1
            stats.last_no_match_at = stamp
            reason = funnel(result.reasons)
            if reason:
                stats.reject[reason] = stats.reject.get(reason, 0) + 1
            stats.last_no_matches[result.agent.id] = _NoMatchRecord(_offer_json(result), list(result.reasons), stamp)

    def finished(self, app_id: str) -> None:
        """Nothing is left to launch for ``app_id`` (Marathon's ``LaunchFinished``)."""
        self._apps.pop(app_id, None)

    def forget_agent(self, agent_id: str) -> None:
        """An agent left: its last offer no longer counts."""
        for stats in self._apps.values():
            stats.last_no_matches.pop(agent_id, None)

    def summary(self, app_id: str, embed_last_unused: bool = False) -> dict:
        """``processedOffersSummary`` (and ``lastUnusedOffers`` when asked) of a queue entry."""
        stats = self._apps.get(app_id, _AppStats())
        last = list(stats.last_no_matches.values())
        last_reject: dict[str, int] = {}
        for record in last:
            reason = funnel(record.reasons)
            if reason:
                last_reject[reason] = last_reject.get(reason, 0) + 1
        summary: dict = {"processedOffersCount": stats.processed, "unusedOffersCount": stats.unused}
        if stats.last_no_match_at:
            summary["lastUnusedOfferAt"] = stats.last_no_match_at
        if stats.last_match_at:
            summary["lastUsedOfferAt"] = stats.last_match_at
        summary["rejectSummaryLastOffers"] = _steps(len(last), last_reject)
        summary["rejectSummaryLaunchAttempt"] = _steps(stats.processed, stats.reject)
        out: dict = {"processedOffersSummary": summary}
        if embed_last_unused:
            out["lastUnusedOffers"] = [{"offer": r.offer, "reason": r.reasons, "timestamp": r.timestamp}
                                       for r in last]
        return out


def _steps(processed: int, declined: dict[str, int]) -> list[dict]:
    """The funnel: each reason's declines and the offers still left to it."""
    out = []
    for reason in REASON_FUNNEL:
        out.append({"reason": reason, "declined": declined.get(reason, 0), "processed": processed})
        processed -= declined.get(reason, 0)
    return out

