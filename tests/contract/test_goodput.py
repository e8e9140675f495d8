"""A job's goodput from its events (contract/goodput, pure): every second of its wall time to one cause,
against runs whose truth is written down here; the save hook's lines (contract/savehook)."""

from __future__ import annotations

import pytest

from marathon_tf.contract import savehook
from marathon_tf.contract import timeline as T
from marathon_tf.contract.goodput import CAUSES, goodput

T0 = 1_000_000.0


def ev(at: float, kind: str, task: str = "worker-0", **details):
    return {"time": T0 + at, "task": task, "kind": kind, **details}


def run(*extra, end: float | None = 100.0):
    """Submitted at 0, every task running at 4, worker-0's first step at 10 (a 40 s wait for placement
    would be ``all_running`` at 40)."""
    events = [ev(0, T.SUBMITTED, "job"), ev(4, T.ALL_RUNNING, "job"), ev(5, T.PROGRAM_STARTED, restart=0),
              ev(10, T.FIRST_STEP, step=0), *extra]
    if end is not None:
        events.append(ev(end, T.JOB_ENDED, "job", state="Succeeded"))
    return events


def test_a_run_without_trouble_is_placement_start_and_training():
    good = goodput(run(), "worker-0", now=T0 + 500)
    assert good["lostSeconds"] == {"placement": 4.0, "start": 6.0, "recovery": 0.0, "retrained": 0.0,
                                   "stalled": 0.0}
    assert (good["wallSeconds"], good["trainingSeconds"], good["ratio"], good["ended"]) == (100.0, 90.0, 0.9, True)
    assert list(good["lostSeconds"]) == list(CAUSES)


def test_a_stall_and_a_recovery_with_steps_trained_again_are_each_their_cause():
    events = run(ev(30, T.STALLED, seconds=5.0, step=842),  # 25..30: no step
                 ev(50, T.PROGRAM_EXITED, code=137, step=1626, rate=100.0, stalled=0.5),  # last step at 49.5
                 ev(50.1, T.PROGRAM_STARTED, restart=1, resumed=1500),
                 ev(52, T.FIRST_STEP, step=1510))
    good = goodput(events, "worker-0", now=T0 + 500)
    lost = good["lostSeconds"]
    assert lost == {"placement": 4.0, "start": 6.0, "recovery": 2.5, "retrained": 1.26, "stalled": 5.0}
    assert good["trainingSeconds"] == pytest.approx(100 - 4 - 6 - 2.5 - 5)
    assert good["ratio"] == round((82.5 - 1.26) / 100, 4)
    (r,) = good["recoveries"]
    assert (r["seconds"], r["retrainedSteps"], r["retrainedSeconds"], r["kind"]) == (2.5, 126, 1.26, "program_exited")


def test_only_the_deciding_tasks_program_and_the_jobs_own_events_count():
    """A TF1 worker restarting while the chief trains on costs the job no wall time."""
    events = run(ev(50, T.PROGRAM_EXITED, "worker-1", code=1, step=10, rate=1.0), ev(60, T.FIRST_STEP, "worker-1"))
    assert goodput(events, "worker-0", now=T0 + 500)["lostSeconds"]["recovery"] == 0.0


def test_overlapping_causes_count_once_the_first_that_holds():
    """A hang's exit is the same recovery as the hang; a stall inside a recovery is the recovery's."""
    events = run(ev(40, T.HANG, step=900, rate=10.0, stalled=20.0),  # no step since 20
                 ev(41, T.PROGRAM_EXITED, code=143),
                 ev(30, T.STALLED, seconds=4.0),  # 26..30, within the recovery's 20..45
                 ev(41.5, T.PROGRAM_STARTED, restart=1, resumed=850),
                 ev(45, T.FIRST_STEP, step=860))
    good = goodput(events, "worker-0", now=T0 + 500)
    assert good["lostSeconds"]["recovery"] == 25.0 and good["lostSeconds"]["stalled"] == 0.0
    assert good["lostSeconds"]["retrained"] == 5.0  # (900 - 850) / 10
    assert len(good["recoveries"]) == 1


def test_a_running_job_counts_to_now_and_a_recovery_under_way_too():
    events = run(ev(50, T.PREEMPTED, code=42, step=100, rate=10.0, stalled=0.0), end=None)
    good = goodput(events, "worker-0", now=T0 + 60)
    assert (good["wallSeconds"], good["lostSeconds"]["recovery"], good["ended"]) == (60.0, 10.0, False)


def test_a_job_still_waiting_to_be_placed_is_all_placement():
    good = goodput([ev(0, T.SUBMITTED, "job")], "worker-0", now=T0 + 30)
    assert good["lostSeconds"]["placement"] == 30.0 and good["ratio"] == 0.0


def test_an_elastic_job_whose_standby_still_waits_is_placed_once_its_minimum_trains():
    """Issue 43, item 3: an elastic job's minimum was placed in about 9 s and its program started; the rest until
    its first step was TensorFlow's import, but goodput said ``placement 1m03s, start 0s`` (every task running
    only came when the standby was placed, after the first step). The program's start ends the placement."""
    events = [ev(0, T.SUBMITTED, "job"), ev(6, T.TASK_STARTED), ev(9, T.PROGRAM_STARTED, restart=0),
              ev(63, T.FIRST_STEP, step=0), ev(120, T.ALL_RUNNING, "job"), ev(130, T.GREW, "job"),
              ev(200, T.JOB_ENDED, "job", state="Succeeded")]
    lost = goodput(events, "worker-0", now=T0 + 500)["lostSeconds"]
    assert (lost["placement"], lost["start"]) == (9.0, 54.0)


def test_an_earlier_deployments_events_are_left_out_and_nothing_known_is_none():
    old = [ev(-500, T.SUBMITTED, "job"), ev(-400, T.PROGRAM_EXITED, code=1, step=5, rate=1.0)]
    assert goodput(old + run(), "worker-0", now=T0 + 500)["lostSeconds"]["recovery"] == 0.0
    assert goodput([], "worker-0", now=T0) is None


def test_a_deciding_task_relaunched_without_a_word_of_its_end_recovers_from_its_new_start():
    events = run(ev(50, T.TASK_STARTED), ev(58, T.FIRST_STEP, step=400))
    assert goodput(events, "worker-0", now=T0 + 500)["lostSeconds"]["recovery"] == 8.0


def test_the_save_hooks_lines():
    assert savehook.parse("marathon-tf save-hook: ready\n") == savehook.READY
    line = savehook.saved_line(3012, "ckpt/model.ckpt-3012")
    assert line == "marathon-tf save-hook: saved step=3012 path=ckpt/model.ckpt-3012"
    assert savehook.parse(line + "\n") == savehook.Saved(3012, "ckpt/model.ckpt-3012")
    assert savehook.parse("marathon-tf save-hook: saved step=7") == savehook.Saved(7, None)
    assert savehook.parse("step=3 loss=1.0") is None and savehook.parse("marathon-tf save-hook: what") is None
    assert savehook.SIGNAL.name == "SIGUSR1"


def test_the_timeline_shows_every_save_round_and_the_recovery_it_came_before():
    events = run(ev(40, T.SAVE_ROUND, reason="ps-0 is stopped", hold=True),
                 ev(40.2, T.SAVED, step=3059, path="ckpt/model.ckpt-3059", seconds=0.2),
                 ev(41, T.PROGRAM_EXITED, code=137), ev(45, T.PROGRAM_STARTED, restart=1), ev(47, T.FIRST_STEP),
                 ev(60, T.SAVE_ROUND, reason="marathon-tf checkpoint", hold=False),
                 ev(61, T.SAVE_FAILED, message="the program did not say it saved within 60.0 s"))
    tl = T.timeline(events)
    assert [(s["reason"], s["outcome"], s.get("step"), s["seconds"]) for s in tl["saves"]] == [
        ("ps-0 is stopped", "saved", 3059, 0.2), ("marathon-tf checkpoint", "failed", None, 1.0)]
    assert tl["recoveries"][0]["savedStep"] == 3059
    assert T.REASONS[T.SAVED] == "Saved" and T.REASONS[T.STALLED] == "Stalled"
