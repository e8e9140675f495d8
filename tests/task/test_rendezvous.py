"""The leader rendezvous protocol (marathon_tf.task.rendezvous), in-process: a real leader serving
GET /rendezvous on a real status endpoint, followers long-polling it over HTTP; backends,
Marathon and the event stream are fakes injected as the bootstrap tests do elsewhere."""

import queue
import random
import threading
import time

import pytest
import requests
from task_helpers import FakeBackend, FakeMarathon, http_json, wait_for

from marathon_tf.contract import naming
from marathon_tf.contract.cluster_spec import Membership
from marathon_tf.contract.errors import DiscoveryError
from marathon_tf.contract.labels import JobState
from marathon_tf.contract.plan import Counts, JobPlan, Round, RoundCause, RoundKind
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.task import rendezvous as ld
from marathon_tf.task.discovery import MarathonBackend, Observation
from marathon_tf.task.rendezvous import leader as leader_side
from marathon_tf.task.rendezvous import view as view_side
from marathon_tf.task.rendezvous.coordinator import Coordinator
from marathon_tf.task.rendezvous.view import View
from marathon_tf.task.status_server import StatusServer, TaskStatus

JOB = "ml/mnist"
PS, W0, W1 = ("ps", 0), ("worker", 0), ("worker", 1)
MEMBERS = [PS, W0, W1]


class FakeEvents:
    """An EventStream stand-in: ``push`` an event; ``wait`` returns what arrived."""

    available = True

    def __init__(self):
        self.q = queue.Queue()
        self.closed = False

    def push(self, **event):
        self.q.put(event)

    def wait(self, seconds):
        try:
            out = [self.q.get(timeout=max(seconds, 0))]
        except queue.Empty:
            return []
        while not self.q.empty():
            out.append(self.q.get_nowait())
        return out

    def close(self):
        self.closed = True


@pytest.fixture
def parts():
    """Started leaders/followers/servers; all closed at teardown."""
    made = []
    yield made
    for thing in reversed(made):
        thing.close()


def start_leader(parts, backend, *, slow=60.0, events=None, me=W0, address="127.0.0.1:2000", hinting=False, **kw):
    stop = threading.Event()
    server = StatusServer(TaskStatus(job=JOB, task="worker-0", role="worker", index=0), "127.0.0.1", 0).start()
    at = f"127.0.0.1:{server.port}"
    if hinting:
        kw["hints"] = ld.Hints(JOB, "worker-0", at)
    lead = ld.LeaderRendezvous(backend, MEMBERS, me, address, job=JOB, slow=slow, events=events, stop=stop,
                               rng=random.Random(1), fast=(0.02, 0.05), **kw)
    server.add_route(ld.PATH, lead.handle)
    parts.extend([server, lead])
    lead.start()
    return lead, at


def start_follower(parts, locate, direct=None, *, me=W1, fallback=30.0, long_poll=2.0):
    follower = ld.FollowerRendezvous(locate, direct or FakeBackend(), MEMBERS, me, job=JOB,
                                     session=requests.Session(), rng=random.Random(2), schedule=(0.02, 0.1),
                                     fallback=fallback, long_poll=long_poll)
    parts.append(follower)
    return follower.start()


def test_the_leader_publishes_a_versioned_view_and_long_polls(parts):
    backend = FakeBackend({PS: "10.0.0.1:1"})
    lead, address = start_leader(parts, backend)
    wait_for(lambda: lead.document()["peers"].get("ps-0"), 5, what="ps-0 found")
    code, doc = http_json(f"http://{address}{ld.PATH}?job={JOB}&after=-1")
    started = time.monotonic()  # a forming follower asks only for the complete view
    assert http_json(f"http://{address}{ld.PATH}?job={JOB}&after=-1&leader={doc['leader']}&complete=1"
                     f"&wait=0.5", timeout=5)[1]["complete"] \
        is False and time.monotonic() - started >= 0.4
    assert code == 200 and doc["job"] == JOB and doc["leader_task"] == "worker-0"
    assert doc["complete"] is False and doc["peers"] == {"ps-0": "10.0.0.1:1", "worker-0": "127.0.0.1:2000"}
    assert doc["missing"] == {"worker-1": "NXDOMAIN"}
    # a long poll at the current version answers when the view changes, not before
    answers = []
    poller = threading.Thread(target=lambda: answers.append(http_json(
        f"http://{address}{ld.PATH}?job={JOB}&after={doc['version']}&leader={doc['leader']}&wait=20", timeout=25)))
    poller.start()
    time.sleep(0.5)
    assert answers == []
    backend.addresses[W1] = "10.0.0.2:2"
    poller.join(10)
    code, newer = answers[0]
    assert code == 200 and newer["version"] > doc["version"] and newer["complete"] is True
    # only what changed since the follower's version (null: no longer missing)
    assert newer["delta"] is True and newer["peers"] == {"worker-1": "10.0.0.2:2"}
    assert newer["missing"] == {"worker-1": None}
    whole = http_json(f"http://{address}{ld.PATH}?job={JOB}&after={doc['version']}&leader=another")[1]
    assert whole["delta"] is False and whole["missing"] == {} and len(whole["peers"]) == 3
    # unchanged: the long poll times out with the same version
    started = time.monotonic()
    code, same = http_json(f"http://{address}{ld.PATH}?job={JOB}&after={newer['version']}&leader={newer['leader']}"
                           f"&wait=0.5", timeout=5)
    assert same["version"] == newer["version"] and time.monotonic() - started >= 0.4
    # another leader id (a relaunched leader) or another job
    assert http_json(f"http://{address}{ld.PATH}?after={newer['version']}&leader=old&wait=20")[1]["version"] \
        == newer["version"]
    assert http_json(f"http://{address}{ld.PATH}?job=other")[0] == 404
    assert http_json(f"http://{address}{ld.PATH}?after=x")[0] == 400


def test_a_follower_finds_the_leader_and_sees_a_move_through_the_long_poll(parts):
    backend = FakeBackend({PS: "10.0.0.1:1", W1: "10.0.0.2:2"})
    lead, address = start_leader(parts, backend, slow=0.05)
    locates = []
    follower = start_follower(parts, lambda: locates.append(1) or Observation(address, "ok"))
    found = follower.wait([PS, W0], 10)
    assert found == {PS: "10.0.0.1:1", W0: "127.0.0.1:2000"}
    assert len(locates) == 1 and follower.long_polls >= 1
    assert follower.moved(found) == {}
    backend.addresses[PS] = "10.0.0.9:9"
    wait_for(lambda: follower.moved(found), 5, interval=0.01, what="the move")  # how fast: benchmarks
    assert follower.moved(found) == {PS: "10.0.0.9:9"}
    assert len(locates) == 1  # one small request to find the leader, then only the leader


def test_moved_reports_nothing_while_a_peer_is_down_and_settle_waits_for_it(parts):
    backend = FakeBackend({PS: "10.0.0.1:1", W1: "10.0.0.2:2"})
    lead, address = start_leader(parts, backend, slow=0.05)
    follower = start_follower(parts, lambda: Observation(address, "ok"), me=W1)
    current = follower.wait([PS, W0], 10)
    del backend.addresses[PS]  # ps relaunching: not running anywhere yet
    wait_for(lambda: "ps-0" in lead.document()["missing"], 5, what="ps-0 missing")
    wait_for(lambda: PS in follower.view.missing, 5, what="the follower saw it")
    assert follower.moved(current) == {}
    result = []
    settler = threading.Thread(target=lambda: result.append(follower.settle(current, 20)))
    settler.start()
    time.sleep(0.5)
    assert result == []  # waiting for the rewritten spec, not restarting with the stale address
    backend.addresses[PS] = "10.0.0.7:7"
    settler.join(10)
    assert result == [{PS: "10.0.0.7:7"}]
    with pytest.raises(DiscoveryError, match="1 peer\\(s\\) not found within 0.3s: worker-9"):
        follower.wait([("worker", 9)], 0.3)


def test_a_follower_falls_back_to_direct_reads_without_a_leader_and_returns_to_it(parts):
    direct = FakeBackend({PS: "10.0.0.1:1", W0: "10.0.0.3:3"})
    where = {"address": None}
    follower = start_follower(parts, lambda: Observation(where["address"], "no app /ml/mnist/worker-0"),
                              direct, fallback=0.3)
    found = follower.wait([PS, W0], 10)
    assert found == {PS: "10.0.0.1:1", W0: "10.0.0.3:3"} and follower.direct_reads >= 1
    assert "leader: no app /ml/mnist/worker-0" in follower.leader_detail
    # the (relaunched) leader comes up: the follower takes its view whole
    lead, address = start_leader(parts, FakeBackend({PS: "10.0.0.5:5", W1: "10.0.0.2:2"}), address="10.0.0.4:4")
    where["address"] = address
    wait_for(lambda: follower.moved(found), 10, what="the leader's view")
    assert follower.moved(found) == {PS: "10.0.0.5:5", W0: "10.0.0.4:4"}
    reads = follower.direct_reads
    time.sleep(0.5)
    assert follower.direct_reads == reads  # no more direct reads once the leader answers
    assert follower.leader_id == lead.leader_id


def test_a_killed_leader_is_relocated_and_its_successor_followed(parts):
    backend = FakeBackend({PS: "10.0.0.1:1", W1: "10.0.0.2:2"})
    first, address = start_leader(parts, backend, address="10.0.0.3:3")
    where = {"address": address}
    follower = start_follower(parts, lambda: Observation(where["address"], "ok"))
    current = follower.wait([PS, W0], 10)
    first.close()
    parts[0].close()  # the leader's status server: connections refused from now on
    second, address2 = start_leader(parts, backend, address="10.0.0.8:8")
    where["address"] = address2
    wait_for(lambda: follower.moved(current), 10, what="the successor's view")
    assert follower.moved(current) == {W0: "10.0.0.8:8"} and follower.leader_id == second.leader_id


def test_an_event_of_the_job_wakes_a_calm_leader_at_once(parts):
    backend = FakeBackend({PS: "10.0.0.1:1", W1: "10.0.0.2:2"})
    events = FakeEvents()
    lead, _ = start_leader(parts, backend, slow=600.0, events=events, hot_window=0.0)
    wait_for(lambda: lead.document()["complete"], 5, what="formed")
    time.sleep(0.3)
    polls = lead.polls
    backend.addresses[PS] = "10.0.0.9:9"
    events.push(appId="/other/job/ps-0", taskStatus="TASK_RUNNING")  # another job: ignored
    time.sleep(0.5)
    assert lead.polls == polls and lead.document()["peers"]["ps-0"] == "10.0.0.1:1"
    events.push(appId="/ml/mnist/ps-0", taskStatus="TASK_RUNNING")
    wait_for(lambda: lead.document()["peers"]["ps-0"] == "10.0.0.9:9", 2, interval=0.01, what="re-read on the event")
    assert lead.events_seen == 1
    lead.close()
    assert events.closed


def test_the_leader_reads_marathon_within_its_byte_budget(parts):
    marathon = FakeMarathon()
    for i, key in enumerate(MEMBERS):
        marathon.add_running(*key, host="10.0.0.1", port=31000 + 10 * i)
    backend = MarathonBackend(marathon, "http://m", job=JOB)

    class Sized:  # FakeResponse with a body size, as requests' .content
        def __init__(self, resp):
            self.resp, self.status_code, self.content = resp, resp.status_code, b"x" * 100_000

        def json(self):
            return self.resp.json()

    original = marathon.get
    marathon.get = lambda *a, **kw: Sized(original(*a, **kw))
    lead, _ = start_leader(parts, backend, slow=0.01, byte_budget=200_000.0)  # 100 kB per GET: 2 GETs/s at most
    wait_for(lambda: lead.document()["complete"], 5, what="formed")
    time.sleep(2.0)
    assert backend.requests <= 6, backend.requests
    assert backend.bytes_read == backend.requests * 100_000


def test_lookup_app_reads_one_app_with_its_tasks(marathon):
    marathon.add_running("worker", 0, "10.0.0.4", 31000)
    backend = MarathonBackend(marathon, "http://m", job=JOB, port_name="status")
    assert backend.lookup_app(W0) == Observation("10.0.0.4:31001", "ok")
    assert marathon.requests[-1]["url"] == "http://m/v2/apps/ml/mnist/worker-0"
    assert marathon.requests[-1]["params"] == [("embed", "app.tasks")]
    assert backend.lookup_app(W1) == Observation(None, "no app /ml/mnist/worker-1")


def test_who_leads_and_when_there_is_no_leader():
    ctx = TaskContext(job=JOB, role="worker", index=1, cluster={"ps": 1, "worker": 2})
    assert ld.leader_of(ctx) == W0
    assert ld.leader_of(TaskContext(job=JOB, role="ps", index=0, cluster={"chief": 1, "ps": 1},
                                    completion="chief")) == ("chief", 0)
    assert ld.leader_of(TaskContext(job=JOB, role="ps", index=0, cluster={"ps": 1, "worker": 0})) is None
    assert ld.rendezvous_mode({}) == "leader" and ld.rendezvous_mode({"MTF_RENDEZVOUS": "direct"}) == "direct"
    with pytest.raises(ValueError, match="MTF_RENDEZVOUS must be leader or direct"):
        ld.rendezvous_mode({"MTF_RENDEZVOUS": "gossip"})
    stop = threading.Event()
    assert ld.make_rendezvous(ctx, {"MTF_RENDEZVOUS": "direct"}, FakeBackend(), me=W1, address="h:1",
                              server=None, stop=stop, slow=1.0) is None
    leader_ctx = TaskContext(job=JOB, role="worker", index=0, cluster={"ps": 1, "worker": 2})
    assert ld.make_rendezvous(leader_ctx, {}, FakeBackend(), me=W0, address="h:1", server=None, stop=stop,
                              slow=1.0) is None  # nowhere to publish: everyone reads directly
    assert ld.fallback_after(3) == 10.0 and ld.fallback_after(1000) == 100.0


def test_in_marathon_mode_status_updates_move_peers_without_reading_the_group(parts):
    marathon = FakeMarathon()
    for i, key in enumerate(MEMBERS):
        marathon.add_running(*key, host="10.0.0.1", port=31000 + 10 * i)
    backend = MarathonBackend(marathon, "http://m", job=JOB)
    events = FakeEvents()
    lead, _ = start_leader(parts, backend, slow=600.0, events=events)
    wait_for(lambda: lead.document()["complete"], 5, what="formed")
    reads = len(marathon.requests)
    events.push(appId="/ml/mnist/ps-0", taskId="ps-0.old", taskStatus="TASK_KILLED", host="10.0.0.1",
                ports=[31000, 31001])
    wait_for(lambda: "ps-0" in lead.document()["missing"], 2, interval=0.01, what="ps-0 down")
    assert lead.document()["missing"]["ps-0"] == "task TASK_KILLED"
    events.push(appId="/ml/mnist/ps-0", taskId="ps-0.new", taskStatus="TASK_RUNNING", host="10.0.0.2",
                ports=[32000, 32001])
    wait_for(lambda: lead.document()["peers"].get("ps-0") == "10.0.0.2:32000", 2, interval=0.01, what="ps-0 back")
    events.push(appId="/ml/mnist/ps-0", taskId="ps-0.older", taskStatus="TASK_KILLED", ports=[1, 2])  # late, stale
    events.push(appId="/ml/other/ps-0", taskId="x", taskStatus="TASK_KILLED")
    time.sleep(0.5)
    assert lead.document()["complete"] and lead.document()["peers"]["ps-0"] == "10.0.0.2:32000"
    assert len(marathon.requests) == reads  # the updates carried it all: no group read


def test_the_leader_hints_followers_so_they_need_not_ask_marathon(parts):
    follower_server = StatusServer(TaskStatus(job=JOB, task="worker-1", role="worker", index=1), "127.0.0.1", 0)
    parts.append(follower_server)
    follower_server.start()
    marathon = FakeMarathon()
    marathon.add_running(*PS, host="127.0.0.1", port=31000)
    marathon.add_running(*W1, host="127.0.0.1", port=follower_server.port - 1)  # ports [tf, status]
    backend = MarathonBackend(marathon, "http://m", job=JOB, also_port="status")
    stop = threading.Event()
    locates = []
    follower = ld.FollowerRendezvous(lambda: locates.append(1) or Observation(None, "no task"), FakeBackend(),
                                     MEMBERS, W1, job=JOB, session=requests.Session(), stop=stop,
                                     schedule=(0.02, 0.1), long_poll=2.0, leader_task="worker-0", hint_wait=20.0)
    parts.append(follower)
    follower_server.add_route(ld.HINT_PATH, follower.hint)
    follower.start()
    lead, address = start_leader(parts, backend, address="127.0.0.1:2000", hinting=True)
    found = follower.wait([PS, W0], 10)
    assert found == {PS: "127.0.0.1:31000", W0: "127.0.0.1:2000"}
    assert locates == [] and follower.hints == 1
    # the leader counts a hint once the follower's answer is back, which can be after the follower took it
    wait_for(lambda: lead.hints.sent == 1, 5, interval=0.01, what="the leader to count its hint")


def test_a_hint_is_taken_only_from_the_leader_task():
    follower = ld.FollowerRendezvous(lambda: Observation(None, "x"), FakeBackend(), MEMBERS, W1, job=JOB,
                                     session=requests.Session(), leader_task="worker-0")
    ok = {"job": JOB, "task": "worker-0", "at": "127.0.0.1:4000", "_client": "127.0.0.1"}
    assert follower.hint({**ok, "task": "ps-0"})[0] == 400
    assert follower.hint({**ok, "job": "other"})[0] == 400
    assert follower.hint({**ok, "at": "127.0.0.1"})[0] == 400
    # (who may send one at all: the job's key, checked by the status server: tests/contract/test_taskauth.py)
    assert follower._hinted is None
    assert follower.hint(ok) == (200, {"ok": True}) and follower._hinted == "127.0.0.1:4000"
    assert follower.hint({**ok, "at": "localhost:4001"})[0] == 200  # names are resolved


# --- at scale: reads beside the status updates, lost answers, hints, a busy leader --------------

class SlowGroup:
    """Wraps a FakeMarathon: a group GET waits until ``release`` is set (a 10,000-app group
    takes Marathon seconds); ``started`` is set when one is under way."""

    def __init__(self, marathon):
        self.marathon, self.started, self.release = marathon, threading.Event(), threading.Event()
        self.slow = False

    def get(self, url, **kw):
        if self.slow and "/v2/groups" in url:
            self.started.set()
            self.release.wait(10)
        return self.marathon.get(url, **kw)


def test_status_updates_go_into_the_view_while_a_group_read_is_under_way(parts, monkeypatch):
    monkeypatch.setattr(leader_side, "EVENT_FORMING", 0.0)  # re-read at once while a peer is missing
    marathon = FakeMarathon()
    marathon.add_running(*PS, host="10.0.0.1", port=31000)
    slow = SlowGroup(marathon)
    backend = MarathonBackend(slow, "http://m", job=JOB)
    events = FakeEvents()
    lead, _ = start_leader(parts, backend, events=events)
    # (at least one: with a peer missing the leader reads again at once, so a look for exactly one can miss it
    # on a loaded machine — seen, a timeout)
    wait_for(lambda: lead.polls >= 1, 5, what="the first read")
    assert list(lead.document()["missing"]) == ["worker-1"]
    slow.slow = True
    assert slow.started.wait(5)  # the next read hangs in Marathon ...
    reads = lead.polls  # (one loop: no read ends while this one hangs)
    events.push(appId="/ml/mnist/worker-1", taskId="w1.a", taskStatus="TASK_RUNNING", host="10.0.0.2",
                ports=[32000, 32001])
    wait_for(lambda: lead.document()["complete"], 5, interval=0.01, what="the update applied meanwhile")
    assert lead.polls == reads and lead.document()["peers"]["worker-1"] == "10.0.0.2:32000"
    slow.release.set()  # ... and answers from before the update (no worker-1): the update's word stands
    wait_for(lambda: lead.polls == reads + 1, 5, what="the slow read merged")
    assert lead.document()["complete"] and lead.document()["peers"]["worker-1"] == "10.0.0.2:32000"


def test_a_group_read_that_fails_keeps_the_peers_already_known(parts, monkeypatch):
    monkeypatch.setattr(leader_side, "EVENT_FORMING", 0.0)
    marathon = FakeMarathon()
    marathon.add_running(*PS, host="10.0.0.1", port=31000)
    backend = MarathonBackend(marathon, "http://m", job=JOB)
    lead, _ = start_leader(parts, backend, events=FakeEvents())
    wait_for(lambda: lead.polls >= 1, 5, what="the first read")
    marathon.script["http://m"] = [503] * 3 + [requests.ConnectionError("down")] * 3
    wait_for(lambda: lead.polls >= 4, 10, what="reads that fail")
    doc = lead.document()
    assert doc["peers"]["ps-0"] == "10.0.0.1:31000"  # not forgotten because Marathon did not answer
    assert doc["missing"]["worker-1"] in ("Marathon 503 (no leader?)", "Marathon unreachable (ConnectionError)")
    assert backend.last_error is not None


def test_the_first_read_waits_for_the_event_stream_to_attach(parts):
    marathon = FakeMarathon()
    backend = MarathonBackend(marathon, "http://m", job=JOB)

    class Attaching(FakeEvents):
        attached = False

    events = Attaching()
    lead, _ = start_leader(parts, backend, events=events)
    time.sleep(0.3)
    assert marathon.requests == [] and lead.polls == 0  # a status update now would be in neither
    events.attached = True
    wait_for(lambda: lead.polls >= 1, 5, what="the first read once attached")


def test_a_re_read_for_lost_updates_is_skipped_when_the_updates_completed_the_view(parts, monkeypatch):
    monkeypatch.setattr(leader_side, "EVENT_FORMING", 1.0)
    marathon = FakeMarathon()
    backend = MarathonBackend(marathon, "http://m", job=JOB)
    events = FakeEvents()
    lead, _ = start_leader(parts, backend, events=events)
    wait_for(lambda: lead.polls >= 1, 5, what="the first read")  # (== 1 is checked below)
    for i, key in enumerate([PS, W1]):
        events.push(appId=naming.app_id(JOB, *key), taskId=f"t{i}", taskStatus="TASK_RUNNING", host="10.0.0.3",
                    ports=[33000 + i, 34000 + i])
    wait_for(lambda: lead.document()["complete"], 5, interval=0.01, what="formed by the updates")
    time.sleep(2.5)  # past the re-read that was planned while peers were missing
    assert len(marathon.requests) == 1 and lead.polls == 1


def test_hints_to_a_follower_not_up_yet_are_retried_without_holding_up_the_others(parts):
    import socket

    with socket.socket() as s:  # a port nothing listens on yet
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    up = StatusServer(TaskStatus(job=JOB, task="worker-1", role="worker", index=1), "127.0.0.1", 0)
    parts.append(up)
    got = []
    up.add_route(ld.HINT_PATH, lambda q: got.append("worker-1") or (200, {"ok": True}))
    up.start()
    # 10 tries, 0.05 s doubling: ps-0 is tried for ~51 s, long enough for a loaded machine to start it below
    hints = ld.Hints(JOB, "worker-0", "127.0.0.1:1", workers=1, tries=10, first_retry=0.05)
    parts.append(hints)
    hints.send({PS: f"127.0.0.1:{free}"})  # refused: its bootstrap has not started its endpoint
    wait_for(lambda: hints.tried >= 2, 5, interval=0.01, what="a retry")
    hints.send({W1: f"127.0.0.1:{up.port}"})  # the one sender thread is not asleep on ps-0's retries
    wait_for(lambda: got == ["worker-1"], 5, interval=0.01, what="worker-1's hint")
    # (the sender counts it once the answer is back, a moment after the route ran)
    wait_for(lambda: hints.sent == 1, 5, interval=0.01, what="worker-1's hint counted")
    later = StatusServer(TaskStatus(job=JOB, task="ps-0", role="ps", index=0), "127.0.0.1", free)
    parts.append(later)
    later.add_route(ld.HINT_PATH, lambda q: got.append("ps-0") or (200, {"ok": True}))
    later.start()
    wait_for(lambda: hints.sent == 2, 60, interval=0.01, what="ps-0's hint once it is up")
    assert got == ["worker-1", "ps-0"]


def test_a_follower_asks_a_busy_leader_again_rather_than_marathon(parts):
    answered, asked = [], []  # asked: how many times the follower had looked the leader up, at each request

    def handler(query):
        asked.append(len(locates))
        if answered:  # answered once; now too busy to answer within the follower's timeout
            time.sleep(1.0)
        answered.append(1)
        return 200, {"job": JOB, "leader": "L1", "leader_task": "worker-0", "version": len(answered),
                     "complete": True, "peers": {"ps-0": "10.0.0.1:1", "worker-0": "10.0.0.2:2"}, "missing": {}}

    server = StatusServer(TaskStatus(job=JOB, task="worker-0", role="worker", index=0), "127.0.0.1", 0,
                          routes={ld.PATH: handler}).start()
    parts.append(server)
    locates = []
    follower = ld.FollowerRendezvous(lambda: locates.append(1) or Observation(f"127.0.0.1:{server.port}", "ok"),
                                     FakeBackend(), MEMBERS, W1, job=JOB, session=requests.Session(),
                                     rng=random.Random(2), schedule=(0.02, 0.1), fallback=60.0, long_poll=0.1,
                                     read_slack=0.2)
    parts.append(follower)
    follower.start()
    assert follower.wait([PS, W0], 10) == {PS: "10.0.0.1:1", W0: "10.0.0.2:2"}
    wait_for(lambda: len(asked) >= 1 + ld.BUSY_TRIES, 20, what="requests to the busy leader")
    assert asked[:1 + ld.BUSY_TRIES] == [1] * (1 + ld.BUSY_TRIES)  # timeouts did not send it to Marathon


def test_a_forming_followers_long_poll_is_answered_once_the_view_is_complete(parts):
    backend = FakeBackend({PS: "10.0.0.1:1"})
    lead, address = start_leader(parts, backend)
    wait_for(lambda: lead.document()["peers"].get("ps-0"), 5, what="ps-0 found")
    answers = []
    poller = threading.Thread(target=lambda: answers.append(http_json(
        f"http://{address}{ld.PATH}?job={JOB}&after=-1&complete=1&wait=20", timeout=25)))  # no leader known yet
    poller.start()
    polls = lead.polls
    wait_for(lambda: lead.polls >= polls + 3, 5, what="reads that leave it incomplete")
    assert answers == []
    backend.addresses[W1] = "10.0.0.2:2"
    poller.join(10)
    code, done = answers[0]
    assert code == 200 and done["complete"] is True and done["peers"]["worker-1"] == "10.0.0.2:2"


def test_a_large_whole_view_goes_gzipped_to_followers_that_accept_it(parts, monkeypatch):
    monkeypatch.setattr(view_side, "GZIP_FROM", 10)  # a 10,000-task view is ~350 kB; this one is small
    lead, address = start_leader(parts, FakeBackend({PS: "10.0.0.1:1", W1: "10.0.0.2:2"}))
    wait_for(lambda: lead.document()["complete"], 5, what="formed")
    url = f"http://{address}{ld.PATH}?job={JOB}&after=-1"
    packed = requests.get(url, timeout=5)  # requests asks for gzip and unpacks it
    assert packed.headers["Content-Encoding"] == "gzip"
    assert int(packed.headers["Content-Length"]) < len(packed.content)
    code, plain = http_json(url)  # urllib does not ask: plain JSON
    assert code == 200 and packed.json() == plain and plain["peers"]["worker-1"] == "10.0.0.2:2"


def test_a_waiting_task_goes_through_its_peers_only_when_the_view_changes():
    class Counted(list):  # counts the passes over the peers (10,000 of them in a large job)
        passes = 0

        def __iter__(self):
            Counted.passes += 1
            return super().__iter__()

    follower = ld.FollowerRendezvous(lambda: Observation(None, "x"), FakeBackend(), MEMBERS, W1, job=JOB,
                                     session=requests.Session())  # not started: the view changes only here
    follower.view.update({PS: "10.0.0.1:1"}, {W0: "not yet"})
    done = []
    waiter = threading.Thread(target=lambda: done.append(follower.wait(Counted([PS, W0]), 30)))
    waiter.start()
    wait_for(lambda: Counted.passes >= 2, 5, interval=0.01, what="the first pass")
    time.sleep(1.0)  # five 0.2 s ticks with the same version
    assert Counted.passes == 2  # found + lacking, once
    follower.view.update({PS: "10.0.0.1:1", W0: "10.0.0.2:2"}, {})
    waiter.join(5)
    assert done == [{PS: "10.0.0.1:1", W0: "10.0.0.2:2"}] and Counted.passes == 4
    follower.close()


def test_a_follower_of_a_scaled_job_waits_for_the_leader_of_its_own_spec(parts):
    """Issue 21: ``scale workers=3`` starts worker-2 while the old tasks (2 workers' spec) still run.
    A follower whose cluster differs from the leader's takes nothing from it (a program started with
    the old tasks' addresses registers where it is not expected: TF's "Unexpected task registered"),
    nor reads the old tasks directly, until a leader of its own spec answers."""
    backend = FakeBackend({PS: "10.0.0.1:1", W1: "10.0.0.2:2"})
    lead, address = start_leader(parts, backend, slow=0.05)
    assert lead.document()["cluster"] == ld.cluster_key(MEMBERS) != ld.cluster_key(MEMBERS + [("worker", 2)])
    direct = FakeBackend({PS: "10.0.0.1:1", W0: "10.0.0.3:3", W1: "10.0.0.2:2"})
    scaled = ld.FollowerRendezvous(lambda: Observation(address, "ok"), direct, MEMBERS + [("worker", 2)],
                                   ("worker", 2), job=JOB, session=requests.Session(), rng=random.Random(2),
                                   schedule=(0.02, 0.1), fallback=0.2, long_poll=1.0, hint_wait=0)
    parts.append(scaled)
    scaled.start()
    # The leader's answer comes when it comes (seconds on a loaded machine): wait for the follower to have
    # read it, then its wait fails naming it.
    wait_for(lambda: "has another cluster spec" in (scaled.leader_detail or ""), 60, what="the leader's answer")
    with pytest.raises(DiscoveryError, match="has another cluster spec"):
        scaled.wait([PS, W0, W1], 0.5)
    assert scaled.direct_reads == 0 and scaled.long_polls > 0 and not set(scaled.view.peers) & {PS, W0, W1}
    same = start_follower(parts, lambda: Observation(address, "ok"))  # a follower of the leader's own spec
    assert same.wait([PS, W0], 10) == {PS: "10.0.0.1:1", W0: "127.0.0.1:2000"}


def test_a_round_and_a_membership_reach_the_followers_as_the_typed_values_the_leader_published(parts, capfd):
    """Issue 40: the keeper's rounds and an elastic job's membership travel in the rendezvous document through the
    plan's one wire form (contract/plan), and the follower's view holds the same typed values the leader's does;
    a round a task cannot read (another shape) is said in one line and not followed."""
    backend = FakeBackend({PS: "10.0.0.1:1", W1: "10.0.0.2:2"})
    lead, address = start_leader(parts, backend, slow=0.05)
    follower = start_follower(parts, lambda: Observation(address, "ok"))
    assert follower.wait([PS, W0], 10) is not None
    round_ = Round(3, RoundKind.RESIZE, RoundCause.GROW, "worker-2 was placed", grace=0.0, restart=("worker-1",))
    membership = Membership("worker", 2, {"worker-0": (0, "127.0.0.1:2000"), "worker-1": (1, "10.0.0.2:2")})
    lead.coordinator.resize(membership)
    lead.coordinator.start_round(round_)
    wait_for(lambda: follower.restart_round()[1] is not None, 10, what="the round at the follower")
    assert follower.restart_round() == (lead.leader_id, round_) and isinstance(follower.view.round, Round)
    assert follower.view.membership == membership
    plan = http_json(f"http://{address}{ld.PATH}?job={JOB}")[1]["plan"]
    assert plan["round"] == round_.to_wire() and plan["generation"] == 2 and follower.view.plan == lead.view.plan

    # a leader whose round this task cannot read: the rest of its document is taken, the round is not
    server = StatusServer(TaskStatus(job=JOB, task="worker-0", role="worker", index=0), "127.0.0.1", 0).start()
    parts.append(server)
    doc = {"job": JOB, "leader": "odd", "leader_task": "worker-0", "cluster": ld.cluster_key(MEMBERS), "version": 1,
           "complete": True, "delta": False, "peers": {"ps-0": "10.0.0.1:1", "worker-0": "10.0.0.5:5"},
           "missing": {}, "plan": {"generation": 4, "round": {"generation": 2, "kind": "restart",
                                                              "reason": "it failed"}}}
    server.add_route(ld.PATH, lambda query: (time.sleep(0.2 if query.get("after") == "1" else 0), (200, doc))[1])
    odd = start_follower(parts, lambda: Observation(f"127.0.0.1:{server.port}", "ok"))
    assert odd.wait([PS, W0], 10) == {PS: "10.0.0.1:1", W0: "10.0.0.5:5"}
    wait_for(lambda: odd.long_polls >= 2, 10, what="a second answer")
    assert odd.restart_round() == ("odd", None)
    said = [line for line in capfd.readouterr().err.splitlines() if "cannot follow" in line]
    assert said == [f"marathon-tf bootstrap: rendezvous: 127.0.0.1:{server.port} sent a plan this task cannot "
                    f"follow: plan.round.reason: expected one of failure, preemption, infrastructure, "
                    f"form, grow, shrink, below_min, asked, stop, moved, got 'it failed'"], said


def test_the_coordinator_writes_each_change_as_the_plans_next_generation_and_nothing_else():
    """Issue 40: the job's plan has one writer; each change is the next generation (and a new version of the view,
    so the long polls answer), a write that changes nothing is none."""
    view = View()
    coordinator = Coordinator(view)
    membership = Membership("worker", 1, {"worker-0": (0, "127.0.0.1:2000"), "worker-1": (1, "10.0.0.2:2")})
    assert coordinator.resize(membership, frozenset({("worker", 2)}))
    assert view.plan.generation == 1 and view.membership == membership and view.optional == {("worker", 2)}
    version = view.version
    assert not coordinator.resize(membership, frozenset({("worker", 2)})) and view.version == version
    assert coordinator.next_round_generation() == 1
    round_ = Round(1, RoundKind.RESIZE, RoundCause.GROW, "worker-1 was placed", grace=0.0, restart=("worker-0",))
    assert coordinator.start_round(round_) and view.round == round_ and view.version == version + 1
    assert view.plan.generation == 2 and coordinator.next_round_generation() == 2
    assert coordinator.counts(Counts(failures=1, max_failures=3, window_seconds=600.0)) and view.plan.generation == 3
    assert coordinator.verdict(JobState.SUCCEEDED) and not coordinator.verdict(JobState.SUCCEEDED)
    assert view.plan.generation == 4 and coordinator.plan == view.plan
    assert JobPlan.from_wire(view.plan.to_wire()) == view.plan
    assert (view.plan.membership, view.plan.round, view.plan.counts.failures, view.plan.verdict) == (
        membership, round_, 1, JobState.SUCCEEDED)


def test_a_follower_that_comes_late_or_comes_back_reads_the_current_plan(parts):
    """Issue 40: level-triggered — a follower that missed every change (it started after them, or could not reach
    its leader while they were made) converges on the plan as it is now, not on a replay of what it missed."""
    backend = FakeBackend({PS: "10.0.0.1:1", W1: "10.0.0.2:2"})
    lead, address = start_leader(parts, backend, slow=0.05)
    away = threading.Event()  # set: the leader's rendezvous answers 503 (a follower cut off from it)
    refused: list[int] = []

    def route(query):
        if away.is_set():
            refused.append(1)
            return 503, {"message": "away"}
        return lead.handle(query)

    server = next(p for p in parts if isinstance(p, StatusServer))
    server.add_route(ld.PATH, route)
    coordinator = lead.coordinator
    coordinator.start_round(Round(1, RoundKind.RESTART, RoundCause.FAILURE, "ps-0 failed"))
    coordinator.counts(Counts(failures=1, max_failures=3, window_seconds=600.0))
    follower = start_follower(parts, lambda: Observation(address, "ok"))
    assert follower.wait([PS, W0], 10) is not None
    wait_for(lambda: follower.view.plan == lead.view.plan, 10, what="the plan at the late follower")
    assert follower.view.plan.generation == 2 and follower.restart_round() == (lead.leader_id, lead.view.round)
    polls, version = follower.long_polls, follower.view.version
    away.set()
    # cut off once its long poll in flight has ended (else that poll, woken by the first change, may carry the
    # last one: a loaded machine runs its answer after the loop below)
    wait_for(lambda: refused, 10, interval=0.01, what="the follower's first request refused")
    for n in range(2, 6):  # meanwhile: rounds, counts, the verdict
        coordinator.start_round(Round(n, RoundKind.RESTART, RoundCause.PREEMPTION, f"round {n}"))
    coordinator.counts(Counts(preemptions=4, max_preemptions=5))
    coordinator.verdict(JobState.FAILED)
    time.sleep(0.5)
    assert follower.view.plan.generation < lead.view.plan.generation == 8  # it missed some
    away.clear()  # back
    wait_for(lambda: follower.view.plan == lead.view.plan, 20, what="the plan at the follower that came back")
    assert (follower.view.plan.generation, follower.view.round.generation, follower.view.plan.verdict) == (
        8, 5, JobState.FAILED)
    assert follower.long_polls > polls and follower.view.version > version
