"""The job's record in Marathon (marathon_tf.marathon.record): finish_job against a fake Marathon
(pytest-httpserver), and which task failures mean a task can never start."""

import pytest

from marathon_tf.contract import labels as L
from marathon_tf.marathon.record import finish_job, hopeless_failures, hopeless_task_failure


def test_finish_job_one_get_and_one_bulk_put_with_force(fake_marathon):
    fake_marathon.add_app("ps", 0)
    fake_marathon.add_app("worker", 0, labels={L.SPEC: '{"name": "mnist"}', L.DIGEST: "0123456789abcdef"})
    fake_marathon.add_app("worker", 1)
    wrote = finish_job(fake_marathon.client(), "ml/mnist", L.SUCCEEDED, reason="worker-0 finished",
                       final_step=300, now=lambda: 1_700_000_000.25)
    assert wrote
    assert [c[0] for c in fake_marathon.calls] == ["GET", "PUT"]
    method, path, query, body = fake_marathon.puts()[0]
    assert path == "/v2/apps" and query == {"force": ["true"]}
    assert [item["id"] for item in body] == ["/ml/mnist/ps-0", "/ml/mnist/worker-0", "/ml/mnist/worker-1"]
    record = {L.STATE: "Succeeded", L.FINISHED_AT: "2023-11-14T22:13:20.250Z", L.FINAL_STEP: "300",
              L.REASON: "worker-0 finished"}
    for item in body:
        assert item["instances"] == 0 and set(item) == {"id", "instances", "labels"}
        assert all(isinstance(v, str) for v in item["labels"].values())
        assert item["labels"][L.JOB] == "ml/mnist" and {k: item["labels"][k] for k in record} == record
    assert body[1]["labels"][L.SPEC] == '{"name": "mnist"}'  # existing labels are kept
    assert L.DIGEST not in body[1]["labels"]  # but not the deploy's digest: the definition changes


def test_finish_job_does_not_overwrite_an_existing_record(fake_marathon):
    fake_marathon.add_app("worker", 0, labels={L.STATE: "Failed", L.REASON: "first"})
    assert not finish_job(fake_marathon.client(), "ml/mnist", L.SUCCEEDED, reason="late", final_step=1)
    assert fake_marathon.puts() == []


def test_finish_job_retries_transient_errors_and_rejects_unknown_states(fake_marathon):
    fake_marathon.add_app("worker", 0)
    fake_marathon.fail_puts = 2
    assert finish_job(fake_marathon.client(), "ml/mnist", L.FAILED, reason="r", final_step=None)
    assert len(fake_marathon.puts()) == 3
    assert L.FINAL_STEP not in fake_marathon.apps["/ml/mnist/worker-0"]["labels"]
    with pytest.raises(ValueError):
        finish_job(fake_marathon.client(), "ml/mnist", "Done", reason="r", final_step=1)


def test_hopeless_task_failures():
    assert hopeless_task_failure("Command exited with status 127: /bin/sh: 1: exec: tb: not found")
    assert hopeless_task_failure("Command exited with status 126")
    assert hopeless_task_failure("volume ckpt: hostPath /x is not a directory")
    assert not hopeless_task_failure("Command exited with status 1")
    assert not hopeless_task_failure("Command exited with status 1270")
    assert not hopeless_task_failure("Command terminated with signal Killed")


def test_hopeless_failures_of_a_group():
    group = {"apps": [
        {"id": "/j/tensorboard-0", "version": "2", "tasks": [],
         "lastTaskFailure": {"message": "Command exited with status 127", "version": "2"}},
        {"id": "/j/worker-0", "version": "2", "tasks": [{"state": "TASK_RUNNING"}],
         "lastTaskFailure": {"message": "Command exited with status 127", "version": "2"}},  # running again
        {"id": "/j/worker-1", "version": "3", "tasks": [],
         "lastTaskFailure": {"message": "Command exited with status 127", "version": "2"}},  # an older version's
        {"id": "/j/ps-0", "version": "2", "tasks": [],
         "lastTaskFailure": {"message": "Command exited with status 1", "version": "2"}},
    ]}
    assert hopeless_failures(group) == [("tensorboard-0", "Command exited with status 127")]


def test_release_job_records_not_placed_with_the_next_attempt_and_the_backoff_doubles_with_jitter(fake_marathon):
    import random

    from marathon_tf.marathon.record import MAX_BACKOFF, next_attempt_delay, release_job

    fake_marathon.add_app("ps", 0)
    fake_marathon.add_app("worker", 0, labels={L.ATTEMPT: "2"})
    labels = release_job(fake_marathon.client(), "ml/mnist", "worker: 0/1 placed; 1 waiting", attempts=4,
                         backoff=10, now=lambda: 1_700_000_000.0, rng=random.Random(1))
    assert labels[L.ATTEMPT] == "2" and labels[L.ATTEMPTS] == "4"
    _, _, _, body = fake_marathon.puts()[0]
    assert {item["instances"] for item in body} == {0}
    assert {item["labels"][L.STATE] for item in body} == {L.NOT_PLACED}
    assert {item["labels"][L.NEXT_ATTEMPT_AT] for item in body} == {labels[L.NEXT_ATTEMPT_AT]}
    assert release_job(fake_marathon.client(), "ml/mnist", "again", attempts=4, backoff=10) is None  # it has a record
    rng = random.Random(7)
    for attempt, base in ((1, 10), (2, 20), (3, 40)):
        delays = [next_attempt_delay(attempt, 10, rng) for _ in range(200)]
        assert base * 0.5 <= min(delays) < base * 0.6 and base * 1.4 < max(delays) <= base * 1.5
    assert next_attempt_delay(30, 10, rng) <= MAX_BACKOFF


def test_release_job_with_no_attempt_left_says_no_next_attempt(fake_marathon):
    from marathon_tf.marathon.record import release_job

    fake_marathon.add_app("worker", 0)
    labels = release_job(fake_marathon.client(), "ml/mnist", "worker: 0/1 placed; 1 waiting", attempts=1, backoff=10)
    assert labels == {L.ATTEMPT: "1", L.ATTEMPTS: "1"}
