"""The benchmark harness itself (issue 45): waits sized to the machine that say what they saw, repetitions
that survive one failure, goals held against their bounds, and ``--compare``'s refusal of what is not a version."""

from __future__ import annotations

import time

import pytest

from benchmarks import common
from benchmarks.common import Row, WaitedTooLong, repeat, until
from benchmarks.compare import CompareError, _prepare_ref
from benchmarks.goals import GOALS, Goal, needed, table, verdicts


@pytest.fixture
def factor(monkeypatch):
    monkeypatch.setattr(common, "_slowdown", 2.0)


def test_a_wait_that_runs_out_says_what_it_waited_for_how_long_and_what_it_saw(factor):
    started = time.monotonic()
    with pytest.raises(WaitedTooLong) as caught:
        until(lambda: False, 0.1, "worker-1's next step", seen=lambda: "worker-1: no step since its restart")
    assert 0.2 <= time.monotonic() - started < 2  # 0.1 s x the machine's factor 2
    said = str(caught.value)
    assert "worker-1's next step" in said and "worker-1: no step since its restart" in said
    assert "0.1 s × 2.0" in said


def test_a_wait_whose_description_fails_still_reports_the_timeout(factor):
    def broken() -> str:
        raise KeyError("x")

    with pytest.raises(WaitedTooLong, match="could not be described"):
        until(lambda: False, 0.01, "a step", seen=broken)


def test_the_slowdown_can_be_set_and_is_never_below_one(monkeypatch):
    monkeypatch.setattr(common, "_slowdown", None)
    monkeypatch.setenv("MTF_BENCH_SLOWDOWN", "0.5")
    assert common.slowdown() == 1.0
    monkeypatch.setattr(common, "_slowdown", None)
    monkeypatch.setenv("MTF_BENCH_SLOWDOWN", "2.5")
    assert common.slowdown() == 2.5


def test_one_failed_repetition_keeps_the_others():
    outcomes = iter([(1.0,), RuntimeError("no step"), (3.0,)])

    def once():
        out = next(outcomes)
        if isinstance(out, Exception):
            raise out
        return out

    runs = repeat("case", 3, once)
    assert runs.results == [(1.0,), (3.0,)]
    assert runs.failures == ["run 2: RuntimeError: no step"] and "1 of 3 failed" in runs.note()


def test_goals_are_met_not_met_or_not_measured_with_the_reason():
    goals = [Goal("a", "b1", r"^speed", "<=", 2.0, "issue 1"), Goal("b", "b1", r"^ratio", ">=", 0.97, "issue 2"),
             Goal("c", "b1", r"^absent", "<=", 1.0, "issue 3"), Goal("d", "b2", r"^x", "<=", 1.0, "issue 4"),
             Goal("e", "b1", r"^broken", "<=", 1.0, "issue 5")]
    rows = [("b1", Row("speed of x", 2.5, "s")), ("b1", Row("ratio y", 0.98, "×")),
            ("b1", Row("broken z", "did not complete", "", "waited 90 s for worker-1's next step"))]
    got = {g.what: v for g, _, v in verdicts(rows, {"b1"}, goals, missing=lambda n: f"{n} needs TensorFlow")}
    assert got == {"a": "NOT met", "b": "met", "c": "not measured: the benchmark gave no such row",
                   "d": "not measured: b2 needs TensorFlow",
                   "e": "not measured: waited 90 s for worker-1's next step"}
    assert "1 of 5 goals met." in table(verdicts(rows, {"b1"}, goals))


def test_every_goal_names_a_benchmark_that_exists():
    from benchmarks.__main__ import BENCHMARKS, _optional

    known = {**BENCHMARKS, **_optional()}
    assert [n for n in needed(GOALS) if n not in known] == []


def test_compare_refuses_what_is_not_a_version(tmp_path):
    with pytest.raises(CompareError, match="neither a folder nor a commit"):
        _prepare_ref("no-such-ref-anywhere", tmp_path / "w1")
    (tmp_path / "plain").mkdir()
    with pytest.raises(CompareError, match="not a marathon-tf checkout"):
        _prepare_ref(str(tmp_path / "plain"), tmp_path / "w2")


def test_a_wait_gives_up_at_once_when_what_it_waits_on_cannot_come(factor):
    """A job that ended Failed while a benchmark waited for its next step made it wait its whole limit (a Keras
    baseline: 25 minutes on a loaded machine)."""
    started = time.monotonic()
    with pytest.raises(WaitedTooLong, match="gave up waiting for a step: the job ended Failed: worker-1 failed"):
        until(lambda: False, 600, "a step", gone=lambda: "the job ended Failed: worker-1 failed")
    assert time.monotonic() - started < 10


def test_a_goal_its_benchmark_could_not_measure_says_why():
    goals = [Goal("render ratio", "render_vs_ecosystem", r"^render ratio", "<=", 0.25, "issue 13")]
    rows = [("render_vs_ecosystem", Row("render vs tensorflow/ecosystem's template", "skipped", "",
                                        "could not clone it: set MTF_ECOSYSTEM_DIR"))]
    [(_, figure, verdict)] = verdicts(rows, {"render_vs_ecosystem"}, goals)
    assert verdict == "not measured: skipped: could not clone it: set MTF_ECOSYSTEM_DIR"
