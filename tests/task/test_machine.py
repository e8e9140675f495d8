"""The task's state machine (marathon_tf/task/machine.py): the table, and that it is the one writer of a phase."""

from __future__ import annotations

import ast
import pathlib

import pytest

from marathon_tf.contract.phases import Phase
from marathon_tf.task.machine import FINAL, LIVE, TRANSITIONS, On, TaskMachine, next_phase
from marathon_tf.task.status_server import TaskStatus

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "marathon_tf"


def _machine(**kw) -> TaskMachine:
    return TaskMachine(TaskStatus(job="/ml/mnist", task="worker-0", role="worker", index=0), **kw)


def test_a_task_discovers_starts_saves_and_succeeds_and_status_shows_each_phase():
    m = _machine()
    seen = [m.phase]
    for on in (On.STARTED, On.SAVE, On.SAVE_ENDED, On.HELD, On.SAVE_ENDED, On.SUCCEEDED):
        assert m.fire(on), on
        seen.append(m.phase)
        assert m.status.snapshot()["phase"] == m.phase.value
    assert seen == [Phase.DISCOVERING, Phase.RUNNING, Phase.SAVING, Phase.RUNNING, Phase.SAVING, Phase.RUNNING,
                    Phase.SUCCEEDED]


def test_an_elastic_standby_is_taken_in_resized_and_restarted():
    m = _machine()
    for on, phase in ((On.STANDBY, Phase.STANDBY), (On.TAKEN_IN, Phase.DISCOVERING), (On.STARTED, Phase.RUNNING),
                      (On.RESIZE, Phase.RESIZING), (On.STANDBY, Phase.STANDBY), (On.TAKEN_IN, Phase.DISCOVERING),
                      (On.STARTED, Phase.RUNNING), (On.RESTART, Phase.RUNNING)):
        assert m.fire(on) and m.phase is phase, (on, m.phase)


def test_an_event_without_a_row_changes_nothing_and_writes_nothing():
    m = _machine()
    m.fire(On.STARTED)
    # a round that ends after the job's size change took the program does not make the task "running" again
    m.fire(On.RESIZE, last_error="the job's size changes")
    assert not m.fire(On.SAVE_ENDED, last_error="overwritten?")
    assert m.phase is Phase.RESIZING and m.status.snapshot()["last_error"] == "the job's size changes"
    # a released hold leaves a running program's phase alone
    m.fire(On.STARTED)
    assert not m.fire(On.SAVE_ENDED) and m.phase is Phase.RUNNING
    # nothing but a start leaves discovering towards training; nothing at all leaves a final phase
    fresh = _machine()
    for on in (On.SAVE, On.HELD, On.RESIZE, On.RESTART, On.SUCCEEDED, On.FAILED, On.SAVE_ENDED):
        assert not fresh.fire(on), on
    m.fire(On.FAILED, exit_code=1)
    for on in On:
        assert not m.fire(on), on
    assert m.phase is Phase.FAILED and m.status.snapshot()["exit_code"] == 1


def test_strict_machines_name_the_missing_row():
    m = _machine(strict=True)
    with pytest.raises(ValueError, match="no transition from discovering on resize"):
        m.fire(On.RESIZE)


def test_the_table_is_the_phases_diagram():
    # every live phase can start its program, stand by, or break; the final ones lead nowhere
    for phase in LIVE:
        assert next_phase(phase, On.STARTED) is Phase.RUNNING
        assert next_phase(phase, On.BROKE) is Phase.FAILED
    assert not [key for key in TRANSITIONS if key[0] in FINAL]
    # a program's end is decided only while it trains
    assert {p for (p, on) in TRANSITIONS if on in (On.SUCCEEDED, On.FAILED)} == \
        {Phase.RUNNING, Phase.SAVING, Phase.RESIZING}
    # every phase is reached by some row, and every event has a row
    assert {to for to in TRANSITIONS.values()} | {Phase.DISCOVERING} == set(Phase)
    assert {on for (_, on) in TRANSITIONS} == set(On)
    m = _machine()
    m.fire(On.STARTED)
    assert m.ended(Phase.SUCCEEDED) and m.phase is Phase.SUCCEEDED


def _phase_writes(path: pathlib.Path) -> tuple[list[int], list[int]]:
    """(lines of calls ``update(phase=...)``, lines of dicts with a ``"phase"`` key: a ``**fields`` write)."""
    calls, dicts = [], []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update" \
                and any(k.arg == "phase" for k in node.keywords):
            calls.append(node.lineno)
        if isinstance(node, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "phase" for k in node.keys):
            dicts.append(node.lineno)
    return calls, dicts


def test_the_machine_is_the_only_writer_of_a_tasks_phase():
    calls, dicts = {}, {}
    for path in (PACKAGE / "task").rglob("*.py"):
        name = str(path.relative_to(PACKAGE))
        calls[name], dicts[name] = _phase_writes(path)
    assert {n for n, lines in calls.items() if lines} == {"task/machine.py"}, calls
    assert len(calls["task/machine.py"]) == 1
    # the only dicts that name a phase: the status a task starts with (discovering) and the /health answer
    assert {n: len(lines) for n, lines in dicts.items() if lines} == {"task/status_server.py": 2}, dicts
