"""Marathon's offer matching: what an offer gives a task, every reason it does not fit, the one reason
per declined offer, and constraints (:mod:`marathon_tf.mesos.placement`; no processes here).

Sources: Marathon ``releases/1.8`` ``src/main/scala/mesosphere/mesos/Constraints.scala``,
``ResourceMatcher.scala`` (``matchResources``) and ``NoOfferMatchReason.scala`` (``reasonFunnel``).
"""

from __future__ import annotations

import pytest

from marathon_tf.mesos.agents import AgentInfo, free_resources
from marathon_tf.mesos.placement import REASON_FUNNEL, FreePorts, Match, NoMatch, funnel, match, meets_constraint
from marathon_tf.mesos.resources import Resource, parse_attributes, parse_resources


def _agent(resources="cpus:2;mem:1024;disk:100;ports:[31000-31002]", attributes="", index=1):
    return AgentInfo(hostname=f"127.0.0.{index}", resources=parse_resources(resources),
                     attributes=parse_attributes(attributes))


def _match(spec, agent=None, placed=(), **kw):
    agent = agent or _agent()
    kw.setdefault("default_roles", {"*"})
    return match({"portDefinitions": [{"port": 0}], **spec}, agent, free_resources(agent, kw.pop("used", [])),
                 list(placed), **kw)


def test_an_offer_that_fits_gives_resources_and_ports():
    m = _match({"cpus": 1, "mem": 512})
    assert isinstance(m, Match)
    assert m.consumed == [Resource("cpus", 1.0), Resource("mem", 512.0)]
    assert m.port_candidates == [31000, 31001, 31002]
    m = _match({"cpus": 1, "mem": 512}, taken_ports=[31000, 31001, 31002])
    assert isinstance(m, NoMatch) and m.reasons == ["InsufficientPorts"]


def test_the_free_ports_of_an_offer_are_its_ranges_less_those_taken_counted_without_being_listed():
    listed = [p for p in range(31000, 41000) if p not in {31001, 40999, 50000}] + [45000, 45001]
    free = FreePorts(((31000, 40999), (45000, 45001)), {31001, 40999, 50000})  # 50000: in no range
    assert len(free) == len(listed) == 10000 and free._listed is None
    assert free[:3] == [31000, 31002, 31003] and free[:0] == [] and free._listed is None  # the first few: no list
    assert free == listed and list(free) == listed and free[-1] == 45001 and free[2:5] == listed[2:5]
    assert free[::2] == listed[::2] and free[-2:] == [45000, 45001]
    assert FreePorts([], ()) == [] and not FreePorts([(1, 2)], (1, 2)) and FreePorts([(5, 6)]) == (5, 6)
    m = _match({"cpus": 1, "mem": 512}, taken_ports=[31001])
    assert isinstance(m, Match) and m.port_candidates == [31000, 31002]


def test_every_failing_check_is_a_reason_and_the_funnel_keeps_the_first():
    agent = _agent()
    m = _match({"cpus": 4, "mem": 4096, "gpus": 1, "constraints": [["hostname", "LIKE", "10\\..*"]]}, agent)
    assert isinstance(m, NoMatch)
    assert m.reasons == ["InsufficientCpus", "InsufficientMemory", "InsufficientGpus", "UnfulfilledConstraint"]
    assert funnel(m.reasons) == "UnfulfilledConstraint"  # before the resources in Marathon's funnel
    assert REASON_FUNNEL[:3] == ("UnfulfilledRole", "UnfulfilledConstraint", "NoCorrespondingReservationFound")
    used = [Resource("cpus", 1.5)]
    m = _match({"cpus": 1, "mem": 100}, agent, used=used)
    assert m.reasons == ["InsufficientCpus"]


def test_roles_select_resources_and_a_missing_role_is_unfulfilled():
    agent = _agent("cpus(ml):2;cpus:1;mem:1024;ports:[31000-31001]")
    m = _match({"cpus": 2, "mem": 10, "acceptedResourceRoles": ["ml"]}, agent, default_roles={"*", "ml"})
    assert isinstance(m, NoMatch) and m.reasons == ["InsufficientMemory"]  # mem is all "*"
    m = _match({"cpus": 2, "mem": 10, "acceptedResourceRoles": ["ml", "*"]}, agent, default_roles={"*", "ml"})
    assert isinstance(m, Match) and Resource("cpus", 2.0, "ml") in m.consumed
    m = _match({"cpus": 0.1, "acceptedResourceRoles": ["gpu"]}, agent)
    assert funnel(m.reasons) == "UnfulfilledRole"


def test_gpu_scheduling_restricted_declines_gpu_agents_for_tasks_without_gpus():
    agent = _agent("cpus:2;mem:1024;gpus:2;ports:[31000-31001]")
    assert _match({"cpus": 1}, agent, gpu_restricted=True).reasons == ["DeclinedScarceResources"]
    assert isinstance(_match({"cpus": 1}, agent), Match)
    assert isinstance(_match({"cpus": 1, "labels": {"GPU_SCHEDULING_BEHAVIOR": "unrestricted"}}, agent,
                             gpu_restricted=True), Match)
    m = _match({"cpus": 1, "gpus": 2}, agent, used_gpus=[], gpu_restricted=True)
    assert isinstance(m, Match) and m.gpus == (0, 1)
    m = _match({"cpus": 1, "gpus": 1}, agent, used=[Resource("gpus", 1.0)], used_gpus=[0])
    assert m.gpus == (1,)


A1, A2, A3 = (_agent(attributes=f"rack:r{(i + 1) // 2}", index=i) for i in (1, 2, 3))  # racks r1, r1, r2


@pytest.mark.parametrize("constraint, placed, ok", [
    (["hostname", "UNIQUE"], [A2], True),
    (["hostname", "UNIQUE"], [A1], False),
    (["@hostname", "UNIQUE"], [A1], False),
    (["rack", "UNIQUE"], [A2], False),  # same rack
    (["hostname", "CLUSTER", "127.0.0.1"], [], True),
    (["hostname", "CLUSTER", "127.0.0.2"], [], False),
    (["rack", "CLUSTER"], [A3], False),  # no value: wherever the first one went
    (["rack", "CLUSTER"], [A2], True),
    (["hostname", "LIKE", "127\\.0\\.0\\.[12]"], [], True),
    (["hostname", "LIKE", "127"], [], False),  # the whole string must match
    (["hostname", "UNLIKE", "127\\.0\\.0\\.1"], [], False),
    (["zone", "UNLIKE", "a"], [], True),  # no such attribute: only UNLIKE holds
    (["zone", "LIKE", ".*"], [], False),
    (["rack", "GROUP_BY", "2"], [A1], False),  # r1 has one, r2 none yet: only 1 group of 2 seen
    (["rack", "GROUP_BY", "2"], [A3], True),  # r1 not used yet
    (["rack", "GROUP_BY"], [A1, A3], True),
    (["rack", "GROUP_BY"], [A1, A2, A3], False),  # r1 has 2, r2 has 1
    (["rack", "MAX_PER", "2"], [A2], True),
    (["rack", "MAX_PER", "2"], [A1, A2], False),
    (["hostname", "MAX_PER", "1"], [A1], False),
    (["rack", "IS", "r1"], [], True),
])
def test_constraints_as_marathon_checks_them(constraint, placed, ok):
    assert meets_constraint(A1, placed, constraint) is ok


# GROUP_BY by version: R1, R2, R3 are one agent on each of three racks.
R1, R2, R3 = (_agent(attributes=f"rack:r{i}", index=i) for i in (1, 2, 3))


@pytest.mark.parametrize("value, placed, offered, instances, old, even", [
    ("2", [R1, R1, R2], R3, 4, True, False),   # 2 values taken: a third only before 1.10.34
    ("2", [R1, R1, R2], R2, 4, True, True),    # r2 has the fewest; 4 // 2 = 2 each: room on r2
    ("2", [R1, R1, R2], R1, 4, False, False),  # r1 has its 2
    ("2", [R1, R2], R1, 3, True, True),        # 3 = 1 + 1, remainder 1: one value gets a second
    ("2", [R1, R1, R2], R2, 3, True, False),   # the remainder went to r1: r2 stays at 1 on 1.11.18+
    ("1", [R1], R2, 2, True, False),           # GROUP_BY 1: a second value only before 1.10.34
    ("1", [R1], R1, 2, True, True),
    ("", [], R1, 1, True, False),              # no value: n 0 divides by zero on 1.11.18+
    ("3", [], R1, 3, True, True),
])
def test_group_by_before_and_after_1_10_34(value, placed, offered, instances, old, even):
    """``GROUP_BY`` at offer time, by version (mesosphere/marathon ``src/main/scala/mesosphere/mesos/
    Constraints.scala`` ``checkGroupBy``): v1.4.3:66-80 (the same at v1.9.109:113-127 and v1.10.26:119-134)
    lets a value no placed instance has through ("the constraint value from the offer is not yet in the
    grouping"), a taken one only when ``n`` values are taken and it has the fewest; releases/1.11:123-149
    (ddd6b19b1 "Allow GROUP_BY to preemptively scale up (#7206)", 1.11.18; releases/1.10 34bb771f2, 1.10.34)
    aims at ``instances / n`` per value plus the remainder, and a new value only while fewer than ``n`` are
    taken; ``desiredInstanceCount / desiredGroupCount`` with no value (``GroupByDefault`` 0) throws."""
    constraint = ["rack", "GROUP_BY", value] if value else ["rack", "GROUP_BY"]
    assert meets_constraint(offered, placed, constraint) is old
    assert meets_constraint(offered, placed, constraint, instances=instances) is even


def test_match_checks_group_by_with_the_apps_instances_when_asked():
    """``match(..., group_by_even=True)`` reads the app's ``instances`` (releases/1.11 mesosphere/marathon
    ``src/main/scala/mesosphere/mesos/Constraints.scala:124``: ``runSpec.instances``) and says
    ``UnfulfilledConstraint`` for a third rack (``ResourceMatcher.scala:215-227``)."""
    spec = {"cpus": 0.1, "instances": 4, "constraints": [["rack", "GROUP_BY", "2"]]}
    assert isinstance(_match(spec, R3, [R1, R1, R2]), Match)
    assert _match(spec, R3, [R1, R1, R2], group_by_even=True).reasons == ["UnfulfilledConstraint"]
    assert isinstance(_match(spec, R2, [R1, R1, R2], group_by_even=True), Match)
