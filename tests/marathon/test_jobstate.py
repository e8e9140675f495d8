"""One reading of a job's state (marathon/jobstate.py) and of Marathon's queue (marathon/queue.py)."""

from __future__ import annotations

import pytest

from marathon_tf.contract import labels as L
from marathon_tf.contract.plan import StopReason
from marathon_tf.marathon import queue as Q
from marathon_tf.marathon.jobstate import job_labels, job_state, stored_spec, task_state

RUN = {"state": "TASK_RUNNING", "startedAt": "2026-01-01T00:00:10.000Z"}
STAGED = {"state": "TASK_STAGING", "stagedAt": "2026-01-01T00:00:20.000Z"}


def app(*tasks, instances=1, deployments=(), **labels):
    return {"id": "/j/worker-0", "instances": instances, "tasks": list(tasks),
            "deployments": [{"id": d} for d in deployments],
            "labels": {L.PREFIX + k.replace("_", "-"): v for k, v in labels.items()}}


@pytest.mark.parametrize("apps, state", [
    ([app(RUN, state="Succeeded"), app(instances=0, state="Succeeded")], "Succeeded"),
    ([app(instances=0, state="Failed")], "Failed"),
    ([app(instances=0, state="NotPlaced")], "NotPlaced"),
    ([app(instances=0, state="NotPlaced", next_attempt_at="2026-01-01T00:01:00.000Z")], "Queued"),
    ([app(instances=0), app(instances=0)], "Stopped"),
    ([app(RUN), app(RUN)], "Running"),
    ([app(RUN), app(deployments=["d1"])], "Deploying"),
    ([app(RUN), app()], "Starting"),
    ([app(RUN, STAGED)], "Starting"),  # the newest task is the relaunch, staging
    ([], "Starting"),
])
def test_a_jobs_state_from_its_record_else_its_apps(apps, state):
    assert job_state(apps) == state and job_state(apps).value == state
    assert job_state(apps).ended == (state in ("Succeeded", "Failed", "NotPlaced", "Stopped"))


def test_without_embedded_tasks_the_counts_say_the_same():
    listed = [{"id": "/j/worker-0", "instances": 1, "tasksRunning": 1, "deployments": []},
              {"id": "/j/ps-0", "instances": 1, "tasksRunning": 1, "deployments": []}]
    assert job_state(listed) == "Running"
    listed[1] = {"id": "/j/ps-0", "instances": 1, "tasksRunning": 0, "tasksStaged": 1, "deployments": [{"id": "d"}]}
    assert task_state(listed[1]) == "TASK_STAGING" and job_state(listed) == "Deploying"
    assert job_state([{"instances": 0, "tasksRunning": 0}]) == "Stopped"


def test_labels_and_the_deployed_job_file():
    apps = [app(spec='{"name": "j"}', state="Failed"), app(reason="worker-1 exited 3")]
    assert job_labels(apps) == {L.SPEC: '{"name": "j"}', L.STATE: "Failed", L.REASON: "worker-1 exited 3"}
    assert stored_spec(apps) == {"name": "j"} and stored_spec([app(spec="{")]) == {} and stored_spec([]) == {}


def test_queue_reasons_delays_and_words():
    declined = {"since": "2026-01-01T00:00:00.000Z", "processedOffersSummary": {"processedOffersCount": 3,
                "rejectSummaryLastOffers": [{"reason": "InsufficientMemory", "declined": 3, "processed": 3}]}}
    assert Q.stall_reason(declined) == "no offer with enough mem (3 of 3 offers declined)"
    assert Q.placement(declined) == "not placed: InsufficientMemory (3 of 3 offers declined)"
    idle = {"since": "2026-01-01T00:00:00.000Z", "processedOffersSummary": {"processedOffersCount": 0}}
    assert Q.stall_reason(idle) == "no offers received since 2026-01-01T00:00:00.000Z"
    assert Q.stall_reason(idle, local=True) == "launch by the local runner (queued since 2026-01-01T00:00:00.000Z)"
    assert Q.stall_reason(None) is None and Q.placement(None) is None
    assert Q.launch_delay({"delay": {"overdue": False, "timeLeftSeconds": 12}}) == 12
    assert Q.launch_delay({"delay": {"overdue": True, "timeLeftSeconds": 0}}) is None and Q.launch_delay({}) is None
    delayed = {"delay": {"overdue": False, "timeLeftSeconds": 12}}
    assert Q.placement(delayed) == "delayed 12s (Marathon's launch backoff)"
    assert set(Q.RESOURCES) < set(Q.WORDS) and Q.WORDS["UnfulfilledConstraint"] == "constraints"


def test_a_new_configuration_restarts_a_task_but_a_placement_move_does_not():
    """``restarting``: a task of an older configuration is being restarted while a deployment names its
    app; not when the job's placement wrote the change to move or hold that very task (its label's
    ``off``, marathon_tf.task.placer), which is a placement wait that status shows with its rule."""
    from marathon_tf.contract import spread
    from marathon_tf.marathon.jobstate import planned_stop, restarting

    def with_(task, ltf=None, off=None):
        out = {"id": "/j/worker-1", "instances": 1, "deployments": [{"id": "d1"}],
               "versionInfo": {"lastConfigChangeAt": "2026-11-28T10:00:05.000Z"},
               "tasks": [task] if task else [], "labels": {}}
        if ltf:
            out["lastTaskFailure"] = ltf
        if off is not None:
            out["labels"][spread.LABEL] = spread.label_value((("hostname", "UNLIKE", "h1"),), "away", off)
        return out

    old = {"id": "t1", "version": "2026-11-28T10:00:00.000Z", "state": "TASK_RUNNING"}
    killed = {"taskId": "t1", "version": old["version"], "state": "TASK_KILLED"}
    assert restarting(with_(old)) == old["version"]
    assert restarting(with_(None, killed)) == old["version"]
    assert restarting(with_(old, off="t1")) is None
    assert restarting(with_(None, killed, off="t1")) is None
    assert restarting(with_(old, off="t0")) == old["version"]  # an earlier move of another task
    assert planned_stop(with_(None, killed, off="t1"), old["version"]) is StopReason.NEW_CONFIGURATION
    assert spread.displaced({"labels": {spread.LABEL: "not json"}}) is None
    # nothing moved, a failure without a task id (as some versions write it): still the restart
    assert restarting(with_(None, {k: v for k, v in killed.items() if k != "taskId"})) == old["version"]
