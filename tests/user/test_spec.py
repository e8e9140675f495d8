"""The job spec: every malformed job file is exit 2 with the field named, and nothing is sent."""

import json

import jsonschema
import pytest
from click.testing import CliRunner
from user_helpers import minimal

from marathon_tf.contract.errors import SpecError
from marathon_tf.user.cli import cli
from marathon_tf.user.spec import json_schema, load_dict, load_job, with_counts


def roles(**r):
    base = {"ps": {"count": 1}, "worker": {"count": 2}}
    base.update(r)
    return base


# (job content, field path the error must name, a word of the message)
MALFORMED = [
    (minimal(oops=1), "oops", "unknown key"),
    (minimal(roles=roles(foo={"count": 1})), "roles.foo", "unknown role"),
    (minimal(roles=roles(worker={"count": 2, "gpu": 1})), "roles.worker.gpu", "unknown key"),
    (minimal(roles=roles(worker={"count": 2, "gpus": -1})), "roles.worker.gpus", "must be >= 0"),
    (minimal(roles=roles(worker={"count": -1})), "roles.worker.count", "between"),
    (minimal(roles=roles(worker={"count": 10**9})), "roles.worker.count", "between"),
    (minimal(roles=roles(worker={"count": "2"})), "roles.worker.count", "integer"),
    (minimal(roles=roles(worker={"count": True})), "roles.worker.count", "integer"),
    (minimal(roles=roles(worker={"count": 1.5})), "roles.worker.count", "integer"),
    (minimal(roles=roles(worker={"count": 2, "cpus": 0})), "roles.worker.cpus", "between"),
    (minimal(roles=roles(worker={"count": 2, "cpus": "1"})), "roles.worker.cpus", "number"),
    (minimal(roles=roles(worker={"count": 2, "mem": -5})), "roles.worker.mem", "between"),
    (minimal(roles=roles(worker={"count": 2, "disk": -1})), "roles.worker.disk", ">="),
    (minimal(roles=roles(chief={"count": 2})), "roles.chief.count", "at most one chief"),
    (minimal(roles=roles(tensorboard={"count": 2}), logdir="x"), "roles.tensorboard.count", "at most one"),
    (minimal(roles={"worker": {"count": 2}}), "roles.ps.count", "at least one ps"),
    (minimal(style="parameter_server"), "roles.chief.count", "exactly one chief"),
    (minimal(style="multi_worker_mirrored"), "roles.ps.count", "no parameter servers"),
    (minimal(roles={"ps": {"count": 1}, "worker": {"count": 0}}), "roles.worker.count", "at least one worker"),
    (minimal(style="custom", roles={"tensorboard": {"count": 1}}, logdir="x"), "roles", "no task"),
    (minimal(completion="chief"), "completion", "chief"),
    (minimal(completion="sometimes"), "completion", "one of"),
    (minimal(style="tf2"), "style", "one of"),
    (minimal(cluster_spec="yaml"), "cluster_spec", "one of"),
    (minimal(containerizer="docker", roles=roles(worker={"count": 1, "gpus": 1})), "roles.worker.gpus",
     "Mesos containerizer"),
    (minimal(name="Bad_Name"), "name", "lowercase"),
    (minimal(name="/abs"), "name", "relative"),
    (minimal(name="a//b"), "name", "relative"),
    (minimal(name="-x"), "name", "segment"),
    (minimal(name="ml/tasks"), "name", "reserved"),
    (minimal(name="x" * 60), "name", "too long for Mesos-DNS"),
    (minimal(name="../etc"), "name", "segment"),
    (minimal(name=""), "name", "empty"),
    (minimal(name=5), "name", "string"),
    ({"style": "tf1", "command": "x", "roles": roles()}, "name", "required"),
    ({"name": "x", "command": "x"}, "roles", "required"),
    (minimal(command=[]), "command", "empty"),
    (minimal(command=""), "command", "empty"),
    (minimal(command=["python3", 3]), "command", "item 1"),
    (minimal(command={"run": "x"}), "command", "list of strings"),
    ({k: v for k, v in minimal().items() if k != "command"}, "roles.ps.command", "no command"),
    (minimal(command=None), "command", "must not be null"),
    (minimal(env={"A": 1}), "env.A", "must be a string"),
    (minimal(env={"bad-key": "v"}), "env.bad-key", "environment variable name"),
    (minimal(env={"MTF_ROLE": "ps"}), "env.MTF_ROLE", "reserved"),
    (minimal(env=["A=1"]), "env", "object"),
    (minimal(env={"A": "x\u0000y"}), "env.A", "NUL"),
    (minimal(image=""), "image", "empty"),
    (minimal(command=["python3", "\ud800"]), "command", "lone surrogates"),
    (minimal(env={"A": "\udfff"}), "env.A", "lone surrogates"),
    (minimal(image="tf\nlatest"), "image", "control characters"),
    (minimal(constraints=[["hostname", "SOMETIMES"]]), "constraints[0]", "unknown operator"),
    (minimal(constraints=[["hostname", "LIKE"]]), "constraints[0]", "needs a value"),
    (minimal(constraints=[["hostname", "LIKE", "(["]]), "constraints[0]", "regular expression"),
    (minimal(constraints=[["hostname", "MAX_PER", "two"]]), "constraints[0]", "integer"),
    (minimal(constraints=["hostname:UNIQUE"]), "constraints[0]", "must be"),
    (minimal(constraints_per_task=[["hostname", "MAX_PER"]]), "constraints_per_task[0]", "needs a value"),
    (minimal(roles={"ps": {"count": 1, "constraints_per_task": [["x", "NOPE"]]}, "worker": {"count": 1}}),
     "roles.ps.constraints_per_task[0]", "unknown operator"),
    (minimal(discovery={"marathon_url": ""}, constraints=[["rack", "LIKE", "r1"], ["hostname", "UNIQUE"]]),
     "constraints[1]", "needs discovery.marathon_url"),
    (minimal(discovery={"marathon_url": ""}, roles={"ps": {"count": 2, "constraints": [["rack", "GROUP_BY"]]},
                                                    "worker": {"count": 1}}),
     "roles.ps.constraints[0]", "constraints_per_task"),
    (minimal(volumes=[{"host_path": "../rel", "container_path": "ckpt"}]), "volumes[0].host_path", ".."),
    (minimal(volumes=[{"host_path": "/x", "container_path": "../up"}]), "volumes[0].container_path", ".."),
    (minimal(volumes=[{"host_path": "/x"}]), "volumes[0].container_path", "required"),
    (minimal(volumes=[{"host_path": "/x", "container_path": "c", "mode": "RWX"}]), "volumes[0].mode", "RW or RO"),
    (minimal(fetch=["missing-file.py"]), "fetch[0].uri", "no such file"),
    (minimal(fetch=["gopher://x/y"]), "fetch[0].uri", "scheme"),
    (minimal(fetch=[{"url": "x"}]), "fetch[0].url", "unknown key"),
    (minimal(labels={"marathon-tf/job": "x"}), "labels.marathon-tf/job", "reserved"),
    (minimal(discovery={"mode": "zookeeper"}), "discovery.mode", "one of"),
    (minimal(discovery={"nameserver": "not a host"}), "discovery.nameserver", "ip[:port]"),
    (minimal(discovery={"nameserver": "10.0.0.1:99999"}), "discovery.nameserver", "ip[:port]"),
    (minimal(discovery={"marathon_url": "ftp://x"}), "discovery.marathon_url", "http"),
    (minimal(discovery={"mode": "mesos-dns-http"}), "discovery.http_api", "needs"),
    (minimal(discovery={"startup_timeout": 0}), "discovery.startup_timeout", "between"),
    (minimal(restart={"max_failures": -1}), "restart.max_failures", ">="),
    (minimal(restart={"permanent_exit_codes": [0]}), "restart.permanent_exit_codes[0]", "between 1 and 127"),
    (minimal(restart={"permanent_exit_codes": [200]}), "restart.permanent_exit_codes[0]", "between 1 and 127"),
    (minimal(restart={"backoff_factor": 0.5}), "restart.backoff_factor", "between"),
    (minimal(network={"mode": "bridge"}), "network.mode", "one of"),
    (minimal(network={"name": "dcos"}), "network.name", "container"),
    (minimal(roles=roles(tensorboard={"count": 1})), "logdir", "logdir"),
    (minimal(roles=roles(worker={"count": 2, "constraints": [["a"]]})), "roles.worker.constraints[0]", "must be"),
]


@pytest.mark.parametrize("job,path,word", MALFORMED, ids=[f"{i}-{m[1]}" for i, m in enumerate(MALFORMED)])
def test_malformed_job_is_exit_2_naming_the_field(write_job, job, path, word):
    f = write_job(job)
    result = CliRunner().invoke(cli, ["validate", str(f)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if not line.startswith("hint:")]
    wanted = f"{f}: {path}: "
    hit = [line for line in lines if wanted in line]
    assert hit, f"no line names {path!r}: {lines}"
    assert word.lower() in hit[0].lower(), hit[0]
    assert result.stdout == ""


RAW = [
    (b"", "the file is empty"),
    (b"   \n", "the file is empty"),
    (b"{", "invalid JSON at line 1"),
    (b'{"name": "a", "name": "b"}', "duplicate key 'name'"),
    (b"\xff\xfe{}", "not valid UTF-8"),
    (b'{"name": NaN}', "invalid JSON"),
    (b"[1, 2]", "must be a JSON object"),
    (b'"just a string"', "must be a JSON object"),
]


@pytest.mark.parametrize("raw,message", RAW)
def test_unreadable_job_files(write_job, raw, message):
    f = write_job(raw)
    result = CliRunner().invoke(cli, ["validate", str(f)])
    assert result.exit_code == 2
    assert message in result.stderr and str(f) in result.stderr


def test_missing_file_and_directory(tmp_path):
    r = CliRunner().invoke(cli, ["validate", str(tmp_path / "nope.json")])
    assert r.exit_code == 2 and "no such file" in r.stderr
    r = CliRunner().invoke(cli, ["validate", str(tmp_path)])
    assert r.exit_code == 2 and "is a directory" in r.stderr


def test_all_unknown_keys_are_listed(write_job):
    f = write_job(minimal(a=1, b=2, roles=roles(worker={"count": 1, "c": 3})))
    with pytest.raises(SpecError) as e:
        load_job(f)
    paths = [p for p, _ in e.value.problems]
    assert paths == ["a", "b", "roles.worker.c"]
    assert "allowed: " in e.value.lines()[0] and "roles" in e.value.lines()[0]


def test_defaults_follow_the_training_style():
    tf1 = load_dict(minimal())
    assert (tf1.cluster_spec, tf1.completion) == ("flags", "all_workers")
    pss = load_dict(minimal(style="parameter_server", roles=roles(chief={"count": 1})))
    assert (pss.cluster_spec, pss.completion) == ("tf_config", "chief")
    mwms = load_dict(minimal(style="multi_worker_mirrored", roles={"worker": {"count": 2}}))
    assert (mwms.cluster_spec, mwms.completion) == ("tf_config", "all_workers")
    assert tf1.role("ps").mem == 1024 and tf1.role("worker").cpus == 1.0
    assert tf1.tasks() == [("ps", 0), ("worker", 0), ("worker", 1)]


def test_custom_style_defaults_to_tf_config_only_as_the_docs_say():
    """docs/job-file.md: TF_CONFIG for every style but tf1 (issue 28, item 6). Classic flags appended to a
    program we know nothing about stop it: ``sleep: unrecognized option '--ps_hosts=...'``."""
    from marathon_tf.contract.cluster_spec import render as render_spec
    from marathon_tf.contract.taskenv import TaskContext
    from marathon_tf.user.render import render_app
    from marathon_tf.user.spec import JobSpec

    job = {"name": "sleepy", "command": ["sleep", "60"], "roles": {"ps": {"count": 1}, "worker": {"count": 2}}}
    custom = load_dict(job)  # no style: custom
    assert (custom.style, custom.cluster_spec, custom.completion) == ("custom", "tf_config", "worker0")
    assert JobSpec.__dataclass_fields__["cluster_spec"].default == "tf_config"  # the model's own default agrees
    assert "default: flags for style tf1, tf_config for every other style" in json_schema()["properties"][
        "cluster_spec"]["description"]
    env = render_app(custom, "worker", 1)["env"]
    assert TaskContext.from_env(env).spec_style == "tf_config"
    endpoints = {("ps", 0): "10.0.0.1:2222", ("worker", 0): "10.0.0.2:2222", ("worker", 1): "10.0.0.3:2222"}
    out = render_spec({"ps": 1, "worker": 2}, endpoints, "worker", 1, style=custom.cluster_spec,
                      argv=["sleep", "60"], shell=False, user_tf_config=None)
    assert out.argv == ["sleep", "60"]  # nothing appended
    assert json.loads(out.tf_config_env)["task"] == {"type": "worker", "index": 1}
    both = load_dict({**job, "cluster_spec": "both"})  # flags only when asked for
    assert render_spec({"ps": 1, "worker": 2}, endpoints, "worker", 1, style=both.cluster_spec, argv=["t"],
                       shell=False, user_tf_config=None).argv[1:] == [
        "--ps_hosts=10.0.0.1:2222", "--worker_hosts=10.0.0.2:2222,10.0.0.3:2222", "--job_name=worker",
        "--task_index=1"]


def test_to_dict_round_trips_and_with_counts_revalidates():
    spec = load_dict(minimal(env={"A": "1"}, labels={"team": "ml"}, constraints=[["hostname", "UNIQUE"]],
                             roles=roles(worker={"count": 2, "gpus": 1, "env": {"B": "2"}})))
    again = load_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec
    bigger = with_counts(spec, {"worker": 8})
    assert bigger.role("worker").count == 8 and bigger.role("worker").gpus == 1
    with pytest.raises(SpecError):
        with_counts(spec, {"ps": 0})


def test_relative_fetch_paths_resolve_next_to_the_job_file(write_job, tmp_path):
    (tmp_path / "train.py").write_text("print(1)")
    spec = load_job(write_job(minimal(fetch=["train.py", "https://example.com/data.tgz"])))
    assert spec.fetch[0].uri == (tmp_path / "train.py").as_uri()
    assert spec.fetch[1].uri == "https://example.com/data.tgz"


def test_the_json_schema_is_valid_and_accepts_a_good_job():
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(minimal(env={"A": "b"}, roles=roles(worker={"count": 3, "gpus": 1})), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(minimal(oops=1), schema)


def test_schema_command_prints_it():
    r = CliRunner().invoke(cli, ["schema"])
    assert r.exit_code == 0
    assert json.loads(r.stdout)["properties"]["roles"]["properties"]["worker"]


@pytest.mark.parametrize("value, modules", [
    (None, ("tensorflow",)), (True, ("tensorflow",)), (False, ()),
    (["tensorflow", "numpy.linalg", "tensorflow"], ("tensorflow", "numpy.linalg")),
])
def test_prewarm_forms(value, modules):
    from marathon_tf.contract.taskenv import TaskContext
    from marathon_tf.user.render import render_group

    job = minimal() if value is None else minimal(prewarm=value)
    spec = load_dict(job)
    assert spec.prewarm == modules
    assert load_dict(spec.to_dict()).prewarm == modules  # kept through scale's re-render
    env = render_group(spec)["apps"][0]["env"]
    assert ("MTF_PREWARM" in env) == (modules != ("tensorflow",))  # the default renders as before
    assert TaskContext.from_env(env).prewarm == modules
    jsonschema.validate(job, json_schema())


@pytest.mark.parametrize("value, message", [
    ([], "prewarm: must be false, true or a non-empty list of module names"),
    ("tensorflow", "prewarm: must be false, true or a non-empty list of module names"),
    (["tensor flow"], "prewarm: item 0 must be a module name"),
    (["ok", 3], "prewarm: item 1 must be a module name"),
])
def test_bad_prewarm_is_named(value, message):
    with pytest.raises(SpecError) as e:
        load_dict(minimal(prewarm=value))
    assert message in str(e.value)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(minimal(prewarm=value), json_schema())


def test_constraints_per_task_round_trip_and_a_role_overrides_the_jobs():
    spec = load_dict(minimal(constraints_per_task=[["hostname", "UNIQUE"]],
                             roles={"ps": {"count": 1, "constraints_per_task": []}, "worker": {"count": 1}}))
    assert spec.constraints_per_task == (("hostname", "UNIQUE"),)
    assert spec.role("ps").constraints_per_task == () and spec.role("worker").constraints_per_task is None
    assert load_dict(spec.to_dict()) == spec
    assert "constraints_per_task" not in load_dict(minimal()).to_dict()  # unchanged for jobs without it
    # per app: nothing across tasks, so no marathon_url is needed
    assert load_dict(minimal(discovery={"marathon_url": ""}, constraints_per_task=[["hostname", "UNIQUE"]]))
