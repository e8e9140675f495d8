"""Rendering for a Marathon version (issue 28, item 2): golden renders of every example for 1.4.3, 1.4.9, 1.7
and 1.11, each validated against that version's JSON Schema (tests/marathon_schemas.py: the 1.4 schema for
1.4.x, the 1.7 schema for 1.7, and for 1.11 the 1.7 schema plus the app fields 1.11's RAML adds) and against
the ``unreachableStrategy`` validator Marathon enforces in code; what a version cannot run is refused naming it.

Marathon sources: see tests/marathon/test_versions.py (the answers: marathon_tf/marathon/versions.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from marathon_schemas import RAML_1_11_ONLY, SCHEMAS, errors, unreachable_errors
from user_helpers import minimal

from marathon_tf.contract import spread
from marathon_tf.contract.errors import UsageError
from marathon_tf.marathon.model import job_apps
from marathon_tf.user.api import Job
from marathon_tf.user.cli import cli
from marathon_tf.user.render import VersionRefused, check_version, render_group, render_group_json
from marathon_tf.user.spec import load_dict, load_job

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"
EXAMPLE_JOBS = sorted(ROOT.glob("examples/*/job*.json"))
VERSIONS = ("1.4.3", "1.4.9", "1.7", "1.11")
#: Versions whose render differs from the default one (the newest's) get their own golden folder.
OWN_GOLDEN = {"1.4.3": GOLDEN / "marathon-1.4.3", "1.7": GOLDEN / "marathon-1.7"}
needs_schemas = pytest.mark.skipif(not SCHEMAS.is_dir(), reason="tests/data/marathon-schema is missing")


def _text(group) -> str:
    return json.dumps(group, indent=2, sort_keys=True).replace(ROOT.as_uri(), "file://ROOT") + "\n"


def _golden(version: str, job_file: Path) -> Path:
    """The version's own golden where it has one for this job (it renders the job differently), else the default."""
    name = f"{job_file.parent.name}__{job_file.stem}.json"
    own = OWN_GOLDEN.get(version, GOLDEN) / name
    return own if own.is_file() or version == "1.4.3" else GOLDEN / name


@needs_schemas
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("job_file", EXAMPLE_JOBS, ids=[f"{p.parent.name}/{p.name}" for p in EXAMPLE_JOBS])
def test_golden_render_per_marathon_version_is_one_that_version_accepts(job_file, version):
    """1.4.9 and 1.11 render byte for byte as before this change (tests/user/golden/); 1.4.3 has its own goldens
    (UPDATE_GOLDEN=1 rewrites them), which differ only in unreachableStrategy; 1.7 its own where a GPU job's
    tasks without GPUs carry the GPU_SCHEDULING_BEHAVIOR label, the default goldens elsewhere."""
    group = render_group(load_job(job_file), marathon_version=version)
    assert errors(group, version) == []
    golden = _golden(version, job_file)
    if os.environ.get("UPDATE_GOLDEN") == "1" and version in OWN_GOLDEN:  # its own only where it differs
        own = OWN_GOLDEN[version] / golden.name
        own.unlink(missing_ok=True)
        golden = _golden(version, job_file)
        if not golden.is_file() or _text(group) != golden.read_text():
            own.parent.mkdir(exist_ok=True)
            own.write_text(_text(group))
            golden = own
    assert golden.is_file(), f"no golden file {golden}; run with UPDATE_GOLDEN=1 once"
    assert _text(group) == golden.read_text()
    assert render_group_json(load_job(job_file), marathon_version=version) == json.dumps(
        group, separators=(",", ":"), sort_keys=True)


@pytest.mark.parametrize("job_file", EXAMPLE_JOBS, ids=[f"{p.parent.name}/{p.name}" for p in EXAMPLE_JOBS])
def test_for_1_4_3_only_the_unreachable_strategy_differs_and_the_newest_is_the_default(job_file):
    spec = load_job(job_file)
    default, old = render_group(spec), render_group(spec, marathon_version="1.4.3")
    assert render_group(spec, marathon_version="1.11") == default  # no version: the newest
    tasks = [a for a in old["apps"] if "unreachableStrategy" in a]
    assert tasks and all(a["unreachableStrategy"] == {"inactiveAfterSeconds": 1, "expungeAfterSeconds": 2}
                         for a in tasks)
    for app in old["apps"]:
        if "unreachableStrategy" in app:
            app["unreachableStrategy"] = {"inactiveAfterSeconds": 0, "expungeAfterSeconds": 0}
    assert old == default


@needs_schemas
def test_the_default_render_is_what_1_4_3_refuses_and_1_4_6_accepts():
    """Why 1.4.0–1.4.5 need their own: 0/0 fails their UnreachableStrategy validator (v1.4.5:
    src/main/scala/mesosphere/marathon/state/UnreachableStrategy.scala); the schema alone does not see it."""
    group = render_group(load_dict(minimal()))
    assert [e for e in errors(group, "1.4.3") if "unreachableStrategy" in e]
    assert errors(group, "1.4.6") == []
    for version in ("1.4.0", "1.4.5"):
        assert all(unreachable_errors(a, version) == [] for a in render_group(load_dict(minimal()),
                                                                              marathon_version=version)["apps"])


@needs_schemas
def test_1_11_is_validated_with_what_its_raml_adds():
    app = {**render_group(load_dict(minimal()))["apps"][0], "role": "ml", "tty": False}
    assert errors({"id": "/mnist", "apps": [app]}, "1.11") == []
    assert [e for e in errors({"id": "/mnist", "apps": [app]}, "1.7") if "role" in e or "tty" in e]
    raml = (Path("/work/shared/marathon-api/raml/1.11/v2/types/app.raml"))
    if raml.is_file():  # the list in marathon_schemas.py is what that RAML's App type has beyond the 1.7 schema
        text = raml.read_text()
        assert all(f"\n      {name}?:" in text for name in RAML_1_11_ONLY)


CONTAINER_NETWORK = minimal(network={"mode": "container", "name": "dcos"})


@needs_schemas
@pytest.mark.parametrize("version", ["1.4.0", "1.4.3", "1.4.13"])
def test_a_container_network_job_is_refused_for_1_4_naming_the_version(version):
    spec = load_dict(CONTAINER_NETWORK)
    with pytest.raises(VersionRefused) as e:
        render_group(spec, marathon_version=version)
    assert isinstance(e.value, UsageError) and e.value.exit_code == 2
    assert f"Marathon {version}" in e.value.message and "network.mode container needs Marathon 1.5" in e.value.message
    assert "portIndex" in e.value.message and "host networking" in e.value.hint
    # what it would have sent is what 1.4's schema has no place for (and Formats.scala drops)
    newest = render_group(spec)
    assert any("networks" in line for line in errors(newest, "1.4.3"))
    assert errors(render_group(spec, marathon_version="1.5.0"), "1.7") == []


@pytest.mark.parametrize("version, refused", [("1.4.3", False), ("1.10.33", False), ("1.10.34", True),
                                              ("1.11.0", False), ("1.11.17", False), ("1.11.18", True),
                                              ("1.11.24", True)])
def test_group_by_without_a_count_per_task_is_refused_where_marathon_divides_by_it(version, refused):
    """mesosphere/marathon releases/1.11 ``src/main/scala/mesosphere/mesos/Constraints.scala:123-149``
    (``checkGroupBy``: ``desiredInstanceCount / desiredGroupCount``, the count 0 when none is written: every offer
    match of the app fails), from #7206 (commit ddd6b19b1; in 1.11.18, and backported to releases/1.10 as
    34bb771f2, in 1.10.34); v1.4.3 ``Constraints.scala:66-80``: a value none of the app's tasks has always fits.
    ``constraints_per_task`` go into each app as they are: where Marathon would never place the task, nothing
    is sent; the job's own ``constraints`` (placed by the job's leader, never Marathon's GROUP_BY) are not."""
    def job(**worker):
        return minimal(roles={"ps": {"count": 1}, "worker": {"count": 2, **worker}})

    per_task = job(constraints_per_task=[["rack", "GROUP_BY"]])
    if refused:
        with pytest.raises(VersionRefused) as e:
            render_group(load_dict(per_task), marathon_version=version)
        assert "roles.worker.constraints_per_task[0] is GROUP_BY without a count" in e.value.message
        assert f"Marathon {version}" in e.value.message and "give GROUP_BY a count" in e.value.hint
    else:
        render_group(load_dict(per_task), marathon_version=version)
    for fine in (job(constraints_per_task=[["rack", "GROUP_BY", "2"]]), job(constraints=[["rack", "GROUP_BY"]])):
        render_group(load_dict(fine), marathon_version=version)


@pytest.mark.parametrize("constraint, ok_from", [(["rack", "IS", "r1"], "1.6.0"), (["@hostname", "UNIQUE"], "1.6.0"),
                                                  (["@zone", "GROUP_BY", "2"], "1.6.0")])
def test_constraints_a_version_does_not_know_are_refused(constraint, ok_from):
    job = minimal(roles={"ps": {"count": 1}, "worker": {"count": 2, "constraints": [constraint]}})
    with pytest.raises(VersionRefused) as e:
        render_group(load_dict(job), marathon_version="1.5.15")
    assert "roles.worker.constraints[0]" in e.value.message and "Marathon 1.5.15" in e.value.message
    app = job_apps(render_group(load_dict(job), marathon_version=ok_from))["worker-1"]
    # a rule across the role's tasks (UNIQUE, GROUP_BY) is the label the job's leader reads, not the app's own
    rules = json.loads(app["labels"].get(spread.RULES_LABEL, '{"rules": []}'))["rules"]
    assert constraint in app["constraints"] or constraint in rules
    check_version(load_dict(minimal(constraints=[["hostname", "UNIQUE"]])), "1.4.0")  # plain hostname: any version


def test_a_custom_template_with_an_unreachable_strategy_the_version_refuses_is_reported(tmp_path):
    """A task.json.j2 copied before templates got ``unreachable`` (0/0 written out) would be refused by 1.4.3."""
    default = (ROOT / "app_templates" / "task.json.j2").read_text()
    (tmp_path / "task.json.j2").write_text(default.replace(
        '"unreachableStrategy": {{ unreachable | tojson }}',
        '"unreachableStrategy": {"inactiveAfterSeconds": 0, "expungeAfterSeconds": 0}'))
    spec = load_dict(minimal())
    assert render_group(spec, templates_dir=str(tmp_path), marathon_version="1.4.6")  # 0/0 is fine there
    with pytest.raises(UsageError) as e:
        render_group(spec, templates_dir=str(tmp_path), marathon_version="1.4.3")
    assert "Marathon 1.4.3 refuses" in e.value.message and "unreachable | tojson" in e.value.hint


def test_a_marathon_older_than_1_4_is_refused():
    with pytest.raises(VersionRefused, match="older than marathon-tf supports"):
        render_group(load_dict(minimal()), marathon_version="1.3.13")


def test_job_render_takes_the_version_and_checks_it():
    job = Job.from_dict(minimal())
    assert job.render(marathon_version="1.4.3")["apps"][0]["unreachableStrategy"]["inactiveAfterSeconds"] == 1
    assert json.loads(job.render_json(marathon_version="1.4.3"))["apps"][0]["unreachableStrategy"][
        "expungeAfterSeconds"] == 2
    assert job.render() == job.render(marathon_version="1.11.24")
    with pytest.raises(UsageError, match="not a Marathon version"):
        job.render(marathon_version="latest")


def test_render_cli_takes_marathon_version(write_job):
    path = write_job(minimal())
    r = CliRunner().invoke(cli, ["render", str(path), "--compact", "--marathon-version", "1.4.3"])
    assert r.exit_code == 0, r.output
    assert {json.dumps(a["unreachableStrategy"], sort_keys=True) for a in json.loads(r.stdout)["apps"]} == {
        '{"expungeAfterSeconds": 2, "inactiveAfterSeconds": 1}'}
    default = CliRunner().invoke(cli, ["render", str(path), "--compact"])
    assert default.stdout == CliRunner().invoke(cli, ["render", str(path), "--compact", "--marathon-version",
                                                      "1.11"]).stdout
    bad = CliRunner().invoke(cli, ["render", str(path), "--marathon-version", "eleven"])
    assert bad.exit_code == 2 and "not a Marathon version" in bad.stderr
    net = CliRunner().invoke(cli, ["render", str(write_job(CONTAINER_NETWORK)), "--marathon-version", "1.4.3"])
    assert net.exit_code == 2 and net.stdout == ""
    assert "Marathon 1.4.3" in net.stderr and "network.mode container" in net.stderr
    assert "--marathon-version" in CliRunner().invoke(cli, ["render", "--help"]).output


OLD = [["rack", "LIKE", "1024|1,024"], ["size", "UNLIKE", "2048|2,048"], ["ram", "LIKE", "20[0-9]{2}"],
       ["zone", "LIKE", "7"], ["mem", "LIKE", "1536\\.5|1,536\\.5"]]
AS_WRITTEN = [["rack", "CLUSTER", "1024"], ["size", "UNLIKE", "2048"], ["ram", "LIKE", "20[0-9]{2}"],
              ["zone", "LIKE", "7"], ["mem", "IS", "1536.5"]]


@pytest.mark.parametrize("version, rendered", [("1.4.3", OLD), ("1.6.0", OLD), ("1.6.322", AS_WRITTEN),
                                               (None, AS_WRITTEN)])
def test_a_number_of_four_digits_in_a_constraint_means_the_same_where_marathon_reads_1_024(version, rendered):
    """Up to 1.6.0 Marathon reads a scalar agent attribute with thousands separators, ``1,024``
    (v1.6.0 src/main/scala/mesosphere/mesos/Constraints.scala:36-37 NumberFormat.getInstance; from 1.6.322
    DecimalFormat("0.###"), releases/1.8 the same file :39-54): a value of 1,000 or more is rendered as either
    form (CLUSTER and IS, equalities, as LIKE of the escaped value); a regex is left to mean what it says, a
    shorter number needs nothing. (IS is refused before 1.6: only the rendering is looked at here.)"""
    from marathon_tf.marathon import versions
    from marathon_tf.user.versioned import for_marathon

    caps = versions.capabilities(version)
    assert [for_marathon(c, caps) for c in AS_WRITTEN] == rendered
    assert for_marathon(["rack", "LIKE", "0999"], caps) == ["rack", "LIKE", "0999"]  # (below 1,000: read the same)
    spec = load_dict(minimal(roles={"ps": {"count": 1},
                                    "worker": {"count": 1, "constraints_per_task": AS_WRITTEN[:4]}}))
    app = job_apps(render_group(spec, marathon_version=version))["worker-0"]
    assert [c for c in app["constraints"] if c[0] in ("rack", "size", "ram", "zone")] == rendered[:4], app


@pytest.mark.parametrize("version, labelled", [("1.5.6", False), ("1.5.7", True), ("1.7.236", True),
                                               ("1.8.0", False), ("1.11.0", False)])
def test_a_gpu_jobs_tasks_without_gpus_keep_off_gpu_agents_where_only_a_label_does_it(version, labelled):
    """``--gpu_scheduling_behavior`` comes with 1.5.7 (mesosphere/marathon v1.5.7
    ``src/main/scala/mesosphere/marathon/GpuSchedulingBehavior.scala``; none at v1.5.6) with the default
    ``undefined`` through 1.7 (v1.7.236 ``MarathonConf.scala:323``), which lets a task without GPUs take a GPU
    agent's room (v1.7.236 ``src/main/scala/mesosphere/mesos/ResourceMatcher.scala:257-262``); an app's label
    ``GPU_SCHEDULING_BEHAVIOR`` overrides it (``:252-253``; ``restricted`` declines, ``:264-270``), and 1.8 makes
    ``restricted`` the default. So the job means 1.8's default on 1.5.7 - 1.7: its tasks without GPUs carry the
    label; before 1.5.7 nothing can say it (the docs list it)."""
    job = minimal(roles={"ps": {"count": 1}, "worker": {"count": 2, "gpus": 1}})
    def labels(job: dict) -> dict[str, str | None]:
        group = render_group(load_dict(job), marathon_version=version)
        return {a["id"].rsplit("/", 1)[-1]: a["labels"].get("GPU_SCHEDULING_BEHAVIOR") for a in group["apps"]}

    assert labels(job) == {"ps-0": "restricted" if labelled else None, "worker-0": None, "worker-1": None}
    assert set(labels(minimal()).values()) == {None}  # a job without GPUs: no GPU agent to keep off
    own = {**job, "labels": {"GPU_SCHEDULING_BEHAVIOR": "unrestricted"}}
    assert set(labels(own).values()) == {"unrestricted"}  # the job's own word
