"""The job's life on the Marathons marathon-tf supports (issue 41), with real TensorFlow on a local cluster
that plays the version (``marathon_version``): an elastic job whose standby waits, then its ps killed,
recovers and ends Succeeded on 1.7.236, 1.4.3 and the default (1.11); so do the lifecycle scenarios of the TF1
example (a ps killed, the chief killed, ``scale``, an agent lost) on 1.7.236 and 1.4.3, and the chief killed on
the default (its other scenarios on the default are test_lifecycle_e2e.py's killed ps and scaled workers and
test_agent_loss_e2e.py's lost agent, with the same job). Each prints its recovery time (the disruption -> the
first step of the restarted session).

Why it could hang: on 1.4 - 1.7 a failed task's ``ScaleRunSpec`` is dropped while a deployment holds its
app (mesosphere/marathon v1.4.3 ``src/main/scala/mesosphere/marathon/MarathonSchedulerActor.scala:169``;
v1.7.236 the same file ``:146-159``, "Did not try to scale run spec; it is locked"), and a group deployment
with a standby that cannot be placed never ends. marathon-tf PUTs the standby apart (a deployment of its
own, holding that app alone: ``DeploymentPlan.isAffectedBy``, v1.7.236 ``core/deployment/
DeploymentPlan.scala:129-131``), so the group's deployment ends once the tasks that must start have.

The elastic job's cluster: agent 1 holds the ps, agents 2 and 3 one worker each; the third worker (the standby)
never fits. The scenarios' cluster: three agents, one task each.
"""

from __future__ import annotations

import json
import sys
import time

import pytest

from marathon_tf.contract import labels as L

pytestmark = [pytest.mark.tf]

TARGET = 4000
#: The scenarios' jobs: disrupted past step 600, they train to it (the steps past the recovery are only CPU).
SCENARIO_TARGET = 2000
#: The TF1 example's first line of a (re)started worker's session.
RESTARTED = "session ready at global step"


def _job(tmp_path) -> str:
    from jobfiles import example_job

    roles = {"ps": {"count": 1, "cpus": 0.5, "mem": 1024, "constraints": [["hostname", "LIKE", "127.0.0.1"]]},
             "worker": {"count": {"min": 2, "max": 3}, "cpus": 1, "mem": 1536,
                        "constraints": [["hostname", "UNLIKE", "127.0.0.1"]]}}
    command = ["python3", "train.py", "--train_steps", str(TARGET), "--checkpoint_dir", "ckpt", "--log_every", "50",
               "--save_checkpoint_steps", "250", "--elastic"]
    return str(example_job("linear-regression-tf1", tmp_path, command=command, roles=roles,
                           progress={"target_step": TARGET}, restart={"max_failures": 5, "window_seconds": 600}))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("versioned_cluster", ["1.7.236", "1.4.3", None], indirect=True,
                         ids=["1.7.236", "1.4.3", "default"])
def test_an_elastic_job_with_a_standby_waiting_recovers_from_a_killed_ps_and_succeeds(tmp_path, versioned_cluster,
                                                                                     job_on):
    job = job_on(versioned_cluster, _job(tmp_path))
    job.wait(lambda: job.max_step() > 600, 240, "training with 2 workers")
    # On 1.4 - 1.7 the ps is killed once no deployment holds its app: the job's first deployment ends when every
    # task that must start has passed its first health check, which under load comes after step 600 (a CI run:
    # the ps killed before that, 1.7.236 left it dead past the test's 180 s, as the real one would until its next
    # scale check: the start step's actor for the ps's app had stopped). The standby's own deployment never holds
    # it; on 1.11 the group's deployment, standby included, holds every app to the end, and relaunches all the same.
    ps = f"/{job.name}/ps-0"
    if job.client.capabilities().deployment_locks_relaunch:
        job.wait(lambda: not any(ps in (d.get("affectedApps") or []) for d in job.client.deployments()), 240,
                 "no deployment to hold ps-0's app")
    queued = {i["app"]["id"] for i in job.client.queue()}
    assert f"/{job.name}/worker-2" in queued, queued  # the standby waits: no agent has room for it
    killed = time.monotonic()
    assert versioned_cluster.kill_task(ps, "KILL")
    back = job.wait(lambda: job.steps(since=killed, started=RESTARTED), 180, "a step after the ps was killed")
    seconds = back[0][0] - killed
    print(f"Marathon {job.client.capabilities().version}: ps killed -> training again "
          f"{seconds:.1f} s", file=sys.stderr)
    final = job.wait_state(300)
    assert final["state"] == L.SUCCEEDED, final.get("reason")


def _disrupt(job, cluster, scenario: str) -> None:
    from marathon_tf.user import jobs

    if scenario == "ps killed":
        assert cluster.kill_task(f"/{job.name}/ps-0", "KILL")
    elif scenario == "chief killed":  # (TF1's chief is worker-0)
        assert cluster.kill_task(f"/{job.name}/worker-0", "KILL")
    elif scenario == "scale":
        jobs.scale(job.client, job.name, {"worker": ("=", 3)})
    else:  # an agent lost: the ps's
        from marathon_tf.contract import naming
        from marathon_tf.marathon.model import job_apps

        group = job.client.get_group(naming.group_id(job.name), embed=("group.apps", "group.apps.tasks"))
        ps = job_apps(group)["ps-0"].tasks[0]
        assert cluster.kill_agent(ps.host) == [ps.id]


@pytest.mark.timeout(420)
@pytest.mark.parametrize("scenario,version", [(s, v) for s in ("ps killed", "chief killed", "scale", "agent lost")
                                              for v in ("1.7.236", "1.4.3")] + [("chief killed", None)],
                         ids=lambda x: x or "default")
def test_the_lifecycle_scenarios_recover_and_succeed_on_each_version(tmp_path, cluster_of, job_on, scenario, version):
    from test_lifecycle_e2e import linear_job

    # three agents, one task each (the TF1 example: a ps, two workers)
    cluster = cluster_of(dns_refresh=0.5, agents=3, **({} if version is None else {"marathon_version": version}))
    job = job_on(cluster, linear_job(tmp_path, SCENARIO_TARGET, save_every=250, log_every=50,
                                     progress={"target_step": SCENARIO_TARGET},
                                     restart={"max_failures": 5, "window_seconds": 600}))
    # Nothing of ours holds the apps when the disruption comes: the first deployment ends once every task has
    # passed its first health check (under load, after step 600), and the disruption comes just after step 600,
    # well before the job's end.
    job.wait(lambda: job.client.deployments() == [], 240, "the job's first deployment to end")
    job.wait(lambda: job.max_step() > 600, 240, "training")
    at = time.monotonic()
    _disrupt(job, cluster, scenario)
    back = job.wait(lambda: job.steps(since=at + 0.5, started=RESTARTED), 240, f"a step after: {scenario}")
    print(f"Marathon {job.client.capabilities().version}: {scenario} -> training again {back[0][0] - at:.1f} s",
          file=sys.stderr)
    final = job.wait_state(300)
    assert final["state"] == L.SUCCEEDED, final.get("reason")


@pytest.mark.timeout(420)
@pytest.mark.parametrize("versioned_cluster", ["1.7.236"], indirect=True)
@pytest.mark.parametrize("lost,looker", [("ps-0", "worker-0"), ("worker-0", "ps-0")],  # (who restarts it)
                         ids=["ps", "the deciding task"])
def test_on_1_7_a_task_lost_while_the_first_deployment_waits_for_a_worker_is_relaunched_once_it_ends(
        tmp_path, versioned_cluster, job_on, lost, looker):
    """Marathon 1.7 relaunches a task lost while a deployment holds its app only at its next scale check
    (v1.7.236 ``src/main/scala/mesosphere/marathon/MarathonSchedulerActor.scala:146-159``: the failure's
    ``ScaleRunSpec`` dropped, "it is locked"; the start step's actor for the app, ``StartingBehavior``, stopped
    once the app had started; ``MarathonConf.scala`` ``scale_apps_interval``, 300 000 ms). The job's first
    deployment stays open while worker-1 waits for room (a blocker holds its agent); ps-0 (or worker-0, TF1's chief
    and the deciding task), started and healthy, is killed meanwhile. Once the blocker is gone and the deployment
    ends, a look at the job (task/jobview.py: the deciding task's at the others, the first other task's at the
    deciding task's app) finds the app with no task, no queue entry and no deployment, and restarts it: training
    again within 60 s of the room made (not at the scale check, 300 s on), and the job ends Succeeded. (worker-0's
    agent, once it is killed, has room for worker-1: that deployment ends at once, and the restarted worker-0 waits
    for the room the blocker holds.)"""
    from test_elastic_e2e import worker_task
    from test_lifecycle_e2e import linear_job

    cluster = versioned_cluster
    block_path = tmp_path / "blocker.json"
    block_path.write_text(json.dumps({
        "name": "blocker", "style": "custom", "command": ["sleep", "100000"],
        "roles": {"worker": {"count": 1, "cpus": 1, "mem": 256, "constraints": [["hostname", "LIKE", "127.0.0.3"]]}}}))
    block = job_on(cluster, str(block_path))
    block.wait(lambda: worker_task(block, "worker-0"), 60, "the blocker running")
    roles = {"ps": {"count": 1, "cpus": 0.5, "mem": 1024, "constraints": [["hostname", "LIKE", "127.0.0.1"]]},
             "worker": {"count": 2, "cpus": 1, "mem": 1536, "constraints": [["hostname", "UNLIKE", "127.0.0.1"]]}}
    job = job_on(cluster, linear_job(tmp_path, SCENARIO_TARGET, save_every=250, log_every=50, roles=roles,
                                     progress={"target_step": SCENARIO_TARGET},
                                     restart={"max_failures": 5, "window_seconds": 600}))
    ps, killed = f"/{job.name}/ps-0", f"/{job.name}/{lost}"

    def healthy(app_id: str) -> bool:
        tasks = job.client.request("GET", f"/v2/apps{app_id}/tasks").body["tasks"]
        return any(t.get("state") == "TASK_RUNNING" and t.get("healthCheckResults")
                   and all(r.get("alive") for r in t["healthCheckResults"]) for t in tasks)

    job.wait(lambda: healthy(ps) and worker_task(job, "worker-0"), 120, "ps-0 healthy, worker-0 running")
    queued = {i["app"]["id"] for i in job.client.queue()}
    assert f"/{job.name}/worker-1" in queued, queued  # it waits for room: the job's deployment stays open
    assert any(killed in (d.get("affectedApps") or []) for d in job.client.deployments())
    assert cluster.kill_task(killed, "KILL")
    time.sleep(5.0)  # the lock: nothing relaunches it (its app's start step had ended)
    assert not job.client.request("GET", f"/v2/apps{killed}/tasks").body["tasks"]
    from marathon_tf.user import jobs

    made = time.monotonic()
    jobs.delete(block.client, "blocker")
    job.wait(lambda: job.client.deployments() == [], 60, "the job's first deployment to end")
    back = job.wait(lambda: job.steps(since=made), 60, "a step after the room was made")
    print(f"Marathon 1.7.236: {lost} lost during the first deployment -> training {back[0][0] - made:.1f} s after "
          f"the room was made", file=sys.stderr)
    said = f"{lost} relaunched: Marathon 1.7.236 left it without a task"
    assert said in job.text(looker) + job.text("worker-1")  # (worker-1 watches the deciding task's app too)
    final = job.wait_state(300)
    assert final["state"] == L.SUCCEEDED, final.get("reason")
