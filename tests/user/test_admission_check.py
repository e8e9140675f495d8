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
    return capacity.Capacity(capacity.parse_agents({"slaves": list(slaves)}), set(roles), "http://master:5050")


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
    from marathon_tf.user import gang, jobs
    from marathon_tf.user.api import Marathon

    seen = []
    monkeypatch.setattr(jobs, "job_status", lambda client, job, **kw: seen.append(("status", kw.get("mesos")))
                        or {"job": job, "state": "Deploying", "tasks": []})
    monkeypatch.setattr(gang, "drive", lambda client, job, status, **kw: seen.append(("drive", kw.get("mesos"))))
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
    apps = {a["id"]: dict(a, tasks=[]) for a in render_group(spec)["apps"]}
    gang.annotate({"job": "mnist", "tasks": []}, apps, {}, client=None, now=0.0, mesos="http://named:5050")
    gang.annotate({"job": "mnist", "tasks": []}, apps, {}, client=None, now=0.0)
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
    own = capacity.marathon_offers(frameworks, "marathon-fw", "marathon")
    agents = {a.id: a.free_summary() for a in capacity.parse_agents(slaves, own_offers=own)}
    assert agents["S1"]["cpus"] == 4.0 and agents["S1"]["ports"] == 100.0  # all offered to Marathon: free
    assert agents["S2"]["cpus"] == 2.5  # 1.5 held by another framework is not
    # without Marathon's offers (unknown), every offer counts as taken, as before
    before = {a.id: a.free_summary()["cpus"] for a in capacity.parse_agents(slaves)}
    assert before == {"S1": 1.0, "S2": 2.0}
    # no framework id in /v2/info: the one active framework named as Marathon's framework_name
    assert capacity.marathon_offers(frameworks, None, "marathon") == own
    assert capacity.marathon_offers(frameworks, None, "nobody") == {}


def test_capacity_asks_the_master_for_marathons_offers_only_when_something_is_offered(httpserver):
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
