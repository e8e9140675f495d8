"""The deploy use case (user/pipeline.py): a deploy renders the job's group once and checks admission
once, whichever way it comes (the Python API, the CLI, a job deployed again), and the status a
follower sees is built without I/O from one look at the job (user/status.py)."""

from __future__ import annotations

import collections
import json

import pytest
from click.testing import CliRunner

from marathon_tf.contract.errors import MarathonNotFound
from marathon_tf.mesos.master import parse_agents
from marathon_tf.user import admission, api, capacity, render
from marathon_tf.user import status as job_status
from marathon_tf.user.api import Job, Marathon
from marathon_tf.user.cli import cli

JOB = {"name": "mnist", "command": "true", "roles": {"ps": {"count": 1}, "worker": {"count": 2}}}
SLAVE = {"id": "S1", "hostname": "10.0.0.1", "active": True,
         "resources": {"cpus": 8.0, "mem": 8192.0, "disk": 1000.0, "gpus": 0.0, "ports": "[31000-31099]"},
         "used_resources": {}, "offered_resources": {}, "reserved_resources": {}, "attributes": {}}


class FakeClient:
    """What a deploy asks of Marathon: its info, the job's group (404 when ``group`` is None), the PUT."""

    url = "http://marathon:8080"
    urls = [url]

    def __init__(self, group=None):
        self.group, self.put = group, []

    def is_local(self):
        return False

    def info(self):
        return {"name": "marathon", "version": "1.8.222", "marathon_config": {"features": []}}

    def get_group(self, group_id, embed=()):
        if self.group is None:
            raise MarathonNotFound(f"{group_id} does not exist", status=404)
        return self.group

    def put_group(self, group, force=False, dry_run=False):
        self.put.append(group)
        return {"deploymentId": "d1", "version": "2026-01-01T00:00:00.000Z"}

    def deployments(self):
        return []

    def limit(self, seconds):
        pass


@pytest.fixture
def counted(monkeypatch):
    """Every rendering (a renderer made, for which spec), every admission check and capacity read."""
    calls: collections.Counter = collections.Counter()
    rendered: list = []
    cap = capacity.Capacity(parse_agents({"slaves": [SLAVE]}), {"*"}, "http://master:5050")
    real_init, real_check, real_effective = render._Renderer.__init__, admission.check, admission.effective

    def init(self, spec, templates_dir, marathon_version=None):
        rendered.append(spec)
        real_init(self, spec, templates_dir, marathon_version)

    def check(*a, **k):
        calls["admission.check"] += 1
        return real_check(*a, **k)

    def effective(*a, **k):
        calls["admission.effective"] += 1
        return real_effective(*a, **k)

    def read(client, given=None):
        calls["capacity.read"] += 1
        return cap

    monkeypatch.setattr(render._Renderer, "__init__", init)
    monkeypatch.setattr(admission, "check", check)
    monkeypatch.setattr(admission, "effective", effective)
    monkeypatch.setattr(capacity, "read", read)
    return calls, rendered


def test_a_deploy_renders_the_group_once_and_checks_admission_once(counted):
    calls, rendered = counted
    client = FakeClient()
    handle = Marathon(client=client).deploy(Job.from_dict(JOB))
    assert handle.deployment.deployment_id == "d1" and len(client.put) == 1
    assert len(rendered) == 1  # was 3: one app per role for the admission check, then the group
    assert calls == {"admission.check": 1, "admission.effective": 1, "capacity.read": 1}
    assert [a["id"] for a in client.put[0]["apps"]] == ["/mnist/ps-0", "/mnist/worker-0", "/mnist/worker-1"]


@pytest.mark.parametrize("counts", [{"ps": {"count": 1}, "worker": {"count": 1}}, JOB["roles"]])
def test_a_job_deployed_again_renders_its_group_once(counted, counts):
    calls, rendered = counted
    deployed = Job.from_dict({**JOB, "roles": counts})
    group = render.render_group(deployed.spec)  # what runs now (Marathon's copy of our rendering)
    rendered.clear()
    client = FakeClient(group)
    handle = Marathon(client=client).deploy(Job.from_dict(JOB))
    job_spec = Job.from_dict(JOB).spec
    # the job's group once (was 3); the running job's own spec once more, to tell `no change`
    assert [s == job_spec for s in rendered].count(True) == (1 if counts != JOB["roles"] else 2)
    assert len(rendered) == 2
    assert handle.deployment.changed is (counts != JOB["roles"]) and len(client.put) == int(handle.deployment.changed)
    assert calls == {"admission.check": 1, "admission.effective": 1, "capacity.read": 1}


def test_the_cli_deploy_takes_the_admission_timeout_once(counted, monkeypatch, tmp_path):
    calls, rendered = counted
    client = FakeClient()
    monkeypatch.setattr(api, "connect", lambda *a, **k: client)
    path = tmp_path / "job.json"
    path.write_text(json.dumps(JOB))
    r = CliRunner().invoke(cli, ["deploy", str(path), "--detach", "--marathon", "http://x",
                                 "--admission-timeout", "60"])
    assert r.exit_code == 0, r.output
    assert len(rendered) == 1 and calls == {"admission.check": 1, "admission.effective": 1, "capacity.read": 1}
    assert client.put[0]["apps"][0]["env"]["MTF_JOB"] == "mnist"


def _apps(state=None, tasks=True):
    group = render.render_group(Job.from_dict(JOB).spec)
    out = {}
    for i, app in enumerate(group["apps"]):
        name = app["id"].rsplit("/", 1)[1]
        app = dict(app, deployments=[], instances=0 if state else 1)
        if state:
            app["labels"] = {**app["labels"], "marathon-tf/state": state, "marathon-tf/final-step": "100"}
        app["tasks"] = [] if state or not tasks else [
            {"id": f"mnist_{name}.1", "host": "10.0.0.1", "state": "TASK_RUNNING", "ports": [31000 + i, 32000 + i],
             "startedAt": "2026-01-01T00:00:00.000Z"}]
        out[name] = app
    return out


def test_a_status_is_built_from_one_look_without_any_io():
    seen = job_status.Observed("mnist", _apps(), probes={"worker-0": {"phase": "running", "step": 40},
                                                        "worker-1": None}, now=1_767_225_660.0)
    st = job_status.build(seen)
    assert st.state == "Running" and st.step == 40
    rows = {t.task: t.to_dict() for t in st.tasks}
    assert rows["worker-0"]["address"] == "10.0.0.1:31001" and rows["worker-0"]["ageSeconds"] == 60.0
    assert rows["worker-0"]["metricsUrl"] == "http://10.0.0.1:32001/metrics" and "metricsUrl" not in rows["ps-0"]
    assert rows["worker-1"]["metricsUrl"] == "http://10.0.0.1:32002/metrics" and "step" not in rows["worker-1"]
    ended = job_status.build(job_status.Observed("mnist", _apps("Succeeded")))
    assert (ended.state, ended.final_step, ended.ended, ended.error()) == ("Succeeded", 100, True, None)
    waiting = job_status.build(job_status.Observed("mnist", _apps(tasks=False), queue={"/mnist/ps-0": {
        "delay": {"overdue": False, "timeLeftSeconds": 12}}}))
    assert waiting.state == "Starting" and [t.state for t in waiting.tasks] == ["delayed 12s", "waiting", "waiting"]


def test_a_fresh_local_cluster_has_no_earlier_run_to_look_for(counted):
    """``deploy --local``: its own logdir lock is in the job's volume before the deploy, which on `local
    serve` would be an earlier run's volumes; on a cluster it just started there is none to look for."""
    from marathon_tf.user import pipeline

    class Fresh(FakeClient):
        def get_group(self, group_id, embed=()):
            raise AssertionError("no earlier run is looked for on a fresh cluster")

    client = Fresh()
    deployment = pipeline.deploy(client, Job.from_dict(JOB).spec, earlier_run=False)
    assert deployment.changed and deployment.resumed is None and len(client.put) == 1
