"""The third-party client ``marathon`` (marathon-python 0.13) works against the local server."""

from __future__ import annotations

from marathon import MarathonClient


def test_marathon_python_client(api, make_app, wait):
    api.put("/v2/groups/job", json={"apps": [make_app("worker-0", portDefinitions=[{"port": 0, "name": "tf"}],
                                                      labels={"marathon-tf/role": "worker"}),
                                             make_app("ps-0")]})
    client = MarathonClient(api.base)
    assert client.ping().strip() in (b"pong", "pong")
    assert client.get_info().version == "1.11.0"  # the version played by default (local/versions.py)
    assert len(client.list_deployments()) >= 0
    api.wait_deployed()
    apps = client.list_apps()
    assert sorted(a.id for a in apps) == ["/job/ps-0", "/job/worker-0"]
    group = client.get_group("/job")
    assert sorted(a.id for a in group.apps) == ["/job/ps-0", "/job/worker-0"]
    tasks = client.list_tasks("/job/worker-0")
    raw = api.tasks("/job/worker-0")
    assert [t.id for t in tasks] == [t["id"] for t in raw] and tasks[0].ports == raw[0]["ports"]
    assert len(client.list_tasks()) == 2
    app = client.get_app("/job/worker-0")
    assert app.tasks_running == 1 and app.port_definitions[0].name == "tf"
    result = client.scale_app("/job/worker-0", instances=2)
    assert result["deploymentId"]
    deployments = client.list_deployments()
    assert all(d.affected_apps == ["/job/worker-0"] for d in deployments)
    wait(lambda: client.get_app("/job/worker-0").tasks_running == 2 and not client.list_deployments(),
         what="scaled")
    assert client.list_queue() == []
    assert [g.id for g in client.list_groups()] == ["/job"]
