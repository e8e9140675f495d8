"""Why a job's tasks wait, per role and in numbers, from Marathon's queue as Marathon writes it.

What the queue looks like (mesosphere/marathon at 90619da70):

* ``src/main/scala/mesosphere/marathon/raml/QueueInfoConversion.scala``: ``lastUnusedOffers`` (only with
  ``embed=lastUnusedOffers``) is ``UnusedOffer(offer, reasons, timestamp)`` for each entry of
  ``info.lastNoMatches``; ``rejectSummaryLastOffers`` counts only the first reason of each offer along
  ``NoOfferMatchReason.reasonFunnel`` (``src/main/scala/mesosphere/mesos/NoOfferMatchReason.scala``).
* ``src/main/scala/mesosphere/marathon/core/launchqueue/impl/OfferMatchStatistics.scala``:
  ``lastNoMatches(path) + (noMatch.offer.getSlaveId.getValue -> noMatch)``: one unused offer per agent,
  the newest, with *every* reason it did not fit.
* ``src/main/scala/mesosphere/marathon/raml/OfferConversion.scala``: an offer's resources are
  ``{"name", "role", "scalar"}`` or ``{"name", "role", "ranges": [{"begin", "end"}]}``; the offer's
  agent is ``agentId``.
* ``src/main/scala/mesosphere/mesos/ResourceMatcher.scala`` ``matchResources`` (``releases/1.8``): every reason
  an offer does not fit (resources, role, constraints, GPU behaviour; ports only once all of that fit).
* The entry's fields: ``docs/docs/rest-api/public/api/v2/types/queue.raml`` at v1.4.3 and releases/1.11.
* The app's tasks: ``group.apps.tasks`` with Mesos task states (``TASK_RUNNING`` …).

The shapes are checked against Marathon's own example (tests/data/marathon-examples/1.8/queue.json).
"""

from __future__ import annotations

import json
from pathlib import Path

from marathon_tf.marathon import waiting as W

EXAMPLE = json.loads((Path(__file__).parents[1] / "data" / "marathon-examples" / "1.8" / "queue.json").read_text())
T0 = "2026-11-25T10:00:00.000Z"


def _app(name, running, **fields):
    tasks = [{"id": f"x.{name}", "state": "TASK_RUNNING"}] if running else []
    return {"id": f"/j/{name}", "instances": 1, "labels": {"marathon-tf/role": name.split("-")[0]},
            "tasks": tasks, "versionInfo": {"lastConfigChangeAt": T0}, **fields}


def _offer(agent, reasons, gpus=0.0, cpus=4.0, when="2026-11-25T10:00:05.000Z"):
    example = EXAMPLE["queue"][1]["lastUnusedOffers"][0]
    offer = {**example["offer"], "id": f"o-{agent}", "agentId": agent, "hostname": agent,
             "resources": [{"name": "cpus", "role": "*", "scalar": cpus}, {"name": "gpus", "role": "*", "scalar": gpus},
                           {"name": "ports", "role": "*", "ranges": [{"begin": 31000, "end": 31009}]}]}
    return {**example, "offer": offer, "reason": reasons, "timestamp": when}


def _entry(app, offers):
    return {**{k: v for k, v in EXAMPLE["queue"][1].items() if k != "lastUnusedOffers"}, "app": {"id": app},
            "since": T0, "lastUnusedOffers": offers}


def test_the_reasons_of_each_agents_newest_offer_are_merged_across_the_roles_waiting_apps():
    apps = [_app(f"worker-{i}", i < 5, gpus=1) for i in range(8)] + [_app("ps-0", True)]
    old = _offer("a1", ["InsufficientCpus"], when="2026-11-25T10:00:01.000Z")  # superseded by a1's newer offer
    queue = {f"/j/worker-{i}": _entry(f"/j/worker-{i}", [
        _offer("a1", ["InsufficientGpus"]), _offer("a2", ["InsufficientGpus"]),
        _offer("a3", ["UnfulfilledConstraint", "InsufficientGpus"]), *([old] if i == 5 else [])])
        for i in range(5, 8)}
    queue["/j/worker-6"]["lastUnusedOffers"].append(_offer("a4", ["UnfulfilledConstraint"]))
    waits = W.role_waits(apps, queue, now=W.wall(T0) + 130)
    worker = waits["worker"]
    assert (worker.total, worker.placed, worker.waiting, worker.waiting_seconds) == (8, 5, 3, 130.0)
    assert worker.text() == ("worker: 5/8 placed; 3 waiting 2m10s: InsufficientGpus on 3 agents (need 1 each, "
                             "0 free), UnfulfilledConstraint on 2")
    assert waits["ps"].text() == "ps: 1/1 placed"
    # the agents' free resources (the master's) win over the offer's
    free = {"a1": {"gpus": 0.0}, "a2": {"gpus": 0.0}, "a3": {"gpus": 1.0}}
    assert W.role_waits(apps, queue, free=free, now=W.wall(T0))["worker"].reasons[0].to_dict() == {
        "reason": "InsufficientGpus", "agents": 3, "resource": "gpus", "need": 1.0, "freeLeast": 0.0, "freeMost": 1.0}
    assert W.summary(waits) == worker.text()  # only the roles that wait


def test_without_embedded_offers_the_summary_of_first_reasons_is_used():
    apps = [_app("worker-0", False, cpus=0.5)]
    queue = {"/j/worker-0": {k: v for k, v in EXAMPLE["queue"][1].items() if k != "lastUnusedOffers"}}
    (reason, *rest) = W.role_waits(apps, queue)["worker"].reasons
    assert reason.text() == "InsufficientCpus on 75 agents (need 0.5 each)"  # the example's 75 declined
    assert [r.reason for r in rest] == ["InsufficientMemory", "InsufficientDisk"]


def test_a_job_is_starting_only_while_a_cluster_task_waits_for_its_first_placement_in_this_configuration():
    waiting = _app("worker-1", False)
    assert W.starting_members([_app("worker-0", True), waiting]) == ["worker-1"]
    relaunch = {**waiting, "lastTaskFailure": {"version": T0, "state": "TASK_FAILED"}}
    assert W.starting_members([relaunch]) == []  # a task of this configuration failed: the restart budget's
    assert W.starting_members([_app("tensorboard-0", False)]) == []  # not in TF's cluster
    assert W.attempt_started([_app("worker-0", True)]) == W.wall(T0)
