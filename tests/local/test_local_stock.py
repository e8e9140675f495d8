"""The local cluster is a stock Marathon 1.11 on Mesos 1.11 by default (issue 28): declined offers
filtered and Marathon's suppress/revive, GPU agents not offered without ``gpu_resources``, 1.11's
order for killing surplus tasks; each friendlier behaviour an option.

Sources, read in ``M@1.11:`` = mesosphere/marathon@releases/1.11 (9ee9f3ce) and ``Mesos@1.11.x:`` =
apache/mesos@1.11.x, are named at each test; the model is ``marathon_tf/local/revive.py`` and
``marathon_tf/local/scaling.py``.
"""

from __future__ import annotations

import time

import pytest

from marathon_tf.local.agents import Agents
from marathon_tf.local.revive import OfferFilters, ReviveOffers, contains
from marathon_tf.local.scaling import surplus
from marathon_tf.local.state import Task
from marathon_tf.mesos.resources import Resource, parse_resources

SMALL = "cpus:1;mem:512;disk:1000;ports:[33500-33599]"


def _app(app_id, cmd="sleep 600", **fields):
    return {"id": app_id, "cmd": cmd, "cpus": 0.1, "mem": 32, "instances": 1, **fields}


def _offers(api, app_id):
    entry = {q["app"]["id"]: q for q in api.get("/v2/queue").json()["queue"]}.get(app_id)
    return entry["processedOffersSummary"]["processedOffersCount"] if entry else None


# --------------------------------------------------------------------------- Mesos's offer filters


def test_a_declined_offer_is_filtered_while_what_the_agent_has_free_is_within_it():
    # Mesos@1.11.x:src/master/allocator/mesos/hierarchical.cpp RefusedOfferFilter::filter:
    # "return _resources.contains(resources); // Refused resources are superset." — until refuse_seconds pass
    # (M@1.11:.../core/launcher/impl/TaskLauncherImpl.scala declineOffer: Filters.setRefuseSeconds, with
    # --decline_offer_duration: M@1.11:src/main/scala/mesosphere/marathon/core/launcher/OfferProcessorConfig.scala,
    # .../core/launcher/impl/OfferProcessorImpl.scala declineOffer; what is left of a used offer: acceptOffer,
    # setRefuseSeconds(0)). An agent the master removes loses its filters (removeSlave -> removeFilters).
    declined = parse_resources("cpus:2;mem:1024;ports:[31000-31010]")
    filters = OfferFilters()
    filters.decline("S0", declined, now=0.0, seconds=120.0)
    assert filters.filtered("S0", declined, now=1.0)
    assert filters.filtered("S0", parse_resources("cpus:1;mem:1024;ports:[31002-31005]"), now=1.0)  # less: filtered
    assert not filters.filtered("S0", parse_resources("cpus:3;mem:1024;ports:[31000-31010]"), now=1.0)  # grew
    assert not filters.filtered("S0", parse_resources("cpus:1;ports:[31011-31011]"), now=1.0)  # another port
    assert not filters.filtered("S1", declined, now=1.0)  # per agent
    assert not filters.filtered("S0", declined, now=120.0)  # expired
    assert len(filters) == 0
    filters.decline("S0", declined, 0.0, 120.0)
    filters.clear()  # reviveOffers / an unsuppress: Mesos@1.11.x:...hierarchical.cpp reviveRoles erases offerFilters
    assert not filters.filtered("S0", declined, 1.0)
    filters.decline("S0", declined, 0.0, 0.0)  # refuse_seconds 0 (an accepted offer's rest): no filter
    assert not filters.filtered("S0", declined, 0.0)
    assert contains(parse_resources("cpus(ml):2"), [Resource("cpus", 1.0, "ml")])
    assert not contains(parse_resources("cpus(ml):2"), [Resource("cpus", 1.0)])  # of its role only


# --------------------------------------------------------------------------- Marathon's suppress and revive


def test_a_newly_queued_task_revives_offers_at_once_after_a_quiet_spell():
    # M@1.11:.../core/launchqueue/impl/ReviveOffersStreamLogic.scala ReviveDirectiveFlowLogicWithSuppression:
    # offers wanted after none were: UpdateFramework (unsuppress, clearing the filters); none wanted: suppress;
    # a higher version (a new instance, also a new configuration's:
    # M@1.11:.../deployment/impl/TaskReplaceActor.scala decommissions the old scheduled instances and schedules
    # new ones): IssueRevive. RateLimiterFlow (M@1.11:.../stream/RateLimiterFlow.scala): one pull per
    # --min_revive_offers_interval (5 s, ReviveOffersConfig.scala), after buffer(1, OverflowStrategy.dropHead).
    # The stream: M@1.11:.../core/launchqueue/impl/ReviveOffersState.scala, ReviveOffersActor.scala;
    # --suppress_offers on by default (M@1.11:.../core/launchqueue/ReviveOffersConfig.scala).
    r = ReviveOffers(5.0, now=0.0)
    assert r.suppressed
    assert r.observe({"/a": 1}, [], now=100.0) == ["unsuppress"] and not r.suppressed  # at once
    assert r.observe({}, [], now=100.1, changed=True) == ["suppress"]  # its launch: the second quick pass
    assert r.observe({"/b": 1}, [], now=101.0) == []  # the next state waits for the limiter's pull…
    assert r.suppressed and r.observe({"/b": 1}, [], now=104.0) == []
    assert r.observe({"/b": 1}, [], now=105.1) == ["unsuppress"]  # … an interval after the last pull
    # a second app queued while the first still wants offers: a higher version, a revive
    assert r.observe({"/b": 1, "/c": 1}, [], now=110.2) == ["revive"]


def test_a_failed_task_is_revived_an_interval_after_it_failed_not_when_its_backoff_ends():
    # The failure (the instance wants offers again: M@1.11:.../core/instance/Instance.scala isScheduled) and its
    # backoff (NotifyRateLimiterStepImpl: Failed is limitWorthy; ReviveOffersState.withDelay) take the two quick
    # pulls; the backoff's end (withoutDelay bumps the version) waits for the next pull.
    r = ReviveOffers(5.0, now=0.0)
    assert r.observe({"/a": 1}, ["/a"], now=100.0, changed=True) == ["unsuppress", "suppress"]
    assert r.observe({"/a": 1}, [], now=101.0) == []  # 1 s backoff over: held by the rate limiter
    assert r.observe({"/a": 1}, [], now=105.0) == ["unsuppress"]
    # the same when the limiter's timer pulled long before the failure (it pulled then, not at the failure)
    r = ReviveOffers(5.0, now=0.0)
    r.observe({"/b": 1}, [], now=10.0)
    r.observe({}, [], now=10.1, changed=True)  # the launch: the timer will pull at 15.0
    assert r.observe({}, [], now=17.0, changed=True) == []  # some change, passed at 17 (the pull at 15)
    assert r.observe({"/a": 1}, ["/a"], now=60.0, changed=True) == ["unsuppress", "suppress"]
    assert r.observe({"/a": 1}, [], now=61.0) == [] and r.observe({"/a": 1}, [], now=65.0) == ["unsuppress"]
    with_zero = ReviveOffers(0.0, now=0.0)  # --revive-interval 0: every state at once
    assert with_zero.observe({"/a": 1}, ["/a"], now=100.0, changed=True) == ["unsuppress", "suppress"]
    assert with_zero.observe({"/a": 1}, [], now=101.0) == ["unsuppress"]


def test_every_revive_is_repeated_at_the_second_tick_while_offers_are_wanted():
    # ReviveRepeaterLogic: markRolesForRepeat(2) on an unsuppress or a revive; on each tick of a timer of the
    # interval (Source.tick), the count goes down, and at 0 the revive is repeated if the role still wants offers.
    r = ReviveOffers(5.0, now=0.0)  # ticks at 5, 10, 15 …
    assert r.observe({"/a": 1}, [], now=11.0) == ["unsuppress"]
    assert r.observe({"/a": 1}, [], now=15.0) == []  # first tick
    assert r.observe({"/a": 1}, [], now=20.0) == ["revive"]  # second tick: repeated
    assert r.observe({"/a": 1}, [], now=40.0) == []  # once
    r = ReviveOffers(5.0, now=0.0)
    r.observe({"/a": 1}, [], now=11.0)
    r.observe({}, [], now=11.1, changed=True)  # launched: suppressed, no repeat
    assert r.observe({}, [], now=21.0) == []


def test_a_new_leader_starts_its_stream_over_unsuppressed():
    # A failover: the new leader subscribes with no role suppressed (Mesos@1.11.x:.../hierarchical.cpp
    # updateFramework revives the roles no longer suppressed); its stream's first state takes the first pull.
    r = ReviveOffers(5.0, now=0.0)
    r.observe({"/a": 1}, [], now=100.0)
    r.observe({}, [], now=100.1, changed=True)
    assert r.suppressed and r.restart(now=200.0) == ["unsuppress"] and not r.suppressed
    assert r.observe({"/b": 1}, [], now=201.0) == []  # waits for the pull an interval after the start
    assert r.observe({"/b": 1}, [], now=205.0) == ["unsuppress"]  # its snapshot wanted none: sliding(2)


def test_a_task_that_keeps_declining_waits_out_the_filter_but_a_newly_queued_one_gets_offers_at_once(cluster_with,
                                                                                                       wait):
    # What a real cluster does (stock defaults: --decline_offer_duration 120 s, --min_revive_offers_interval 5 s):
    # the offers a task cannot use are declined and filtered (Mesos@1.11.x RefusedOfferFilter); after the repeated
    # revive they do not come back for 120 s, while the agents' resources stay what they were. A task queued
    # meanwhile revives offers (ReviveOffersState: a new instance, a higher version), which clears the filters
    # (Mesos@1.11.x reviveRoles): it is launched, and the waiting task sees the offers once more.
    cluster, api = cluster_with(agents=2, agent_resources=[SMALL])
    assert api.post("/v2/apps", json=_app("/big", cpus=2)).status_code == 201
    first = wait(lambda: _offers(api, "/big"), what="the big task's offers declined")
    assert first == 2  # one offer per agent, at once
    wait(lambda: _offers(api, "/big") == 4, 12, what="the revive repeated at the second tick (5-10 s)")
    time.sleep(3.0)
    assert _offers(api, "/big") == 4  # filtered: no offer comes back for 120 s
    started = time.monotonic()
    assert api.post("/v2/apps", json=_app("/small", cpus=0.5)).status_code == 201
    wait(lambda: api.running("/small"), 10, what="the newly queued task launched")
    assert time.monotonic() - started < 6  # at once, or when the rate limiter lets its revive pass
    wait(lambda: _offers(api, "/big") >= 6, 5, what="the revive cleared the big task's filters too")
    assert {q["app"]["id"] for q in api.get("/v2/queue").json()["queue"]} == {"/big"}
    # an agent that frees resources is offered again although its filter has not expired
    seen = _offers(api, "/big")
    assert api.delete("/v2/apps/small").status_code == 200
    wait(lambda: _offers(api, "/big") > seen, 10, what="the freed agent offered again")


def test_with_the_friendly_options_declined_offers_come_back_every_allocation(cluster_with, wait):
    # --offer-filter 0 (no refuse_seconds) and --revive-interval 0: what the local cluster did before issue 28;
    # the master still offers an agent at most once per --allocation_interval (1 s:
    # Mesos@1.11.x:src/master/constants.hpp DEFAULT_ALLOCATION_INTERVAL).
    cluster, api = cluster_with(agents=2, agent_resources=[SMALL], offer_filter=0, revive_interval=0)
    assert api.post("/v2/apps", json=_app("/big", cpus=2)).status_code == 201
    first = wait(lambda: _offers(api, "/big"), what="offers declined")
    time.sleep(3.0)
    assert _offers(api, "/big") >= first + 4


# --------------------------------------------------------------------------- GPU agents


def test_a_marathon_without_gpu_resources_is_not_offered_gpu_agents(cluster_with, wait):
    # Mesos@1.11.x:src/master/allocator/mesos/hierarchical.cpp isCapableOfReceivingAgent: with
    # --filter_gpu_resources (default true, src/master/flags.cpp) an agent with GPUs is offered only to a
    # framework with the GPU_RESOURCES capability, which Marathon has with --enable_features gpu_resources
    # (M@1.11:src/main/scala/mesosphere/marathon/MarathonSchedulerDriver.scala).
    _, api = cluster_with(agents=2, agent_resources=["cpus:4;mem:2048;gpus:1|cpus:4;mem:2048"], features=())
    api.post("/v2/apps", json=_app("/cpu", instances=3))
    wait(lambda: len(api.running("/cpu")) == 3, what="3 CPU tasks")
    assert {t["host"] for t in api.running("/cpu")} == {"127.0.0.2"}  # never the GPU agent
    api.post("/v2/apps", json=_app("/spread", instances=2, constraints=[["hostname", "UNIQUE"]]))
    wait(lambda: len(api.running("/spread")) == 1, what="one on the agent without GPUs")
    wait(lambda: {q["app"]["id"]: q for q in api.get("/v2/queue").json()["queue"]}.get("/spread", {})
         .get("processedOffersSummary", {}).get("unusedOffersCount"), what="the second one's offers declined")
    entry = {q["app"]["id"]: q for q in api.get("/v2/queue", params={"embed": "lastUnusedOffers"})
             .json()["queue"]}["/spread"]
    assert {o["offer"]["hostname"] for o in entry["lastUnusedOffers"]} == {"127.0.0.2"}  # no offer of the GPU agent
    # the master started with --filter_gpu_resources=false offers it: the tasks spread over both
    _, api = cluster_with(agents=2, agent_resources=["cpus:4;mem:2048;gpus:1|cpus:4;mem:2048"], features=(),
                          filter_gpu_resources=False)
    api.post("/v2/apps", json=_app("/spread", instances=2, constraints=[["hostname", "UNIQUE"]]))
    wait(lambda: len(api.running("/spread")) == 2, what="both placed")


# --------------------------------------------------------------------------- the surplus kill order


def _task(n, state="TASK_RUNNING", staged="2026-01-01T00:00:0{}.000Z", started="2026-01-01T00:00:1{}.000Z",
          agent="S0", unreachable=False):
    t = Task(f"t{n}", "/a", f"i{n}", "v", "v", [], "/box", staged_at=staged.format(n), state=state,
             started_at=started.format(n) if state == "TASK_RUNNING" else None, agent_id=agent)
    t.unreachable_since = 1.0 if unreachable else None
    return t


def test_surplus_tasks_go_unreachable_first_then_staging_then_by_kill_selection():
    # M@1.11:src/main/scala/mesosphere/marathon/core/deployment/ScalingProposition.scala sortByConditionAndDate:
    # weight Unreachable 1, Staging 2, Starting 3, Running 4; two staging by their staging time, two running by
    # activeSince, per killSelection (M@1.11:.../state/KillSelection.scala: YoungestFirst = a.youngerThan(b)).
    running = [_task(1), _task(2), _task(3)]
    staging, lost = _task(4, state="TASK_STAGING"), _task(5, unreachable=True)
    agent_of = lambda t: None  # noqa: E731
    order = surplus({}, running + [staging, lost], 1, agent_of)
    assert [t.id for t in order] == ["t5", "t4", "t3", "t2"]  # youngest running first (the default)
    assert len(surplus({}, running, 0, agent_of)) == 3  # all of them (selectInstancesToKill's short circuit)
    assert [t.id for t in surplus({"killSelection": "OLDEST_FIRST"}, running, 2, agent_of)] == ["t1"]
    assert [t.id for t in surplus({"killSelection": "YOUNGEST_FIRST"}, running, 1, agent_of)] == ["t3", "t2"]


def test_surplus_tasks_keep_group_by_even(tmp_path):
    # M@1.11:src/main/scala/mesosphere/mesos/Constraints.scala selectInstancesToKill: for GROUP_BY, a task of
    # the fullest group first (GroupByDistribution.findInstancesToKill), before the condition/date order.
    agents = Agents(tmp_path, count=3, attributes=["rack:r1|rack:r1|rack:r2"])
    by_id = {a.id: a for a in agents.all}
    r1a, r1b, r2 = agents.all
    # the oldest three on r1, the youngest on r2: youngest-first alone would empty r2
    tasks = [_task(1, agent=r1a.id), _task(2, agent=r1b.id), _task(3, agent=r1a.id), _task(4, agent=r2.id)]
    app = {"constraints": [["rack", "GROUP_BY"]]}
    killed = surplus(app, tasks, 2, lambda t: by_id[t.agent_id])
    assert len(killed) == 2 and all(by_id[t.agent_id].attributes["rack"] == "r1" for t in killed)
    assert [t.id for t in surplus({}, tasks, 2, lambda t: by_id[t.agent_id])] == ["t4", "t3"]


def test_scale_down_follows_the_apps_kill_selection(cluster_with, wait):
    # The scheduler's scale-down asks ScalingProposition (marathon_tf/local/scaling.py) which tasks go, as
    # Marathon's deployment scale step and scale check do (M@1.11:.../core/deployment/impl/DeploymentActor.scala,
    # M@1.11:.../MarathonSchedulerActor.scala scale; ScalingProposition.propose).
    _, api = cluster_with()
    for selection, kept in (("OLDEST_FIRST", "younger"), ("YOUNGEST_FIRST", "older")):
        app_id = "/" + selection.lower().replace("_", "-")
        api.post("/v2/apps", json=_app(app_id, killSelection=selection))
        api.wait_deployed()
        older = api.running(app_id)[0]["id"]
        api.put(f"/v2/apps{app_id}", json={"instances": 2})
        api.wait_deployed(30)
        younger = next(t["id"] for t in api.running(app_id) if t["id"] != older)
        api.put(f"/v2/apps{app_id}", json={"instances": 1})
        api.wait_deployed(30)
        wait(lambda: len(api.running(app_id)) == 1, what="scaled to 1")
        assert api.running(app_id)[0]["id"] == (younger if kept == "younger" else older)


@pytest.mark.parametrize("option", [{}, {"zk_session_timeout": 2.5}])
def test_info_says_the_clusters_marathon_settings(cluster_with, option):
    _, api = cluster_with(**option)
    info = api.get("/v2/info").json()
    assert info["zookeeper_config"]["zk_session_timeout"] == int(option.get("zk_session_timeout", 10) * 1000)
    assert info["marathon_config"]["decline_offer_duration"] == 120000
    assert info["marathon_config"]["min_revive_offers_interval"] == 5000
