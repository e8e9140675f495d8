"""Job-wide and role-wide placement rules on the local cluster with 3 agents (issue 28), end to end: the real
bootstrap in every task (the job's leader places the others: marathon_tf.task.placer), a ``sleep`` for a
program (no TensorFlow), ``deploy`` as the user runs it.

The local cluster checks constraints as Marathon does, among one app's own instances
(``M@1.11:src/main/scala/mesosphere/mesos/Constraints.scala``, marathon_tf/mesos/placement.py): with one app
per task a copied ``UNIQUE`` would constrain nothing (4 such workers on 3 agents would all run). What keeps
the tasks apart here is what a real Marathon 1.4–1.11 would keep too: the apps' own ``UNLIKE`` / ``LIKE``
constraints, which ``/v2/apps`` shows.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from leaks import wait_no_processes
from offers import FAST_OFFERS
from polling import wait_for

from marathon_tf.contract import spread
from marathon_tf.marathon.client import Client, RetryPolicy
from marathon_tf.user import jobs, pipeline
from marathon_tf.user.cli import cli
from marathon_tf.user.render import render_group
from marathon_tf.user.spec import load_dict
from marathon_tf.user.status import job_status


@pytest.fixture
def cluster_of(tmp_path):
    from marathon_tf.local import LocalCluster

    made = []

    def start(**options):
        cluster = LocalCluster(state_dir=tmp_path / f"state-{len(made)}", dns_refresh=0.25, kill_grace=1.0,
                               shutdown_grace=1.0, **{**FAST_OFFERS, **options}).start()
        made.append(cluster)
        return cluster

    yield start
    for cluster in made:
        cluster.stop()
    for n in range(len(made)):
        assert wait_no_processes(tmp_path / f"state-{n}") == []


def _job(cluster, name, workers, job_rules=(), ps=0, worker_rules=None):
    roles = {"worker": {"count": workers, "cpus": 0.1, "mem": 64}}
    if worker_rules is not None:
        roles["worker"]["constraints"] = worker_rules
    if ps:
        roles["ps"] = {"count": ps, "cpus": 0.1, "mem": 64}
    return {"name": name, "command": ["sleep", "600"], "prewarm": False, "cluster_spec": "tf_config",
            "restart": {"max_failures": 0}, "constraints": [list(c) for c in job_rules],
            "discovery": {"mode": "marathon", "marathon_url": cluster.marathon_url}, "roles": roles}


def _client(cluster):
    return Client(cluster.marathon_url, retry=RetryPolicy(attempts=5, budget=30, initial=0.2, max_wait=2))


def _running(client, job, n):
    """Every task past its rendezvous (its program started): the rule held by then."""
    st = job_status(client, job).to_dict()
    rows = st["tasks"]
    return rows if len(rows) == n and all(t.get("phase") == "running" for t in rows) else None


def _apps(client, job):
    return {a["id"].rsplit("/", 1)[-1]: a for a in client.list_apps(label="marathon-tf/job")
            if a["id"].startswith(f"/{job}/")}


def _stderr(cluster, task):
    boxes = sorted(Path(cluster.state_dir).rglob(f"*_{task}.instance-*/stderr"), key=lambda p: p.stat().st_mtime)
    return boxes[-1].read_text() if boxes else ""


@pytest.mark.timeout(120)
def test_job_level_unique_puts_three_workers_on_three_hosts_and_their_apps_keep_them_there(cluster_of):
    cluster = cluster_of(agents=3)
    client = _client(cluster)
    began = time.monotonic()
    pipeline.deploy(client, load_dict(_job(cluster, "uniq", 3, [["hostname", "UNIQUE"]])))
    rows = wait_for(lambda: _running(client, "uniq", 3), 60, interval=0.2, what="3 workers past their rendezvous")
    placed = time.monotonic() - began
    hosts = {t["task"]: t["host"] for t in rows}
    assert sorted(hosts.values()) == ["127.0.0.1", "127.0.0.2", "127.0.0.3"], hosts
    # not only a copied UNIQUE: each app's own constraints exclude the hosts its siblings hold
    apps = _apps(client, "uniq")
    assert apps["worker-0"]["constraints"] == []
    for name in ("worker-1", "worker-2"):
        (constraint,) = apps[name]["constraints"]
        assert constraint[:2] == ["hostname", "UNLIKE"]
        excluded = [h.replace("\\.", ".") for h in constraint[2].split("|")]
        assert hosts[name] not in excluded and hosts["worker-0"] in excluded
    assert json.loads(apps["worker-2"]["labels"][spread.RULES_LABEL]) == {"scope": "job",
                                                                         "rules": [["hostname", "UNIQUE"]]}
    print(f"\n3 UNIQUE workers placed one at a time and past their rendezvous in {placed:.1f} s")
    assert placed < 30


@pytest.mark.timeout(120)
def test_rules_no_three_agents_can_satisfy_are_refused_before_anything_is_sent(cluster_of, tmp_path):
    cluster = cluster_of(agents=3)
    client = _client(cluster)
    for name, job, said in [
        ("four", _job(cluster, "four", 4, [["hostname", "UNIQUE"]]),
         'job rule ["hostname", "UNIQUE"] needs 4 distinct hosts for its 4 tasks; the Mesos master lists 3 agents; '
         'nothing was sent'),
        ("roles", _job(cluster, "roles", 4, [["hostname", "UNIQUE"]], ps=1),
         None),  # the job's rule spans ps-0 too: 5 tasks
        ("role", _job(cluster, "role", 4, ps=1, worker_rules=[["hostname", "UNIQUE"]]),
         'worker rule ["hostname", "UNIQUE"] needs 4 distinct hosts for its 4 tasks; the Mesos master lists 3 '
         'agents; nothing was sent'),
        ("maxper", _job(cluster, "maxper", 7, [["hostname", "MAX_PER", "2"]]),
         'job rule ["hostname", "MAX_PER", "2"] fits at most 2 × 3 = 6 of its 7 tasks; the Mesos master lists 3 '
         'agents; nothing was sent'),
    ]:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(job))
        r = CliRunner().invoke(cli, ["deploy", str(path), "--detach"], env={"MARATHON_URL": cluster.marathon_url})
        assert r.exit_code == 2, r.output
        if said:
            assert said in r.output
        else:
            assert "needs 5 distinct hosts for its 5 tasks" in r.output
        assert _apps(client, name) == {}  # nothing sent
    # Marathon's own per-app meaning stays available: nothing across tasks to refuse
    per_app = _job(cluster, "perapp", 4)
    per_app["constraints_per_task"] = [["hostname", "UNIQUE"]]
    assert pipeline.deploy(client, load_dict(per_app)).deployment_id
    wait_for(lambda: _running(client, "perapp", 4), 60, interval=0.2, what="4 per-app UNIQUE workers on 3 agents")


@pytest.mark.timeout(120)
def test_max_per_two_spreads_five_workers_over_three_agents(cluster_of):
    cluster = cluster_of(agents=3)
    client = _client(cluster)
    pipeline.deploy(client, load_dict(_job(cluster, "maxper", 5, [["hostname", "MAX_PER", "2"]])))
    rows = wait_for(lambda: _running(client, "maxper", 5), 60, interval=0.2, what="5 workers past their rendezvous")
    hosts = [t["host"] for t in rows]
    assert max(hosts.count(h) for h in hosts) == 2 and len(set(hosts)) == 3, hosts


@pytest.mark.timeout(120)
def test_a_role_level_rule_spans_the_roles_tasks_only(cluster_of):
    cluster = cluster_of(agents=3)
    client = _client(cluster)
    job = _job(cluster, "rolewise", 3, ps=2, worker_rules=[["hostname", "UNIQUE"]])
    pipeline.deploy(client, load_dict(job))
    rows = wait_for(lambda: _running(client, "rolewise", 5), 60, interval=0.2, what="5 tasks past their rendezvous")
    workers = sorted(t["host"] for t in rows if t["role"] == "worker")
    assert workers == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    apps = _apps(client, "rolewise")
    assert spread.RULES_LABEL not in apps["ps-0"]["labels"] and apps["ps-1"]["constraints"] == []


@pytest.mark.timeout(150)
def test_a_race_that_put_the_workers_on_one_host_is_corrected_before_any_program_starts(cluster_of):
    """Marathon places the tasks before the rule's constraints are written (here: the apps sent without
    their holds, as a race in one offer cycle would leave them) on the only agent; two agents join; the
    leader moves the two that break the rule, one at a time, and the programs start only then."""
    cluster = cluster_of(agents=1)
    client = _client(cluster)
    group = render_group(load_dict(_job(cluster, "race", 3, [["hostname", "UNIQUE"]])))
    for app in group["apps"]:  # no holds: every task is launched as soon as offers come
        app["constraints"] = [list(c) for c in spread.split(app)[0]]
        app["labels"].pop(spread.LABEL, None)
    # the siblings are placed before the leader starts (else a quick leader would hold them before any
    # offer came: no race), then the leader joins them on the one agent
    leader = next(a for a in group["apps"] if a["id"].endswith("/worker-0"))
    leader["instances"] = 0
    jobs.put(client, "race", group)
    wait_for(lambda: sorted(a["id"][-8:] for a in client.get_group("/race", embed=("group.apps", "group.apps.tasks"))
                            ["apps"] if any(t.get("state") == "TASK_RUNNING" for t in a.get("tasks") or [])) ==
             ["worker-1", "worker-2"], 30, interval=0.2, what="the siblings placed on the one agent")
    client.update_apps([{"id": leader["id"], "instances": 1}], force=True)
    # the leader finds its siblings beside it and moves them: one released (nowhere to go yet), one held
    wait_for(lambda: len(re.findall(r"placement: moving worker-\d off 127\.0\.0\.1", _stderr(cluster, "worker-0")))
             == 2, 30, interval=0.2, what="the leader moving the two stacked workers")
    # the leader holds the rendezvous: none of them starts its program beside a sibling
    time.sleep(2)
    rows = job_status(client, "race").to_dict()["tasks"]
    assert not any(t.get("phase") == "running" for t in rows), rows
    assert {t["task"]: t["state"] for t in rows if t["task"] != "worker-0"} == {"worker-1": "waiting",
                                                                                "worker-2": "waiting"}
    # status says which rule holds each: one released (away from the leader's host), the other held
    waits = sorted(t["waitingFor"] for t in rows if t["task"] != "worker-0")
    assert waits[0].startswith('held by job rule ["hostname", "UNIQUE"]: its tasks are placed one at a time'), waits
    assert waits[1].startswith('job rule ["hostname", "UNIQUE"]: away from 127.0.0.1 (worker-0)'), waits
    cluster.add_agent()
    cluster.add_agent()
    rows = wait_for(lambda: _running(client, "race", 3), 60, interval=0.2, what="the race corrected")
    assert sorted(t["host"] for t in rows) == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    assert {t["task"]: t["host"] for t in rows}["worker-0"] == "127.0.0.1"  # the leader kept its place
    leader = _stderr(cluster, "worker-0")
    moved = re.findall(r"placement: moving (worker-\d) off 127\.0\.0\.1", leader)
    assert sorted(moved) == ["worker-1", "worker-2"], leader
    # the leader's own program started once, after the moves
    assert leader.count("all 2 peer(s) found") == 1
    assert leader.index("placement: moving") < leader.index("all 2 peer(s) found")


@pytest.mark.timeout(120)
def test_with_auth_on_the_leaders_own_scoped_token_places_its_siblings(cluster_of):
    """``local serve --auth``: the tasks call back with tokens of their own (local/taskscope.py), which may
    change only LIKE / UNLIKE constraints of their own job's apps: enough to place them."""
    from marathon_tf.local.security import Credentials

    cluster = cluster_of(agents=3, auth=Credentials(token="tok-28"))
    client = Client(cluster.marathon_url, token="tok-28",
                    retry=RetryPolicy(attempts=5, budget=30, initial=0.2, max_wait=2))
    pipeline.deploy(client, load_dict(_job(cluster, "authed", 3, [["hostname", "UNIQUE"]])))
    rows = wait_for(lambda: _running(client, "authed", 3), 60, interval=0.2, what="3 workers past their rendezvous")
    assert sorted(t["host"] for t in rows) == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    # a 403 would read "PUT http://…/v2/apps/…: 403 …: Marathon denied access; …" (marathon/client.py); the bare
    # digits also occur in a pid ("(pid 3403)": a fresh-clone CI run)
    text = _stderr(cluster, "worker-0")
    assert not re.search(r": 403\b|denied access", text), text
