"""Placement rules across a job's tasks (:mod:`marathon_tf.contract.spread`; pure, no processes).

Marathon checks an app's constraints among that app's own instances only: ``Constraints.meetsConstraint
(allInstances, offer, constraint)`` (``git -C /work/.mirror/mesosphere+marathon/repo show
releases/1.11:src/main/scala/mesosphere/mesos/Constraints.scala``; the same in 1.4–1.10) is given the
instances of one run spec. ``LIKE`` / ``UNLIKE`` match the whole value (``offerValue.matches(value)``),
an offer without the field meets only ``UNLIKE``, scalar attributes compare as ``DecimalFormat("0.###")``
text. The simulations below let the Mesos model's :func:`marathon_tf.mesos.placement.meets_constraint`
(the same semantics) play Marathon at its worst: every waiting app takes the first agent its own
constraints allow, all in the same offer cycle.
"""

from __future__ import annotations

import re

import pytest

from marathon_tf.contract import spread
from marathon_tf.contract.spread import HOLD, Member, Rule, Scope
from marathon_tf.mesos.agents import AgentInfo
from marathon_tf.mesos.placement import meets_constraint
from marathon_tf.mesos.resources import parse_attributes

UNIQUE = Rule("hostname", "UNIQUE")


def _agents(n, racks=None):
    return [AgentInfo(hostname=f"10.0.0.{i + 1}", resources=[],
                      attributes=parse_attributes(f"rack:{racks[i]}") if racks else {}) for i in range(n)]


@pytest.mark.parametrize("constraint, relational", [
    (["hostname", "UNIQUE"], True), (["rack", "MAX_PER", "2"], True), (["rack", "GROUP_BY"], True),
    (["rack", "GROUP_BY", "3"], True), (["rack", "CLUSTER"], True), (["rack", "CLUSTER", "r1"], False),
    (["rack", "LIKE", "r1"], False), (["rack", "UNLIKE", "r1"], False), (["level", "IS", "2"], False),
])
def test_only_the_operators_that_compare_tasks_are_rules(constraint, relational):
    assert spread.relational(constraint) is relational


def test_values_are_escaped_for_javas_and_pythons_regular_expressions_alike():
    assert spread.escape("10.0.0.1") == "10\\.0\\.0\\.1"
    assert spread.escape("rack-{a,b}") == "rack\\-\\{a\\,b\\}"
    # every escaped character is a non-alphanumeric one: a literal in java.util.regex as in re
    for text in ("10.0.0.1", "[1-4]", "a|b", "x*y+z?", "ho st"):
        assert re.fullmatch(spread.escape(text), text) and not re.fullmatch(spread.escape(text), text + "x")
    assert spread.value_text(2) == "2" and spread.value_text(0.5) == "0.5" and spread.value_text(1.23456) == "1.235"


@pytest.mark.parametrize("rule, held, total, expected", [
    (UNIQUE, [], 3, ()),
    (UNIQUE, ["10.0.0.1"], 3, (("hostname", "UNLIKE", "10\\.0\\.0\\.1"),)),
    (UNIQUE, ["10.0.0.2", "10.0.0.1"], 3, (("hostname", "UNLIKE", "10\\.0\\.0\\.1|10\\.0\\.0\\.2"),)),
    (Rule("hostname", "MAX_PER", "2"), ["h1", "h2", "h1"], 5, (("hostname", "UNLIKE", "h1"),)),
    (Rule("hostname", "MAX_PER", "2"), ["h1", "h2"], 5, ()),
    # GROUP_BY n: at most ceil(N/n) per value, and no new value once n are used (then LIKE the ones with room)
    (Rule("rack", "GROUP_BY", "2"), ["r1"], 4, ()),
    (Rule("rack", "GROUP_BY", "2"), ["r1", "r1"], 4, (("rack", "UNLIKE", "r1"),)),
    (Rule("rack", "GROUP_BY", "2"), ["r1", "r2", "r1"], 4, (("rack", "LIKE", "r2"),)),
    # GROUP_BY without a count (Marathon 1.4–1.8's): a new value, or one of those holding the fewest
    (Rule("rack", "GROUP_BY"), ["r1", "r2", "r1"], 6, (("rack", "UNLIKE", "r1"),)),
    (Rule("rack", "CLUSTER"), [], 3, ()),
    (Rule("rack", "CLUSTER"), ["r2", "r2"], 3, (("rack", "LIKE", "r2"),)),
])
def test_a_rule_becomes_per_app_constraints_naming_the_values_siblings_hold(rule, held, total, expected):
    assert spread.translate(rule, held, total) == expected


@pytest.mark.parametrize("rule, placed, total, moved", [
    (UNIQUE, [("worker-0", "h1"), ("worker-1", "h1"), ("worker-2", "h2")], 3, ["worker-1"]),
    (Rule("hostname", "MAX_PER", "2"), [("a", "h1"), ("b", "h1"), ("c", "h1"), ("d", "h2")], 5, ["c"]),
    (Rule("rack", "GROUP_BY", "2"), [("a", "r1"), ("b", "r2"), ("c", "r3"), ("d", "r1")], 4, ["c"]),
    (Rule("rack", "CLUSTER"), [("a", "r1"), ("b", "r2")], 2, ["b"]),
    (Rule("rack", "UNIQUE"), [("a", None), ("b", "r1")], 2, ["a"]),  # an agent without the attribute
    (Rule("rack", "GROUP_BY"), [("a", "r1"), ("b", "r1"), ("c", "r1"), ("d", "r2")], 4, ["c"]),
])
def test_the_tasks_that_break_a_rule_are_the_later_ones(rule, placed, total, moved):
    assert spread.breaches(rule, placed, total) == moved


@pytest.mark.parametrize("rule, tasks, values, refused", [
    (UNIQUE, 3, ["h1", "h2", "h3"], None),
    (UNIQUE, 4, ["h1", "h2", "h3"],
     'job rule ["hostname", "UNIQUE"] needs 4 distinct hosts for its 4 tasks; the Mesos master lists 3 agents'),
    (Rule("hostname", "MAX_PER", "2"), 5, ["h1", "h2", "h3"], None),
    (Rule("hostname", "MAX_PER", "2"), 7, ["h1", "h2", "h3"],
     'job rule ["hostname", "MAX_PER", "2"] fits at most 2 × 3 = 6 of its 7 tasks; the Mesos master lists 3 agents'),
    (Rule("rack", "UNIQUE"), 3, ["r1", "r1", None],
     'job rule ["rack", "UNIQUE"] needs 3 distinct values of rack for its 3 tasks; the 3 agents the Mesos master '
     'lists have 1 (r1)'),
    (Rule("rack", "GROUP_BY", "3"), 6, ["r1", "r2"],
     'job rule ["rack", "GROUP_BY", "3"] needs 3 distinct values of rack for its 6 tasks; the 2 agents the Mesos '
     'master lists have 2 (r1, r2)'),
    (Rule("gpu", "CLUSTER"), 2, [None, None],
     'job rule ["gpu", "CLUSTER"] cannot place its 2 tasks: the 2 agents the Mesos master lists have no attribute gpu'),
])
def test_a_rule_no_agents_can_satisfy_is_named_with_the_agents(rule, tasks, values, refused):
    assert spread.infeasible(rule, "job", tasks, values) == refused


def test_the_base_constraints_and_the_digest_form_leave_out_what_the_placement_added():
    app = {"id": "/j/worker-1", "constraints": [["rack", "LIKE", "r1"], list(HOLD)],
           "labels": {"x": "1", spread.LABEL: spread.label_value((HOLD,), "held")}}
    assert spread.split(app) == ((("rack", "LIKE", "r1"),), (HOLD,), "held")
    bare = spread.strip(app)
    assert bare["constraints"] == [["rack", "LIKE", "r1"]] and bare["labels"] == {"x": "1"}
    moved = {**app, "constraints": [["rack", "LIKE", "r1"], ["hostname", "UNLIKE", "h1"]],
             "labels": {"x": "1", spread.LABEL: spread.label_value((("hostname", "UNLIKE", "h1"),), "away")}}
    assert spread.strip(moved) == bare
    # a label that does not match the constraints' tail (changed by hand) adds nothing
    assert spread.split({**app, "constraints": [["rack", "LIKE", "r1"]]})[1] == ()


# -- rounds against a Marathon that stacks whatever it may -------------------------------------------


class Marathon:
    """Apps of one instance each, placed the way Marathon's per-app checks allow at their worst: every
    waiting app takes the first agent (in a fixed order) whose offer meets its own constraints, in the
    same cycle (its own instances: none, so UNIQUE/MAX_PER/GROUP_BY in an app would stop nothing)."""

    def __init__(self, agents, tasks, constraints=()):
        self.agents = agents
        self.apps = {t: {"constraints": [list(c) for c in constraints], "labels": {}} for t in tasks}
        self.where: dict[str, AgentInfo] = {}
        self.staged: dict[str, int] = {}
        self.clock = 0
        self.kills = 0

    def write(self, task, added, why, base):
        self.apps[task] = {"constraints": [list(c) for c in base + added],
                           "labels": {spread.LABEL: spread.label_value(added, why)}}
        if task in self.where:  # a new app version: Marathon kills the task and launches it again
            del self.where[task]
            self.kills += 1

    def cycle(self):
        self.clock += 1
        for task, app in self.apps.items():
            if task in self.where:
                continue
            agent = next((a for a in self.agents
                          if all(meets_constraint(a, [], c) for c in app["constraints"])), None)
            if agent is not None:
                self.where[task], self.staged[task] = agent, self.clock

    def members(self, rules):
        out = {}
        for task, app in self.apps.items():
            base, added, why = spread.split(app)
            agent = self.where.get(task)
            values = {}
            for r in rules:
                if agent is not None:
                    values[r.field] = agent.hostname if spread.is_hostname(r.field) else \
                        spread.value_text(agent.attributes.get(r.field))
            out[task] = Member(task, base, added, why, agent.hostname if agent else None,
                               f"{self.staged.get(task, 0):06d}", values)
        return out


def _run(marathon, scope, leader="worker-0", rounds=40):
    for n in range(rounds):
        members = marathon.members(scope.rules)
        plan = spread.plan(scope, members, leader)
        for task, (added, why) in plan.writes.items():
            marathon.write(task, added, why, members[task].base)
        if plan.settled and not plan.writes:
            return n
        marathon.cycle()
    raise AssertionError(f"not settled after {rounds} rounds: {plan.blocking}")


def _hosts(marathon):
    return sorted(a.hostname for a in marathon.where.values())


def test_held_tasks_are_released_one_at_a_time_and_never_meet():
    tasks = tuple(f"worker-{i}" for i in range(3))
    scope = Scope("job", "constraints", (UNIQUE,), tasks, "worker-0")
    marathon = Marathon(_agents(3), tasks)
    for t in tasks[1:]:  # as rendered: all but the first held
        marathon.apps[t] = {"constraints": [list(HOLD)], "labels": {spread.LABEL: spread.label_value((HOLD,), "")}}
    marathon.cycle()
    rounds = _run(marathon, scope)
    assert _hosts(marathon) == ["10.0.0.1", "10.0.0.2", "10.0.0.3"] and marathon.kills == 0
    assert rounds <= 4  # one release per round: N tasks, N rounds
    assert marathon.apps["worker-2"]["constraints"] == [["hostname", "UNLIKE", "10\\.0\\.0\\.1|10\\.0\\.0\\.2"]]


def test_a_race_that_stacked_every_task_on_one_host_is_corrected():
    tasks = tuple(f"worker-{i}" for i in range(4))
    scope = Scope("job", "constraints", (Rule("hostname", "MAX_PER", "2"),), tasks, "worker-0")
    marathon = Marathon(_agents(3), tasks)
    marathon.cycle()  # no holds: Marathon stacks all four on the first agent
    assert _hosts(marathon) == ["10.0.0.1"] * 4
    _run(marathon, scope)
    hosts = _hosts(marathon)
    assert max(hosts.count(h) for h in hosts) <= 2 and marathon.where["worker-0"].hostname == "10.0.0.1"
    assert marathon.kills == 2  # the two beyond MAX_PER moved, nothing else


@pytest.mark.parametrize("rule, n, racks, check", [
    (UNIQUE, 3, None, lambda v: len(set(v)) == 3),
    (Rule("hostname", "MAX_PER", "2"), 5, None, lambda v: max(v.count(x) for x in v) <= 2),
    (Rule("rack", "GROUP_BY", "2"), 6, ["r1", "r2", "r3", "r1"],
     lambda v: sorted(v.count(x) for x in set(v)) == [3, 3]),
    (Rule("rack", "UNIQUE"), 2, ["r1", "r1", "r2"], lambda v: len(set(v)) == 2),
    (Rule("rack", "CLUSTER"), 3, ["r1", "r2", "r2"], lambda v: len(set(v)) == 1),
])
def test_every_rule_holds_once_settled(rule, n, racks, check):
    tasks = tuple(f"worker-{i}" for i in range(n))
    scope = Scope("job", "constraints", (rule,), tasks, "worker-0")
    agents = _agents(len(racks) if racks else 3, racks)
    base = [rule.presence()] if rule.presence() else []
    marathon = Marathon(agents, tasks, base)
    marathon.cycle()  # everything stacked where the per-app constraints allow
    _run(marathon, scope)
    values = [a.hostname if spread.is_hostname(rule.field) else spread.value_text(a.attributes.get(rule.field))
              for a in marathon.where.values()]
    assert len(values) == n and check(values), values


def test_the_leader_keeps_its_place_and_the_longest_placed_keep_theirs():
    tasks = ("ps-0", "worker-0", "worker-1")
    scope = Scope("job", "constraints", (UNIQUE,), tasks, "worker-0")
    members = {"ps-0": Member("ps-0", host="h1", staged="1", values={"hostname": "h1"}),
               "worker-0": Member("worker-0", host="h1", staged="3", values={"hostname": "h1"}),
               "worker-1": Member("worker-1", host="h2", staged="2", values={"hostname": "h2"})}
    plan = spread.plan(scope, members, "worker-0")
    assert plan.moves == ["ps-0"] and plan.released == "ps-0"
    assert plan.writes["ps-0"][0] == (("hostname", "UNLIKE", "h1|h2"),)
    assert plan.blocking["ps-0"].endswith("on h1 beside worker-0; being moved")
    assert "worker-0" not in plan.writes and "worker-1" not in plan.writes  # placed ones are never written to


def test_a_value_not_known_yet_is_not_judged():
    scope = Scope("job", "constraints", (Rule("rack", "UNIQUE"),), ("worker-0", "worker-1"), "worker-0")
    members = {"worker-0": Member("worker-0", host="h1", values={"rack": "r1"}),
               "worker-1": Member("worker-1", host="h9", values={})}  # an agent whose attributes were not read
    plan = spread.plan(scope, members, "worker-0")
    assert plan.moves == [] and plan.settled


def test_held_apps_are_not_written_to_again_for_nothing():
    tasks = ("worker-0", "worker-1", "worker-2")
    scope = Scope("job", "constraints", (UNIQUE,), tasks, "worker-0")
    held = Member("worker-2", added=(HOLD,), why=spread.held_why(scope))
    members = {"worker-0": Member("worker-0", host="h1", values={"hostname": "h1"}),
               "worker-1": Member("worker-1", added=(HOLD,), why=spread.held_why(scope)), "worker-2": held}
    plan = spread.plan(scope, members, "worker-0")
    assert list(plan.writes) == ["worker-1"]  # released; worker-2 stays held as it is
    assert plan.blocking["worker-2"] == "placement: " + spread.held_why(scope)
