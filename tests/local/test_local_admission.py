"""Admission on the local cluster's finite agents (issue 20), the user's side: the job that can never
fit is refused before anything is sent; one that fits only partly says per role why its tasks wait
(``status -o json`` / text) and, past its admission deadline, holds nothing (every app at 0, every GPU
free again). The tasks here are ``sleep`` (no bootstrap): only placement matters, and a task given
GPUs would fail the bootstrap's GPU check on a machine without them.

What is modelled: the Mesos master's ``/master/slaves`` (apache/mesos ``src/master/readonly_handler.cpp``
``SlaveWriter``: ``resources``, ``used_resources``, ``offered_resources``, ``*_full``), Marathon's
``/v2/info`` ``marathon_config.mesos_leader_ui_url`` (mesosphere/marathon
``src/main/scala/mesosphere/marathon/api/v2/InfoResource.scala``) and ``/v2/queue?embed=lastUnusedOffers``
(``src/main/scala/mesosphere/marathon/raml/QueueInfoConversion.scala``; one newest unused offer per
agent with every reason: ``core/launchqueue/impl/OfferMatchStatistics.scala``, at 90619da70).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from marathon_tf.contract import labels as L
from marathon_tf.contract.errors import UsageError
from marathon_tf.marathon.client import Client
from marathon_tf.marathon.waiting import wall
from marathon_tf.user.api import Marathon
from marathon_tf.user.render import render_group
from marathon_tf.user.spec import load_dict

MARATHON_TF = str(Path(sys.executable).parent / "marathon-tf")
GPU_AGENT = "cpus:2;mem:2048;disk:1000;gpus:2;ports:[33100-33199]"
CPU_AGENT = "cpus:1;mem:1024;disk:1000;ports:[33200-33299]"


def _cli(url, *args, cwd):
    env = {k: v for k, v in os.environ.items() if k not in ("MARATHON_URL", "MESOS_URL")}
    if url:
        env["MARATHON_URL"] = url
    return subprocess.run([MARATHON_TF, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=60)


def _job_file(tmp_path, job):
    path = tmp_path / f"{job['name']}.json"
    path.write_text(json.dumps(job))
    return path


def _put_sleeping(api, job: dict) -> None:
    """The job's group as marathon-tf renders it, every task ``sleep 600`` instead of the bootstrap."""
    group = render_group(load_dict(job))
    for app in group["apps"]:
        app["cmd"] = "sleep 600"
    assert api.put(f"/v2/groups/{job['name']}", json=group).status_code == 200


def _nothing_of(api, job):
    return api.get(f"/v2/groups/{job}").status_code == 404 and not any(
        app.startswith(f"/{job}/") for d in api.deployments() for app in d["affectedApps"])


def _used_gpus(api) -> float:
    slaves = api.get("/mesos/master/slaves").json()["slaves"]
    return sum(float((s.get("used_resources") or {}).get("gpus") or 0) for s in slaves)


def test_a_task_that_fits_on_no_agent_is_refused_in_one_line_before_anything_is_sent(cluster_with, tmp_path):
    cluster, api = cluster_with(agents=3, agent_resources=[GPU_AGENT])
    job = {"name": "imp", "command": "true", "roles": {"ps": {"count": 1, "cpus": 0.5, "mem": 128},
                                                       "worker": {"count": 2, "cpus": 0.5, "mem": 128, "gpus": 4}}}
    began = time.monotonic()
    with pytest.raises(UsageError) as refused:
        Marathon(client=Client(cluster.marathon_url)).deploy(load_dict(job))
    took = time.monotonic() - began
    assert str(refused.value) == "worker needs gpus 4; the largest agent has 2 (agent-1); nothing was sent"
    assert took <= 2.0, took
    path = _job_file(tmp_path, job)
    for args in ([], ["--dry-run"]):
        r = _cli(cluster.marathon_url, "deploy", str(path), *args, cwd=tmp_path)
        assert r.returncode == 2, r.stderr
        assert r.stderr.splitlines()[0] == ("error: worker needs gpus 4; the largest agent has 2 (agent-1); "
                                            "nothing was sent")
    # a dry run without a Marathon reads the master it is given (a real master names agents by hostname)
    r = _cli(None, "deploy", str(path), "--dry-run", "--mesos", cluster.marathon_url + "/mesos", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr.splitlines()[0] == ("error: worker needs gpus 4; the largest agent has 2 (127.0.0.1); "
                                        "nothing was sent")
    # more than one resource short: each named with its largest agent; memory in the role that asks it
    job["roles"]["worker"].update(gpus=1, mem=4096, cpus=3)
    r = _cli(cluster.marathon_url, "deploy", str(_job_file(tmp_path, job)), cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.splitlines()[0] == ("error: worker needs cpus 3, mem 4096; the largest agents have cpus 2 "
                                        "(agent-1), mem 2048 (agent-1); nothing was sent")
    assert _nothing_of(api, "imp")


def test_a_shortfall_now_is_said_and_refused_only_without_waiting(cluster_with, tmp_path, wait):
    cluster, api = cluster_with(agents=3, agent_resources=[CPU_AGENT])
    job = {"name": "fit", "command": "true", "roles": {"worker": {"count": 2, "cpus": 1, "mem": 128}}}
    _put_sleeping(api, job)
    wait(lambda: api.running("/fit/worker-0") and api.running("/fit/worker-1"), 15, what="both workers placed")
    big = {**job, "name": "big", "roles": {"worker": {"count": 2, "cpus": 1, "mem": 128}}}
    r = _cli(cluster.marathon_url, "deploy", str(_job_file(tmp_path, big)), "--no-wait-for-resources", cwd=tmp_path)
    assert r.returncode == 4, r.stderr
    assert r.stderr.splitlines()[0] == ("error: job big does not fit what the cluster has free now: 1 of 2 worker "
                                        "would wait; it needs cpus 2 (1 free); nothing was sent")
    assert _nothing_of(api, "big")
    r = _cli(cluster.marathon_url, "scale", "fit", "worker=4", "--no-wait-for-resources", cwd=tmp_path)
    assert r.returncode == 2, r.stderr  # 4 workers of 1 cpu never fit 3 agents of 1 cpu: refused at once
    assert r.stderr.splitlines()[0] == ("error: job fit needs cpus 4 in all; the cluster has 3 in all (3 agents): its "
                                        "tasks can never all run at once; nothing was sent")
    assert sorted(a["id"] for a in api.get("/v2/groups/fit").json()["apps"]) == ["/fit/worker-0", "/fit/worker-1"]
    # waiting is the default: said on stderr, and sent
    r = _cli(cluster.marathon_url, "deploy", str(_job_file(tmp_path, big)), "--dry-run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert ("warning: job big does not fit what the cluster has free now: 1 of 2 worker would wait; it needs cpus 2 "
            "(1 free); it waits for room until its admission deadline") in r.stderr


def test_a_job_that_fits_partly_says_why_it_waits_then_holds_nothing_at_its_deadline(cluster_with, tmp_path, wait):
    cluster, api = cluster_with(agents=3, agent_resources=[GPU_AGENT])
    timeout = 15  # room for the CLI's looks below on a loaded machine
    job = {"name": "part", "command": "true", "admission": {"timeout": timeout},
           "roles": {"worker": {"count": 4, "cpus": 0.5, "mem": 128, "gpus": 2}}}
    _put_sleeping(api, job)
    wait(lambda: sum(len(api.running(f"/part/worker-{i}")) for i in range(4)) == 3, 15, what="3 workers placed")
    marathon = Marathon(client=Client(cluster.marathon_url))

    def why(st):
        roles = (st.get("admission") or {}).get("roles") or {}
        return st if (roles.get("worker") or {}).get("reasons") else None

    wait(lambda: why(marathon.status("part", drive=False).data), 10, what="the workers' reasons")
    r = json.loads(_cli(cluster.marathon_url, "status", "part", "-o", "json", cwd=tmp_path).stdout)
    view = r["admission"]
    worker = view["roles"]["worker"]
    assert (worker["placed"], worker["total"], worker["waiting"]) == (3, 4, 1)
    assert worker["reasons"] == [{"reason": "InsufficientGpus", "agents": 3, "resource": "gpus", "need": 2.0,
                                  "freeLeast": 0.0, "freeMost": 0.0}]
    assert worker["text"].startswith("worker: 3/4 placed; 1 waiting ")
    assert worker["text"].endswith(": InsufficientGpus on 3 agents (need 2 each, 0 free)")
    assert view["starting"] == ["worker-3"] and (view["attempt"], view["attempts"]) == (1, 1)
    assert r["state"] == "Deploying" and view["timeoutSeconds"] == timeout
    text = _cli(cluster.marathon_url, "status", "part", cwd=tmp_path).stdout
    assert "  placement  worker: 3/4 placed; 1 waiting" in text and "(admission.timeout 15s, attempt 1 of 1)" in text
    # past the deadline the first look releases it: every app at 0 instances, every GPU free
    deadline = wall(view["deadline"])
    assert deadline == wall(view["submittedAt"]) + timeout
    st = wait(lambda: (lambda s: s if s.state == L.NOT_PLACED else None)(marathon.status("part")), timeout + 10,
              what="NotPlaced")
    apps = api.get("/v2/groups/part").json()["apps"]
    wait(lambda: _used_gpus(api) == 0 and all(not api.tasks(a["id"]) for a in apps), 5, what="every GPU free")
    released = time.time() - deadline
    print(f"deadline to the last GPU free: {released:.2f} s", file=sys.stderr)
    assert released <= 5.0
    assert [a["instances"] for a in apps] == [0, 0, 0, 0]
    # not before it (to the millisecond Marathon's timestamps carry, each side rounding on its own clock)
    assert wall(apps[0]["labels"][L.FINISHED_AT]) >= deadline - 0.05
    assert {a["labels"][L.STATE] for a in apps} == {L.NOT_PLACED}
    assert st.reason.startswith("worker: 3/4 placed; 1 waiting") and "InsufficientGpus on 3 agents" in st.reason
    r = _cli(cluster.marathon_url, "status", "part", "--watch", cwd=tmp_path)
    assert r.returncode == 4 and r.stdout.startswith("job part (/part): NotPlaced")
