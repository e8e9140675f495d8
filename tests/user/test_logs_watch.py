"""`logs` through the agent files API (local runner and a fake Mesos agent); watching deployments."""

import json
import os
import time

import pytest
from click.testing import CliRunner
from polling import wait_for

from marathon_tf.contract.errors import Timeout
from marathon_tf.local import LocalCluster
from marathon_tf.marathon.client import Client
from marathon_tf.marathon.events import EventStream
from marathon_tf.user import logs, output, pipeline
from marathon_tf.user.cli import cli
from marathon_tf.user.results import JobStatus
from marathon_tf.user.status import job_status
from marathon_tf.user.watch import wait_deployment

LABELS = {"marathon-tf/job": "j", "marathon-tf/role": "worker", "marathon-tf/index": "0"}


@pytest.fixture
def cluster(tmp_path):
    c = LocalCluster(state_dir=tmp_path / "state", dns_refresh=0, heartbeat=0.5)
    c.start()
    yield c
    c.stop()


def test_logs_reads_the_local_sandboxes(cluster):
    client = Client(cluster.marathon_url)
    client.put_group({"id": "/j", "apps": [{"id": "/j/worker-0", "instances": 1, "labels": LABELS,
                                            "cmd": "echo out-1; echo err-1 >&2; sleep 1; echo out-2; sleep 60"}]})
    assert wait_for(lambda: any(t == "worker-0" for t, _, x in logs.follow(
        client, "j", None, ("stdout",), tail=1000, follow_=False, agent_port=5051, agent_url=None) if "out-2" in x))
    r = CliRunner().invoke(cli, ["logs", "j", "worker-0", "--marathon", cluster.marathon_url])
    assert r.exit_code == 0, r.output
    # all log text on stdout (so `logs … | grep` sees stderr too), stdout's lines first, and a note saying
    # why they are not in time order (two files without times: no order can be made)
    assert r.stdout.splitlines() == ["[worker-0] out-1", "[worker-0] out-2", "[worker-0] err-1"]
    assert r.stderr.splitlines() == [output.TWO_FILES]
    r = CliRunner().invoke(cli, ["logs", "j", "worker-0", "--stream", "stdout", "--marathon", cluster.marathon_url])
    assert r.exit_code == 0 and r.stderr == ""  # one stream: nothing to say
    r = CliRunner().invoke(cli, ["logs", "j", "worker-9", "--marathon", cluster.marathon_url])
    assert r.exit_code == 2 and "worker-9" in r.stderr


def test_logs_previous_without_an_earlier_instance_is_exit_1_as_documented(cluster):
    client = Client(cluster.marathon_url)
    client.put_group({"id": "/j", "apps": [{"id": "/j/worker-0", "instances": 1, "labels": LABELS,
                                            "cmd": "echo only-run; sleep 60"}]})
    def run(*a):
        return CliRunner().invoke(cli, ["logs", "j", "worker-0", "--marathon", cluster.marathon_url, *a])
    assert wait_for(lambda: "only-run" in run().stdout)
    r = run("--previous")
    assert r.exit_code == 1 and r.stdout == "", r.output  # `logs --help`: errors exit 1; was 2
    assert r.stderr.startswith("error: j: task worker-0 has no earlier instance to read logs from")


def _relaunched_then_ended(cluster, body: str, instances: int, last_words: str, state: str) -> list:
    """worker-0 of job j runs ``n=<sandbox count>; BODY; exit 1`` until ``instances`` sandboxes exist and the
    last of those printed ``last_words``; then the job ends with ``state`` (its record, instances 0, as the
    deciding task's bootstrap writes it). The sandboxes, oldest first."""
    client = Client(cluster.marathon_url)
    cmd = f"n=$(ls ../ | wc -l); {body}; exit 1"
    client.put_group({"id": "/j", "apps": [{"id": "/j/worker-0", "instances": 1, "labels": LABELS, "cmd": cmd,
                                            "backoffSeconds": 0.2, "backoffFactor": 1.0}]})
    def boxes():
        return sorted((cluster.state_dir / "sandboxes").glob("*"), key=lambda p: p.stat().st_mtime)
    assert wait_for(lambda: len(boxes()) >= instances and last_words in (boxes()[instances - 1] / "stdout").read_text())
    client.put_group({"id": "/j", "apps": [{"id": "/j/worker-0", "instances": 0, "cmd": cmd,
                                            "labels": {**LABELS, "marathon-tf/state": state}}]}, force=True)
    assert wait_for(lambda: not any(a.get("tasks") for a in client.list_apps(embed=("apps.tasks",))))
    return boxes()


def test_logs_of_finished_and_restarted_tasks_tail_in_lines_and_follow_ends_with_the_job(cluster):
    # every instance prints its run number, then exits 1: Marathon relaunches it
    boxes = _relaunched_then_ended(cluster, "for i in 1 2 3 4 5; do echo run-$n line-$i; done; echo oops >&2", 2,
                                   "line-5", "Succeeded")
    last, before = boxes[-1], boxes[-2]
    def run(*a):
        return CliRunner().invoke(cli, ["logs", "j", "worker-0", "--marathon", cluster.marathon_url, *a])
    r = run("--tail", "2", "--stream", "stdout")
    assert r.exit_code == 0, r.output
    tag = (last / "stdout").read_text().split()[0]
    assert r.stdout.splitlines() == [f"[worker-0] {tag} line-4", f"[worker-0] {tag} line-5"]
    r = run("--previous", "--tail", "1")
    assert r.exit_code == 0, r.output
    prev = (before / "stdout").read_text().split()[0]
    assert prev != tag
    assert r.stdout.splitlines() == [f"[worker-0] {prev} line-5", "[worker-0] oops"]
    r = run("-f", "--tail", "0")  # the job has ended: -f returns at once, exit 0
    assert r.exit_code == 0, r.output


def test_logs_since_picks_the_instances_that_wrote_output_in_that_time(cluster):
    *old, recent = _relaunched_then_ended(cluster, "echo run-$n", 3, "run-", "Failed")
    hour_ago = time.time() - 3600
    for box in old:  # every instance but the last wrote its output an hour ago
        for name in ("stdout", "stderr"):
            os.utime(box / name, (hour_ago, hour_ago))
    def run(*a):
        return CliRunner().invoke(cli, ["logs", "j", "worker-0", "--marathon", cluster.marathon_url, *a])
    r = run("--since", "10m", "--stream", "stdout")
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == [f"[worker-0] {(recent / 'stdout').read_text().strip()}"]
    r = run("--since", "2h", "--stream", "stdout")
    assert r.exit_code == 0, r.output
    assert len(r.stdout.splitlines()) == len(old) + 1
    for box in [recent]:
        for name in ("stdout", "stderr"):
            os.utime(box / name, (hour_ago, hour_ago))
    r = run("--since", "10m")  # nothing to read is a runtime outcome (exit 1), not a usage error
    assert r.exit_code == 1 and r.stdout == "" and "no task worker-0 wrote output in that time" in r.stderr, r.output
    r = run("--since", "10m", "--previous")
    assert r.exit_code == 2 and "give one of them" in r.stderr


def test_logs_errors_are_reported_not_swallowed(cluster):
    client = Client(cluster.marathon_url)
    client.put_group({"id": "/j", "apps": [{"id": "/j/worker-0", "instances": 1, "labels": LABELS,
                                            "cmd": "echo hi; sleep 60"}]})
    assert wait_for(lambda: any(a.get("tasks") for a in client.list_apps(embed=("apps.tasks",))))
    r = CliRunner().invoke(cli, ["logs", "j", "--marathon", cluster.marathon_url, "--agent-url", "http://127.0.0.1:1"])
    assert r.exit_code == 1, r.output
    assert r.stdout == ""
    assert "http://127.0.0.1:1" in r.stderr and "agent" in r.stderr


def test_the_agent_file_api_refuses_paths_outside_the_sandboxes(cluster):
    import requests

    r = requests.get(f"{cluster.marathon_url}/files/read", params={"path": "/etc/passwd", "offset": 0})
    assert r.status_code == 404
    r = requests.get(f"{cluster.marathon_url}/files/read",
                     params={"path": str(cluster.state_dir / "sandboxes" / ".." / ".." / "x"), "offset": 0})
    assert r.status_code == 404


def test_logs_on_a_cluster_go_to_the_tasks_agent(httpserver):
    """Marathon says where the task runs; the agent's /state says its sandbox; /files/read gives the text."""
    agent = httpserver.url_for("").rstrip("/")
    host_port = agent.split("://", 1)[1]
    host, port = host_port.split(":")
    task_id = "j_worker-0.instance-1._app.1"
    httpserver.expect_request("/v2/info").respond_with_json({"name": "marathon", "version": "1.8.222"})
    httpserver.expect_request("/v2/groups/j").respond_with_json({"id": "/j", "apps": [
        {"id": "/j/worker-0", "labels": LABELS, "tasks": [{"id": task_id, "host": host, "stagedAt": "t"}]}]})
    httpserver.expect_request("/state").respond_with_json({"frameworks": [{"executors": [
        {"id": "other", "directory": "/x", "tasks": [{"id": "other"}]},
        {"id": task_id, "directory": "/var/lib/mesos/slaves/S1/runs/r1", "tasks": [{"id": task_id}]}]}]})
    content = "line one\nline two\n"

    def read(request):
        from werkzeug import Response

        assert request.args["path"] == "/var/lib/mesos/slaves/S1/runs/r1/stdout"
        offset = int(request.args["offset"])
        if offset == -1:
            return Response(json.dumps({"data": "", "offset": len(content)}), content_type="application/json")
        return Response(json.dumps({"data": content[offset:], "offset": offset}), content_type="application/json")

    httpserver.expect_request("/files/read").respond_with_handler(read)
    r = CliRunner().invoke(cli, ["logs", "j", "--stream", "stdout", "--marathon", agent, "--agent-port", port])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == ["[worker-0] line one", "[worker-0] line two"]


def test_events_arrive_and_wait_deployment_ends_when_tasks_run(cluster):
    client = Client(cluster.marathon_url)
    with EventStream(client) as stream, EventStream(client) as probe:
        time.sleep(0.5)  # both attached
        body = client.put_group({"id": "/j", "apps": [{"id": "/j/worker-0", "instances": 1, "labels": LABELS,
                                                       "cmd": "sleep 60"}]})
        status = wait_deployment(client, body["deploymentId"], "j", timeout=30, stream=stream, poll=5.0)
        assert body["deploymentId"] not in {d["id"] for d in client.deployments()}
        assert status.tasks[0].state == "TASK_RUNNING"
        types = []
        assert wait_for(lambda: types.extend(e["eventType"] for e in probe.wait(0.2)) or
                        {"status_update_event", "deployment_success"} <= set(types), 5), types


def test_wait_deployment_times_out_with_exit_code_3(cluster):
    client = Client(cluster.marathon_url)
    app = {"id": "/j/worker-0", "instances": 1, "labels": LABELS, "cmd": "sleep 60",
           "healthChecks": [{"protocol": "COMMAND", "command": {"value": "false"}, "gracePeriodSeconds": 300,
                             "intervalSeconds": 1, "delaySeconds": 0}]}
    body = client.put_group({"id": "/j", "apps": [app]})
    with pytest.raises(Timeout) as e:
        wait_deployment(client, body["deploymentId"], "j", timeout=1.5, poll=0.5)
    assert e.value.exit_code == 3 and "still in progress" in e.value.message


def test_status_derives_running_and_counts(cluster):
    client = Client(cluster.marathon_url)
    client.put_group({"id": "/j", "apps": [{"id": "/j/worker-0", "instances": 1, "labels": LABELS, "cmd": "sleep 60"}]})
    assert wait_for(lambda: job_status(client, "j").to_dict()["state"] == "Running")
    st = job_status(client, "j").to_dict()
    assert st["counts"]["worker"]["running"] == 1


class _Stream:
    available = True

    def __init__(self, events):
        self._events = list(events)

    def wait(self, seconds):
        out, self._events = self._events, []
        return out


class _Deployments:
    def __init__(self, ids):
        self.ids = ids

    def deployments(self):
        return [{"id": i} for i in self.ids]

    def get_group(self, group_id, embed=()):
        from marathon_tf.contract.errors import MarathonNotFound

        raise MarathonNotFound(f"Group '{group_id}' does not exist")


def test_the_jobs_end_overriding_its_deployment_is_the_jobs_outcome_not_a_failed_deployment(monkeypatch):
    from marathon_tf.contract.errors import JobFailed
    from marathon_tf.user import watch

    states = iter([{"state": "Deploying"}, {"state": "Failed", "reason": "worker-1 exited 3 (permanent)"}])
    monkeypatch.setattr(watch, "job_status",
                        lambda client, job, probe=True, mesos=None: JobStatus.from_dict({"job": "j", **next(states)}))
    event = {"eventType": "deployment_failed", "id": "d1",
             "reason": "Deployment was forcefully overridden by another deployment"}
    final = watch.wait_deployment(_Deployments(["d1"]), "d1", "j", timeout=None, stream=_Stream([event]))
    assert final.state == "Failed" and final.reason == "worker-1 exited 3 (permanent)"
    # a deployment that failed while the job has no end: the deployment's own words
    states = iter([{"state": "Deploying"}, {"state": "Deploying"}])
    with pytest.raises(JobFailed) as e:
        watch.wait_deployment(_Deployments(["d1"]), "d1", "j", timeout=None, stream=_Stream([event]))
    assert "deployment d1 of j failed: Deployment was forcefully overridden" in e.value.message


def test_following_survives_a_short_marathon_outage(monkeypatch):
    from marathon_tf.contract.errors import MarathonUnavailable
    from marathon_tf.user import watch

    now = [0.0]
    answers = iter([MarathonUnavailable("down"), MarathonUnavailable("down"),
                    JobStatus.from_dict({"job": "j", "state": "Succeeded"})])

    def status(client, job, probe=True, mesos=None):
        a = next(answers)
        if isinstance(a, Exception):
            raise a
        return a

    monkeypatch.setattr(watch, "job_status", status)
    monkeypatch.setattr(watch, "_sleep", lambda s: now.__setitem__(0, now[0] + 10) or [])
    assert watch.wait_job(None, "j", timeout=None, clock=lambda: now[0]).state == "Succeeded"
    answers = iter([MarathonUnavailable("down")] * 20)
    with pytest.raises(MarathonUnavailable):
        watch.wait_job(None, "j", timeout=None, clock=lambda: now[0])


@pytest.mark.parametrize("state,code", [("Succeeded", 0), ("Failed", 1)])
def test_status_watch_exits_with_the_jobs_outcome_and_says_why(monkeypatch, state, code):
    from marathon_tf.user import watch

    final = JobStatus.from_dict({"job": "j", "groupId": "/j", "state": state, "tasks": [], "counts": {},
                                 "reason": "the reason"})
    monkeypatch.setattr(watch, "job_status", lambda *a, **k: final)
    monkeypatch.setattr(pipeline, "EventStream", lambda client: _Ctx())
    r = CliRunner().invoke(cli, ["status", "j", "--watch", "--marathon", "http://127.0.0.1:1"])
    assert r.exit_code == code, r.output
    assert f"job j: {state} (the reason)" in r.stderr


class _Ctx:
    available = False

    def __enter__(self):
        return self

    def __exit__(self, *a):
        pass


def test_logs_of_a_job_that_does_not_exist_or_has_no_output_is_an_error(cluster):
    client = Client(cluster.marathon_url)
    r = CliRunner().invoke(cli, ["logs", "nope", "--marathon", cluster.marathon_url])
    assert r.exit_code == 2 and "job 'nope' does not exist" in r.stderr
    client.put_group({"id": "/j", "apps": [{"id": "/j/worker-0", "instances": 0, "labels": LABELS, "cmd": "true"}]})
    r = CliRunner().invoke(cli, ["logs", "j", "--marathon", cluster.marathon_url])
    assert r.exit_code == 1 and "no task has output" in r.stderr and r.stdout == ""


def test_a_deployment_the_jobs_leader_overrides_to_place_its_tasks_is_followed_on(monkeypatch):
    from marathon_tf.contract import spread
    from marathon_tf.user import watch

    class Placed(_Deployments):
        def get_group(self, group_id, embed=()):  # the job's apps carry placement rules (marathon_tf.task.placer)
            return {"id": group_id, "apps": [{"id": "/j/worker-0", "labels": {
                "marathon-tf/job": "j", "marathon-tf/role": "worker", "marathon-tf/index": "0",
                spread.RULES_LABEL: '{"scope":"job","rules":[["hostname","UNIQUE"]]}'}}]}

    monkeypatch.setattr(watch, "job_status", lambda client, job, probe=True, mesos=None: JobStatus.from_dict(
        {"job": "j", "state": "Deploying"}))
    event = {"eventType": "deployment_failed", "id": "d1",
             "reason": "Deployment was forcefully overridden by another deployment"}
    final = watch.wait_deployment(Placed(["d1"]), "d1", "j", timeout=None, stream=_Stream([event]))
    assert final.state == "Deploying"  # no JobFailed: the job is followed from here on


class _Agent:
    """A Mesos agent's /state and /files/read for one sandbox, unreachable for the first ``down`` requests to /state
    (a Marathon leader killed between `logs -f`'s look at the group and its look at the agent: in the local runner its
    agent API is served on Marathon's port; fresh-clone CI of 6adcc80, tests/system/e2e/test_e2e_failover.py)."""

    def __init__(self, down):
        self.down = down
        self.text = "step=1\n"

    def get(self, url, params=None, timeout=None):
        import requests

        if url.endswith("/state"):
            if self.down:
                self.down -= 1
                raise requests.ConnectionError("refused")
            ex = {"id": "j_worker-0.1", "directory": "/sandbox", "tasks": [{"id": "j_worker-0.1"}]}
            return _Answer({"frameworks": [{"executors": [ex]}]})
        offset = int(params["offset"])
        return _Answer({"offset": len(self.text)} if offset < 0 else {"data": self.text[offset:offset + 1000]})


class _Answer:
    status_code = 200

    def __init__(self, body):
        self.body = body

    def json(self):
        return self.body


class _Group:
    def __init__(self, ends_after):
        self.looks = 0
        self.ends_after = ends_after

    def get_group(self, group_id, embed=()):
        self.looks += 1
        labels = {**LABELS, **({"marathon-tf/state": "Succeeded"} if self.looks > self.ends_after else {})}
        return {"apps": [{"id": "/j/worker-0", "instances": 1, "labels": labels,
                          "tasks": [{"id": "j_worker-0.1", "host": "a1", "state": "TASK_RUNNING"}]}]}


def test_follow_looks_again_at_an_agent_that_did_not_answer_while_finding_the_sandboxes():
    agent, marathon = _Agent(down=2), _Group(ends_after=3)
    got = list(logs.follow(marathon, "j", None, ("stdout",), tail=None, follow_=True, agent_port=5051,
                           agent_url="http://a1:5051", session=agent, sleep=lambda s: None))
    assert got == [("worker-0", "stdout", "step=1\n")] and marathon.looks == 4
    # without -f, an agent that does not answer is the one-line error it was
    with pytest.raises(logs.LogError, match="cannot read task logs from the Mesos agent at http://a1:5051"):
        list(logs.follow(_Group(ends_after=3), "j", None, ("stdout",), tail=None, follow_=False, agent_port=5051,
                         agent_url="http://a1:5051", session=_Agent(down=1), sleep=lambda s: None))
