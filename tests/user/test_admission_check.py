"""The capacity check before anything is sent, without a cluster: the Mesos master's agents as
``/master/slaves`` writes them (apache/mesos ``src/master/readonly_handler.cpp`` ``SlaveWriter``:
``resources``, ``used_resources``, ``offered_resources``, ``reserved_resources``, ``attributes``,
``active``), what fits on none of them, a master that cannot be read (skipped with a note), and what is
offered to Marathon itself (free for it) against what other frameworks hold (not)."""

from __future__ import annotations

import time

import pytest
import requests

from marathon_tf.contract.errors import NotPlaced, UsageError
from marathon_tf.mesos.master import marathon_offers, parse_agents
from marathon_tf.user import admission, capacity
from marathon_tf.user.render import render_app, render_group
from marathon_tf.user.spec import load_dict

PORTS = "[31000-31099]"


def _slave(n, cpus=4.0, gpus=0.0, used=None, rack="r1", active=True, reserved=None):
    return {"id": f"S{n}", "hostname": f"10.0.0.{n}", "active": active,
            "resources": {"cpus": cpus, "mem": 8192.0, "disk": 1000.0, "gpus": gpus, "ports": PORTS},
            "used_resources": used or {"cpus": 0.0, "mem": 0.0, "disk": 0.0, "gpus": 0.0},
            "offered_resources": {"cpus": 0.0, "mem": 0.0, "disk": 0.0, "gpus": 0.0},
            "reserved_resources": reserved or {}, "attributes": {"rack": rack}}


def _cap(*slaves, roles=("*",)):
    return capacity.Capacity(parse_agents({"slaves": list(slaves)}), set(roles), "http://master:5050")


def _apps(job):
    spec = load_dict(job)
    return {r: render_app(spec, r, 0) for r in spec.counts()}, spec


def test_the_masters_agents_free_is_total_less_used_and_offered_and_inactive_agents_are_left_out():
    cap = _cap(_slave(1, cpus=4, gpus=2, used={"cpus": 1.5, "gpus": 1.0}), _slave(2, active=False))
    (agent,) = cap.agents
    assert agent.name == "10.0.0.1" and agent.attributes == {"rack": "r1"}
    free = agent.free_summary()
    assert (free["cpus"], free["gpus"], free["ports"]) == (2.5, 1.0, 100.0)


def test_what_fits_on_no_agent_is_named_with_the_largest_agent():
    cap = _cap(_slave(1, cpus=2), _slave(2, cpus=8), _slave(3, cpus=4))
    apps, _ = _apps({"name": "j", "command": "true", "roles": {"worker": {"count": 1, "cpus": 16, "mem": 64}}})
    assert admission.impossible(apps, cap) == "worker needs cpus 16; the largest agent has 8 (10.0.0.2)"
    apps, _ = _apps({"name": "j", "command": "true", "roles": {"worker": {
        "count": 1, "cpus": 1, "mem": 64, "constraints": [["rack", "LIKE", "r9"]]}}})
    said = admission.impossible(apps, cap)
    assert said.startswith("worker's constraints [[\"rack\", \"LIKE\", \"r9\"]] match no agent (agents' attributes: "
                           "10.0.0.1 rack:r1")
    # resources reserved for a role Marathon is not offered do not count
    reserved = _slave(1, cpus=0.5, reserved={"ml": {"cpus": 8.0}})
    apps, _ = _apps({"name": "j", "command": "true", "roles": {"worker": {"count": 1, "cpus": 2, "mem": 64}}})
    assert admission.impossible(apps, _cap(reserved)) is not None
    assert admission.impossible(apps, _cap(reserved, roles=("*", "ml"))) is None


def test_a_job_larger_than_what_is_free_now_waits_or_is_refused(monkeypatch):
    cap = _cap(_slave(1, cpus=2, used={"cpus": 1.0}), _slave(2, cpus=2))
    monkeypatch.setattr(capacity, "read", lambda client, given=None: cap)
    spec = load_dict({"name": "j", "command": "true", "roles": {"worker": {"count": 4, "cpus": 1, "mem": 64}}})
    verdict = admission.check(None, spec)
    assert verdict.waiting == {"worker": 1}
    assert verdict.shortfall == ("job j does not fit what the cluster has free now: 1 of 4 worker would wait; "
                                 "it needs cpus 4 (3 free)")
    with pytest.raises(NotPlaced) as e:
        admission.check(None, spec, wait=False)
    assert e.value.exit_code == 4
    big = load_dict({"name": "j", "command": "true", "roles": {"worker": {"count": 1, "cpus": 3, "mem": 64}}})
    with pytest.raises(UsageError) as e:
        admission.check(None, big)
    assert e.value.exit_code == 2 and str(e.value).startswith("worker needs cpus 3; the largest agent has 2")


def test_a_master_that_cannot_be_read_skips_the_check_with_a_note():
    spec = load_dict({"name": "j", "command": "true", "roles": {"worker": {"count": 1}}})
    began = time.monotonic()
    verdict = admission.check(None, spec, mesos="http://127.0.0.1:9")
    assert time.monotonic() - began < capacity.TIMEOUT[0] + 1
    assert not verdict.checked and verdict.note == ("cluster capacity not checked: the Mesos master at "
                                                    "http://127.0.0.1:9 cannot be read (ConnectionError)")
    assert admission.check(None, spec).note.endswith("give --mesos URL or MESOS_URL")  # no Marathon, no master


def test_the_admission_timeout_can_be_overridden_at_deploy():
    spec = load_dict({"name": "j", "command": "true", "admission": {"timeout": 60, "retries": 2},
                      "roles": {"worker": {"count": 1}}})
    assert admission.effective(spec, environ={}).admission.timeout == 60
    assert admission.effective(spec, environ={admission.TIMEOUT_ENV: "5m"}).admission.timeout == 300
    assert admission.effective(spec, 30.0, environ={admission.TIMEOUT_ENV: "5m"}).admission.retries == 2
    with pytest.raises(UsageError):
        admission.effective(spec, environ={admission.TIMEOUT_ENV: "soon"})


def test_the_master_the_user_named_is_passed_to_every_look_not_remembered(monkeypatch):
    """``--mesos`` / ``MESOS_URL`` goes with the calls that read the master (the status' waits, the
    admission deadline's look, the check of a deploy or scale); no client remembers it."""
    from marathon_tf.user import jobs, release, status, watch  # noqa: F401 - imported before the patch below:
    from marathon_tf.user.api import Marathon  # a module first imported under it would keep
    from marathon_tf.user.results import JobStatus  # the fake job_status for the whole session

    seen = []
    monkeypatch.setattr(status, "job_status", lambda client, job, **kw: seen.append(("status", kw.get("mesos")))
                        or JobStatus.from_dict({"job": job, "state": "Deploying", "tasks": []}))
    monkeypatch.setattr(release, "drive", lambda client, job, st, **kw: seen.append(("drive", kw.get("mesos"))))
    Marathon(client=object(), mesos="http://named:5050").status("j")
    assert seen == [("status", "http://named:5050"), ("drive", "http://named:5050")]
    seen.clear()
    monkeypatch.setenv("MESOS_URL", "http://from-env:5050")
    Marathon(client=object()).status("j", drive=False)
    monkeypatch.delenv("MESOS_URL")
    Marathon(client=object()).status("j", drive=False)
    assert seen == [("status", "http://from-env:5050"), ("status", None)]
    # the status of a starting job reads the master it is given
    read = []
    monkeypatch.setattr(capacity, "read", lambda client, given=None: read.append(given))
    spec = load_dict({"name": "mnist", "command": "true", "roles": {"ps": {"count": 1}, "worker": {"count": 2}}})
    group = render_group(spec)

    class Client:
        url = "http://marathon"

        def get_group(self, group_id, embed=()):
            return {"id": group["id"], "apps": [dict(a, tasks=[]) for a in group["apps"]]}

        def request(self, *a, **k):
            raise RuntimeError("no queue here")

        def is_local(self):
            return False

    from marathon_tf.user.status import fetch

    fetch(Client(), "mnist", probe=False, mesos="http://named:5050")
    fetch(Client(), "mnist", probe=False)
    assert read == ["http://named:5050", None]


# --------------------------------------------------------------------------- offers: Marathon's are free for it


def _offered(slave, cpus, ports=None):
    slave["offered_resources"] = {"cpus": cpus, "mem": 0.0, "disk": 0.0, "gpus": 0.0,
                                  **({"ports": ports} if ports else {})}
    return slave


def _offer(agent, cpus, role="*", ports=None, framework="marathon-fw"):
    return {"id": f"o-{agent}-{framework}", "framework_id": framework, "slave_id": agent,
            "allocation_info": {"role": role},
            "resources": {"cpus": cpus, "mem": 0.0, "disk": 0.0, "gpus": 0.0, **({"ports": ports} if ports else {})}}


def test_resources_offered_to_marathon_count_as_free_those_offered_to_others_do_not():
    # apache/mesos@1.11.x:src/master/readonly_handler.cpp: an agent's offered_resources are every framework's
    # offers of it (SlaveWriter); a framework's own are its "offers" (FullFrameworkWriter), each with slave_id,
    # resources (a summary) and allocation_info.role (src/common/http.cpp json(…, const Offer&)).
    slaves = {"slaves": [_offered(_slave(1, cpus=4), 3.0, "[31000-31099]"), _offered(_slave(2, cpus=4), 2.0)]}
    frameworks = {"frameworks": [
        {"id": "marathon-fw", "name": "marathon", "active": True,
         "offers": [_offer("S1", 3.0, ports="[31000-31099]"), _offer("S2", 0.5)]},
        {"id": "spark-fw", "name": "spark", "active": True, "offers": [_offer("S2", 1.5, framework="spark-fw")]}]}
    own = marathon_offers(frameworks, "marathon-fw", "marathon")
    agents = {a.id: a.free_summary() for a in parse_agents(slaves, own_offers=own)}
    assert agents["S1"]["cpus"] == 4.0 and agents["S1"]["ports"] == 100.0  # all offered to Marathon: free
    assert agents["S2"]["cpus"] == 2.5  # 1.5 held by another framework is not
    # without Marathon's offers (unknown), every offer counts as taken, as before
    before = {a.id: a.free_summary()["cpus"] for a in parse_agents(slaves)}
    assert before == {"S1": 1.0, "S2": 2.0}
    # no framework id in /v2/info: the one active framework named as Marathon's framework_name
    assert marathon_offers(frameworks, None, "marathon") == own
    assert marathon_offers(frameworks, None, "nobody") == {}


def test_capacity_asks_the_master_for_marathons_offers_only_when_something_is_offered(httpserver):
    # /v2/info's frameworkId (1.4 too), marathon_config.framework_name and mesos_leader_ui_url (the leading
    # master's URL): mesosphere/marathon@releases/1.11 (and M@1.8)
    # src/main/scala/mesosphere/marathon/api/v2/InfoResource.scala; a framework's offers:
    # apache/mesos@1.11.x:src/master/readonly_handler.cpp ``frameworks``.
    class _Client:  # /v2/info of Marathon 1.11: frameworkId, marathon_config.framework_name
        urls, session, verify = ["http://marathon:8080"], requests.Session(), True

        def is_local(self):
            return False

        def info(self):
            return {"name": "marathon", "frameworkId": "marathon-fw",
                    "marathon_config": {"framework_name": "marathon",
                                        "mesos_leader_ui_url": httpserver.url_for("/").rstrip("/")}}

    slaves = {"slaves": [_offered(_slave(1, cpus=4), 3.0)]}
    httpserver.expect_request("/master/slaves").respond_with_json(slaves)
    httpserver.expect_request("/master/frameworks", query_string="framework_id=marathon-fw").respond_with_json(
        {"frameworks": [{"id": "marathon-fw", "name": "marathon", "offers": [_offer("S1", 2.0)]},
                        {"id": "other", "name": "other", "offers": [_offer("S1", 1.0, framework="other")]}]})
    cap = capacity.read(_Client())
    assert cap.agents[0].free_summary()["cpus"] == 3.0  # 4 - 1 held by the other framework
    assert [r.path for r, _ in httpserver.log] == ["/master/slaves", "/master/frameworks"]
    httpserver.clear_log()
    httpserver.clear()
    httpserver.expect_request("/master/slaves").respond_with_json({"slaves": [_slave(1, cpus=4)]})
    assert capacity.read(_Client()).agents[0].free_summary()["cpus"] == 4.0
    assert [r.path for r, _ in httpserver.log] == ["/master/slaves"]  # nothing offered: no second look


def test_a_job_the_whole_cluster_can_never_hold_at_once_is_refused_like_an_impossible_task(monkeypatch):
    """Issue 32: a job needing 27,136 MiB on a cluster of 20,000 waited for room until its admission
    deadline (10 minutes, a progress line every second). A job more of whose tasks than the empty cluster
    holds would have to run at once (in all, or a role's gang) is refused at once: exit 2, the numbers."""
    slaves = [_slave(1, cpus=4), _slave(2, cpus=4)]
    for s in slaves:
        s["resources"]["mem"] = 10000.0
    cap = _cap(*slaves)
    monkeypatch.setattr(capacity, "read", lambda client, given=None: cap)
    big = load_dict({"name": "big", "command": "true", "roles": {
        "ps": {"count": 1, "cpus": 0.5, "mem": 1024}, "worker": {"count": 4, "cpus": 0.5, "mem": 4096},
        "chief": {"count": 1, "cpus": 1, "mem": 4096}, "evaluator": {"count": 1, "cpus": 1, "mem": 5632}}})
    with pytest.raises(UsageError) as e:
        admission.check(None, big)
    assert e.value.exit_code == 2
    assert str(e.value) == ("job big needs mem 27136 in all; the cluster has 20000 in all (2 agents): its tasks can "
                            "never all run at once; nothing was sent")
    # every task fits an agent, the total fits, but no agent holds two of them: 3 workers on 2 agents
    gang = load_dict({"name": "gang", "command": "true", "roles": {"worker": {"count": 3, "cpus": 2.5, "mem": 64}}})
    with pytest.raises(UsageError) as e:
        admission.check(None, gang)
    assert str(e.value).startswith("job gang: worker has 3 tasks of cpus 2.5, mem 64 each; the agents hold at most 2 "
                                   "of them at once (10.0.0.1 1, 10.0.0.2 1)")
    # what only waits for room now still waits (the same job on a busy cluster)
    busy = _cap(_slave(1, cpus=4, used={"cpus": 3.0}), _slave(2, cpus=4, used={"cpus": 1.0}))
    monkeypatch.setattr(capacity, "read", lambda client, given=None: busy)
    fits = load_dict({"name": "j", "command": "true", "roles": {"worker": {"count": 2, "cpus": 2, "mem": 64}}})
    assert admission.check(None, fits).waiting == {"worker": 1}


def test_an_elastic_role_is_admitted_by_its_min_its_standbys_hold_nothing(monkeypatch):
    """Issue 30: admission's all-or-nothing unit is the job with ``min`` workers. A cluster that holds 2
    of them at once admits ``{"min": 2, "max": 3}`` (the third is a standby, placed when there is room),
    and refuses the same job with a fixed count of 3; a shortfall counts the min only."""
    cap = _cap(_slave(1, cpus=2), _slave(2, cpus=2))
    monkeypatch.setattr(capacity, "read", lambda client, given=None: cap)

    def job(count):
        return load_dict({"name": "el", "command": "true", "style": "multi_worker_mirrored",
                          "roles": {"worker": {"count": count, "cpus": 2, "mem": 64}}})
    assert job({"min": 2, "max": 3}).required_tasks() == [("worker", 0), ("worker", 1)]
    assert job(3).required_tasks() == job(3).tasks()
    verdict = admission.check(None, job({"min": 2, "max": 3}))
    assert verdict.checked and not verdict.waiting
    with pytest.raises(UsageError) as e:
        admission.check(None, job(3))
    assert str(e.value).startswith("job el needs cpus 6 in all; the cluster has 4 in all (2 agents)")
    busy = _cap(_slave(1, cpus=2, used={"cpus": 2.0}), _slave(2, cpus=2))
    monkeypatch.setattr(capacity, "read", lambda client, given=None: busy)
    assert admission.check(None, job({"min": 2, "max": 3})).waiting == {"worker": 1}


# -- placement rules across the job's tasks (marathon_tf.contract.spread) ----------------------------


def _rules_job(workers, job_rules, **role):
    return load_dict({"name": "j", "command": "true", "constraints": job_rules,
                      "roles": {"worker": {"count": workers, "cpus": 1, "mem": 64, **role}}})


def test_a_rule_no_agents_can_satisfy_is_refused_naming_it_and_the_agents(monkeypatch):
    cap = _cap(_slave(1), _slave(2), _slave(3))
    monkeypatch.setattr(capacity, "registered", lambda client, given=None: cap)
    monkeypatch.setattr(capacity, "read", lambda client, given=None: None)  # sizes not enforced: still refused
    with pytest.raises(UsageError) as e:
        admission.check(None, _rules_job(4, [["hostname", "UNIQUE"]]))
    assert e.value.exit_code == 2
    assert str(e.value) == ('job rule ["hostname", "UNIQUE"] needs 4 distinct hosts for its 4 tasks; the Mesos master '
                            'lists 3 agents; nothing was sent')
    assert "constraints_per_task" in e.value.hint
    assert admission.check(None, _rules_job(3, [["hostname", "UNIQUE"]])).note is None
    assert admission.check(None, _rules_job(6, [["hostname", "MAX_PER", "2"]])).note is None
    with pytest.raises(UsageError) as e:
        admission.check(None, _rules_job(7, [["hostname", "MAX_PER", "2"]]))
    assert str(e.value).startswith('job rule ["hostname", "MAX_PER", "2"] fits at most 2 × 3 = 6 of its 7 tasks')
    with pytest.raises(UsageError) as e:  # a role's own rule names its role; every agent has rack r1
        admission.check(None, _rules_job(2, [], constraints=[["rack", "UNIQUE"]]))
    assert str(e.value).startswith('worker rule ["rack", "UNIQUE"] needs 2 distinct values of rack for its 2 tasks; '
                                   'the 3 agents the Mesos master lists have 1 (r1)')
    # Marathon's per-app meaning constrains nothing across tasks: nothing to refuse
    per_app = load_dict({"name": "j", "command": "true", "constraints_per_task": [["hostname", "UNIQUE"]],
                         "roles": {"worker": {"count": 5, "cpus": 1, "mem": 64}}})
    assert admission.check(None, per_app).note is None


def test_rules_not_checked_when_the_master_cannot_be_read_say_so_and_proceed(monkeypatch):
    def unknown(client, given=None):
        raise capacity.Unknown("the Mesos master at http://master:5050 cannot be read (ConnectionError)")

    monkeypatch.setattr(capacity, "registered", unknown)
    monkeypatch.setattr(capacity, "read", unknown)
    verdict = admission.check(None, _rules_job(9, [["hostname", "UNIQUE"]]))
    assert verdict.note == ("placement rules not checked against the agents: the Mesos master at http://master:5050 "
                            "cannot be read (ConnectionError)")


def test_the_packing_places_a_rules_tasks_as_the_leader_would():
    cap = _cap(_slave(1, cpus=4), _slave(2, cpus=4))
    spec = _rules_job(3, [["hostname", "MAX_PER", "1"]])
    app = admission.spread.strip(render_app(spec, "worker", 1))  # a held app: what it asks, without the hold
    assert app["constraints"] == []
    from marathon_tf.user.render import placement_scopes

    (scope,) = placement_scopes(spec)
    order = [("worker", app)] * 3
    assert admission.pack(order, cap) == {}  # per app: all three fit (two on one agent)
    assert admission.pack(order, cap, scopes=[scope] * 3) == {"worker": 1}  # the rule: one per agent
