"""The rendezvous poll schedule scales with the job: quick for small jobs, bounded load for large ones."""

import random

from marathon_tf.task.discovery import JOB_POLLS_PER_SECOND, Observation, poll_schedule, watch_interval
from marathon_tf.task.rendezvous import DirectRendezvous


def test_small_jobs_poll_fast_and_large_jobs_are_bounded():
    assert poll_schedule(3) == (0.25, 1.0)
    first, cap = poll_schedule(1000)
    assert (first, cap) == (2.5, 20.0)
    assert 1000 / cap <= JOB_POLLS_PER_SECOND
    assert poll_schedule(100_000) == (5.0, 60.0)
    assert watch_interval(3, 20.0) == 20.0
    assert 1000 / watch_interval(1000, 20.0) <= JOB_POLLS_PER_SECOND / 5


class SlowPeers:
    """Every peer answers only after ``ready_after`` seconds of fake time."""

    def __init__(self, clock, ready_after):
        self.clock, self.ready_after, self.calls = clock, ready_after, 0

    def lookup(self, peers):
        self.calls += 1
        up = self.clock() >= self.ready_after
        return {p: Observation(f"10.0.0.1:{1000 + p[1]}" if up else None, "NXDOMAIN") for p in peers}


def run(n_peers, ready_after):
    now = [0.0]
    sleeps = []

    def sleep(s):
        sleeps.append(s)
        now[0] += s

    backend = SlowPeers(lambda: now[0], ready_after)
    rdv = DirectRendezvous(backend, clock=lambda: now[0], sleep=sleep, rng=random.Random(1))
    found = rdv.wait([("worker", i) for i in range(n_peers)], timeout=600)
    return found, sleeps, now[0]


def test_a_small_job_sees_a_late_peer_within_about_a_second():
    found, sleeps, t = run(2, ready_after=10.0)
    assert len(found) == 2
    assert max(sleeps) <= 1.5  # cap 1 s with jitter up to 1.5x
    assert t - 10.0 <= 1.5


def test_a_thousand_task_job_polls_rarely():
    found, sleeps, t = run(999, ready_after=60.0)
    assert len(found) == 999
    assert sleeps[0] >= 2.5 * 0.5 and max(sleeps) <= 20 * 1.5
    assert len(sleeps) <= 10  # each task: about ten polls over a minute of waiting
