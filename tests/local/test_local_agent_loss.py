"""Agents lost and found on the local cluster, with the apps' unreachableStrategy.

Modelled on Marathon ``releases/1.8`` ``docs/docs/unreachable.md`` (TASK_UNREACHABLE from the
master; after ``inactiveAfterSeconds`` a replacement, after ``expungeAfterSeconds`` the instance is
forgotten and, should it come back, killed), ``state/UnreachableStrategy.scala`` (default 0/0,
``"disabled"``), ``core/condition/Condition.scala`` (``Unreachable``, ``UnreachableInactive``) and
``core/event/Events.scala`` (``unknown_instance_terminated_event``).
"""

from __future__ import annotations

import requests
from polling import alive


def _app(app_id, instances=1, **fields):
    return {"id": app_id, "cmd": "exec sleep 600", "cpus": 0.1, "mem": 32, "instances": instances, **fields}


def _by_agent(api, app_id):
    return {t["host"]: t for t in api.tasks(app_id)}


def test_a_killed_agents_tasks_turn_unreachable_and_are_replaced_elsewhere(cluster_with, wait):
    cluster, api = cluster_with(agents=3)
    api.post("/v2/apps", json=_app("/a", instances=3, constraints=[["hostname", "UNIQUE"]]))
    wait(lambda: len(api.running("/a")) == 3, what="one task per agent")
    api.wait_deployed()
    r = api.put("/v2/apps/a", json={"constraints": [["hostname", "MAX_PER", "2"]]})  # room for a replacement
    assert r.status_code == 200
    api.wait_deployed()
    tasks = wait(lambda: (lambda t: t if len(t) == 3 else None)(api.running("/a")), what="the restarted tasks")
    lost = next(t for t in tasks if t["host"] == "127.0.0.2")
    pid = cluster.call(lambda: cluster._rt.state.find_task(lost["id"]).pid)
    before = len(cluster.events("status_update_event"))
    assert cluster.kill_agent("agent-2") == [lost["id"]]
    wait(lambda: not alive(pid), what="the dead agent's process to be gone")
    updates = [e for e in cluster.events("status_update_event")[before:] if e["taskId"] == lost["id"]]
    assert updates[0]["taskStatus"] == "TASK_UNREACHABLE" and updates[0]["host"] == "127.0.0.2"
    conditions = lambda: [e["condition"] for e in cluster.events("instance_changed_event")  # noqa: E731
                          if e["instanceId"] in lost["id"]]
    wait(lambda: conditions()[-2:] == ["Unreachable", "UnreachableInactive"],  # default strategy 0/0: at once
         what=f"Unreachable then UnreachableInactive (so far {conditions()})")
    # replaced on another agent; the lost task is expunged (default expungeAfterSeconds 0)
    running = wait(lambda: (lambda t: t if len(t) == 3 else None)(api.running("/a")), what="the replacement")
    assert "127.0.0.2" not in {t["host"] for t in running}
    assert lost["id"] not in {t["id"] for t in api.tasks("/a")}
    state = api.get("/mesos/master/state").json()
    assert state["unreachable_slaves"] == 1 and len(state["slaves"]) == 2
    assert requests.post(f"{cluster.marathon_url}/_local/agents/agent-2", json={"action": "reconnect"},
                         timeout=5).json()["agent"]["state"] == "active"
    assert api.put("/v2/apps/a", json={"instances": 4}).status_code == 200
    wait(lambda: len(api.running("/a")) == 4, what="4 tasks")
    assert "127.0.0.2" in {t["host"] for t in api.running("/a")}  # the agent that came back is used


def test_inactive_and_expunge_after_seconds_are_honoured(cluster_with, wait):
    import time

    cluster, api = cluster_with(agents=2)
    strategy = {"inactiveAfterSeconds": 2, "expungeAfterSeconds": 4}
    api.post("/v2/apps", json=_app("/s", unreachableStrategy=strategy, constraints=[["hostname", "CLUSTER",
                                                                                      "127.0.0.2"]]))
    wait(lambda: api.running("/s") and api.running("/s")[0], what="the task on agent 2")
    api.wait_deployed()
    assert api.put("/v2/apps/s", json={"constraints": []}).status_code == 200
    api.wait_deployed()
    task = wait(lambda: api.running("/s") and api.running("/s")[0], what="the task")
    lost_at = time.monotonic()
    assert cluster.kill_agent(task["host"]) == [task["id"]]
    states = wait(lambda: [t["state"] for t in api.tasks("/s")], what="the task list")
    assert states == ["TASK_UNREACHABLE"]  # counted: no replacement yet
    wait(lambda: api.running("/s"), timeout=10, what="the replacement")
    assert time.monotonic() - lost_at >= 2
    assert len(api.tasks("/s")) == 2  # the unreachable one is still known
    wait(lambda: len(api.tasks("/s")) == 1, timeout=10, what="the expunge")
    assert time.monotonic() - lost_at >= 4


def test_a_partitioned_agent_keeps_running_and_a_replaced_task_is_killed_when_it_returns(cluster_with, wait):
    cluster, api = cluster_with(agents=2)
    api.post("/v2/apps", json=_app("/p", constraints=[["hostname", "LIKE", "127.0.0.1"]]))
    wait(lambda: api.running("/p") and api.running("/p")[0], what="the task")
    api.wait_deployed()
    assert api.put("/v2/apps/p", json={"constraints": []}).status_code == 200
    api.wait_deployed()
    task = wait(lambda: api.running("/p") and api.running("/p")[0], what="the task")
    pid = cluster.call(lambda: cluster._rt.state.find_task(task["id"]).pid)
    assert cluster.agent_unreachable(task["host"]) == [task["id"]]
    replacement = wait(lambda: api.running("/p") and api.running("/p")[0], what="the replacement")
    assert replacement["host"] != task["host"] and alive(pid)  # a partition: the old one runs on
    assert api.get("/v2/apps/p").json()["app"]["tasksRunning"] == 1
    agent = next(a for a in cluster.agents() if a["hostname"] == task["host"])
    assert agent["state"] == "unreachable"
    assert api.get(f"/slave({agent['name'].split('-')[1]})/state").status_code == 404
    cluster.reconnect_agent(agent["name"])
    wait(lambda: not alive(pid), what="the expunged task to be killed when its agent is back")
    gone = cluster.events("unknown_instance_terminated_event")
    assert [e["runSpecId"] for e in gone] == ["/p"] and gone[0]["instanceId"] in task["id"]
    assert [t["id"] for t in api.running("/p")] == [replacement["id"]]


def test_a_task_whose_agent_returns_before_it_is_inactive_runs_on(cluster_with, wait):
    cluster, api = cluster_with(agents=2)
    api.post("/v2/apps", json=_app("/r", unreachableStrategy={"inactiveAfterSeconds": 300,
                                                               "expungeAfterSeconds": 600}))
    task = wait(lambda: api.running("/r") and api.running("/r")[0], what="the task")
    cluster.agent_unreachable(task["host"])
    assert [t["state"] for t in api.tasks("/r")] == ["TASK_UNREACHABLE"]
    q = api.get("/v2/queue").json()["queue"]
    assert q == []  # counted while unreachable: nothing to launch
    cluster.reconnect_agent(task["host"])
    wait(lambda: [t["id"] for t in api.running("/r")] == [task["id"]], what="the same task running again")


def test_disabled_strategy_never_replaces(cluster_with, wait):
    import time

    cluster, api = cluster_with(agents=2)
    api.post("/v2/apps", json=_app("/d", unreachableStrategy="disabled"))
    task = wait(lambda: api.running("/d") and api.running("/d")[0], what="the task")
    cluster.kill_agent(task["host"])
    time.sleep(1.5)  # give the scheduler (every 100 ms) many passes
    assert [t["state"] for t in api.tasks("/d")] == ["TASK_UNREACHABLE"]
    cluster.reconnect_agent(task["host"])  # it died: back empty, the task is gone and relaunched
    wait(lambda: api.running("/d") and api.running("/d")[0]["id"] != task["id"], what="a new task")
    failure = api.get("/v2/apps/d").json()["app"]["lastTaskFailure"]
    assert failure["state"] == "TASK_GONE" and failure["taskId"] == task["id"]


def test_agents_are_lost_and_found_over_the_admin_api(cluster_with):
    cluster, api = cluster_with(agents=2)
    base = f"{cluster.marathon_url}/_local/agents"
    assert [a["name"] for a in requests.get(base, timeout=5).json()] == ["agent-1", "agent-2"]
    r = requests.post(base, json={"resources": "cpus:2;mem:512", "attributes": "rack:r9"}, timeout=5)
    assert r.status_code == 201 and r.json()["hostname"] == "127.0.0.3" and r.json()["attributes"] == {"rack": "r9"}
    assert requests.post(base, json={"resources": "cpus:x"}, timeout=5).status_code == 422
    r = requests.post(f"{base}/agent-9", json={"action": "kill"}, timeout=5)
    assert r.status_code == 404 and "agent-9" in r.json()["message"]
    assert requests.post(f"{base}/agent-1", json={"action": "explode"}, timeout=5).status_code == 422
    r = requests.post(f"{base}/127.0.0.2", json={"action": "unreachable"}, timeout=5)
    assert r.status_code == 200 and r.json() == {"agent": {**r.json()["agent"], "state": "unreachable"},
                                                 "unreachable": []}
