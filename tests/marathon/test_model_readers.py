"""marathon/model.py's readers beside App and Task: the newest task, the counts, a deployment as listed."""

from marathon_tf.marathon import tasks as T
from marathon_tf.marathon.model import App, Deployment, Task, newest_task, oldest_first, wall


def _task(state, staged, started=None):
    out = {"id": f"t-{staged}", "state": state, "stagedAt": staged}
    if started:
        out["startedAt"] = started
    return out


def test_the_newest_task_is_typed_and_ordered_as_tasks_newest():
    old = _task("TASK_RUNNING", "2026-11-24T06:00:00.000Z", "2026-11-24T06:00:05.000Z")
    new = _task("TASK_STAGING", "2026-11-24T06:10:00.000Z")
    app = App({"id": "/j/worker-0", "tasks": [new, old, "x", {}]})
    assert isinstance(app.newest_task(), Task) and app.newest_task().id == "t-2026-11-24T06:10:00.000Z"
    assert app.newest_task((T.RUNNING,)).since == "2026-11-24T06:00:05.000Z"
    assert app.newest_task(("TASK_KILLING",)) is None and newest_task(None) is None
    assert [t.id for t in oldest_first(app.tasks)][-2:] == [old["id"], new["id"]]
    assert wall("1970-01-01T00:01:00.000Z") == T.wall("1970-01-01T00:01:00.000Z") == 60.0


def test_counts_and_deployments_read_as_absent_when_missing_or_of_the_wrong_type():
    assert (App({"tasksRunning": 2, "tasksStaged": 1}).tasks_running, App({"tasksStaged": 1}).tasks_staged) == (2, 1)
    assert App({"tasksRunning": "2"}).tasks_running == 0 and App({}).tasks_running == 0
    assert Deployment.parse({"id": "d1", "affectedApps": ["/j/worker-0"]}) == Deployment("d1", ("/j/worker-0",))
    assert Deployment.parse({"affectedApps": "x"}) == Deployment(None, ()) == Deployment.parse(None)
