"""Finite agents on the local cluster: placement, the queue's reasons, GPUs, Mesos's endpoints.

What is modelled, and where it comes from:

* ``/v2/queue`` (Marathon ``releases/1.8`` ``raml/QueueInfoConversion.scala``,
  ``core/launchqueue/impl/OfferMatchStatistics.scala``, ``core/launchqueue/LaunchStats.scala``;
  its example ``tests/data/marathon-examples/1.8/queue.json``): ``count``, ``delay``,
  ``since``, ``processedOffersSummary`` with both reject summaries as the whole funnel
  (``NoOfferMatchReason.reasonFunnel``: one reason per declined offer, the first; ``processed``
  is what the reasons before it left), ``lastUnusedOffers`` only with ``embed=lastUnusedOffers``.
* GPUs: Mesos's GPU isolator (apache/mesos ``src/slave/containerizer/mesos/isolators/gpu/
  isolator.cpp``, ``allocator.cpp``) hands each container whole GPUs of the agent and lets it open
  only those devices (devices cgroup); it sets no variable. The local runner cannot use cgroups, so
  it shows the same set to CUDA with ``CUDA_VISIBLE_DEVICES`` (and ``NVIDIA_VISIBLE_DEVICES``, what
  the NVIDIA container runtime reads); a task without GPUs on an agent with GPUs sees none.
* ``/v2/info`` ``features`` and the 422 of a GPU app without ``gpu_resources`` (Marathon
  ``api/v2/Validation.scala`` ``featureEnabled``, ``api/v2/validation/AppValidation.scala``
  ``complyWithGpuRules``).
* ``/mesos/master/slaves`` and an agent's ``/slave(N)/state`` (apache/mesos
  ``src/master/readonly_handler.cpp`` ``SlaveWriter``/``SlavesWriter``, ``src/slave/http.cpp``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import requests

from marathon_tf.local.agents import Agents, per_agent
from marathon_tf.mesos.placement import REASON_FUNNEL
from marathon_tf.mesos.resources import Resource

SMALL = "cpus:1;mem:512;disk:1000;ports:[33100-33199]"
# 1.11's own example: the entries carry the 1.9+ ``role`` (M@1.11:docs/docs/rest-api/public/api/v2/types/queue.raml
# QueueObject.role; M@1.11:src/main/scala/mesosphere/marathon/raml/QueueInfoConversion.scala: info.role)
EXAMPLE = json.loads((Path(__file__).parents[1] / "data" / "marathon-examples" / "1.11" / "queue.json").read_text())
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def _app(app_id, cmd="sleep 600", **fields):
    return {"id": app_id, "cmd": cmd, "cpus": 0.1, "mem": 32, "instances": 1, **fields}


def queue(api, embed=False):
    r = api.get("/v2/queue", params={"embed": "lastUnusedOffers"} if embed else None)
    assert r.status_code == 200
    return {q["app"]["id"]: q for q in r.json()["queue"]}


def funnel_of(processed, declined):
    """The whole funnel as Marathon writes it, for ``declined`` = {reason: n}."""
    out = []
    for reason in REASON_FUNNEL:
        out.append({"reason": reason, "declined": declined.get(reason, 0), "processed": processed})
        processed -= declined.get(reason, 0)
    return out


def sandbox_of(cluster, task):
    roots = {a["id"]: Path(a["sandboxes"]) for a in cluster.agents()}
    return roots[task["slaveId"]] / task["id"]


def test_a_job_that_fits_nowhere_waits_with_the_queues_reasons(cluster_with, wait):
    cluster, api = cluster_with(agents=3, agent_resources=[SMALL])
    for spec in (_app("/big", cpus=2), _app("/fat", cpus=0.5, mem=1024), _app("/both", cpus=2, mem=1024),
                 _app("/fits", cpus=0.5)):
        assert api.post("/v2/apps", json=spec).status_code == 201
    wait(lambda: api.running("/fits"), what="the app that fits")
    q = wait(lambda: (lambda q: q if all(q.get(a, {}).get("processedOffersSummary", {}).get("processedOffersCount")
                                         for a in ("/big", "/fat", "/both")) else None)(queue(api)),
             what="offers processed for the three waiting apps")
    assert set(q) == {"/big", "/fat", "/both"}  # /fits is launched: not in the queue
    big = q["/big"]
    assert big["count"] == 1 and big["delay"] == {"timeLeftSeconds": 0, "overdue": True} and TS.match(big["since"])
    assert big["role"] == "*"  # the app's role, else --mesos_role's default (1.9+)
    summary = big["processedOffersSummary"]
    assert summary["rejectSummaryLastOffers"] == funnel_of(3, {"InsufficientCpus": 3})  # one offer per agent
    n = summary["processedOffersCount"]
    assert n % 3 == 0 and summary["unusedOffersCount"] == n and TS.match(summary["lastUnusedOfferAt"])
    assert summary["rejectSummaryLaunchAttempt"] == funnel_of(n, {"InsufficientCpus": n})
    assert "lastUnusedOffers" not in big
    assert q["/fat"]["processedOffersSummary"]["rejectSummaryLastOffers"] == funnel_of(3, {"InsufficientMemory": 3})
    # both short: every reason is kept on the offer, one (the funnel's first) is counted
    assert q["/both"]["processedOffersSummary"]["rejectSummaryLastOffers"] == funnel_of(3, {"InsufficientCpus": 3})
    offers = queue(api, embed=True)["/both"]["lastUnusedOffers"]
    agents = cluster.agents()
    assert sorted(o["offer"]["agentId"] for o in offers) == sorted(a["id"] for a in agents)
    for o in offers:
        assert o["reason"] == ["InsufficientCpus", "InsufficientMemory"] and TS.match(o["timestamp"])
        assert o["offer"]["hostname"] in {a["hostname"] for a in agents}
        names = {r["name"] for r in o["offer"]["resources"]}
        assert {"cpus", "mem", "disk", "ports"} <= names and all(r["role"] == "*" for r in o["offer"]["resources"])
    # each offer as Marathon releases/1.8 src/main/scala/mesosphere/marathon/raml/OfferConversion.scala writes it
    example = EXAMPLE["queue"][1]  # the same keys as Marathon's own example
    assert set(queue(api, embed=True)["/both"]) == set(example)
    assert set(summary) == set(example["processedOffersSummary"]) - {"lastUsedOfferAt"}  # none used yet
    assert set(offers[0]["offer"]) == set(example["lastUnusedOffers"][0]["offer"])
    assert [d["affectedApps"] for d in api.deployments()].count(["/big"]) == 1  # its deployment waits


def test_status_says_why_a_task_of_a_job_waits(cluster_with, wait):
    from marathon_tf.marathon.client import Client
    from marathon_tf.user.render import render_group
    from marathon_tf.user.spec import load_dict
    from marathon_tf.user.status import job_status

    cluster, api = cluster_with(agents=3, agent_resources=[SMALL])
    spec = load_dict({"name": "big", "command": "sleep 600",
                      "roles": {"ps": {"count": 1, "cpus": 0.5, "mem": 128},
                                "worker": {"count": 2, "cpus": 4, "mem": 128}}})
    group = render_group(spec)
    for a in group["apps"]:
        a["cmd"] = "sleep 600"  # no bootstrap: only placement matters here
    assert api.put("/v2/groups/big", json=group).status_code == 200
    wait(lambda: api.running("/big/ps-0"), what="ps-0")
    st = wait(lambda: (lambda s: s if all(t.get("waitingFor", "").startswith("no offer")
                                          for t in s["tasks"] if t["role"] == "worker") else None)(
        job_status(Client(cluster.marathon_url), "big").to_dict()), what="the workers' reasons")
    workers = [t for t in st["tasks"] if t["role"] == "worker"]
    assert [t["waitingFor"] for t in workers] == ["no offer with enough cpus (3 of 3 offers declined)"] * 2


def test_hostname_unique_with_more_instances_than_agents_leaves_the_rest_waiting(cluster_with, wait):
    cluster, api = cluster_with(agents=3)  # machine-sized agents: only the constraint limits
    api.post("/v2/apps", json=_app("/spread", instances=5, constraints=[["hostname", "UNIQUE"]]))
    running = wait(lambda: (lambda t: t if len(t) == 3 else None)(api.running("/spread")), what="3 running")
    assert sorted(t["host"] for t in running) == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    q = wait(lambda: (lambda q: q.get("/spread") if q.get("/spread", {}).get("processedOffersSummary", {})
                      .get("unusedOffersCount") else None)(queue(api)), what="the queue entry")
    assert q["count"] == 2
    assert q["processedOffersSummary"]["rejectSummaryLastOffers"] == funnel_of(3, {"UnfulfilledConstraint": 3})
    assert len(api.tasks("/spread")) == 3
    new = cluster.add_agent()  # a new agent is used at once
    wait(lambda: len(api.running("/spread")) == 4, what="the 4th instance on the new agent")
    assert new["hostname"] in {t["host"] for t in api.running("/spread")}
    assert queue(api)["/spread"]["count"] == 1


def test_attribute_constraints_spread_over_racks(cluster_with, wait):
    cluster, api = cluster_with(agents=4, agent_attributes=["rack:r1|rack:r2"])
    api.post("/v2/apps", json=_app("/racks", instances=3, constraints=[["rack", "MAX_PER", "1"]]))
    wait(lambda: len(api.running("/racks")) == 2, what="one per rack")
    by_host = {a["hostname"]: a["attributes"]["rack"] for a in cluster.agents()}
    assert sorted(by_host[t["host"]] for t in api.running("/racks")) == ["r1", "r2"]
    api.post("/v2/apps", json=_app("/grouped", instances=4, constraints=[["rack", "GROUP_BY", "2"]]))
    wait(lambda: len(api.running("/grouped")) == 4, what="4 grouped")
    assert sorted(by_host[t["host"]] for t in api.running("/grouped")) == ["r1", "r1", "r2", "r2"]
    api.post("/v2/apps", json=_app("/like", instances=2, constraints=[["hostname", "LIKE", "127\\.0\\.0\\.[34]"]]))
    wait(lambda: len(api.running("/like")) == 2, what="2 on agents 3 and 4")
    assert {t["host"] for t in api.running("/like")} <= {"127.0.0.3", "127.0.0.4"}


def test_a_task_runs_on_its_agent_address_ports_and_sandbox(cluster_with, wait):
    cluster, api = cluster_with(agents=2, agent_resources=[SMALL])
    cmd = "env > env.tmp && mv env.tmp env.txt; exec sleep 600"  # env.txt appears whole
    api.post("/v2/apps", json=_app("/a", cmd=cmd, instances=2, cpus=0.6, portDefinitions=[{"port": 0}, {"port": 0}]))
    tasks = wait(lambda: (lambda t: t if len(t) == 2 else None)(api.running("/a")), what="2 tasks")
    assert {t["host"] for t in tasks} == {"127.0.0.1", "127.0.0.2"}  # 0.6 cpus each: one per agent
    for t in tasks:
        assert all(33100 <= p <= 33199 for p in t["ports"]) and t["ipAddresses"][0]["ipAddress"] == t["host"]
        env_file = sandbox_of(cluster, t) / "env.txt"
        env = dict(line.split("=", 1) for line in wait(lambda: env_file.exists() and env_file.read_text(),
                                                          what="env.txt").splitlines() if "=" in line)
        assert env["HOST"] == t["host"] and env["PORT0"] == str(t["ports"][0])
        assert env["MESOS_SANDBOX"] == str(sandbox_of(cluster, t))
        # a task without GPUs: CUDA sees none, on agents without GPUs too (no CUDA init errors on CPU machines)
        assert env["CUDA_VISIBLE_DEVICES"] == "" and "NVIDIA_VISIBLE_DEVICES" not in env
    on2 = next(t for t in tasks if t["host"] == "127.0.0.2")
    assert "/agents/agent-2/sandboxes/" in str(sandbox_of(cluster, on2))
    state = api.get("/state").json()  # the runner's one view: every agent's sandboxes (logs, web UI)
    dirs = {e["id"]: e["directory"] for f in state["frameworks"] for e in f["executors"]}
    assert dirs[on2["id"]] == str(sandbox_of(cluster, on2))
    read = api.get("/files/read", params={"path": str(sandbox_of(cluster, on2) / "env.txt"), "offset": 0})
    assert read.status_code == 200 and "HOST=127.0.0.2" in read.json()["data"]
    from dnslib import DNSRecord

    host, port = cluster.mesos_dns.split(":")
    answer = DNSRecord.parse(DNSRecord.question("a.marathon.mesos", "A").send(host, int(port), timeout=3))
    assert sorted(str(r.rdata) for r in answer.rr) == ["127.0.0.1", "127.0.0.2"]


def _env(path: Path) -> dict:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def test_gpus_are_numbered_per_agent_and_never_handed_to_two_tasks(cluster_with, wait):
    cluster, api = cluster_with(agents=2, agent_resources=["cpus:8;mem:4096;gpus:2;ports:[33200-33299]"],
                                gpu_scheduling_behavior="unrestricted")
    cmd = "env > env.tmp && mv env.tmp env.txt; exec sleep 600"  # env.txt appears whole
    api.post("/v2/apps", json=_app("/g1", cmd=cmd, instances=3, gpus=1))
    api.post("/v2/apps", json=_app("/g0", cmd=cmd, gpus=0))

    def held(apps=("/g1", "/g2")):
        out = []
        for t in [t for a in apps for t in api.running(a)]:
            f = sandbox_of(cluster, t) / "env.txt"
            if not f.exists() or "CUDA_VISIBLE_DEVICES" not in f.read_text():
                return None
            env = _env(f)
            assert env["NVIDIA_VISIBLE_DEVICES"] == env["CUDA_VISIBLE_DEVICES"]
            out += [(t["slaveId"], int(i)) for i in env["CUDA_VISIBLE_DEVICES"].split(",")]
        return out

    def held3():
        return held(("/g3",)) or []

    wait(lambda: len(api.running("/g1")) == 3 and held() and len(held()) == 3, what="3 one-GPU tasks")
    api.post("/v2/apps", json=_app("/g2", cmd=cmd, instances=1, gpus=2))
    # 4 GPUs, 3 taken: no agent has 2. Both agents' offers reach it once Marathon has revived offers for it
    # (at most --min_revive_offers_interval, 5 s, after the last suppress/revive state; an agent declined
    # before then is filtered until that revive: marathon_tf/local/revive.py)
    q = wait(lambda: (lambda e: e if e and e["processedOffersSummary"]["rejectSummaryLastOffers"][0]["processed"] == 2
                      else None)(queue(api).get("/g2")), what="the 2-GPU task waits, both agents' offers declined")
    pairs = held()
    assert len(pairs) == len(set(pairs)) == 3
    g0 = api.running("/g0")[0]
    env = _env(wait(lambda: (sandbox_of(cluster, g0) / "env.txt").exists() and sandbox_of(cluster, g0) / "env.txt",
                    what="g0's env"))
    assert env["CUDA_VISIBLE_DEVICES"] == "" and "NVIDIA_VISIBLE_DEVICES" not in env
    # the one-GPU tasks go: the 2-GPU task gets both GPUs of one agent, another one those of the other
    assert api.delete("/v2/apps/g1").status_code == 200
    wait(lambda: api.running("/g2") and held() is not None and len(held()) == 2, what="the 2-GPU task")
    api.post("/v2/apps", json=_app("/g3", cmd=cmd, instances=2, gpus=2))
    wait(lambda: len(api.running("/g3")) == 1 and len((held() or []) + held3()) == 4, what="one 2-GPU task of /g3")
    pairs = held() + held3()
    assert len(pairs) == len(set(pairs)) == 4  # every GPU of both agents, each once
    assert sorted(i for a, i in held()) == [0, 1] and sorted(i for a, i in held3()) == [0, 1]
    assert queue(api)["/g3"]["count"] == 1  # no GPU left for the second
    assert q["processedOffersSummary"]["rejectSummaryLastOffers"] == funnel_of(2, {"InsufficientGpus": 2})
    used = {s["id"]: s["used_resources"]["gpus"] for s in api.get("/mesos/master/slaves").json()["slaves"]}
    assert sorted(used.values()) == [2.0, 2.0]


def test_restricted_gpu_scheduling_keeps_tasks_without_gpus_off_gpu_agents(cluster_with, wait):
    cluster, api = cluster_with(agents=2, agent_resources=["cpus:4;mem:2048;gpus:1|cpus:4;mem:2048"])
    api.post("/v2/apps", json=_app("/cpu", instances=2, constraints=[["hostname", "UNIQUE"]]))
    wait(lambda: len(api.running("/cpu")) == 1, what="one on the agent without GPUs")
    assert api.running("/cpu")[0]["host"] == "127.0.0.2"

    def declined():
        entry = queue(api).get("/cpu")
        steps = entry["processedOffersSummary"]["rejectSummaryLastOffers"] if entry else []
        out = {r["reason"]: r["declined"] for r in steps if r["declined"]}
        return out if sum(out.values()) == 2 else None

    # agent 1 has a GPU: declined; agent 2 has the first instance: UNIQUE
    assert wait(declined, what="both agents' last offers") == {"DeclinedScarceResources": 1,
                                                                 "UnfulfilledConstraint": 1}


def test_features_follow_the_option_and_a_gpu_app_without_them_gets_marathons_422(cluster_with):
    # the --enable_features values Marathon 1.8 knows: vips, task_killing, external_volumes, secrets, gpu_resources
    # (M@1.8 = mesosphere/marathon@releases/1.8: src/main/scala/mesosphere/marathon/Features.scala)
    _, api = cluster_with()
    assert api.get("/v2/info").json()["marathon_config"]["features"] == ["gpu_resources"]  # today's default
    _, api = cluster_with(features=())
    assert api.get("/v2/info").json()["marathon_config"]["features"] == []
    r = api.post("/v2/apps", json=_app("/g", gpus=1))
    assert r.status_code == 422
    assert r.json() == {"message": "Object is not valid", "details": [
        {"path": "/",
         "errors": ["Feature gpu_resources is not enabled. Enable with --enable_features gpu_resources)"]}]}
    r = api.put("/v2/groups/j", json={"apps": [_app("w", gpus=2)]})
    assert r.status_code == 422 and r.json()["details"][0]["path"] == "/apps(0)"
    assert api.post("/v2/apps", json=_app("/c", gpus=0)).status_code == 201
    with pytest.raises(ValueError, match="unknown to Marathon 1.8"):
        cluster_with(features=("gpus",))


def test_master_and_agent_endpoints_show_every_agent_in_mesos_shape(cluster_with, wait):
    cluster, api = cluster_with(agents=2, agent_resources=["cpus:2;cpus(ml):2;mem:1024;gpus:1;ports:[33300-33309]"],
                                agent_attributes=["rack:r1;level:2|rack:r2;level:3"],
                                gpu_scheduling_behavior="unrestricted")
    api.post("/v2/apps", json=_app("/u", cpus=1.5, mem=256, gpus=1, acceptedResourceRoles=["ml", "*"]))
    task = wait(lambda: api.running("/u") and api.running("/u")[0], what="the task")
    slaves = api.get("/mesos/master/slaves").json()
    assert set(slaves) == {"slaves", "recovered_slaves"}
    by_id = {s["id"]: s for s in slaves["slaves"]}
    assert len(by_id) == 2
    s = by_id[task["slaveId"]]
    assert s["hostname"] == task["host"] and s["pid"] == f"slave({int(task['slaveId'][-1]) + 1})@{api.base[7:]}"
    assert s["resources"] == {"cpus": 4.0, "gpus": 1.0, "mem": 1024.0, "disk": s["resources"]["disk"],
                              "ports": "[33300-33309]"}
    assert s["reserved_resources"] == {"ml": {"cpus": 2.0, "gpus": 0.0, "mem": 0.0, "disk": 0.0}}
    assert s["unreserved_resources"]["cpus"] == 2.0  # the "*" part of the total, not what is free
    assert s["used_resources"] == {"cpus": 1.5, "gpus": 1.0, "mem": 256.0, "disk": 0.0,
                                   "ports": f"[{task['ports'][0]}-{task['ports'][0]}]"}
    assert s["attributes"] in ({"rack": "r1", "level": 2.0}, {"rack": "r2", "level": 3.0})
    assert s["active"] is True and isinstance(s["registered_time"], float)
    assert {"reserved_resources_full", "unreserved_resources_full", "used_resources_full",
            "offered_resources_full"} <= set(s)
    state = api.get("/mesos/master/state").json()
    assert state["activated_slaves"] == 2 and state["unreachable_slaves"] == 0
    assert {x["id"] for x in state["slaves"]} == set(by_id)
    assert [t["slave_id"] for t in state["frameworks"][0]["tasks"]] == [task["slaveId"]]
    index = int(task["slaveId"][-1]) + 1
    agent = api.get(f"/slave({index})/state").json()
    assert agent["id"] == task["slaveId"] and agent["hostname"] == task["host"]
    assert agent["resources"] == s["resources"] and agent["attributes"] == s["attributes"]
    assert agent["unreserved_resources_allocated"]["cpus"] + sum(
        v["cpus"] for v in agent["reserved_resources_allocated"].values()) == 1.5
    assert [e["id"] for f in agent["frameworks"] for e in f["executors"]] == [task["id"]]
    assert api.get("/slave(3)/state").status_code == 404
    r = requests.get(f"{cluster.marathon_url}/mesos/master/slaves", params={"jsonp": "cb"}, timeout=5,
                     headers={"Referer": cluster.marathon_url + "/mesos"})  # JSONP: for the server's own pages
    assert r.text.startswith("cb(")


def test_the_default_agent_is_the_machine_and_enforces_nothing(cluster, api, wait):
    api.post("/v2/apps", json=_app("/huge", cpus=4096, mem=10 ** 7))
    task = wait(lambda: api.running("/huge") and api.running("/huge")[0], what="the huge task (as before)")
    assert task["host"] == "127.0.0.1"
    assert queue(api) == {}
    slaves = api.get("/mesos/master/slaves").json()["slaves"]
    assert len(slaves) == 1 and slaves[0]["used_resources"]["cpus"] == 4096.0


def test_values_are_spread_over_the_agents_in_turn():
    assert per_agent(["rack:r1|rack:r2"], 3, "--agent-attributes") == ["rack:r1", "rack:r2", "rack:r1"]
    assert per_agent(["rack:r1", "rack:r2"], 2, "x") == ["rack:r1", "rack:r2"]
    assert per_agent([], 2, "x") == [None, None]
    with pytest.raises(ValueError, match="3 agent values for 2 agents"):
        per_agent(["a:1|a:2|a:3"], 2, "--agent-attributes")


def test_agents_have_their_own_address_sandbox_root_and_id(tmp_path):
    """What is not given is detected as a Mesos agent does (apache/mesos@1.11.x
    ``src/slave/containerizer/containerizer.cpp`` ``Containerizer::resources``: every CPU, memory less 1 GiB,
    the work directory's disk less 5 GiB, ports ``[31000-32000]``, no GPUs)."""
    agents = Agents(tmp_path, "127.0.0.1", 3, ["cpus:2;mem:1024"], ["rack:r1|rack:r2"])
    a1, a2, a3 = agents.all
    assert [a.hostname for a in agents.all] == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    assert [a.name for a in agents.all] == ["agent-1", "agent-2", "agent-3"]
    assert [a.id.rsplit("-", 1)[1] for a in agents.all] == ["S0", "S1", "S2"]
    assert a1.sandboxes == tmp_path / "sandboxes" and a2.sandboxes == tmp_path / "agents" / "agent-2" / "sandboxes"
    assert a3.attributes == {"rack": "r1"}
    assert Resource("ports", ((31000, 32000),)) in a2.resources  # Mesos's default range
    assert {r.name for r in a2.resources} >= {"cpus", "mem", "disk", "ports"}  # disk detected, as Mesos does
    default = Agents(tmp_path, "127.0.0.1").all
    assert len(default) == 1 and not default[0].enforced  # today's one agent: the machine, not enforced
