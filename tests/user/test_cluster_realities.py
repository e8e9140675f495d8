"""What the verbs do about a real cluster's Marathon (fake Marathons): a deployment id not listed yet, GPU
jobs on a Marathon without gpu_resources, relative volume host paths, the agents' credentials, Jetty's
401 in one line.

``M@1.x:<path>`` = mesosphere/marathon, branch releases/1.x, that path.
"""

from __future__ import annotations

import json

import pytest
import requests
from click.testing import CliRunner
from pytest_httpserver import HTTPServer
from user_helpers import minimal, no_job_yet
from werkzeug import Response

from marathon_tf.contract.errors import Timeout
from marathon_tf.local import LocalCluster
from marathon_tf.local.security import Credentials
from marathon_tf.user import watch
from marathon_tf.user.cli import cli
from marathon_tf.user.render import render_group
from marathon_tf.user.results import JobStatus
from marathon_tf.user.spec import load_dict

LABELS = {"marathon-tf/job": "j", "marathon-tf/role": "worker", "marathon-tf/index": "0"}
INFO = {"name": "marathon", "version": "1.8.222", "marathon_config": {"features": ["vips", "task_killing"]}}


# --------------------------------------------------------------------------- a deployment id not listed yet


class _Marathon:
    """``deployments()`` answers from a script (one list per call, the last repeated); the group
    GET of ``_converged`` from ``group``."""

    def __init__(self, listed, group=None):
        self.listed, self.calls, self.group = list(listed), 0, group or {"apps": []}

    def deployments(self):
        self.calls += 1
        ids = self.listed.pop(0) if len(self.listed) > 1 else self.listed[0]
        return [{"id": i} for i in ids]

    def get_group(self, group_id, embed=()):
        return self.group


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


@pytest.fixture
def quiet_status(monkeypatch):
    monkeypatch.setattr(watch, "job_status", lambda client, job, probe=True, mesos=None: JobStatus.from_dict(
        {"job": "j", "state": "Deploying"}))
    monkeypatch.setattr(watch, "_sleep", lambda seconds: [])


def test_an_id_not_listed_yet_is_waited_for_until_seen_and_gone(quiet_status):
    # M@1.11:src/main/scala/mesosphere/marathon/core/deployment/impl/DeploymentManagerActor.scala: the answer
    # (DeploymentStarted) goes out before LaunchDeployment lists the plan; M@1.4:.../upgrade/DeploymentManager.scala
    # lists a plan only once its first step is reported. "Not listed" is not "finished".
    marathon = _Marathon([[], [], ["d1"], ["d1"], []])
    watch.wait_deployment(marathon, "d1", "j", timeout=None, clock=_Clock())
    assert marathon.calls == 5


def test_an_id_never_listed_is_finished_after_the_grace_period(quiet_status):
    clock = _Clock()
    marathon = _Marathon([[]])

    def tick():
        clock.now += 4.0
        return [{"id": "other"}]

    marathon.deployments = tick
    watch.wait_deployment(marathon, "d1", "j", timeout=None, clock=clock, grace=30)
    assert 30 <= clock.now <= 38


def test_an_id_never_listed_is_finished_when_the_apps_show_it_done(quiet_status):
    app = {"id": "/j/worker-0", "labels": LABELS, "instances": 2, "deployments": [],
           "versionInfo": {"lastConfigChangeAt": "2026-01-01T00:00:10.000Z"},
           "tasks": [{"state": "TASK_RUNNING", "version": "2026-01-01T00:00:10.000Z"},
                     {"state": "TASK_RUNNING", "version": "2026-01-01T00:00:05.000Z"}]}
    marathon = _Marathon([[]], {"apps": [app]})
    clock = _Clock()
    with pytest.raises(Timeout):  # not done: one task is of the old configuration
        watch.wait_deployment(marathon, "d1", "j", timeout=0, clock=clock, grace=30)
    app["tasks"][1]["version"] = "2026-01-01T00:00:11.000Z"
    watch.wait_deployment(marathon, "d1", "j", timeout=None, clock=clock, grace=30)
    assert clock.now == 0 and marathon.calls == 2


def test_an_id_never_listed_is_finished_by_its_deployment_success_event(quiet_status):
    class Stream:
        available = True

        def wait(self, seconds):
            return [{"eventType": "deployment_success", "id": "d1"}]

    marathon = _Marathon([[]], {"apps": [{"labels": LABELS, "instances": 1, "tasks": []}]})
    watch.wait_deployment(marathon, "d1", "j", timeout=None, clock=_Clock(), stream=Stream())
    assert marathon.calls == 2


# --------------------------------------------------------------------------- GPUs without gpu_resources


def _gpu_job(write_job):
    return write_job(minimal(roles={"ps": {"count": 1}, "worker": {"count": 2, "gpus": 1}}))


def test_deploy_of_a_gpu_job_is_refused_when_marathon_lacks_gpu_resources(httpserver, write_job):
    # Marathon refuses GPU apps with 422 unless it runs with --enable_features gpu_resources
    # (M@1.11:.../api/v2/validation/AppValidation.scala complyWithGpuRules); /v2/info lists the enabled
    # features in marathon_config.features (M@1.4..1.11:.../api/v2/InfoResource.scala).
    httpserver.expect_request("/v2/info").respond_with_json(INFO)
    r = CliRunner().invoke(cli, ["deploy", str(_gpu_job(write_job)), "--detach", "--marathon", httpserver.url_for("")])
    assert r.exit_code == 2, r.output
    error = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "roles.worker.gpus is 1" in error[0] and "gpu_resources" in error[0]
    assert "--enable_features gpu_resources" in r.stderr
    assert [req.method for req, _ in httpserver.log] == ["GET"]  # nothing sent


def test_deploy_of_a_gpu_job_goes_ahead_with_gpu_resources(httpserver, write_job):
    httpserver.expect_request("/v2/info").respond_with_json(
        {**INFO, "marathon_config": {"features": ["gpu_resources"]}})
    no_job_yet(httpserver)
    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_json({"deploymentId": "d", "version": "v"})
    r = CliRunner().invoke(cli, ["deploy", str(_gpu_job(write_job)), "--detach", "--marathon", httpserver.url_for("")])
    assert r.exit_code == 0, r.output


def test_scale_of_a_gpu_job_is_refused_when_marathon_lacks_gpu_resources(httpserver):
    group = render_group(load_dict(minimal(roles={"ps": {"count": 1}, "worker": {"count": 1, "gpus": 2}})))
    httpserver.expect_request("/v2/groups/mnist", method="GET").respond_with_json(group)
    httpserver.expect_request("/v2/info").respond_with_json(INFO)
    r = CliRunner().invoke(cli, ["scale", "mnist", "workers=3", "--marathon", httpserver.url_for("")])
    assert r.exit_code == 2, r.output
    assert [line for line in r.stderr.splitlines() if line.startswith("error:")] == [
        f"error: job mnist: roles.worker.gpus is 2, but Marathon at {httpserver.url_for('').rstrip('/')} runs "
        "without the gpu_resources feature (its features: vips, task_killing); it would refuse the job"]
    assert not [req for req, _ in httpserver.log if req.method != "GET"]


# --------------------------------------------------------------------------- volumes and the network


def test_a_relative_volume_host_path_is_refused_for_a_remote_marathon(httpserver, write_job):
    # Mesos: a relative Volume.host_path is relative to the container's work directory (apache/mesos
    # include/mesos/mesos.proto): each task would get its own copy in its sandbox.
    httpserver.expect_request("/v2/info").respond_with_json(INFO)
    job = write_job(minimal(volumes=[{"host_path": "ckpt", "container_path": "ckpt"}]))
    r = CliRunner().invoke(cli, ["deploy", str(job), "--detach", "--marathon", httpserver.url_for("")])
    assert r.exit_code == 2, r.output
    assert "volumes[0].host_path 'ckpt' is relative" in r.stderr and "absolute path" in r.stderr
    assert not [req for req, _ in httpserver.log if req.method == "PUT"]


def test_a_container_network_needs_its_name(write_job):
    # M@1.11:src/main/scala/mesosphere/marathon/api/v2/validation/NetworkValidation.scala: a container network
    # without a name needs Marathon's --default_network_name; 1.4 has no top-level networks at all.
    r = CliRunner().invoke(cli, ["validate", str(write_job(minimal(network={"mode": "container"})))])
    assert r.exit_code == 2
    assert r.stderr.splitlines()[0].startswith("error: ") and "network.name: a container network needs its name" \
        in r.stderr.splitlines()[0]


# --------------------------------------------------------------------------- the agents' credentials


def test_logs_sends_no_marathon_credentials_to_the_agents(httpserver):
    """Mesos agents have their own HTTP authentication (usually none): Marathon's token stays with Marathon."""
    agent = HTTPServer(host="127.0.0.1")
    agent.start()
    try:
        host, port = agent.url_for("").rstrip("/").split("://", 1)[1].split(":")
        task_id = "j_worker-0.instance-1._app.1"
        httpserver.expect_request("/v2/info").respond_with_json(INFO)
        httpserver.expect_request("/v2/groups/j").respond_with_json({"id": "/j", "apps": [
            {"id": "/j/worker-0", "labels": LABELS, "tasks": [{"id": task_id, "host": host, "stagedAt": "t"}]}]})
        agent.expect_request("/state").respond_with_json({"frameworks": [{"executors": [
            {"id": task_id, "directory": "/sandbox/r1", "tasks": [{"id": task_id}]}]}]})
        content = "hi\n"

        def read(request):
            offset = int(request.args["offset"])
            body = ({"data": "", "offset": len(content)} if offset == -1
                    else {"data": content[offset:], "offset": offset})
            return Response(json.dumps(body), content_type="application/json")

        agent.expect_request("/files/read").respond_with_handler(read)
        r = CliRunner(env={"MARATHON_TOKEN": "tok-secret"}).invoke(
            cli, ["logs", "j", "--stream", "stdout", "--marathon", httpserver.url_for(""), "--agent-port", port])
        assert r.exit_code == 0, r.output
        assert r.stdout.splitlines() == ["[worker-0] hi"]
        assert all(req.headers.get("Authorization") == "token=tok-secret" for req, _ in httpserver.log)
        assert agent.log and not [req for req, _ in agent.log if "Authorization" in req.headers]
    finally:
        agent.clear()
        agent.stop()


def test_the_agent_session_sends_marathons_credentials_to_marathons_own_addresses_only(httpserver):
    """The local runner serves the agent API on Marathon's port: there Marathon's session (its token) is used."""
    from marathon_tf.marathon.client import Client
    from marathon_tf.user import logs

    agent = HTTPServer(host="127.0.0.1")
    agent.start()
    try:
        for server in (httpserver, agent):
            server.expect_request("/state").respond_with_json({})
        client = Client(httpserver.url_for("/"), token="tok-secret")
        client.limit(30.0)
        session = logs.AgentSession(client)
        assert session.get(httpserver.url_for("/state"), timeout=5).json() == {}
        assert session.get(agent.url_for("/state"), timeout=5).json() == {}
        assert [req.headers.get("Authorization") for req, _ in httpserver.log] == ["token=tok-secret"]
        assert [req.headers.get("Authorization") for req, _ in agent.log] == [None]
        assert agent.log[0][0].headers["User-Agent"] == client.session.headers["User-Agent"]
        client.deadline = 0.0  # past: the agents' requests are bounded by Marathon's deadline too
        with pytest.raises(requests.Timeout):
            session.get(agent.url_for("/state"), timeout=5)
    finally:
        agent.clear()
        agent.stop()


# --------------------------------------------------------------------------- Jetty's 401, one line


def test_basic_auth_refused_is_one_line_naming_the_credentials(tmp_path):
    with LocalCluster(state_dir=tmp_path / "state", dns_refresh=0, auth=Credentials(user="ops", password="right")) as c:
        for env, said in (({}, "no credentials were sent"),
                          ({"MARATHON_USER": "ops", "MARATHON_PASSWORD": "wrong"},
                           "user 'ops' (MARATHON_USER/MARATHON_PASSWORD) was sent")):
            r = CliRunner(env={"MARATHON_URL": c.marathon_url, **env}).invoke(cli, ["list"])
            assert r.exit_code == 1, r.output
            errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
            assert errors == [f"error: GET {c.marathon_url}/v2/apps: 401 Error 401 Unauthorized: "
                              f"Marathon refused the credentials; {said}"], r.stderr
            assert "does not answer like Marathon" not in r.stderr and "wrong" not in r.stderr
        r = CliRunner(env={"MARATHON_URL": c.marathon_url, "MARATHON_USER": "ops", "MARATHON_PASSWORD": "right"}
                      ).invoke(cli, ["list"])
        assert r.exit_code == 0, r.output
