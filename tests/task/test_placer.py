"""The job's leader enforcing its placement rules (marathon_tf.task.placer), and its rendezvous holding the
peers the rules hold (marathon_tf.task.rendezvous.leader): Marathon and the backend are fakes.

Marathon compares an app's constraints among that app's instances only (``Constraints.scala``,
``M@1.11:src/main/scala/mesosphere/mesos/Constraints.scala``); the placer writes what the rules mean
across apps as ``LIKE`` / ``UNLIKE`` constraints to the apps that wait, in one bulk
``PUT /v2/apps?force=true``."""

from __future__ import annotations

import json
import random
import threading
import time

from task_helpers import FakeBackend, wait_for

from marathon_tf.contract import labels as L
from marathon_tf.contract import spread
from marathon_tf.contract.spread import HOLD
from marathon_tf.task import rendezvous as ld
from marathon_tf.task.placer import Placer

JOB = "ml/spread"
RULES = json.dumps({"scope": "job", "rules": [["hostname", "UNIQUE"]]})


def _app(task, host=None, added=(), why="", staged="2024-01-01T00:00:00.000Z", base=(), rules=RULES):
    labels = {L.DIGEST: "d-" + task, spread.RULES_LABEL: rules}
    if added:
        labels[spread.LABEL] = spread.label_value(added, why)
    tasks = [{"id": task + ".1", "host": host, "state": "TASK_RUNNING", "stagedAt": staged}] if host else []
    return {"id": f"/{JOB}/{task}", "constraints": [list(c) for c in base + added], "labels": labels, "tasks": tasks}


class Marathon:
    """The calls the placer makes: the job's group, bulk partial updates, /v2/info, the master's agents."""

    def __init__(self, apps, agents=None):
        self.apps = {a["id"]: a for a in apps}
        self.puts: list[tuple[list, bool]] = []
        self.agents = agents
        self.urls = ["http://marathon.example:8080"]

    def get_group(self, group_id, embed=()):
        assert group_id == "/" + JOB and "group.apps.tasks" in embed
        return {"id": group_id, "apps": list(self.apps.values())}

    def update_apps(self, items, force=False):
        self.puts.append((items, force))
        for item in items:
            self.apps[item["id"]] = {**self.apps[item["id"]], **item}
        return {"deploymentId": "d", "version": "v"}

    def info(self):
        return {"marathon_config": {"mesos_leader_ui_url": "http://marathon.example:8080/mesos"}}

    def request(self, method, path):
        assert (method, path) == ("GET", "/mesos/master/slaves")
        if self.agents is None:
            from marathon_tf.contract.errors import MarathonError

            raise MarathonError("403 forbidden", status=403)
        return type("R", (), {"body": {"slaves": self.agents}})()


def test_a_round_releases_the_next_held_task_with_the_siblings_hosts_in_one_forced_bulk_write():
    held = (HOLD,)
    m = Marathon([_app("worker-0", "10.0.0.1"), _app("worker-1", added=held, why="held"),
                  _app("worker-2", added=held, why="held")])
    said = []
    placer = Placer(m, JOB, "worker-0", log=said.append)
    assert placer.round() is False
    (items, force), = m.puts
    assert force is True and [i["id"] for i in items] == [f"/{JOB}/worker-1", f"/{JOB}/worker-2"]
    w1 = m.apps[f"/{JOB}/worker-1"]
    assert w1["constraints"] == [["hostname", "UNLIKE", "10\\.0\\.0\\.1"]]
    assert w1["labels"][L.DIGEST] == "d-worker-1"  # every other label kept (a partial update replaces the map)
    assert spread.split(w1)[2] == 'job rule ["hostname", "UNIQUE"]: away from 10.0.0.1 (worker-0)'
    assert m.apps[f"/{JOB}/worker-2"]["constraints"] == [list(HOLD)]  # its why is now the round's own text
    assert placer.hold({"worker-1": 0.0, "worker-2": 0.0}) == {
        "worker-1": 'placement: job rule ["hostname", "UNIQUE"]: away from 10.0.0.1 (worker-0)',
        "worker-2": 'placement: held by job rule ["hostname", "UNIQUE"]: its tasks are placed one at a time by the '
                    "job's leader"}
    m.apps[f"/{JOB}/worker-1"]["tasks"] = [{"id": "w1", "host": "10.0.0.2", "state": "TASK_STAGING", "stagedAt": "b"}]
    placer.round()
    assert m.apps[f"/{JOB}/worker-2"]["constraints"] == [["hostname", "UNLIKE", "10\\.0\\.0\\.1|10\\.0\\.0\\.2"]]
    assert m.apps[f"/{JOB}/worker-1"]["constraints"] == [["hostname", "UNLIKE", "10\\.0\\.0\\.1"]]  # placed: untouched
    m.apps[f"/{JOB}/worker-2"]["tasks"] = [{"id": "w2", "host": "10.0.0.3", "state": "TASK_RUNNING", "stagedAt": "c"}]
    writes = len(m.puts)
    assert placer.round() is True and len(m.puts) == writes  # settled: nothing written
    assert placer.hold({"worker-1": 0.0, "worker-2": 0.0}) == {}


def test_a_task_beside_a_sibling_is_moved_and_held_by_the_rendezvous_until_it_is_gone():
    m = Marathon([_app("worker-0", "10.0.0.1", staged="b"), _app("worker-1", "10.0.0.1", staged="c"),
                  _app("worker-2", "10.0.0.2", staged="a")])
    said = []
    placer = Placer(m, JOB, "worker-0", log=said.append)
    placer.round()
    (items, _), = m.puts
    assert [i["id"] for i in items] == [f"/{JOB}/worker-1"]  # the leader keeps its place, so does worker-2
    assert items[0]["constraints"] == [["hostname", "UNLIKE", "10\\.0\\.0\\.1|10\\.0\\.0\\.2"]]
    assert any(line.startswith("placement: moving worker-1 off 10.0.0.1") for line in said)
    assert placer.hold({"worker-1": 0.0, "worker-2": 0.0}) == {
        "worker-1": 'placement: job rule ["hostname", "UNIQUE"]: on 10.0.0.1 beside worker-0; being moved'}
    # a peer whose place changed after the round's read began is not counted until the next round
    assert placer.hold({"worker-2": time.monotonic() + 1})["worker-2"] == "placement: its place is being checked"


def test_before_its_first_round_every_peer_waits_for_the_placement():
    placer = Placer(Marathon([]), JOB, "worker-0")
    assert placer.hold({"ps-0": 0.0}) == {"ps-0": "placement: not checked yet"}


def test_an_attribute_rule_reads_the_agents_from_the_master_else_is_said_unenforced():
    rules = json.dumps({"scope": "job", "rules": [["rack", "UNIQUE"]]})
    presence = (("rack", "LIKE", ".*"),)
    apps = [_app("worker-0", "h1", rules=rules, base=presence),
            _app("worker-1", added=(HOLD,), why="held", rules=rules, base=presence)]
    m = Marathon(apps, agents=[{"hostname": "h1", "attributes": {"rack": "r1"}},
                               {"hostname": "h2", "attributes": {"rack": "r2", "level": 2}}])
    Placer(m, JOB, "worker-0").round()
    assert m.apps[f"/{JOB}/worker-1"]["constraints"] == [["rack", "LIKE", ".*"], ["rack", "UNLIKE", "r1"]]
    m = Marathon(apps, agents=None)  # the master refuses the task's credentials
    said = []
    placer = Placer(m, JOB, "worker-0", log=said.append)
    placer.round()
    placer._attributes_at = -1e9
    placer.round()
    assert said.count('placement: job rule ["rack", "UNIQUE"] not enforced: the agents\' attributes cannot be read '
                      'from the Mesos master') == 1
    assert m.apps[f"/{JOB}/worker-1"]["constraints"] == [["rack", "LIKE", ".*"]]  # released, one at a time still


def test_the_leaders_view_is_complete_only_once_the_placement_lets_every_peer_count():
    members = [("worker", 0), ("worker", 1), ("worker", 2)]
    backend = FakeBackend({("worker", 1): "10.0.0.1:1", ("worker", 2): "10.0.0.2:2"})

    class Placement:
        def __init__(self):
            self.held = {"worker-1": "placement: job rule: on 10.0.0.1 beside worker-0; being moved"}
            self.listeners, self.woken = [], 0

        def hold(self, changed):
            return {t: why for t, why in self.held.items() if t in changed}

        def wake(self):
            self.woken += 1

    placement = Placement()
    stop = threading.Event()
    lead = ld.LeaderRendezvous(backend, members, ("worker", 0), "10.0.0.1:0", job=JOB, slow=60.0, stop=stop,
                               rng=random.Random(1), fast=(0.02, 0.05), placement=placement).start()
    try:
        wait_for(lambda: lead.document()["peers"].get("worker-2"), 5, what="worker-2 found")
        doc = lead.document()
        assert doc["complete"] is False and "worker-1" not in doc["peers"]
        assert doc["missing"] == {"worker-1": "placement: job rule: on 10.0.0.1 beside worker-0; being moved"}
        assert placement.woken >= 1  # a peer that showed up wakes the placement
        placement.held = {}
        for listener in placement.listeners:  # the placement's round is over: the view is shown again
            listener()
        assert lead.document()["complete"] is True and lead.document()["peers"]["worker-1"] == "10.0.0.1:1"
    finally:
        stop.set()
        lead.close()


def test_a_rule_on_the_zone_reads_the_agents_fault_domain():
    """``@region`` / ``@zone`` are Marathon 1.6+'s fields read from the offer's domain
    (``M@1.11:src/main/scala/mesosphere/mesos/Constraints.scala``)."""
    rules = json.dumps({"scope": "job", "rules": [["@zone", "UNIQUE"]]})
    presence = (("@zone", "LIKE", ".*"),)
    apps = [_app("worker-0", "h1", rules=rules, base=presence),
            _app("worker-1", added=(HOLD,), why="held", rules=rules, base=presence)]
    zone = {"fault_domain": {"region": {"name": "eu"}, "zone": {"name": "eu-1a"}}}
    m = Marathon(apps, agents=[{"hostname": "h1", "attributes": {}, "domain": zone}, {"hostname": "h2"}])
    Placer(m, JOB, "worker-0").round()
    assert m.apps[f"/{JOB}/worker-1"]["constraints"] == [["@zone", "LIKE", ".*"], ["@zone", "UNLIKE", "eu\\-1a"]]


def test_a_released_task_no_offer_fits_is_looked_at_less_and_less_often():
    m = Marathon([_app("worker-0", "10.0.0.1"), _app("worker-1", added=(HOLD,), why="held")])
    placer = Placer(m, JOB, "worker-0", fast=0.05, calm=0.4).start()
    try:
        time.sleep(1.5)
    finally:
        placer.close()
    assert len(m.puts) == 1  # released once; nothing to write while it waits for an offer
    assert placer.rounds <= 10  # 0.05, 0.1, 0.2, 0.4, 0.4 … not 30 reads at the fast pace
    placer.wake()  # a peer change or a status update: a round at once


def test_a_later_write_to_a_task_it_stopped_still_names_that_stop_as_the_placements():
    """Two siblings stacked on the leader's host: the first round moves one and holds the other, both
    stopped by that write. Marathon ends the two kills in either order; the one released keeps its turn
    (no write flips the two), and when the held one is released later (a write with no task to stop) its
    label still names the task the placement stopped, else ``status`` takes that stop for a restart of
    the job and hides its wait (the race test in tests/local/test_local_placement.py, seen in a loaded CI)."""
    m = Marathon([_app("worker-0", "10.0.0.1", staged="a"), _app("worker-1", "10.0.0.1", staged="b"),
                  _app("worker-2", "10.0.0.1", staged="c")])
    said = []
    placer = Placer(m, JOB, "worker-0", log=said.append)
    placer.round()
    w1, w2 = m.apps[f"/{JOB}/worker-1"], m.apps[f"/{JOB}/worker-2"]
    assert (spread.displaced(w1), spread.displaced(w2)) == ("worker-1.1", "worker-2.1")
    assert w1["constraints"] == [["hostname", "UNLIKE", "10\\.0\\.0\\.1"]] and w2["constraints"] == [list(HOLD)]
    assert sorted(line.split(":")[1] for line in said if " moving " in line) == [" moving worker-1 off 10.0.0.1",
                                                                                 " moving worker-2 off 10.0.0.1"]
    w2["tasks"] = []  # worker-2's kill ends first, worker-1's is still under way
    writes = len(m.puts)
    placer.round()
    assert len(m.puts) == writes and sum(" moving " in line for line in said) == 2  # nothing flips, said once
    m.apps[f"/{JOB}/worker-1"]["tasks"] = [{"id": "worker-1.2", "host": "10.0.0.2", "state": "TASK_RUNNING",
                                           "stagedAt": "d"}]
    placer.round()
    w2 = m.apps[f"/{JOB}/worker-2"]
    assert w2["constraints"] == [["hostname", "UNLIKE", "10\\.0\\.0\\.1|10\\.0\\.0\\.2"]]  # released: a second write
    assert spread.displaced(w2) == "worker-2.1"


def test_the_placements_writes_do_not_postpone_the_admission_deadline():
    # Marathon stamps an app whose constraints or labels change with a new versionInfo.lastConfigChangeAt
    # (v1.4.3 src/main/scala/mesosphere/marathon/state/VersionInfo.scala:11 withConfigChange; an app PUT that
    # changes more than instances is a config change), and the admission deadline counts from the job's
    # newest one (marathon/waiting.py attempt_started): the leader releasing a held task must not move it.
    from marathon_tf.marathon import waiting as W

    deployed, released = "2024-01-01T00:00:00.000Z", "2024-01-01T00:05:00.000Z"
    apps = [_app("worker-0", "10.0.0.1"), _app("worker-1", added=(HOLD,), why="held"),
            _app("worker-2", added=(HOLD,), why="held")]
    for app in apps:
        app["versionInfo"] = {"lastConfigChangeAt": deployed}
    m = Marathon(apps)
    writes = m.update_apps

    def update_apps(items, force=False):
        out = writes([{**i, "versionInfo": {"lastConfigChangeAt": released}} for i in items], force)
        return out
    m.update_apps = update_apps
    Placer(m, JOB, "worker-0", log=lambda _: None).round()
    assert m.apps[f"/{JOB}/worker-1"]["versionInfo"]["lastConfigChangeAt"] == released  # it was written
    assert W.attempt_started(m.apps.values()) == W.wall(deployed)
    # a deploy, a scale or a re-submission (the render's labels: no leader's write) does move it
    again = {**m.apps[f"/{JOB}/worker-1"], "labels": {spread.LABEL: spread.label_value((HOLD,), "held")}}
    assert W.attempt_started([*m.apps.values(), again]) == W.wall(released)
