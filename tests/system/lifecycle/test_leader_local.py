"""The leader rendezvous through the local runner (real processes, its Marathon API, /v2/events and
Mesos-DNS): in ``marathon`` mode only the leader reads the job's group; the others ask Marathon
once for the leader's app and long-poll it; a SIGKILLed ps's new address reaches every task
through the leader, which follows ``/v2/events``."""

import json
import sys
import time

import pytest
from jobfiles import example_job

BOOTSTRAP = f"{sys.executable} -m marathon_tf.bootstrap --watch-interval 2 --grace 2"
PRINT = ["python3", "-c", "import os, time; print('TFC=' + os.environ['TF_CONFIG'], flush=True); time.sleep(600)"]


def tiny_job(tmp_path, mode: str) -> str:
    roles = {"ps": {"count": 1, "cpus": 0.1, "mem": 128, "command": PRINT},
             "worker": {"count": 3, "cpus": 0.1, "mem": 128, "command": PRINT},
             "tensorboard": {"count": 0}}
    return str(example_job("linear-regression-tf1", tmp_path, command=PRINT, bootstrap=BOOTSTRAP, roles=roles,
                           cluster_spec="tf_config", discovery={"mode": mode, "startup_timeout": 120}))


def configs(job, task: str) -> list[dict]:
    return [json.loads(x[4:]) for t, n, s, x in list(job.lines) if n == task and x.startswith("TFC=")]


TASKS = ["ps-0", "worker-0", "worker-1", "worker-2"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["marathon", "mesos-dns"])
def test_only_the_leader_reads_the_job_and_a_killed_ps_reaches_everyone(tmp_path, local_job, mode):
    job = local_job(tiny_job(tmp_path, mode))
    job.wait(lambda: all(configs(job, t) for t in TASKS), 60, "every task's TF_CONFIG")
    first = {t: configs(job, t)[0] for t in TASKS}
    assert len({json.dumps(c["cluster"], sort_keys=True) for c in first.values()}) == 1, first
    assert "leading the rendezvous of 4 task(s)" in job.text("worker-0")
    for task in ("ps-0", "worker-1", "worker-2"):
        assert "following the rendezvous leader worker-0" in job.text(task)

    log = job.cluster.request_log()
    group_gets = [r for r in log if r["method"] == "GET" and r["path"] == f"/v2/groups/{job.name}"
                  and "group.apps.tasks" in str(r["query"])]
    leader_app = [r for r in log if r["method"] == "GET" and r["path"] == f"/v2/apps/{job.name}/worker-0"]
    if mode == "marathon":
        # at most one per follower (none if the leader's hint came first), a few more early
        assert len(leader_app) <= 3 * 5
        assert group_gets, "the leader reads the group"
    else:
        assert not leader_app  # followers find the leader through Mesos-DNS
    # calm: nobody polls the whole job every second (the leader follows /v2/events)
    before = len(job.cluster.request_log())
    time.sleep(12)
    calm = [r for r in job.cluster.request_log()[before:] if r["path"] == f"/v2/groups/{job.name}"]
    assert len(calm) <= 4, calm

    old_ps = first["worker-1"]["cluster"]["ps"]
    assert job.cluster.kill_task(f"/{job.name}/ps-0", "KILL")

    def rewritten():
        return all(any(c["cluster"]["ps"] != old_ps for c in configs(job, t)) for t in TASKS)

    job.wait(rewritten, 60, "every task's spec with the relaunched ps")
    latest = {t: configs(job, t)[-1]["cluster"] for t in TASKS}
    assert len({json.dumps(c, sort_keys=True) for c in latest.values()}) == 1, latest

