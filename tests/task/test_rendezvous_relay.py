"""A large job's relays (marathon_tf.task.rendezvous.relay, issue 40): the leader serves a few relays, every other
follower long-polls one of them, so the leader's bytes to form and change a job grow with the job, not its square.
In-process over HTTP on 127.0.0.1 (a real leader, relays and followers, each on a status endpoint of its own); the
tree is made small (relays above 2 followers, 3 per relay) so that seven tasks show it."""

import json
import random
import threading
import time

import pytest
import requests
from task_helpers import FakeBackend, wait_for

from marathon_tf.contract.plan import Round, RoundCause, RoundKind
from marathon_tf.task import rendezvous as ld
from marathon_tf.task.discovery import Observation
from marathon_tf.task.rendezvous import leader as leader_side
from marathon_tf.task.rendezvous.relay import Mirror, Tree
from marathon_tf.task.status_server import StatusServer, TaskStatus

JOB = "ml/big"
MEMBERS = [("worker", i) for i in range(7)]
W0 = ("worker", 0)
SMALL = {"above": 2, "fanout": 3}


def test_the_tree_gives_a_hundredth_of_a_large_jobs_followers_a_hundred_followers_each():
    members = [("ps", 0)] + [("worker", i) for i in range(10_000)]
    tree = Tree.of(members, W0)
    assert len(tree.relays) == 100 and tree.relays[0] == ("ps", 0) and W0 not in tree.relays
    served: dict = {}
    for m in members:
        if m != W0 and not tree.serves(m):
            served.setdefault(tree.relay_of(m), []).append(m)
    assert set(served) == set(tree.relays) and max(map(len, served.values())) <= 100
    assert sum(map(len, served.values())) + len(tree.relays) == len(members) - 1
    assert tree.relay_of(W0) is None and tree.relay_of(tree.relays[5]) is None and tree.serves(tree.relays[5])
    # a job of up to 1,000 followers: no relays (every follower asks the leader, as before)
    small = Tree.of([("worker", i) for i in range(1001)], W0)
    assert small.relays == () and small.relay_of(("worker", 7)) is None
    assert Tree.of(members, None).relays == ()


def test_a_mirror_answers_deltas_across_the_leaders_versions_and_waits_for_followers_ahead():
    mirror = Mirror("j", "worker-1", lambda: False)
    assert mirror.handle({"job": "j", "wait": "0"})[0] == 503  # nothing taken yet
    mirror.take({"leader": "L", "leader_task": "worker-0", "cluster": "c", "version": 3, "complete": False,
                 "delta": False, "peers": {"worker-0": "a:1"}, "missing": {"worker-2": "NXDOMAIN"}})
    # the leader's version 7 came as a delta since 3 (the relay never had 4-6)
    mirror.take({"leader": "L", "version": 7, "complete": True, "delta": True, "peers": {"worker-2": "b:2"},
                 "missing": {"worker-2": None}, "plan": {"generation": 2}, "cluster": "c", "leader_task": "worker-0"})
    with mirror.cond:
        assert mirror.since(3) == ({"worker-2": "b:2"}, {"worker-2": None})
        assert mirror.since(5) == ({"worker-2": "b:2"}, {"worker-2": None})  # a follower that had 5 from the leader
        assert mirror.since(2) is None and mirror.since(8) is None
    code, body = mirror.handle({"job": "j", "after": "3", "leader": "L", "wait": "0"})
    doc = json.loads(body)
    assert code == 200 and doc["delta"] is True and doc["version"] == 7 and doc["plan"] == {"generation": 2}
    assert doc["peers"] == {"worker-2": "b:2"} and doc["via"] == "worker-1" and doc["leader"] == "L"
    whole = json.loads(mirror.handle({"job": "j", "leader": "other", "wait": "0"})[1])
    assert whole["delta"] is False and whole["missing"] == {}
    assert whole["peers"] == {"worker-0": "a:1", "worker-2": "b:2"}
    # a follower at the mirror's version (or ahead of it, from the leader itself) waits for a newer one
    started = time.monotonic()
    code, body = mirror.handle({"job": "j", "after": "9", "leader": "L", "wait": "0.3"})
    assert time.monotonic() - started >= 0.25 and json.loads(body)["version"] == 7
    answers: list = []
    waiter = threading.Thread(target=lambda: answers.append(mirror.handle(
        {"job": "j", "after": "7", "leader": "L", "wait": "20"})))
    waiter.start()
    time.sleep(0.2)
    assert answers == []
    mirror.take({"leader": "L", "version": 8, "complete": True, "delta": True, "peers": {"worker-0": "a:9"},
                 "missing": {}, "cluster": "c", "leader_task": "worker-0"})
    waiter.join(5)
    assert json.loads(answers[0][1])["peers"] == {"worker-0": "a:9"}
    # a relaunched leader: its view taken whole, the old history gone
    mirror.take({"leader": "M", "version": 1, "complete": True, "delta": False, "peers": {"worker-0": "c:1"},
                 "missing": {}, "cluster": "c", "leader_task": "worker-0"})
    with mirror.cond:
        assert mirror.since(7) is None and mirror.peers == {"worker-0": "c:1"}
    assert mirror.handle({"job": "other"})[0] == 404


class Job:
    """The leader (worker-0), and the followers worker-1..6 (1 and 2 relays), each on its own status endpoint; what
    the leader answered, by whom and of what kind."""

    def __init__(self, backend, long_poll=2.0):
        self.stop = threading.Event()
        self.parts: list = []
        self.answers: list[tuple[str, str, int]] = []  # (who asked, redirect/whole/delta, bytes)
        server = self._server(0)
        tree = Tree.of(MEMBERS, W0, **SMALL)
        self.lead = ld.LeaderRendezvous(backend, MEMBERS, W0, "127.0.0.1:2000", job=JOB, slow=0.05, stop=self.stop,
                                        rng=random.Random(1), fast=(0.02, 0.05), tree=tree)
        server.add_route(ld.PATH, self._counted)
        self.lead_at = f"127.0.0.1:{server.port}"
        self.parts.append(self.lead.start())
        self.followers: dict[int, ld.FollowerRendezvous] = {}
        self.servers: dict[int, StatusServer] = {}
        for i in range(1, 7):  # the relays first: a follower that asks before its relay registered is answered whole
            if i == 3:
                wait_for(lambda: len(self.lead._relays) == 2, 10, what="both relays registered")
            status = self.servers[i] = self._server(i)
            follower = ld.FollowerRendezvous(lambda: Observation(self.lead_at, "ok"), FakeBackend(), MEMBERS,
                                             ("worker", i), job=JOB, session=requests.Session(), stop=self.stop,
                                             rng=random.Random(i), schedule=(0.02, 0.1), fallback=30.0,
                                             long_poll=long_poll, leader_task="worker-0", relay_pause=1.0,
                                             serve=status.port if tree.serves(("worker", i)) else None)
            if follower.mirror is not None:
                status.add_route(ld.PATH, follower.mirror.handle)
            self.followers[i] = follower
            self.parts.append(follower.start())

    def _server(self, i):
        server = StatusServer(TaskStatus(job=JOB, task=f"worker-{i}", role="worker", index=i), "127.0.0.1", 0).start()
        self.parts.append(server)
        return server

    def _counted(self, query):
        answer = self.lead.handle(query)
        body = answer[1] if isinstance(answer[1], bytes) else json.dumps(answer[1]).encode()
        doc = json.loads(body)
        kind = "redirect" if "redirect" in doc else "delta" if doc.get("delta") else "whole"
        self.answers.append((query.get("me", "?"), kind, len(body)))
        return answer

    def close(self):
        self.stop.set()
        for part in reversed(self.parts):
            part.close()


@pytest.fixture
def job():
    made: list[Job] = []
    yield lambda backend, **kw: made.append(Job(backend, **kw)) or made[-1]
    for j in made:
        j.close()


def _everyone(job, peers_of):
    others = lambda i: [m for m in MEMBERS if m != ("worker", i)]  # noqa: E731
    return {i: f.wait(others(i), 20) for i, f in job.followers.items() if peers_of(i)}


def test_followers_of_a_large_job_get_the_view_and_the_plan_through_their_relays(job):
    backend = FakeBackend({("worker", i): f"10.0.0.{i}:{i}" for i in range(1, 7)})
    j = job(backend)
    found = _everyone(j, lambda i: True)
    assert all(f == {m: backend.addresses.get(m, "127.0.0.1:2000") for m in MEMBERS if m != ("worker", i)}
               for i, f in found.items())
    wait_for(lambda: all(j.followers[i].relay_address for i in (3, 4, 5, 6)), 10, what="every follower relayed")
    assert {i: j.followers[i].relay_task for i in (3, 4, 5, 6)} == {3: "worker-1", 4: "worker-2", 5: "worker-1",
                                                                    6: "worker-2"}
    assert j.followers[1].relay_address is None and j.followers[3].relay_address == \
        f"127.0.0.1:{j.servers[1].port}"
    # the leader answered the relays with views, every other follower with a redirect only
    views = {who for who, kind, _ in j.answers if kind != "redirect"}
    assert views <= {"worker-1", "worker-2"}, j.answers
    assert {who for who, kind, _ in j.answers if kind == "redirect"} == {"worker-3", "worker-4", "worker-5", "worker-6"}
    # a move and a plan change reach every follower through the relays; the leader sends them to its two relays
    before = len(j.answers)
    backend.addresses[("worker", 6)] = "10.0.9.6:66"
    round_ = Round(1, RoundKind.RESTART, RoundCause.FAILURE, "worker-4 failed", grace=0.0)
    j.lead.coordinator.start_round(round_)
    current = {m: "10.0.0.6:6" for m in [("worker", 6)]}
    for i in (1, 2, 3, 4, 5):
        wait_for(lambda i=i: j.followers[i].moved(current) == {("worker", 6): "10.0.9.6:66"}, 10,
                 what=f"the move at worker-{i}")
        wait_for(lambda i=i: j.followers[i].restart_round()[1] == round_, 10, what=f"the round at worker-{i}")
        assert j.followers[i].restart_round()[0] == j.lead.leader_id
    assert {who for who, kind, _ in j.answers[before:]} <= {"worker-1", "worker-2"}, j.answers[before:]
    assert "through relay worker-2" in j.followers[4].leader_detail


def test_a_relay_that_fails_its_followers_sends_them_to_the_leader_until_it_serves_again(job):
    backend = FakeBackend({("worker", i): f"10.0.0.{i}:{i}" for i in range(1, 7)})
    j = job(backend)
    _everyone(j, lambda i: True)
    wait_for(lambda: j.followers[3].relay_address and j.followers[5].relay_address, 10, what="relayed")
    away = threading.Event()  # set: worker-1's relay answers 503 (it went away)
    relay = j.followers[1]
    j.servers[1].add_route(ld.PATH, lambda q: (503, {"message": "gone"}) if away.is_set() else relay.mirror.handle(q))
    away.set()
    # once their polls in flight at the relay end (2 s long polls here), the next is refused: to the leader
    wait_for(lambda: j.followers[3].relay_address is None and j.followers[5].relay_address is None, 10,
             interval=0.005, what="worker-1's followers back at the leader")
    backend.addresses[("worker", 4)] = "10.0.9.4:44"
    current = {("worker", 4): "10.0.0.4:4"}
    for i in (3, 5):  # worker-1's followers had the move from the leader itself (their relay refuses)
        wait_for(lambda i=i: j.followers[i].moved(current) == {("worker", 4): "10.0.9.4:44"}, 10,
                 what=f"the move at worker-{i} without its relay")
    assert {"worker-3", "worker-5"} <= {who for who, kind, _ in j.answers if kind != "redirect"}
    away.clear()  # back: after the pause (1 s here) the leader sends them to it again
    wait_for(lambda: j.followers[3].relay_address and j.followers[5].relay_address, 10, what="relayed again")


@pytest.mark.parametrize("index, network, relays", [(1, "host", True), (11, "host", True), (12, "host", False),
                                                    (1, "bridge", False)])
def test_a_task_of_a_large_job_relays_when_the_tree_says_so_and_its_port_is_its_hosts(index, network, relays):
    """make_rendezvous: in a job of 1,001 followers (11 relays) worker-1 and worker-11 serve the view on their status
    port; worker-12 does not; nor does a relay on a bridge network (the leader could not reach the port it names)."""
    from marathon_tf.contract.taskenv import TaskContext

    ctx = TaskContext(job=JOB, role="worker", index=index, cluster={"worker": 1002}, discovery="marathon",
                      marathon_url="http://127.0.0.1:9", network=network)
    server = StatusServer(TaskStatus(job=JOB, task=ctx.task, role="worker", index=index), "127.0.0.1", 0).start()
    stop = threading.Event()
    side = ld.make_rendezvous(ctx, {}, FakeBackend(), me=("worker", index), address="127.0.0.1:2000", server=server,
                              stop=stop, slow=60.0, session=requests.Session())
    try:
        assert isinstance(side, ld.FollowerRendezvous) and (side.serve == server.port) is relays
        code = requests.get(f"http://127.0.0.1:{server.port}{ld.PATH}?job={JOB}&wait=0", timeout=5).status_code
        assert code == (503 if relays else 404)  # a relay with no view yet; no such route on the others
    finally:
        stop.set()
        side.close()
        server.close()


def test_a_relay_of_a_forming_job_has_a_view_for_its_followers_before_the_job_formed(job):
    """A follower sent to its relay while the job forms stays there: the relay's own long poll at the leader began
    first and ends first, so by the time the follower's poll at the relay times out the relay has the leader's
    (partial) view to answer with, not a 503 sending the follower back to the leader; once the job formed the
    follower has the complete view from its relay, and the leader sent views to its relays only."""
    backend = FakeBackend({("worker", i): f"10.0.0.{i}:{i}" for i in range(1, 6)})  # worker-6 not placed yet
    j = job(backend)
    wait_for(lambda: j.followers[3].relay_address and j.followers[4].relay_address, 10, what="redirected")
    for i in (1, 2):
        wait_for(lambda i=i: j.followers[i].mirror.leader is not None, 10, what=f"worker-{i}'s mirror")
        assert j.followers[i].mirror.complete is False and "worker-6" in j.followers[i].mirror.missing
    polls = {i: j.followers[i].long_polls for i in (3, 4)}
    time.sleep(2.5)  # longer than a follower's long poll here (2 s): its relay answered it, not sent it away
    assert j.followers[3].relay_address and j.followers[4].relay_address
    assert all(j.followers[i].long_polls > polls[i] for i in (3, 4))
    backend.addresses[("worker", 6)] = "10.0.0.6:6"
    found = _everyone(j, lambda i: i in (3, 4, 5))
    assert all(f[("worker", 6)] == "10.0.0.6:6" for f in found.values())
    assert not {who for who, kind, _ in j.answers if kind != "redirect"} - {"worker-1", "worker-2"}, j.answers


def test_a_follower_whose_relay_is_gone_hears_of_a_new_plan_at_once_from_the_leader(job, monkeypatch):
    """A relay that died stays registered for a while; once that lapses, its followers wait at the leader for a new
    registration — and still hear of every change there at once, a new plan (a round) as well as a move."""
    monkeypatch.setattr(leader_side, "REGISTERED_FOR", 0.5)
    backend = FakeBackend({("worker", i): f"10.0.0.{i}:{i}" for i in range(1, 7)})
    j = job(backend, long_poll=20.0)
    _everyone(j, lambda i: True)
    wait_for(lambda: j.followers[3].relay_address and j.followers[5].relay_address, 10, what="relayed")
    j.followers[1].close()  # worker-1, their relay, is gone
    j.servers[1].close()

    def move(i, address):
        backend.addresses[("worker", i)] = address
        for k in (3, 5):
            wait_for(lambda k=k: j.followers[k].view.peers.get(("worker", i)) == address, 10,
                     what=f"the move of worker-{i} at worker-{k}")

    move(4, "10.0.9.4:44")  # their polls at the relay were refused: now at the leader, relay=0 (1 s here)
    time.sleep(1.5)
    move(6, "10.0.9.6:66")  # their next polls: at the leader, waiting for worker-1 to register again
    time.sleep(0.3)
    round_ = Round(1, RoundKind.RESTART, RoundCause.FAILURE, "worker-2 failed", grace=0.0)
    began = time.monotonic()
    j.lead.coordinator.start_round(round_)
    for k in (3, 5):
        wait_for(lambda k=k: j.followers[k].restart_round()[1] == round_, 5, what=f"the round at worker-{k}")
    assert time.monotonic() - began < 5
