"""A job's timeline from its events (contract/timeline): the start's phases in time order with
non-negative durations, and every recovery: cause → restarted → training again."""

from __future__ import annotations

import json

from marathon_tf.contract import timeline as T


def ev(t, task, kind, message="", **kw):
    return {"time": t, "task": task, "kind": kind, **({"message": message} if message else {}), **kw}


START = [
    ev(100.0, "job", T.SUBMITTED, "deployed", version="v1"),
    ev(101.0, "ps-0", T.TASK_STARTED), ev(101.2, "worker-0", T.TASK_STARTED), ev(101.5, "worker-1", T.TASK_STARTED),
    ev(101.6, "job", T.ALL_RUNNING), ev(103.0, "job", T.DEPLOYED),
    ev(101.7, "worker-0", T.PEERS_FOUND), ev(101.9, "ps-0", T.PEERS_FOUND), ev(102.0, "worker-1", T.PEERS_FOUND),
    ev(104.0, "ps-0", T.SERVER_UP), ev(104.5, "worker-0", T.SERVER_UP), ev(104.2, "worker-1", T.SERVER_UP),
    ev(105.0, "worker-0", T.FIRST_STEP, step=0), ev(105.5, "worker-1", T.FIRST_STEP, step=40),
]


def test_the_start_has_every_phase_in_time_order_with_durations_that_add_up():
    start = T.timeline(START)["start"]
    assert [p["phase"] for p in start] == ["submitted", "every task running", "cluster spec complete",
                                            "deployment done", "every TF server up", "first step"]
    assert [p["seconds"] for p in start] == [0.0, 1.6, 0.4, 1.0, 1.5, 0.5]
    assert all(p["seconds"] >= 0 for p in start) and start[-1]["sinceStart"] == 5.0
    assert start[0]["at"] == "1970-01-01T00:01:40.000Z"


def test_recoveries_cause_restart_training_again():
    events = START + [
        # worker-1's program killed: restarted in place
        ev(200.0, "worker-1", T.PROGRAM_EXITED, "training program exited with 137 (failure 1 of at most 5 in "
           "600 s); restarting it in place: Killed", code=137),
        ev(201.0, "worker-1", T.PROGRAM_STARTED, restart=1),
        ev(204.0, "worker-1", T.FIRST_STEP, step=900),
        # worker-0 hangs: the watchdog's stop is the same failure
        ev(300.0, "worker-0", T.HANG, "no progress for 120 s since step 1000; waiting for ps-0 (its TF server does "
           "not answer)", peer="ps-0"),
        ev(301.0, "worker-0", T.PROGRAM_EXITED, "training program exited with 143 …", code=143),
        ev(302.0, "worker-0", T.PROGRAM_STARTED, restart=1),
        # ps-0 exits, Marathon says so too, and relaunches it: a new bootstrap starts
        ev(400.0, "ps-0", T.PROGRAM_EXITED, "exiting so Marathon relaunches the task", code=1),
        ev(400.5, "ps-0", T.TASK_FAILED, "Marathon: TASK_FAILED exited with 1"),
        ev(410.0, "ps-0", T.TASK_STARTED),
        ev(500.0, "worker-1", T.PROGRAM_EXITED, code=0),  # a success is no recovery
    ]
    recoveries = T.timeline(events)["recoveries"]
    assert [(r["task"], r.get("code"), r.get("how")) for r in recoveries] == [
        ("worker-1", 137, "in place"), ("worker-0", 143, "in place"), ("ps-0", 1, "relaunched by Marathon")]
    killed, hung, ps = recoveries
    assert killed["cause"].startswith("training program exited with 137")
    assert (killed["secondsToRestart"], killed["secondsToTraining"], killed["seconds"]) == (1.0, 3.0, 4.0)
    assert hung["peer"] == "ps-0" and "waiting for ps-0" in hung["cause"] and "trainingAgain" not in hung
    assert ps["secondsToRestart"] == 10.0


def test_the_timeline_is_the_current_deployments_and_merge_drops_duplicates():
    earlier = [ev(10.0, "job", T.SUBMITTED), ev(11.0, "worker-0", T.FIRST_STEP),
               ev(12.0, "worker-0", T.PROGRAM_EXITED, "old failure", code=1)]
    tl = T.timeline(earlier + START + START)  # the same events from two sources
    assert tl["start"][0]["at"] == T.iso(100.0) and tl["recoveries"] == []
    assert len(T.merge(START, START)) == len(START)


def test_the_records_events_fit_a_label_and_say_how_many_were_left_out():
    many = START + [ev(1000.0 + i, "worker-1", T.PROGRAM_EXITED, "x" * 200, code=1) for i in range(400)]
    text = T.compact(many, limit=8 * 1024)
    assert len(text.encode()) <= 8 * 1024
    events, omitted = T.expand(text)
    assert omitted > 0 and len(events) + omitted == len(many)
    assert [e["kind"] for e in events[: len(START)]] == [e["kind"] for e in T.merge(START)]  # the start is kept
    assert events[-1]["time"] == 1399.0  # and the newest
    assert T.expand(T.compact(START)) == (T.merge(START), 0)
    assert T.expand("not json") == ([], 0) and json.loads(T.compact([])) == []


def test_a_tasks_events_of_one_millisecond_are_in_the_order_of_its_life():
    from marathon_tf.contract import timeline as T

    t = 100.0
    events = [{"time": t, "task": "w", "kind": k} for k in (T.FIRST_STEP, T.PROGRAM_STARTED, T.SERVER_UP,
                                                            T.RESTARTING)]
    assert [e["kind"] for e in T.merge(events)] == [T.RESTARTING, T.PROGRAM_STARTED, T.SERVER_UP, T.FIRST_STEP]
    assert set(T.KINDS) == set(T._LIFE)


def test_a_task_that_never_steps_trains_again_with_the_job_and_a_job_that_ended_says_so():
    """Issue 43, item 4: after a ParameterServerStrategy scale, `--timeline` showed `→ not training yet` for the
    ps and workers of a job that Succeeded: only the coordinator prints steps. Such a task trains again with
    the job (the first step of any task after its restart); a recovery the job's end came before says so."""
    from marathon_tf.user import output

    events = [ev(100.0, "job", T.SUBMITTED), ev(105.0, "chief-0", T.FIRST_STEP, step=0),
              ev(200.0, "ps-0", T.RESTARTING, "training program stopped for scale", why="scale"),
              ev(200.0, "chief-0", T.RESTARTING, "training program stopped for scale", why="scale"),
              ev(203.0, "ps-0", T.PROGRAM_STARTED, restart=1), ev(203.5, "chief-0", T.PROGRAM_STARTED, restart=1),
              ev(208.0, "chief-0", T.FIRST_STEP, step=500),
              ev(300.0, "worker-0", T.RESTARTING, "training program stopped for a peer that moved", why="peer_moved"),
              ev(301.0, "worker-0", T.PROGRAM_STARTED, restart=2),
              ev(302.0, "job", T.JOB_ENDED, "Succeeded: the chief finished", state="Succeeded")]
    recoveries = {r["task"]: r for r in T.timeline(events)["recoveries"]}
    ps, chief, worker = recoveries["ps-0"], recoveries["chief-0"], recoveries["worker-0"]
    assert (ps["secondsToTraining"], ps["trainedBy"], ps["seconds"]) == (5.0, "chief-0", 8.0)
    assert chief["secondsToTraining"] == 4.5 and "trainedBy" not in chief  # it steps itself
    assert "trainingAgain" not in worker and worker["jobEnded"] == T.iso(302.0)
    text = output.timeline_text(T.timeline(events))
    assert "not training yet" not in text and "→ the job ended before it trained again" in text
    assert "training again after 5.0s (8.0s in all; chief-0's step: ps-0 prints none)" in text
