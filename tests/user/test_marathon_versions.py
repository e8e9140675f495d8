"""deploy and scale against a fake Marathon that says its version in ``/v2/info`` (tests/fake_marathon.py):
against 1.4.3 every app sent is one 1.4.3 accepts (its JSON Schema and its UnreachableStrategy validator,
``v1.4.3:src/main/scala/mesosphere/marathon/state/UnreachableStrategy.scala``), a container-network job is
refused naming the version with nothing sent (``v1.4.3:src/main/scala/mesosphere/marathon/api/v2/json/
Formats.scala`` would drop its networks); against 1.11 what is sent is today's render, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from fake_marathon import FakeMarathon
from marathon_schemas import SCHEMAS
from user_helpers import minimal

from marathon_tf.contract import labels as L
from marathon_tf.user.cli import cli

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"
EXAMPLE_JOBS = sorted(ROOT.glob("examples/*/job*.json"))
pytestmark = pytest.mark.skipif(not SCHEMAS.is_dir(), reason="tests/data/marathon-schema is missing")


def _remote_ready(job_file: Path) -> dict:
    """An example as it is deployed to a remote Marathon: its fetch and relative volumes are the local
    runner's (refused for a remote Marathon before anything is sent), so served and shared instead."""
    job = json.loads(job_file.read_text())
    job["name"] = "ml/mnist"
    job["fetch"] = [f"https://example.com/{Path(f if isinstance(f, str) else f['uri']).name}"
                    for f in job.get("fetch") or []]
    job["volumes"] = [{**v, "host_path": "/mnt/shared/" + v["host_path"]} for v in job.get("volumes") or []]
    return job


def _deploy(fake: FakeMarathon, path: Path):
    return CliRunner().invoke(cli, ["deploy", str(path), "--detach", "--marathon", fake.url])


def _sent(fake: FakeMarathon) -> list[dict]:
    return [body for method, path, _, body in fake.calls if method == "PUT" and path.startswith("/v2/groups")]


def _sent_apart(fake: FakeMarathon) -> list[dict]:
    """The apps PUT one by one (1.4 - 1.7: what may wait, apart from the group: user/apart.py)."""
    return [body for method, path, _, body in fake.calls if method == "PUT" and path.startswith("/v2/apps/")]


@pytest.mark.parametrize("job_file", EXAMPLE_JOBS, ids=[f"{p.parent.name}/{p.name}" for p in EXAMPLE_JOBS])
def test_every_app_sent_to_1_4_3_is_one_it_accepts(httpserver, write_job, job_file):
    fake = FakeMarathon(httpserver, version="1.4.3")
    r = _deploy(fake, write_job(_remote_ready(job_file)))
    assert r.exit_code == 0, r.output
    assert fake.refused == [] and len(_sent(fake)) == 1
    tasks = [a for a in _sent(fake)[0]["apps"] + _sent_apart(fake) if "unreachableStrategy" in a]
    assert tasks and {json.dumps(a["unreachableStrategy"], sort_keys=True) for a in tasks} == {
        '{"expungeAfterSeconds": 2, "inactiveAfterSeconds": 1}'}


def test_a_scale_on_1_4_3_sends_what_it_accepts_and_an_unchanged_job_is_left_alone(httpserver, write_job):
    fake = FakeMarathon(httpserver, version="1.4.3")
    path = write_job(minimal(name="ml/mnist"))
    assert _deploy(fake, path).exit_code == 0
    again = _deploy(fake, path)  # rendered for 1.4.3 both times: the same, so nothing is sent
    assert again.exit_code == 0 and "no change" in again.stderr and len(_sent(fake)) == 1
    r = CliRunner().invoke(cli, ["scale", "ml/mnist", "worker=3", "--marathon", fake.url, "--detach"])
    assert r.exit_code == 0, r.output
    assert fake.refused == [] and len(_sent(fake)) == 2
    assert len(_sent(fake)[1]["apps"]) == 4
    assert all(a["unreachableStrategy"]["inactiveAfterSeconds"] == 1 for a in _sent(fake)[1]["apps"])


def test_the_fake_1_4_3_refuses_what_the_real_one_would(httpserver):
    """The check itself: today's default render (0/0) sent as it is gets 1.4.3's 422."""
    from marathon_tf.user.render import render_group
    from marathon_tf.user.spec import load_dict

    fake = FakeMarathon(httpserver, version="1.4.3")
    client = fake.client()
    with pytest.raises(Exception) as e:
        client.put_group(render_group(load_dict(minimal(name="ml/mnist"))))
    assert getattr(e.value, "status", None) == 422
    assert fake.refused and "unreachableStrategy 0/0 is refused by Marathon 1.4.3" in fake.refused[0][1][0]


@pytest.mark.parametrize("verb", ["deploy", "dry-run"])
def test_a_container_network_job_is_refused_by_1_4_3_naming_it_and_nothing_is_sent(httpserver, write_job, verb):
    fake = FakeMarathon(httpserver, version="1.4.3")
    path = write_job(minimal(name="ml/mnist", network={"mode": "container", "name": "dcos"}))
    args = ["deploy", str(path), "--detach", "--marathon", fake.url] + (["--dry-run"] if verb == "dry-run" else [])
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2, r.output
    error = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and f"Marathon 1.4.3 at {fake.url}" in error[0] and "network.mode container" in error[0]
    assert "hint:" in r.stderr and "upgrade Marathon to 1.5" in r.stderr
    assert [(m, p) for m, p, _, _ in fake.calls if m != "GET"] == []  # nothing sent (not even a dry run)


@pytest.mark.parametrize("job_file", EXAMPLE_JOBS, ids=[f"{p.parent.name}/{p.name}" for p in EXAMPLE_JOBS])
def test_against_1_11_what_is_sent_is_todays_render(httpserver, write_job, job_file, tmp_path):
    fake = FakeMarathon(httpserver, version="1.11.24")
    job = _remote_ready(job_file)
    r = _deploy(fake, write_job(job))
    assert r.exit_code == 0, r.output
    sent = _sent(fake)[0]
    from marathon_tf.contract import taskauth

    for app in sent["apps"]:
        del app["labels"][L.DIGEST]  # the client's marker (marathon/marker.py)
        assert len(app["env"].pop(taskauth.KEY_VAR)) == 64  # the job's key, only in what is sent (taskauth)
    from marathon_tf.user.render import render_group
    from marathon_tf.user.spec import load_dict

    offline = render_group(load_dict(job, source=str(tmp_path / "job.json")))  # no version: what render prints
    assert json.dumps(sent, sort_keys=True) == json.dumps(offline, sort_keys=True)
    golden = json.loads((GOLDEN / f"{job_file.parent.name}__{job_file.stem}.json").read_text())
    tasks = [a for a in sent["apps"] if "unreachableStrategy" in a]
    assert {json.dumps(a["unreachableStrategy"]) for a in tasks} == {
        json.dumps(a["unreachableStrategy"]) for a in golden["apps"] if "unreachableStrategy" in a}


@pytest.mark.parametrize("version, apart", [("1.7.236", True), ("1.4.3", True), ("1.11.0", False)])
def test_an_elastic_jobs_standbys_are_put_apart_where_a_deployment_locks_its_apps(httpserver, write_job, version,
                                                                                   apart):
    # 1.4 - 1.7 drop a failed task's ScaleRunSpec while a deployment holds its app (v1.7.236 src/main/scala/
    # mesosphere/marathon/MarathonSchedulerActor.scala:146-159); a lock holds the apps of its plan only
    # (DeploymentPlan.isAffectedBy, v1.7.236 src/main/scala/mesosphere/marathon/core/deployment/
    # DeploymentPlan.scala:129-131): the standbys (worker-2, worker-3 of 2..4) get deployments of their own.
    fake = FakeMarathon(httpserver, version=version)
    job = _remote_ready(ROOT / "examples" / "keras-multiworker" / "job-elastic.json")
    job["roles"]["worker"]["count"] = {"min": 2, "max": 4}
    assert _deploy(fake, write_job(job)).exit_code == 0
    in_group = [a["id"] for a in _sent(fake)[0]["apps"]]
    by_itself = [a["id"] for a in _sent_apart(fake)]
    standbys = ["/ml/mnist/worker-2", "/ml/mnist/worker-3"]
    if apart:
        assert by_itself == standbys and not set(standbys) & set(in_group) and "/ml/mnist/worker-1" in in_group
        assert all(L.DIGEST in a["labels"] for a in _sent_apart(fake))  # recognised as ours, as the group's
    else:
        assert by_itself == [] and set(standbys) <= set(in_group)
