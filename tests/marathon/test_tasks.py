"""marathon/tasks.py: the newest task, its ports by name, Marathon's timestamps (one definition each).

Shapes as Marathon 1.4–1.11 write them (``docs/docs/rest-api/public/api/v2/types/task.raml``; examples in
/work/shared/marathon-api/examples/*/apps*.json): ``startedAt`` is absent until the task runs.
"""

from marathon_tf.marathon import tasks as T
from marathon_tf.marathon.model import newest_task

APP = {"id": "/j/worker-0", "portDefinitions": [{"port": 0, "name": "tf"}, {"port": 0, "name": "status"}]}


def task(state, staged, started=None, ports=(31000, 31001), host="a1"):
    out = {"id": f"t-{staged}", "state": state, "stagedAt": staged, "host": host, "ports": list(ports)}
    if started:
        out["startedAt"] = started
    return out


def test_newest_prefers_the_latest_start_and_counts_a_staged_task_by_its_staging():
    old = task("TASK_RUNNING", "2026-11-24T06:00:00.000Z", "2026-11-24T06:00:05.000Z")
    new = task("TASK_STAGING", "2026-11-24T06:10:00.000Z")
    assert newest_task([old, new]).id == new["id"]
    assert newest_task([old, new], (T.RUNNING,)).id == old["id"]
    assert T.newest_running({"tasks": [new]}) is None
    # the order of the list does not matter; a task started later wins over one staged later but started earlier
    a = task("TASK_RUNNING", "2026-11-24T06:00:00.000Z", "2026-11-24T06:09:00.000Z")
    b = task("TASK_RUNNING", "2026-11-24T06:01:00.000Z", "2026-11-24T06:02:00.000Z")
    assert newest_task([a, b]).id == newest_task([b, a]).id == a["id"]


def test_newest_skips_entries_that_are_not_tasks():
    assert newest_task([None, "x", {"state": None}, {}]) is None
    assert newest_task(None) is None


def test_ports_are_found_by_name_in_port_definitions_or_port_mappings():
    t = task("TASK_RUNNING", "2026-11-24T06:00:00.000Z", "2026-11-24T06:00:01.000Z")
    assert T.task_port(APP, t, "status") == 31001
    assert T.task_address(APP, t, "tf") == "a1:31000"
    assert T.task_url(APP, t, "status", "/status") == "http://a1:31001/status"
    assert T.task_port(APP, t, "nope") is None and T.task_url(APP, t, "nope") is None
    assert T.task_port(APP, {**t, "ports": [31000]}, "status") is None  # not given yet
    bridged = {"container": {"portMappings": [{"containerPort": 2222, "hostPort": 0, "name": "tf"}]}}
    assert T.task_port(bridged, t, "tf") == 31000
    # a container network without host ports: the container port at the task's own IP
    cni = {"container": {"portMappings": [{"containerPort": 2222, "name": "tf"}]}}
    ip = {**t, "ports": [], "ipAddresses": [{"ipAddress": "10.0.0.7", "protocol": "IPv4"}]}
    assert T.task_address(cni, ip, "tf", container_network=True) == "10.0.0.7:2222"
    assert T.task_address(cni, ip, "tf") == "a1:2222"


def test_timestamps():
    assert T.wall("1970-01-01T00:01:00.000Z") == 60.0
    assert T.wall("1970-01-01T00:01:00") == 60.0  # no zone: UTC
    assert T.wall("yesterday") is None and T.wall(None) is None and T.wall(5) is None
    assert T.age("1970-01-01T00:01:00.000Z", now=lambda: 100.04) == 40.0
    assert T.age("1970-01-01T00:01:00.000Z", now=lambda: 10.0) == 0.0
