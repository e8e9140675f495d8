"""A Mesos agent dies under a running TF job on a 3-agent local cluster (real TensorFlow): its
task turns TASK_UNREACHABLE, Marathon's unreachableStrategy (rendered 0/0) replaces it on another
agent at once, and the job ends Succeeded from its checkpoint. With Mesos-DNS's real defaults
(``RefreshSeconds`` 60, ``TTL`` 60: ``records/config.go`` ``NewConfig`` in mesosphere/mesos-dns@e888ef4;
records rebuilt only at each refresh: ``resolver/resolver.go`` ``Reload``) the job forms (its tasks
appear in DNS only at the first refresh after they start) and recovers (the lost ps's old record
stays up to a minute)
with the bootstrap's polling as it is.

The TF1 example (1 ps + 2 workers, flags, checkpoints in a shared volume); on three machine-sized
agents the scheduler puts one task on each (agents with fewer tasks first)."""

from __future__ import annotations

import sys
import time

import pytest
from test_lifecycle_e2e import RESTARTED, SAVE_EVERY, TARGET, checkpoints, linear_job

from marathon_tf.contract import labels as L

pytestmark = [pytest.mark.tf]


def _task(job, app):
    tasks = job.client.request("GET", f"/v2/apps/{job.name}/{app}/tasks").body["tasks"]
    return tasks[0] if tasks else None


@pytest.mark.timeout(420)
@pytest.mark.parametrize("refresh", [0.5, 60], ids=["dns-refresh-0.5", "dns-refresh-60"])
def test_an_agent_killed_under_a_running_job_is_replaced_elsewhere_and_the_job_succeeds(tmp_path, cluster_of,
                                                                                        job_on, refresh):
    cluster = cluster_of(agents=3, dns_refresh=refresh, dns_ttl=60)
    job = job_on(cluster, linear_job(tmp_path, TARGET, save_every=SAVE_EVERY, log_every=50,
                                      restart={"max_failures": 10, "window_seconds": 600}))
    deployed = time.monotonic()
    job.wait(lambda: job.max_step() > 1200 and checkpoints(tmp_path), 120 + refresh, "step > 1200", 0.05)
    formed = min(t for t, _, _ in job.steps()) - deployed  # every worker steps only once all are there
    print(f"refresh {refresh:g} s: first step {formed:.0f} s after the deploy", file=sys.stderr)
    ps = _task(job, "ps-0")
    hosts = {_task(job, a)["host"] for a in ("ps-0", "worker-0", "worker-1")}
    assert hosts == {"127.0.0.1", "127.0.0.2", "127.0.0.3"}  # one task per agent
    saved = checkpoints(tmp_path)[-1]
    killed_at = time.monotonic()
    assert cluster.kill_agent(ps["host"]) == [ps["id"]]
    moved = job.wait(lambda: (lambda t: t if t and t["state"] == "TASK_RUNNING" else None)(_task(job, "ps-0")),
                     30, "ps-0 replaced")
    assert moved["host"] != ps["host"] and moved["id"] != ps["id"]
    status = job.wait_state(150 + 2 * refresh)
    assert status["state"] == L.SUCCEEDED, status
    assert status["finalStep"] >= TARGET
    after = job.steps(since=killed_at, started=RESTARTED)
    assert after and min(s for _, _, s in after) >= saved, (saved, after[:10])  # resumed, not restarted
    ready = [line for t, n, s, line in job.lines if t > killed_at and RESTARTED in line]
    assert ready and all(int(x.split("global step ")[1].split("/")[0]) >= saved for x in ready), ready
    states = [e["taskStatus"] for e in cluster.events("status_update_event") if e["taskId"] == ps["id"]]
    assert "TASK_UNREACHABLE" in states
