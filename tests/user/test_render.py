"""Rendering: Marathon's own schema accepts every example; user strings come back exactly."""

import json
import os
import shlex
from pathlib import Path

import jsonschema
import pytest
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4
from user_helpers import minimal

from marathon_tf.contract import naming, spread
from marathon_tf.contract.errors import UsageError
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.marathon.model import job_apps
from marathon_tf.user import spec as spec_mod
from marathon_tf.user.render import RenderError, render_app, render_group
from marathon_tf.user.spec import load_dict, load_job

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "tests" / "data" / "marathon-schema"  # Marathon's own, see its SOURCE.md
GOLDEN = Path(__file__).parent / "golden"
EXAMPLE_JOBS = sorted(ROOT.glob("examples/*/job*.json"))


def marathon_validator(version="1.7"):
    app = json.loads((SCHEMAS / version / "AppDefinition.json").read_text())
    group = json.loads((SCHEMAS / version / "Group.json").read_text())
    registry = Registry().with_resource(app["id"] if "id" in app else
                                        "https://raw.githubusercontent.com/mesosphere/marathon/master/docs/docs/rest-api/public/api/v2/schema/AppDefinition.json",
                                        Resource.from_contents(app, default_specification=DRAFT4))
    return jsonschema.Draft4Validator(group, registry=registry)


def schema_errors(group, version="1.7"):
    return [f"{'/'.join(map(str, e.path))}: {e.message[:200]}" for e in marathon_validator(version).iter_errors(group)]


needs_schemas = pytest.mark.skipif(not SCHEMAS.is_dir(), reason="tests/data/marathon-schema is missing")


@needs_schemas
def test_marathon_schema_rejects_a_broken_group():
    """The validator itself works: a group Marathon would refuse is refused."""
    assert schema_errors({"id": "/x", "apps": [{"id": "/x/a", "cmd": "x", "instances": -1, "bogus": 1}]})


@needs_schemas
@pytest.mark.parametrize("job_file", EXAMPLE_JOBS, ids=[f"{p.parent.name}/{p.name}" for p in EXAMPLE_JOBS])
def test_every_example_renders_to_a_group_marathon_accepts(job_file):
    group = render_group(load_job(job_file))
    assert schema_errors(group) == []
    assert len(group["apps"]) == len(load_job(job_file).tasks())


def test_examples_exist():
    assert len(EXAMPLE_JOBS) >= 3, "the examples/ job files are missing"


@needs_schemas
def test_full_featured_job_validates_against_marathon_schema(tmp_path):
    (tmp_path / "train.py").write_text("")
    job = minimal(image="registry.example.com/tf:2.21.0-gpu", logdir="ckpt",
                  volumes=[{"host_path": "/shared/ckpt", "container_path": "ckpt"}],
                  fetch=["https://example.com/train.tgz"], labels={"team": "ml"},
                  constraints=[["hostname", "UNIQUE"], ["rack", "GROUP_BY", "2"]],
                  roles={"ps": {"count": 2}, "worker": {"count": 3, "gpus": 2}, "chief": {"count": 1},
                         "evaluator": {"count": 1}, "tensorboard": {"count": 1}})
    group = render_group(load_dict(job))
    assert schema_errors(group) == []
    worker = job_apps(group)["worker-2"]
    assert worker["container"] == {"type": "MESOS", "docker": {"image": "registry.example.com/tf:2.21.0-gpu"},
                                   "volumes": [{"containerPath": "ckpt", "hostPath": "/shared/ckpt", "mode": "RW"}]}
    assert worker["gpus"] == 2 and worker["instances"] == 1
    # a lost TF task is replaced at once and its old copy killed when it returns (app_templates/task.json.j2)
    assert {a["id"].rsplit("/", 1)[1]: a["unreachableStrategy"] for a in group["apps"]
            if "tensorboard" not in a["id"]}["chief-0"] == {"inactiveAfterSeconds": 0, "expungeAfterSeconds": 0}


@needs_schemas
def test_container_network_job_validates(tmp_path):
    group = render_group(load_dict(minimal(network={"mode": "container", "name": "dcos"})))
    assert schema_errors(group) == []
    app = group["apps"][0]
    assert app["networks"] == [{"mode": "container", "name": "dcos"}]
    assert "portDefinitions" not in app
    assert [m["name"] for m in app["container"]["portMappings"]] == ["tf", "status"]


def test_one_app_per_task_with_identity_labels_ports_and_health_check():
    spec = load_dict(minimal(name="ml/mnist"))
    group = render_group(spec)
    assert group["id"] == "/ml/mnist"
    assert [a["id"] for a in group["apps"]] == ["/ml/mnist/ps-0", "/ml/mnist/worker-0", "/ml/mnist/worker-1"]
    w1 = group["apps"][2]
    assert w1["instances"] == 1
    assert w1["labels"]["marathon-tf/job"] == "ml/mnist"
    assert (w1["labels"]["marathon-tf/role"], w1["labels"]["marathon-tf/index"]) == ("worker", "1")
    assert w1["portDefinitions"] == [{"port": 0, "name": "tf", "protocol": "tcp"},
                                     {"port": 0, "name": "status", "protocol": "tcp",
                                      "labels": {"metrics": "/metrics"}}]  # Prometheus' marathon_sd
    hc = w1["healthChecks"][0]
    assert (hc["protocol"], hc["portIndex"], hc["path"]) == ("MESOS_HTTP", 1, "/health")
    assert w1["upgradeStrategy"] == {"minimumHealthCapacity": 0, "maximumOverCapacity": 0}
    assert "container" not in w1  # no image: the command runs on the agent as is


def test_env_tells_the_bootstrap_its_task_and_the_cluster():
    spec = load_dict(minimal(name="ml/mnist", discovery={"nameserver": "10.0.0.2:53"}))
    app = render_app(spec, "worker", 1)
    ctx = TaskContext.from_env(app["env"])
    assert (ctx.job, ctx.role, ctx.index) == ("ml/mnist", "worker", 1)
    assert dict(ctx.cluster) == {"ps": 1, "worker": 2}
    assert ctx.mesos_dns == "10.0.0.2:53" and ctx.spec_style == "flags" and ctx.style == "tf1"
    assert ctx.completion == "all_workers"


HOSTILE = [
    "it's",
    'say "hi"',
    "back\\slash",
    "new\nline",
    "{{ 7 * 7 }}",
    "{% raw %}",
    "$(rm -rf /); `id`",
    "tab\there",
    "</script><!--",
    "ünïcödé ✓",
    "--flag=a b",
    "",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_strings_round_trip_exactly(value):
    command = ["python3", "train.py", "--msg", value]
    spec = load_dict(minimal(command=command, env={"MSG": value, "OTHER": "x"},
                             labels={"note": value or "empty"}))
    app = render_app(spec, "worker", 0)
    assert app["env"]["MSG"] == value
    assert app["labels"]["note"] == (value or "empty")
    prefix, _, user = app["cmd"].partition(" -- ")
    assert prefix == "marathon-tf bootstrap"
    assert shlex.split(user) == command


def test_shell_string_command_is_passed_as_one_argument():
    spec = load_dict(minimal(command="python3 train.py --steps $STEPS | tee log"))
    cmd = render_app(spec, "worker", 0)["cmd"]
    assert shlex.split(cmd) == ["marathon-tf", "bootstrap", "--", "python3 train.py --steps $STEPS | tee log"]


def test_role_overrides_take_precedence():
    spec = load_dict(minimal(image="img:job", env={"A": "job", "B": "job"}, constraints=[["hostname", "UNIQUE"]],
                             roles={"ps": {"count": 1, "image": "img:ps", "command": ["ps-server"],
                                           "env": {"A": "ps"}, "constraints": []},
                                    "worker": {"count": 1}}))
    ps, worker = render_group(spec)["apps"]
    assert ps["container"]["docker"]["image"] == "img:ps" and worker["container"]["docker"]["image"] == "img:job"
    assert ps["env"]["A"] == "ps" and ps["env"]["B"] == "job" and worker["env"]["A"] == "job"
    # the job's UNIQUE is a rule across the job's tasks (here worker-0 only: ps has its own constraints),
    # kept in a label for the job's leader, not copied into the app (marathon_tf.contract.spread)
    assert ps["constraints"] == [] and worker["constraints"] == []
    assert json.loads(worker["labels"][spread.RULES_LABEL]) == {"scope": "job", "rules": [["hostname", "UNIQUE"]]}
    assert spread.RULES_LABEL not in ps["labels"]
    assert ps["cmd"].endswith("-- ps-server")


def test_tensorboard_runs_on_the_logdir_and_is_not_a_cluster_member():
    spec = load_dict(minimal(logdir="/shared/logs", roles={"ps": {"count": 1}, "worker": {"count": 1},
                                                          "tensorboard": {"count": 1}}))
    tb = job_apps(render_group(spec))["tensorboard-0"]
    assert shlex.split(tb["cmd"])[:3] == ["tensorboard", "--logdir", "/shared/logs"]
    assert tb["portDefinitions"] == [{"port": 0, "name": "http", "protocol": "tcp"}]
    assert json.loads(tb["env"]["MTF_CLUSTER"]) == {"ps": 1, "worker": 1}


def test_docker_containerizer_when_asked_and_no_gpus():
    app = render_app(load_dict(minimal(image="i:1", containerizer="docker")), "worker", 0)
    assert app["container"]["type"] == "DOCKER"


def test_the_job_spec_is_kept_on_worker_0_only():
    group = render_group(load_dict(minimal()))
    apps = job_apps(group)
    stored = json.loads(apps["worker-0"]["labels"]["marathon-tf/spec"])
    assert load_dict(stored) == load_dict(minimal())
    assert "marathon-tf/spec" not in apps["worker-1"]["labels"]


def test_custom_template_directory_overrides_one_template(tmp_path):
    default = (ROOT / "app_templates" / "group.json.j2").read_text()
    (tmp_path / "group.json.j2").write_text(default.replace('"apps"', '"dependencies": [], "apps"'))
    group = render_group(load_dict(minimal()), templates_dir=str(tmp_path))
    assert group["dependencies"] == [] and len(group["apps"]) == 3


@pytest.mark.parametrize("template,message", [
    ('{"id": {{ group_id | tojson }}, "apps": {{ apps | tojson }},}', "invalid JSON"),
    ('{"id": {{ nope }}}', "undefined"),
    ('{"id": "/other", "apps": []}', "must keep the group id"),
    ('[1]', "JSON object"),
])
def test_broken_custom_templates_are_reported(tmp_path, template, message):
    (tmp_path / "group.json.j2").write_text(template)
    with pytest.raises(RenderError) as e:
        render_group(load_dict(minimal()), templates_dir=str(tmp_path))
    assert message in str(e.value)
    assert isinstance(e.value, UsageError)


def _golden_name(job_file: Path) -> str:
    return f"{job_file.parent.name}__{job_file.stem}.json"


@pytest.mark.parametrize("job_file", EXAMPLE_JOBS, ids=[f"{p.parent.name}/{p.name}" for p in EXAMPLE_JOBS])
def test_golden_rendering_of_every_example(job_file):
    """The rendered group is stable; UPDATE_GOLDEN=1 rewrites tests/user/golden/ after a deliberate change."""
    group = render_group(load_job(job_file))
    text = json.dumps(group, indent=2, sort_keys=True)
    # fetch URIs hold the checkout's absolute path: make the golden file independent of it
    text = text.replace(ROOT.as_uri(), "file://ROOT")
    golden = GOLDEN / _golden_name(job_file)
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        golden.write_text(text + "\n")
    assert golden.is_file(), f"no golden file {golden.name}; run with UPDATE_GOLDEN=1 once"
    assert text + "\n" == golden.read_text()


def test_many_tasks_each_get_their_own_app():
    """(Speed and linearity are measured in benchmarks/, not here.)"""
    spec = load_dict(minimal(roles={"ps": {"count": 1}, "worker": {"count": 50}}))
    group = render_group(spec)
    ids = {a["id"] for a in group["apps"]}
    assert len(ids) == 51 and naming.app_id("mnist", "worker", 49) in ids


def _full_way(spec, templates_dir=None):
    """Every app rendered through its template one by one (what render_group must equal)."""
    from marathon_tf.user.render import _Renderer

    r = _Renderer(spec, templates_dir)
    return [r.app(role, i) for role, i in spec.tasks()]


def test_stamped_apps_equal_apps_rendered_one_by_one():
    spec = load_dict(minimal(roles={"chief": {"count": 1}, "ps": {"count": 3}, "worker": {"count": 40},
                                    "evaluator": {"count": 4}, "tensorboard": {"count": 1}},
                             logdir="ckpt", labels={"team": "ml"}, env={"A": "x\u00e9\"<&>'"}))
    group = render_group(spec)
    assert group["apps"] == _full_way(spec)
    assert [a["env"]["MTF_INDEX"] for a in group["apps"] if "/worker-" in a["id"]] == [str(i) for i in range(40)]
    spec_label = "marathon-tf/spec"
    assert spec_label in group["apps"][4]["labels"] and spec_label not in group["apps"][5]["labels"]


def test_each_role_s_template_is_rendered_a_few_times_not_once_per_task(monkeypatch):
    import marathon_tf.user.render as render_mod

    calls = []
    real = render_mod._render_text
    monkeypatch.setattr(render_mod, "_render_text", lambda env, name, ctx: calls.append(name) or real(env, name, ctx))
    render_group(load_dict(minimal(roles={"ps": {"count": 10}, "worker": {"count": 500}})))
    # per role: one with placeholders + the first and last task the full way (+ worker-0); the group twice
    assert calls.count("task.json.j2") <= 8 and calls.count("group.json.j2") == 2


@pytest.mark.parametrize("change", [
    ('"cpus": {{ role.cpus | tojson }}', '"cpus": {{ (env.MTF_INDEX | int) + 1 }}'),   # index arithmetic
    ('"cmd": {{ cmd | tojson }}', '"cmd": "run {{ app_id }} #{{ labels[\'marathon-tf/index\'] }}"'),  # no tojson
    ('"instances": {{ instances | tojson }}', '"instances": {{ 1 if app_id.endswith("-2") else 1 }}'),
])
def test_custom_templates_that_compute_with_per_task_values_are_rendered_the_full_way(tmp_path, change):
    default = (ROOT / "app_templates" / "task.json.j2").read_text()
    assert change[0] in default
    (tmp_path / "task.json.j2").write_text(default.replace(*change))
    spec = load_dict(minimal(roles={"ps": {"count": 1}, "worker": {"count": 6}}))
    group = render_group(spec, templates_dir=str(tmp_path))
    assert group["apps"] == _full_way(spec, str(tmp_path))
    if "cpus" in change[1]:
        assert [a["cpus"] for a in group["apps"]] == [1, 1, 2, 3, 4, 5, 6]
    if "cmd" in change[1]:
        assert group["apps"][3]["cmd"] == "run /mnist/worker-2 #2"


def test_a_group_template_that_looks_into_apps_is_rendered_the_full_way(tmp_path):
    (tmp_path / "group.json.j2").write_text(
        '{"id": {{ group_id | tojson }}, "apps": {{ apps | tojson }}, "dependencies": [],'
        ' "x": {{ apps | length }}, "first": {{ (apps | first).id | tojson }}}')
    spec = load_dict(minimal(roles={"ps": {"count": 1}, "worker": {"count": 5}}))
    group = render_group(spec, templates_dir=str(tmp_path))
    assert group["x"] == 6 and group["first"] == "/mnist/ps-0" and len(group["apps"]) == 6


@pytest.mark.parametrize("roles", [
    {"ps": {"count": 1}, "worker": {"count": 2}},
    {"chief": {"count": 1}, "ps": {"count": 3}, "worker": {"count": 40}, "evaluator": {"count": 4},
     "tensorboard": {"count": 1}},
])
def test_the_compact_text_is_exactly_the_group_serialised(roles):
    from marathon_tf.user.render import render_group_json

    spec = load_dict(minimal(roles=roles, logdir="ckpt", env={"A": "x\u00e9\"<&>'\u2028"}))
    assert render_group_json(spec) == json.dumps(render_group(spec), separators=(",", ":"), sort_keys=True)


def test_the_compact_text_follows_custom_templates_the_full_way(tmp_path):
    from marathon_tf.user.render import render_group_json

    default = (ROOT / "app_templates" / "task.json.j2").read_text()
    (tmp_path / "task.json.j2").write_text(default.replace('"cpus": {{ role.cpus | tojson }}',
                                                           '"cpus": {{ (env.MTF_INDEX | int) + 1 }}'))
    (tmp_path / "group.json.j2").write_text('{"id": {{ group_id | tojson }}, "apps": {{ apps | tojson }},'
                                            ' "n": {{ apps | length }}}')
    spec = load_dict(minimal(roles={"ps": {"count": 1}, "worker": {"count": 6}}))
    text = render_group_json(spec, templates_dir=str(tmp_path))
    assert json.loads(text)["n"] == 7 and [a["cpus"] for a in json.loads(text)["apps"]] == [1, 1, 2, 3, 4, 5, 6]
    assert text == json.dumps(render_group(spec, templates_dir=str(tmp_path)), separators=(",", ":"), sort_keys=True)


def test_job_fields_reach_the_task_environment_and_schema():
    job = {"name": "w", "command": ["python3", "t.py"], "roles": {"worker": {"count": 1}},
           "restart": {"progress_timeout_seconds": 120, "first_step_timeout_seconds": 600}}
    spec = spec_mod.load_dict(job)
    group = render_group(spec)
    app = (group.get("apps") or [a for sg in group["groups"] for a in sg["apps"]])[0]
    assert app["env"]["MTF_PROGRESS_TIMEOUT"] == "120/600"
    ctx = TaskContext.from_env(app["env"])
    assert ctx.progress_timeouts == (120.0, 600.0)
    assert spec_mod.load_dict(spec.to_dict()).restart.progress_timeout_seconds == 120
    plain = spec_mod.load_dict({**job, "restart": {}})
    assert "MTF_PROGRESS_TIMEOUT" not in json.dumps(render_group(plain))
    assert "progress_timeout_seconds" not in json.dumps(plain.to_dict())
    with pytest.raises(Exception, match="progress_timeout_seconds"):
        spec_mod.load_dict({**job, "restart": {"progress_timeout_seconds": -1}})
    off = render_group(spec_mod.load_dict({**job, "restart": {"progress_timeout_seconds": 0,  # 0: off (issue 24)
                                                               "first_step_timeout_seconds": 0}}))
    off_env = (off.get("apps") or [a for sg in off["groups"] for a in sg["apps"]])[0]["env"]
    assert off_env["MTF_PROGRESS_TIMEOUT"] == "0/0" and TaskContext.from_env(off_env).progress_timeouts == (0.0, 0.0)
    restart = spec_mod.json_schema()["properties"]["restart"]["properties"]
    assert restart["progress_timeout_seconds"]["minimum"] == 0 and "first_step_timeout_seconds" in restart


# -- placement rules across the job's tasks (marathon_tf.contract.spread, marathon_tf.task.placer) ----


def test_a_job_rule_is_a_label_every_task_of_its_scope_carries_and_all_but_the_first_wait_held():
    spec = load_dict(minimal(constraints=[["hostname", "UNIQUE"], ["rack", "LIKE", "r[12]"]],
                             constraints_per_task=[["hostname", "MAX_PER", "1"]],
                             roles={"ps": {"count": 2}, "worker": {"count": 3}}))
    apps = job_apps(render_group(spec))
    hold = list(spread.HOLD)
    assert apps["worker-0"]["constraints"] == [["hostname", "MAX_PER", "1"], ["rack", "LIKE", "r[12]"]]
    for name in ("ps-0", "ps-1", "worker-1", "worker-2"):  # the leader worker-0 places these one at a time
        assert apps[name]["constraints"] == [["hostname", "MAX_PER", "1"], ["rack", "LIKE", "r[12]"], hold]
        assert spread.split(apps[name]) == ((("hostname", "MAX_PER", "1"), ("rack", "LIKE", "r[12]")),
                                            (spread.HOLD,), 'held by job rule ["hostname", "UNIQUE"]: its tasks are '
                                                            "placed one at a time by the job's leader")
    for app in apps.values():
        assert json.loads(app["labels"][spread.RULES_LABEL]) == {"scope": "job", "rules": [["hostname", "UNIQUE"]]}
        assert app["env"]["MTF_PLACEMENT"] == "1"
    assert spread.LABEL not in apps["worker-0"]["labels"]


def test_a_roles_rule_spans_its_tasks_and_its_first_task_goes_first():
    spec = load_dict(minimal(roles={"ps": {"count": 3, "constraints": [["rack", "MAX_PER", "2"]]},
                                    "worker": {"count": 2}}))
    apps = job_apps(render_group(spec))
    assert apps["ps-0"]["constraints"] == [["rack", "LIKE", ".*"]]  # a rule on an attribute: agents that have it
    assert apps["ps-2"]["constraints"] == [["rack", "LIKE", ".*"], list(spread.HOLD)]
    assert json.loads(apps["ps-1"]["labels"][spread.RULES_LABEL])["scope"] == "ps"
    assert "MTF_PLACEMENT" in apps["worker-0"]["env"] and spread.RULES_LABEL not in apps["worker-1"]["labels"]


def test_a_job_without_rules_renders_as_before():
    apps = job_apps(render_group(load_dict(minimal(constraints=[["rack", "LIKE", "r1"]]))))
    for app in apps.values():
        assert app["constraints"] == [["rack", "LIKE", "r1"]] and "MTF_PLACEMENT" not in app["env"]
        assert not {spread.LABEL, spread.RULES_LABEL} & set(app["labels"])


def test_many_held_tasks_are_stamped_as_rendered_one_by_one():
    from marathon_tf.user.render import render_group_json

    spec = load_dict(minimal(constraints=[["hostname", "MAX_PER", "3"]], roles={"ps": {"count": 7},
                                                                                  "worker": {"count": 9}}))
    group = render_group(spec)
    assert json.loads(render_group_json(spec)) == group
    full = [render_app(spec, *naming.parse_task_name(t)) for t in job_apps(group)]
    assert group["apps"] == full


def test_a_put_keeps_what_the_leader_wrote_to_an_app_whose_rendering_did_not_change():
    from marathon_tf.marathon.marker import digest, stamp
    from marathon_tf.user.jobs import keep_placement

    spec = load_dict(minimal(constraints=[["hostname", "UNIQUE"]], roles={"ps": {"count": 1},
                                                                          "worker": {"count": 2}}))
    sent = stamp(render_group(spec))
    now = json.loads(json.dumps(sent))  # as Marathon has it once the leader released worker-1
    w1 = next(a for a in now["apps"] if a["id"].endswith("worker-1"))
    w1["constraints"] = [["hostname", "UNLIKE", "10\\.0\\.0\\.1"]]
    w1["labels"][spread.LABEL] = spread.label_value((("hostname", "UNLIKE", "10\\.0\\.0\\.1"),), "away from 10.0.0.1")
    assert digest(w1) == w1["labels"]["marathon-tf/digest"]  # the placement is no change of the job
    again = stamp(keep_placement(render_group(spec), now))
    assert again == now  # PUT again: nothing changed, nothing restarts
    scaled = keep_placement(render_group(load_dict(minimal(constraints=[["hostname", "UNIQUE"]],
                                                           roles={"ps": {"count": 1}, "worker": {"count": 3}}))), now)
    w1_scaled = next(a for a in scaled["apps"] if a["id"].endswith("worker-1"))
    assert w1_scaled["constraints"] == [list(spread.HOLD)]  # its env changed (MTF_CLUSTER): rendered afresh, held
