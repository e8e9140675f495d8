"""Why Marathon has not placed a task, in Marathon's own words (``GET /v2/queue``).

A queue entry (Marathon 1.4–1.11's REST API; recorded answers in ``tests/data/marathon-examples/``) is
``{count, delay{timeLeftSeconds, overdue},
since, app|pod, processedOffersSummary{processedOffersCount, unusedOffersCount,
rejectSummaryLastOffers?[{reason, declined, processed}], …}, lastUnusedOffers?[{offer, reason[],
timestamp}]}``. ``rejectSummaryLastOffers`` counts the last offer of every agent, one reason per
declined offer (the first check that failed: ``UnfulfilledRole``, ``UnfulfilledConstraint``,
``NoCorrespondingReservationFound``, ``InsufficientCpus``, ``InsufficientMemory``,
``InsufficientDisk``, ``InsufficientGpus``, ``InsufficientPorts``, …: Marathon's
``NoOfferMatchReason``); ``lastUnusedOffers`` (``embed=lastUnusedOffers``) lists each unused
offer's reasons. Pure, but for :func:`fetch` (one GET through the client).

Every reading of a queue entry is here: :func:`placement` (why a task is not placed, in Marathon's
words: ``status``' waits, the events, the deciding task's view), :func:`stall_reason` (the same, in
resources: a task row's ``waitingFor``), :func:`launch_delay` (Marathon's launch backoff) and
:data:`RESOURCES` / :data:`WORDS` (Marathon's reason names).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from marathon_tf.contract.errors import MarathonError
from marathon_tf.marathon import shapes

__all__ = ["entries_by_app", "placement", "stall_reason", "launch_delay", "fetch", "RESOURCES", "WORDS"]

#: Marathon's reason → the resource it names.
RESOURCES = {"InsufficientCpus": "cpus", "InsufficientMemory": "mem", "InsufficientDisk": "disk",
             "InsufficientGpus": "gpus", "InsufficientPorts": "ports"}
#: Marathon's reason → what an offer lacked, in a few words (``no offer with enough mem (…)``).
WORDS = {**RESOURCES, "UnfulfilledConstraint": "constraints", "UnfulfilledRole": "role",
         "NoCorrespondingReservationFound": "reservation", "DeclinedScarceResources": "no GPU agents may be used",
         "AgentMaintenance": "agent maintenance"}


def fetch(client: Any) -> list[dict[str, Any]]:
    """``GET /v2/queue?embed=lastUnusedOffers``: every entry with each agent's last unused offer
    (its resources and every reason it did not fit; Marathon 1.3+ answers the embed). Every field
    read here is checked first (:data:`.shapes.QUEUE`): a wrong shape is a :class:`MarathonError`
    of one line."""
    body = client.request("GET", "/v2/queue", params={"embed": "lastUnusedOffers"}).body
    if body is None:
        return []
    try:
        return shapes.check(body, shapes.QUEUE).get("queue") or []
    except shapes.ShapeError as e:
        raise MarathonError(f"GET /v2/queue: does not answer like Marathon: {e}", body=body) from None


def entries_by_app(queue: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """``GET /v2/queue``'s ``queue`` list by app id."""
    return {q["app"].get("id"): q for q in queue or [] if isinstance(q, Mapping) and q.get("app")}


def placement(entry: Mapping[str, Any] | None) -> str | None:
    """``not placed: InsufficientMemory (15 of 48 offers declined)`` — the reason(s) that declined
    the most offers; ``delayed 12s (backoff)``; ``not placed: no offers since …``; None when the
    entry says nothing."""
    if not entry:
        return None
    delay = launch_delay(entry)
    if delay:
        return f"delayed {delay}s (Marathon's launch backoff)"
    summary = entry.get("processedOffersSummary") or {}
    declined = [r for r in summary.get("rejectSummaryLastOffers") or [] if (r.get("declined") or 0) > 0]
    if declined:
        top = max(r["declined"] for r in declined)
        words = [f"{r.get('reason')} ({r['declined']} of {r.get('processed', r['declined'])} offers declined)"
                 for r in declined if r["declined"] == top]
        return "not placed: " + ", ".join(words)
    reasons: dict[str, int] = {}
    for offer in entry.get("lastUnusedOffers") or []:
        for reason in offer.get("reason") or []:
            reasons[reason] = reasons.get(reason, 0) + 1
    if reasons:
        return "not placed: " + ", ".join(sorted(reasons, key=lambda r: -reasons[r]))
    if summary.get("processedOffersCount") == 0 and entry.get("since"):
        return f"not placed: no offers since {entry['since']}"
    return None


def launch_delay(entry: Mapping[str, Any] | None) -> Any:
    """Seconds of Marathon's launch backoff still to wait (``delay.timeLeftSeconds`` as Marathon wrote
    it, 0 when it left it out) while ``delay.overdue`` is false; None when the entry is not delayed."""
    delay = (entry or {}).get("delay") or {}
    if not isinstance(delay, Mapping) or delay.get("overdue") is not False:
        return None
    return delay.get("timeLeftSeconds") or 0


def stall_reason(entry: Mapping[str, Any] | None, *, local: bool = False) -> str | None:
    """Why Marathon cannot place a task, from the entry's offer summary (1.3+): ``no offer with enough
    mem (3 of 3 offers declined)``. The local runner's agents decline offers for the same reasons;
    otherwise it launches a queued task itself (``local``)."""
    entry = entry or {}
    summary = entry.get("processedOffersSummary") or {}
    rejected = [r for r in summary.get("rejectSummaryLastOffers") or [] if r.get("declined")]
    if rejected:
        parts = [f"{WORDS.get(r.get('reason'), r.get('reason'))} ({r['declined']} of "
                 f"{r.get('processed', r['declined'])} offers declined)" for r in rejected]
        return "no offer with enough " + ", ".join(parts)
    if local:
        return f"launch by the local runner (queued since {entry['since']})" if entry.get("since") else None
    if summary.get("processedOffersCount") == 0 and entry.get("since"):
        return f"no offers received since {entry['since']}"
    return None
