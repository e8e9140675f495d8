"""All-or-nothing start end to end on the local cluster's finite agents (issue 20), with the real
bootstrap in every task and a tiny program (no TensorFlow: placement is the point).

* Nobody follows the job: its placed tasks watch the admission deadline while they wait for their
  peers (marathon_tf.task.admission) and release it: NotPlaced, every app at 0, no process left.
* Two jobs that each need 3/4 of the cluster, retries on, followed by the API's ``wait``: never a
  deadlock; both end Succeeded.
* A job whose missing agent comes back before its deadline starts and succeeds.

Marathon's queue (``/v2/queue?embed=lastUnusedOffers``: mesosphere/marathon
``src/main/scala/mesosphere/marathon/raml/QueueInfoConversion.scala``) is what the local runner
serves as Marathon 1.8 does (tests/local/test_local_agents.py checks its shape).
"""

from __future__ import annotations

import sys
import threading

import pytest
from leaks import processes_under, wait_no_processes
from offers import FAST_OFFERS
from polling import wait_for

from marathon_tf.contract import labels as L
from marathon_tf.contract.errors import UsageError
from marathon_tf.marathon.client import Client, RetryPolicy
from marathon_tf.marathon.waiting import wall
from marathon_tf.user.api import Marathon
from marathon_tf.user.spec import load_dict
from marathon_tf.user.status import job_status

AGENT = "cpus:1;mem:1024;disk:1000;ports:[33400-33499]"
#: A Mesos master that cannot be read (nothing listens on the discard port): the admission check is skipped
#: with a note and the job is sent, as for a cluster whose master the user's machine cannot reach.
UNREAD = "http://127.0.0.1:9"


@pytest.fixture
def cluster_of(tmp_path):
    """``cluster_of(**options)``: a started LocalCluster; stopped at teardown, no task process left."""
    from marathon_tf.local import LocalCluster

    made = []

    def start(**options):
        cluster = LocalCluster(state_dir=tmp_path / "state", dns_refresh=0.25, kill_grace=2.0, shutdown_grace=2.0,
                               **{**FAST_OFFERS, **options}).start()
        made.append(cluster)
        return cluster

    yield start
    for cluster in made:
        cluster.stop()
    wait_for(lambda: not processes_under(tmp_path / "state"), 10, what="no task process left")


def _spec(cluster, name, workers, program="import sys; sys.exit(0)", elastic=False, **admission):
    """``elastic``: the worker count ``{"min": workers, "max": workers + 1}`` (issue 30: the job's
    all-or-nothing unit is its ``min`` workers; the extra app is a standby that holds nothing)."""
    count = {"min": workers, "max": workers + 1} if elastic else workers
    style = {"style": "multi_worker_mirrored"} if elastic else {}  # (custom programs cannot be elastic)
    return load_dict({**style, "name": name, "command": ["python3", "-c", program], "prewarm": False,
                      "admission": admission, "restart": {"max_failures": 0},
                      "discovery": {"nameserver": cluster.mesos_dns, "http_api": cluster.mesos_dns_http,
                                    "marathon_url": cluster.marathon_url},
                      "roles": {"worker": {"count": count, "cpus": 1, "mem": 128}}})


def _client(cluster):
    return Client(cluster.marathon_url, retry=RetryPolicy(attempts=5, budget=30, initial=0.2, max_wait=2))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("elastic", [False, True], ids=["fixed", "elastic"])
def test_placed_tasks_release_a_job_nobody_follows_at_its_deadline(cluster_of, tmp_path, elastic):
    cluster = cluster_of(agents=3, agent_resources=[AGENT])
    client = _client(cluster)
    # sent with its capacity not checked (the master cannot be read): the whole job can never be placed
    submitted = wall(Marathon(client=client, mesos=UNREAD).deploy(
        _spec(cluster, "part", 4, timeout=6, elastic=elastic)).deployment.version)
    st = wait_for(lambda: (lambda s: s if s.get("state") in L.RECORDED else None)(job_status(client, "part").to_dict()),
                  40, interval=0.2, what="the job's record")
    assert st["state"] == L.NOT_PLACED, st
    # (elastic: the standby waits as well, holding nothing; the deadline is the min's)
    said = "worker: 3 of 4..5 placed; 2 waiting " if elastic else "worker: 3/4 placed; 1 waiting "
    assert st["reason"].startswith(said)
    assert st["reason"].endswith(": InsufficientCpus on 3 agents (need 1 each, 0 free)")
    apps = client.get_group("/part", embed=("group.apps",))["apps"]
    deadline = submitted + 6  # (the release is a new configuration: lastConfigChangeAt moved)
    released = wall(apps[0]["labels"][L.FINISHED_AT])
    assert [a["instances"] for a in apps] == [0] * (5 if elastic else 4) and 0 <= released - deadline <= 5, \
        released - deadline
    # the placed tasks were stopped (their grace period): no program ever started, nothing is held
    left = wait_no_processes(tmp_path / "state", 10)
    assert left == [], f"the placed tasks still run 10 s after the release: {left}"
    # (an agent frees a task's resources at its terminal status update, a moment after its process ended)
    wait_for(lambda: sum(float(s["used_resources"].get("cpus") or 0)
                         for s in client.request("GET", "/mesos/master/slaves").body["slaves"]) == 0,
             10, interval=0.2, what="the agents' resources freed")
    print(f"deadline to the record: {released - deadline:.2f} s", file=sys.stderr)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("elastic", [False, True], ids=["fixed", "elastic"])
def test_two_jobs_that_each_need_most_of_the_cluster_both_succeed_with_retries(cluster_of, elastic):
    """Each job needs 3 of the 4 agents and trains longer than its admission timeout: whichever is
    placed second holds what it got only until its deadline, is released (NotPlaced, Queued), and
    is submitted again after its jittered backoff by the ``wait`` that follows it, until it fits."""
    cluster = cluster_of(agents=4, agent_resources=[AGENT])
    marathon = Marathon(client=_client(cluster))
    program = "import time; time.sleep(5)"
    handles = [marathon.deploy(_spec(cluster, name, 3, program, timeout=3, retries=8, backoff_seconds=1,
                                     elastic=elastic))
               for name in ("one", "two")]
    finals: dict[str, object] = {}
    seen: dict[str, set] = {"one": set(), "two": set()}

    def follow(handle):
        finals[handle.name] = marathon.wait(handle.name, deployment_id=handle.deployment.deployment_id, timeout=200,
                                            on_progress=lambda st: seen[handle.name].add(st.state))

    threads = [threading.Thread(target=follow, args=(h,)) for h in handles]
    for t in threads:
        t.start()
    for t in threads:
        t.join(210)
    assert {name: st.state for name, st in finals.items()} == {"one": L.SUCCEEDED, "two": L.SUCCEEDED}, finals
    attempts = {name: max(int(a["labels"].get(L.ATTEMPT) or 1)
                          for a in marathon.client.get_group(f"/{name}", embed=("group.apps",))["apps"])
                for name in ("one", "two")}
    assert max(attempts.values()) >= 2, attempts  # one was released and submitted again
    assert any(L.QUEUED in states for states in seen.values()), seen


@pytest.mark.timeout(120)
@pytest.mark.parametrize("elastic", [False, True], ids=["fixed", "elastic"])
def test_a_job_whose_missing_agent_comes_back_before_its_deadline_starts_and_succeeds(cluster_of, elastic):
    cluster = cluster_of(agents=2, agent_resources=[AGENT])
    marathon = Marathon(client=_client(cluster))
    with pytest.raises(UsageError) as refused:  # 3 workers of 1 cpu can never all run on 2 agents of 1 cpu
        marathon.deploy(_spec(cluster, "back", 3, timeout=60, elastic=elastic))
    assert str(refused.value).startswith("job back needs cpus 3 in all; the cluster has 2 in all (2 agents)")
    # sent all the same where the master cannot be read (as a cluster losing an agent after the check would):
    # it waits for the agent
    Marathon(client=_client(cluster), mesos=UNREAD).deploy(_spec(cluster, "back", 3, timeout=60, elastic=elastic))
    said = "worker: 2 of 3..4 placed; 2 waiting" if elastic else "worker: 2/3 placed; 1 waiting"
    st = wait_for(lambda: (lambda s: s if said in str((s.admission or {}).get("waiting"))
                           else None)(marathon.status("back")), 30, interval=0.2, what=said)
    assert st.admission["waiting"][0].endswith(": InsufficientCpus on 2 agents (need 1 each, 0 free)")
    cluster.add_agent(AGENT.replace("33400-33499", "33500-33599"))
    final = marathon.wait("back", timeout=60)
    assert final.state == L.SUCCEEDED, final
