"""Agents' resources and attributes in Mesos's syntax, Mesos's JSON of them, and Marathon's offer
matching: constraints and the one reason per declined offer (no processes here).

Sources: apache/mesos ``src/common/resources.cpp`` (``Resources::fromSimpleString``),
``src/common/values.cpp`` (``parse``; ranges written ``[a-b, c-d]``), ``src/common/attributes.cpp``,
``src/common/http.cpp`` (``json(ObjectWriter*, ResourceIterable)``: cpus/gpus/mem/disk always);
Marathon ``releases/1.8`` ``src/main/scala/mesosphere/mesos/Constraints.scala``,
``ResourceMatcher.scala`` and ``NoOfferMatchReason.scala`` (``reasonFunnel``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from marathon_tf.local.agents import Agent, Agents, per_agent
from marathon_tf.local.placement import REASON_FUNNEL, Match, NoMatch, free_resources, funnel, match, meets_constraint
from marathon_tf.local.resources import (Resource, attribute_text, attributes_json, full_json, offer_resources_json,
                                         parse_attributes, parse_resources, summary_json)


def test_the_issues_example_parses_as_mesos_does():
    res = parse_resources("cpus:4;mem:8192;disk:20000;gpus:2;ports:[31000-32000]")
    assert res == [Resource("cpus", 4.0), Resource("mem", 8192.0), Resource("disk", 20000.0),
                   Resource("gpus", 2.0), Resource("ports", ((31000, 32000),))]
    assert summary_json(res) == {"cpus": 4.0, "gpus": 2.0, "mem": 8192.0, "disk": 20000.0, "ports": "[31000-32000]"}


def test_roles_ranges_and_sums():
    res = parse_resources("cpus(ml):2; cpus:1 ;cpus(ml):1;ports:[31005-31010,31000-31004, 32000-32001]")
    assert Resource("cpus", 3.0, "ml") in res and Resource("cpus", 1.0) in res
    assert Resource("ports", ((31000, 31010), (32000, 32001))) in res  # coalesced, sorted
    assert summary_json(res)["ports"] == "[31000-31010, 32000-32001]"
    assert summary_json(res)["cpus"] == 4.0 and summary_json([])["gpus"] == 0.0
    full = full_json(res)
    assert {"name": "cpus", "type": "SCALAR", "role": "ml", "scalar": {"value": 3.0},
            "reservations": [{"type": "STATIC", "role": "ml"}]} in full
    assert {"name": "ports", "type": "RANGES", "role": "*",
            "ranges": {"range": [{"begin": 31000, "end": 31010}, {"begin": 32000, "end": 32001}]}} in full


@pytest.mark.parametrize("text, message", [
    ("cpus", "expecting name:value"),
    ("cpus:4:5", "expecting name:value"),
    ("cpus(:4", "mismatched parentheses"),
    ("cpus:four", "'four' is not a number"),
    ("gpus:1.5", "whole number"),
    ("ports:31000", "must be ranges"),
    ("ports:[32000-31000]", "begin <= end"),
    ("mem:-1", "non-negative"),
    ("cpus:{a,b}", "must be a number"),
])
def test_bad_resources_are_one_line_naming_the_part(text, message):
    with pytest.raises(ValueError) as e:
        parse_resources(text)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_attributes_text_scalars_ranges():
    attrs = parse_attributes("rack:r1;level:2;slots:[1-4];zone:eu-1a")
    assert attrs == {"rack": "r1", "level": 2.0, "slots": ((1, 4),), "zone": "eu-1a"}
    assert attributes_json(attrs) == {"rack": "r1", "level": 2.0, "slots": "[1-4]", "zone": "eu-1a"}
    assert [attribute_text(v) for v in attrs.values()] == ["r1", "2", "[1-4]", "eu-1a"]
    assert attribute_text(0.5) == "0.5"
    with pytest.raises(ValueError, match="expecting name:value"):
        parse_attributes("rack")


def test_values_are_spread_over_the_agents_in_turn():
    assert per_agent(["rack:r1|rack:r2"], 3, "--agent-attributes") == ["rack:r1", "rack:r2", "rack:r1"]
    assert per_agent(["rack:r1", "rack:r2"], 2, "x") == ["rack:r1", "rack:r2"]
    assert per_agent([], 2, "x") == [None, None]
    with pytest.raises(ValueError, match="3 agent values for 2 agents"):
        per_agent(["a:1|a:2|a:3"], 2, "--agent-attributes")


def test_agents_have_their_own_address_sandbox_root_and_id(tmp_path):
    agents = Agents(tmp_path, "127.0.0.1", 3, ["cpus:2;mem:1024"], ["rack:r1|rack:r2"])
    a1, a2, a3 = agents.all
    assert [a.hostname for a in agents.all] == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    assert [a.name for a in agents.all] == ["agent-1", "agent-2", "agent-3"]
    assert [a.id.rsplit("-", 1)[1] for a in agents.all] == ["S0", "S1", "S2"]
    assert a1.sandboxes == tmp_path / "sandboxes" and a2.sandboxes == tmp_path / "agents" / "agent-2" / "sandboxes"
    assert a3.attributes == {"rack": "r1"}
    assert Resource("ports", ((31000, 32000),)) in a2.resources  # Mesos's default range
    assert {r.name for r in a2.resources} >= {"cpus", "mem", "disk", "ports"}  # disk detected, as Mesos does
    default = Agents(tmp_path, "127.0.0.1").all
    assert len(default) == 1 and not default[0].enforced  # today's one agent: the machine, not enforced


def _agent(resources="cpus:2;mem:1024;disk:100;ports:[31000-31002]", attributes="", index=1, tmp=Path("/tmp")):
    return Agent(index, f"127.0.0.{index}", tmp, parse_resources(resources), parse_attributes(attributes))


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


def test_marathons_offer_json_for_last_unused_offers():
    res = parse_resources("cpus:1;ports:[31000-31001]")
    assert offer_resources_json(res) == [{"name": "cpus", "role": "*", "scalar": 1.0},
                                         {"name": "ports", "role": "*", "ranges": [{"begin": 31000, "end": 31001}]}]
