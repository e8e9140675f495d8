"""The job's plan (contract/plan): typed rounds, reasons and the plan's one wire form. Pure: no process, no network."""

import dataclasses
import json
import random
import string

import pytest

from marathon_tf.contract.cluster_spec import Membership
from marathon_tf.contract.labels import JobState
from marathon_tf.contract.plan import (
    FORMAT,
    VERDICTS,
    Counts,
    JobPlan,
    PlanError,
    Round,
    RoundCause,
    RoundKind,
    StopReason,
)

try:  # the property test runs with hypothesis where it is installed; the seeded one below runs everywhere
    from hypothesis import given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - depends on the environment
    st = None


def _name(rng: random.Random) -> str:
    return f"{rng.choice(['worker', 'chief', 'ps'])}-{rng.randrange(0, 10_000)}"


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(string.printable + "é→✓") for _ in range(rng.randrange(0, 40)))


def _seconds(rng: random.Random) -> float:
    return rng.choice([0.0, 0.5, 1e-9, 30.0, rng.uniform(0, 1e6)])


def random_round(rng: random.Random) -> Round:
    return Round(generation=rng.randrange(1, 2**40), kind=rng.choice(list(RoundKind)),
                 reason=rng.choice(list(RoundCause)), cause=_text(rng), delay=_seconds(rng),
                 grace=rng.choice([None, _seconds(rng)]), deadline=rng.choice([None, rng.uniform(0, 2e9)]),
                 restart=rng.choice([None, (), tuple(sorted({_name(rng) for _ in range(rng.randrange(1, 6))}))]))


def random_plan(rng: random.Random) -> JobPlan:
    membership = None
    if rng.random() < 0.6:
        members = {f"worker-{i}": (j, f"10.0.{i % 250}.{j % 250}:{2000 + i}")
                   for j, i in enumerate(rng.sample(range(100), rng.randrange(0, 8)))}
        vacant = {len(members) + k: f"10.1.0.{k}:9" for k in range(rng.randrange(0, 3))}
        membership = Membership("worker", rng.randrange(0, 1000), members, vacant, rng.random() < 0.3, _text(rng))
    counts = Counts(rng.randrange(0, 50), rng.randrange(0, 50), _seconds(rng), rng.randrange(0, 50),
                    rng.randrange(0, 50))
    return JobPlan(generation=rng.randrange(0, 2**40), membership=membership,
                   round=rng.choice([None, random_round(rng)]), counts=counts,
                   verdict=rng.choice([None, *VERDICTS]), restoring=rng.random() < 0.5)


def test_a_plan_goes_on_the_wire_and_back_unchanged_through_json():
    rng = random.Random(40)
    for _ in range(2000):
        plan = random_plan(rng)
        wire = json.loads(json.dumps(plan.to_wire()))  # what travels is JSON text
        assert JobPlan.from_wire(wire) == plan, wire
        assert JobPlan.from_wire(wire).to_wire() == wire
        if plan.round is not None:
            assert Round.from_wire(json.loads(json.dumps(plan.round.to_wire()))) == plan.round


if st is not None:  # pragma: no branch
    rounds = st.builds(Round, generation=st.integers(1, 2**53), kind=st.sampled_from(list(RoundKind)),
                       reason=st.sampled_from(list(RoundCause)), cause=st.text(max_size=50),
                       delay=st.floats(0, 1e9), grace=st.none() | st.floats(0, 1e9),
                       deadline=st.none() | st.floats(0, 1e10),
                       restart=st.none() | st.lists(st.text(min_size=1, max_size=12), max_size=5).map(tuple))

    @settings(max_examples=300, deadline=None)
    @given(rounds, st.integers(0, 2**53), st.none() | st.sampled_from(VERDICTS))
    def test_hypothesis_round_trips_plans(round_, generation, verdict):
        plan = JobPlan(generation=generation, round=round_, verdict=verdict)
        assert JobPlan.from_wire(json.loads(json.dumps(plan.to_wire()))) == plan


def test_the_wire_form_is_plain_json_with_stable_words():
    r = Round(4, RoundKind.RESIZE, RoundCause.GROW, "worker-2 was placed", grace=0.0, restart=("worker-0", "worker-1"))
    assert r.to_wire() == {"generation": 4, "kind": "resize", "reason": "grow", "cause": "worker-2 was placed",
                           "delay": 0.0, "grace": 0.0, "restart": ["worker-0", "worker-1"]}
    m = Membership("worker", 2, {"worker-0": (0, "h:1")})
    assert JobPlan(5, m, r, Counts(1, 3, 600.0), JobState.FAILED).to_wire() == {
        "format": FORMAT, "generation": 5, "membership": m.to_dict(), "round": r.to_wire(),
        "ledger": {"failures": 1, "max_failures": 3, "window_seconds": 600.0, "preemptions": 0,
                   "max_preemptions": 0}, "verdict": "Failed", "restoring": False}
    assert JobPlan().to_wire() == {"format": FORMAT, "generation": 0, "membership": None, "round": None,
                                   "ledger": Counts().to_wire(), "verdict": None, "restoring": False}
    assert JobPlan(restoring=True).to_wire()["restoring"] is True
    # the enums are strings that show as their value
    assert f"{RoundKind.RESIZE}" == "resize" and str(RoundCause.PREEMPTION) == "preemption"
    assert RoundCause.FAILURE == "failure" and json.dumps([RoundKind.HOLD]) == '["hold"]'


def test_a_round_names_whom_it_stops():
    every = Round(1, RoundKind.RESTART, RoundCause.FAILURE)
    some = Round(2, RoundKind.RESIZE, RoundCause.SHRINK, restart=("worker-1",))
    assert every.follows("worker-7") and every.restart is None and not every.resize
    assert some.follows("worker-1") and not some.follows("worker-0") and some.resize
    assert not Round(3, RoundKind.RESIZE, RoundCause.GROW, restart=()).follows("worker-0")
    with pytest.raises(dataclasses.FrozenInstanceError):
        some.generation = 3  # type: ignore[misc]


def test_unknown_keys_are_left_out_and_missing_optional_ones_take_their_defaults():
    wire = {"generation": 2, "kind": "restart", "reason": "preemption", "cause": "ps-0 was preempted",
            "added_by_a_newer_version": {"x": 1}}
    assert Round.from_wire(wire) == Round(2, RoundKind.RESTART, RoundCause.PREEMPTION, "ps-0 was preempted")
    assert JobPlan.from_wire({"generation": 7, "round": wire, "more": [1, 2]}) == \
        JobPlan(7, round=Round.from_wire(wire))
    assert JobPlan.from_wire({}) == JobPlan()


@pytest.mark.parametrize("wire, said", [
    ([], "plan: expected an object, got list"),
    ({"generation": "3"}, "plan.generation: expected an integer, got '3'"),
    ({"generation": True}, "plan.generation: expected an integer, got True"),
    ({"generation": -1}, "plan.generation: expected at least 0, got -1"),
    ({"format": FORMAT + 1}, f"plan.format: {FORMAT + 1} is newer than this marathon-tf reads ({FORMAT})"),
    ({"verdict": "Running"}, "plan.verdict: expected one of Succeeded, Failed, NotPlaced or null, got 'Running'"),
    ({"restoring": "yes"}, "plan.restoring: expected true or false, got 'yes'"),
    ({"restoring": 1}, "plan.restoring: expected true or false, got 1"),
    ({"ledger": {"failures": 1.5}}, "plan.ledger.failures: expected an integer, got 1.5"),
    ({"ledger": []}, "plan.ledger: expected an object, got list"),
    ({"membership": {"generation": 1, "members": ["worker-0"]}}, "plan.membership: not a membership: "),
    ({"membership": {"members": {}}}, "plan.membership: not a membership: "),
    ({"round": "restart"}, "plan.round: expected an object, got str"),
    ({"round": {"kind": "restart", "reason": "failure"}}, "plan.round.generation: expected an integer, got None"),
    ({"round": {"generation": 0, "kind": "restart", "reason": "failure"}},
     "plan.round.generation: expected at least 1, got 0"),
    ({"round": {"generation": 1, "kind": "reboot", "reason": "failure"}},
     "plan.round.kind: expected one of start, restart, resize, save, hold, stop, got 'reboot'"),
    ({"round": {"generation": 1, "kind": "restart", "reason": "it failed"}},
     "plan.round.reason: expected one of failure, preemption, infrastructure, form, grow, shrink, below_min, "
     "asked, stop, moved, got 'it failed'"),
    ({"round": {"generation": 1, "kind": "restart", "reason": "failure", "grace": -1}},
     "plan.round.grace: expected a number of seconds (0 or more), got -1"),
    ({"round": {"generation": 1, "kind": "restart", "reason": "failure", "delay": float("nan")}},
     "plan.round.delay: expected a number of seconds (0 or more), got nan"),
    ({"round": {"generation": 1, "kind": "restart", "reason": "failure", "delay": None}},
     "plan.round.delay: expected a number of seconds (0 or more), got None"),
    ({"round": {"generation": 1, "kind": "resize", "reason": "grow", "restart": "worker-0"}},
     "plan.round.restart: expected a list of task names, got 'worker-0'"),
    ({"round": {"generation": 1, "kind": "resize", "reason": "grow", "restart": [0]}},
     "plan.round.restart: expected a list of task names, got [0]"),
    ({"round": {"generation": 1, "kind": "resize", "reason": "grow", "cause": 3}},
     "plan.round.cause: expected a string, got 3"),
])
def test_a_wrong_shape_is_one_line_naming_the_field(wire, said):
    with pytest.raises(PlanError) as e:
        JobPlan.from_wire(wire)
    assert str(e.value).startswith(said) and "\n" not in str(e.value), str(e.value)


def test_a_long_wrong_value_is_cut_in_the_line():
    with pytest.raises(PlanError) as e:
        Round.from_wire({"generation": "x" * 10_000, "kind": "start", "reason": "form"})
    assert len(str(e.value)) < 150


def test_the_planned_stop_reasons_keep_the_words_people_read():
    """Their value is what ``status``/``events`` have always said of a planned restart (unchanged words)."""
    assert [(r.value, r.text, f"{r}", r.final) for r in StopReason] == [
        ("the job ended", "the job ended", "the job ended", True),
        ("its app was removed", "its app was removed", "its app was removed", True),
        ("its app has a new configuration", "its app has a new configuration", "its app has a new configuration",
         False)]
