"""The Python API against a real local cluster (small jobs without TensorFlow): deploy, wait, status,
logs, scale, delete, the typed results (the same data as -o json), re-deploying a job that runs
unchanged (no change) or that has ended (asked: resume or fresh), delete --purge; and that
importing it stays cheap."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from leaks import wait_no_processes
from polling import wait_for

from marathon_tf import Job, JobStatus, LocalCluster, SpecError, UsageError
from marathon_tf.user.cli import cli

#: Writes a "checkpoint" into the job's volume, prints a step and ends the job (completion worker0).
PROGRAM = ("import os; p = os.path.join('ckpt', 'model.ckpt'); n = os.path.exists(p); open(p, 'a').write('x'); "
           "print('resumed' if n else 'fresh', flush=True); print('step=5 loss=1', flush=True)")


def job_dict(command=("python3", "-c", PROGRAM), name="api-demo", workers=1):
    return {"name": name, "style": "custom", "command": list(command), "prewarm": False,
            "roles": {"worker": {"count": workers, "cpus": 0.1, "mem": 64}},
            "volumes": [{"host_path": "ckpt", "container_path": "ckpt"}], "logdir": "ckpt",
            "discovery": {"startup_timeout": 60}}


@pytest.fixture
def cluster(tmp_path):
    with LocalCluster(tmp_path / "state") as c:
        yield c
    assert wait_no_processes(tmp_path / "state") == []


def test_importing_marathon_tf_stays_cheap_and_the_api_never_imports_tensorflow():
    code = ("import sys, marathon_tf; cheap = [m for m in ('click', 'requests', 'marshmallow', 'jinja2', 'aiohttp') "
            "if m in sys.modules]; from marathon_tf import Job, Marathon, LocalCluster; "
            "Job.from_dict({'name': 'x', 'command': 'true', 'roles': {'worker': {'count': 1}}}).render(); "
            "tf = [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')]; "
            "print(cheap, tf); sys.exit(1 if cheap or tf else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_job_from_dict_reports_every_problem_as_the_documented_exception():
    with pytest.raises(SpecError) as e:
        Job.from_dict({"name": "Bad_Name", "comand": "x", "roles": {"wokrer": {"count": 1}}})
    assert [p for p, _ in e.value.problems] == ["comand", "name", "roles.wokrer"]
    job = Job.from_dict(job_dict())
    assert job.name == "api-demo" and job.warnings == []
    assert [a["id"] for a in job.render()["apps"]] == ["/api-demo/worker-0"]
    assert job.summary()["counts"] == {"worker": 1}


def test_deploy_wait_status_logs_and_the_job_deployed_again(cluster, tmp_path):
    job = Job.from_dict(job_dict())
    handle = cluster.deploy(job)
    assert handle.deployment.changed and handle.deployment.deployment_id
    final = handle.wait(timeout=120)
    assert isinstance(final, JobStatus) and final.state == "Succeeded" and final.succeeded, final.to_dict()
    status = handle.status()
    printed = json.loads(CliRunner().invoke(cli, ["status", "api-demo", "-o", "json",
                                                  "--marathon", cluster.url]).stdout)
    assert JobStatus.from_dict(printed) == status and set(printed) == set(status.to_dict())  # the data of -o json
    checkpoints = tmp_path / "state" / "volumes" / "api-demo" / "ckpt"
    assert status.logdir == "ckpt" and status.logdir_path == str(checkpoints)  # on this machine
    assert (checkpoints / "model.ckpt").read_text() == "x"
    text = CliRunner().invoke(cli, ["status", "api-demo", "--marathon", cluster.url]).stdout
    assert f"logdir     {checkpoints}\n" in text and "(the tasks' ckpt)" in text  # the path whole, never cut
    lines = handle.logs(stream="stdout")
    assert [(line.task, line.text) for line in lines] == [("worker-0", "fresh"), ("worker-0", "step=5 loss=1")]

    # deployed again once it has ended: asked, not guessed (it would resume from the checkpoints)
    with pytest.raises(UsageError) as e:
        cluster.deploy(job)
    assert e.value.message.startswith("job api-demo has ended (Succeeded at ")
    assert e.value.message.endswith(f"deploying it again resumes from its checkpoints in {checkpoints}")
    again = cluster.deploy(job, resume=True)
    assert again.deployment.resumed is True and "it resumes from its checkpoints" in again.deployment.note
    assert again.wait(timeout=120).state == "Succeeded"
    assert (checkpoints / "model.ckpt").read_text() == "xx" and "resumed" in [x.text for x in again.logs()]
    fresh = cluster.deploy(job, resume=False)  # the volume is removed first
    assert fresh.deployment.resumed is False and f"(removed {checkpoints.parent})" in fresh.deployment.note
    assert fresh.wait(timeout=120).state == "Succeeded"
    assert (checkpoints / "model.ckpt").read_text() == "x"

    # delete --purge: the group and the job's volumes
    body = cluster.delete("api-demo", purge=True)
    assert body["purged"] == str(checkpoints.parent) and not checkpoints.parent.exists()
    assert cluster.jobs() == []


def test_an_unchanged_running_job_is_no_change_and_scale_says_what_starts(cluster, tmp_path):
    job = Job.from_dict(job_dict(command=["python3", "-c", "import time; print('step=1'); time.sleep(120)"],
                                 name="steady"))
    assert cluster.deploy(job).deployment.changed
    path = tmp_path / "steady.json"
    path.write_text(json.dumps(job.to_dict()))
    puts = lambda: len([q for q in cluster._cluster.request_log() if q["method"] == "PUT"])  # noqa: E731
    sent = puts()
    r = CliRunner().invoke(cli, ["deploy", "--detach", "--marathon", cluster.url, str(path)])
    assert r.exit_code == 0, r.output
    assert f"no change: steady already runs as {path} renders it" in r.stderr and "nothing was sent" in r.stderr
    assert cluster.deploy(job).deployment.changed is False and puts() == sent
    wait_for(lambda: not cluster.client.deployments(), 60, what="the first deployment done")  # else scale waits: 409
    result = cluster.scale("steady", worker=2)
    assert result.changed and result.start == ("worker-1",) and result.restart == ("worker-0",)
    assert result.to_dict()["tasks"]["start"] == ["worker-1"]
    assert [(j.job, j.tasks) for j in cluster.jobs()] == [("steady", 2)]
    cluster.delete("steady", force=True)


def test_deploying_a_changed_running_job_says_what_starts_stops_and_restarts(cluster, tmp_path):
    """Issue 43, item 5: a re-deploy of a changed job file restarted every task without saying so. ``deploy``
    (and ``--dry-run``) lists the tasks that start, stop and restart, as ``scale`` does, before it acts."""
    job = Job.from_dict(job_dict(command=["python3", "-c", "import time; print('step=1'); time.sleep(120)"],
                                 name="changing"))
    assert cluster.deploy(job).deployment.changed
    wait_for(lambda: not cluster.client.deployments(), 60, what="the first deployment done")
    changed = {**job.to_dict(), "env": {"NEW": "1"}, "roles": {"worker": {"count": 2}}}
    path = tmp_path / "changing.json"
    path.write_text(json.dumps(changed))
    dry = CliRunner().invoke(cli, ["deploy", "--dry-run", "--marathon", cluster.url, str(path)])
    assert dry.exit_code == 0, dry.output
    assert "start: worker-1\nrestart with the new cluster spec: worker-0" in dry.stdout
    r = CliRunner().invoke(cli, ["deploy", "--detach", "--marathon", cluster.url, str(path), "-o", "json"])
    assert r.exit_code == 0, r.output
    assert "changing: start: worker-1" in r.stderr
    assert "changing: restart with the new cluster spec: worker-0" in r.stderr
    assert json.loads(r.stdout)["tasks"] == {"start": ["worker-1"], "stop": [], "restart": ["worker-0"],
                                             "unchanged": []}
    cluster.delete("changing", force=True)


def test_purge_is_refused_for_a_real_marathon_before_anything_is_deleted(httpserver):
    from marathon_tf import Marathon

    httpserver.expect_request("/v2/info").respond_with_json({"name": "marathon", "version": "1.9.0"})
    with pytest.raises(UsageError) as e:
        Marathon(httpserver.url_for("")).delete("mnist", purge=True)
    assert "cannot reach from here; nothing was deleted" in e.value.message
    assert [req.path for req, _ in httpserver.log] == ["/v2/info"]



def test_an_ended_job_without_a_lasting_logdir_is_deployed_again_without_asking(cluster):
    data = {k: v for k, v in job_dict(command=["python3", "-c", "print('step=1')"], name="stateless").items()
            if k not in ("volumes", "logdir")}
    job = Job.from_dict(data)
    assert cluster.deploy(job).wait(timeout=120).state == "Succeeded"
    again = cluster.deploy(job)  # nothing to resume from: neither asked, nor "no change" (it must run again)
    assert again.deployment.changed and again.deployment.resumed is None
    assert again.wait(timeout=120).state == "Succeeded"


def test_logs_tail_counts_per_stream_in_the_api_as_in_the_cli_and_both_say_so(monkeypatch):
    """Issue 32: `run.logs("worker-0", tail=3)` returned 6 lines (3 per stream); the CLI said why (its note on
    two files), the API did not. The same meaning in both, said in both: the API's docstring, the CLI's
    --tail help, the README's example and its note."""
    from pathlib import Path

    from click.testing import CliRunner

    from marathon_tf.user import logs as tasklogs
    from marathon_tf.user.api import Marathon
    from marathon_tf.user.cli import cli

    def follow(client, job, task, streams, *, tail, **kw):
        for stream in streams:
            yield task, stream, "".join(f"{stream} {n}\n" for n in range(10)[-tail:])

    monkeypatch.setattr(tasklogs, "follow", follow)
    lines = list(Marathon(client=object()).logs("j", "worker-0", tail=3))
    assert [(x.stream, x.text) for x in lines] == [(s, f"{s} {n}") for s in ("stdout", "stderr") for n in (7, 8, 9)]
    assert "the last N lines *of each stream* of each task" in " ".join(Marathon.logs.__doc__.split())
    help_text = " ".join(CliRunner().invoke(cli, ["logs", "--help"], terminal_width=200).stdout.split())
    assert "Only the last N lines of each stream of each task" in help_text and "logs(tail=N)" in help_text
    readme = Path(__file__).parents[2].joinpath("README.md").read_text()
    assert 'run.logs("worker-0", tail=3, stream="stdout")' in readme and "`logs(tail=N)` counts per stream" in readme
