"""Rendezvous: polling with backoff until every peer is known, the deadline, watching for moves."""

import random

import pytest
from task_helpers import FakeBackend

from marathon_tf.contract.errors import DiscoveryError
from marathon_tf.task.discovery import MesosDnsBackend
from marathon_tf.task.rendezvous import DirectRendezvous

PEERS = [("ps", 0), ("worker", 1), ("worker", 2)]


def rendezvous(backend, clock, **kw):
    return DirectRendezvous(backend, clock=clock, sleep=clock.sleep, rng=random.Random(7), **kw)


def test_all_peers_present_needs_one_poll(fake_dns, clock):
    for i, (role, index) in enumerate(PEERS):
        fake_dns.add_task(role, index, f"10.0.0.{i}", 31000 + i)
    rdv = rendezvous(MesosDnsBackend(fake_dns, job="ml/mnist"), clock)
    found = rdv.wait(PEERS, 60)
    assert found == {("ps", 0): "10.0.0.0:31000", ("worker", 1): "10.0.0.1:31001", ("worker", 2): "10.0.0.2:31002"}
    assert rdv.polls == 1 and clock.sleeps == []


def test_late_peer_nxdomain_n_times_then_found_and_only_missing_peers_are_asked(fake_dns, clock):
    fake_dns.add_task("ps", 0, "10.0.0.1", 31000)
    fake_dns.add_task("worker", 1, "10.0.0.2", 31001)
    late = "_tf._worker-2-mnist-ml._tcp.marathon.mesos."
    fake_dns.add_task("worker", 2, "10.0.0.3", 31002)
    answer = fake_dns.answers[late]
    fake_dns.answers[late] = lambda n: "NXDOMAIN" if n <= 4 else answer
    rdv = rendezvous(MesosDnsBackend(fake_dns, job="ml/mnist"), clock)
    found = rdv.wait(PEERS, 600)
    assert found[("worker", 2)] == "10.0.0.3:31002"
    assert rdv.polls == 5
    assert fake_dns.queries.count(late) == 5
    assert fake_dns.queries.count("_tf._ps-0-mnist-ml._tcp.marathon.mesos.") == 1


def test_backoff_grows_with_jitter_and_is_capped(clock):
    rdv = rendezvous(FakeBackend(), clock, initial_delay=0.25, max_delay=5.0)
    with pytest.raises(DiscoveryError):
        rdv.wait([("ps", 0)], 60)
    nominal = [min(5.0, 0.25 * 2 ** i) for i in range(len(clock.sleeps))]
    for slept, base in zip(clock.sleeps[:-1], nominal):
        assert 0.5 * base <= slept <= 1.5 * base
    assert len(set(round(s / b, 6) for s, b in zip(clock.sleeps[:-1], nominal))) > 1  # jittered
    assert max(clock.sleeps) <= 7.5 and 10 < len(clock.sleeps) < 40


def test_deadline_names_each_missing_peer_and_what_was_last_seen(clock):
    class Backend:
        def lookup(self, peers):
            from marathon_tf.task.discovery import Observation
            seen = {("ps", 0): Observation("10.0.0.1:1", "ok"),
                    ("worker", 1): Observation(None, "task not running: TASK_STAGING"),
                    ("worker", 2): Observation(None, "NXDOMAIN (_tf._worker-2-mnist-ml._tcp.marathon.mesos.)")}
            return {p: seen[p] for p in peers}

    rdv = rendezvous(Backend(), clock)
    with pytest.raises(DiscoveryError) as err:
        rdv.wait(PEERS, 30)
    message = err.value.message
    assert message.startswith("2 peer(s) not found within 30s")
    assert "worker-1: task not running: TASK_STAGING" in message
    assert "worker-2: NXDOMAIN (_tf._worker-2-mnist-ml._tcp.marathon.mesos.)" in message
    assert "ps-0" not in message
    assert 30 <= clock.now - 1000 <= 31


def test_stop_ends_the_wait(clock):
    stops = iter([False, False, True])
    rdv = rendezvous(FakeBackend(), clock, stop=lambda: next(stops))
    assert rdv.wait([("ps", 0)], 60) is None


def test_moved_reports_only_peers_at_a_new_address():
    backend = FakeBackend({("ps", 0): "a:1", ("worker", 1): "b:2"})
    rdv = DirectRendezvous(backend)
    current = {("ps", 0): "a:1", ("worker", 1): "b:2", ("worker", 2): "c:3"}
    assert rdv.moved(current) == {}  # worker-2 vanished (relaunching): not a move yet
    backend.addresses[("worker", 2)] = "c:9"
    assert rdv.moved(current) == {("worker", 2): "c:9"}
