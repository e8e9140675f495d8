"""The task context (contract/taskenv): one table of fields, from which the rendered app's variables
and the bootstrap's reading of them both come."""

from dataclasses import fields

import pytest

from marathon_tf.contract import taskenv
from marathon_tf.contract.taskenv import VARS, TaskContext

BASE = {"job": "ml/mnist", "role": "worker", "index": 1, "cluster": {"ps": 1, "worker": 2}}

#: field -> a value other than its default (every field of TaskContext has one here)
OTHER = {
    "job": "team/other", "role": "chief", "index": 7, "cluster": {"chief": 1, "ps": 2, "worker": 4},
    "discovery": "marathon", "mesos_dns": "10.0.0.1:53", "mesos_dns_http": "http://10.0.0.1:8123",
    "dns_domain": "corp", "dns_framework": "mara", "marathon_url": "http://m1:8080,http://m2:8080",
    "spec_style": "flags", "port_name": "grpc", "status_port_name": "health", "network": "container",
    "startup_timeout": 12.5, "style": "tf1", "completion": "all_workers", "restart_budget": (3, 60.5),
    "progress_timeouts": (None, 900.0), "target_step": 300, "permanent_exit_codes": (3, 4), "logdir": "ckpt",
    "prewarm": ("tensorflow", "numpy"), "gpus": 2, "preemption_budget": (5, 3600.0),
    "preemption_exit_codes": (42,), "grace_seconds": 7.5, "admission": (30.0, 2, 5.0),
}
#: values whose text is special: none at all, zero, the "off" words
EDGES = [("prewarm", ()), ("preemption_exit_codes", ()), ("progress_timeouts", (0.0, 0.0)), ("grace_seconds", 0.0),
         ("progress_timeouts", (120.0, None)), ("restart_budget", (0, 600.0)), ("permanent_exit_codes", (3,))]


def test_the_table_names_every_field_once_and_the_docstring_every_variable():
    assert sorted(v.field for v in VARS) == sorted(f.name for f in fields(TaskContext))
    names = [v.name for v in VARS]
    assert len(set(names)) == len(names)
    for name in names + [v.runner for v in VARS if v.runner]:
        assert f"``{name}``" in taskenv.__doc__, f"{name} is not described in contract/taskenv.py's docstring"


@pytest.mark.parametrize("field", sorted(OTHER))
def test_every_field_survives_the_round_trip(field):
    ctx = TaskContext(**{**BASE, field: OTHER[field]})
    assert ctx != TaskContext(**BASE)
    assert TaskContext.from_env(ctx.to_env()) == ctx


@pytest.mark.parametrize("field, value", EDGES)
def test_edge_values_survive_the_round_trip(field, value):
    ctx = TaskContext(**{**BASE, field: value})
    assert TaskContext.from_env(ctx.to_env()) == ctx


def test_defaults_are_left_out_and_the_rest_always_written():
    env = TaskContext(**BASE).to_env()
    assert env == {"MTF_JOB": "ml/mnist", "MTF_ROLE": "worker", "MTF_INDEX": "1",
                   "MTF_CLUSTER": '{"ps":1,"worker":2}', "MTF_DISCOVERY": "mesos-dns", "MTF_DNS_DOMAIN": "mesos",
                   "MTF_DNS_FRAMEWORK": "marathon", "MTF_SPEC_STYLE": "both", "MTF_PORT_NAME": "tf",
                   "MTF_STATUS_PORT_NAME": "status", "MTF_NETWORK": "host", "MTF_STARTUP_TIMEOUT": "600",
                   "MTF_STYLE": "custom", "MTF_COMPLETION": "worker0", "MTF_RESTART_BUDGET": "5/600"}
    assert TaskContext.from_env(env) == TaskContext(**BASE)


def test_the_values_as_the_rendered_app_carries_them():
    env = TaskContext(**{**BASE, **OTHER}).to_env()
    assert {k: env[k] for k in ("MTF_CLUSTER", "MTF_RESTART_BUDGET", "MTF_PROGRESS_TIMEOUT", "MTF_TARGET_STEP",
                                "MTF_PERMANENT_EXIT_CODES", "MTF_PREWARM", "MTF_GPUS", "MTF_PREEMPTION_BUDGET",
                                "MTF_PREEMPTION_EXIT_CODES", "MTF_GRACE_SECONDS", "MTF_ADMISSION", "MESOS_DNS",
                                "MTF_STARTUP_TIMEOUT")} == {
        "MTF_CLUSTER": '{"chief":1,"ps":2,"worker":4}', "MTF_RESTART_BUDGET": "3/60.5",
        "MTF_PROGRESS_TIMEOUT": "/900", "MTF_TARGET_STEP": "300", "MTF_PERMANENT_EXIT_CODES": "3,4",
        "MTF_PREWARM": "tensorflow,numpy", "MTF_GPUS": "2", "MTF_PREEMPTION_BUDGET": "5/3600",
        "MTF_PREEMPTION_EXIT_CODES": "42", "MTF_GRACE_SECONDS": "7.5", "MTF_ADMISSION": "30/2/5",
        "MESOS_DNS": "10.0.0.1:53", "MTF_STARTUP_TIMEOUT": "12.5"}
    off = TaskContext(**BASE, prewarm=(), preemption_exit_codes=(), target_step=0).to_env()
    assert off["MTF_PREWARM"] == "false" and off["MTF_PREEMPTION_EXIT_CODES"] == "none"
    assert "MTF_TARGET_STEP" not in off  # 0: no target


def test_a_local_runner_s_variables_win():
    env = {**TaskContext(**BASE, marathon_url="http://m:8080", mesos_dns="1.1.1.1").to_env(),
           "MTF_RUNNER_MARATHON_URL": "http://127.0.0.1:9", "MTF_RUNNER_MESOS_DNS": "",
           "MTF_RUNNER_MESOS_DNS_HTTP": "http://127.0.0.1:8"}
    ctx = TaskContext.from_env(env)
    assert (ctx.marathon_url, ctx.mesos_dns, ctx.mesos_dns_http) == ("http://127.0.0.1:9", "1.1.1.1",
                                                                     "http://127.0.0.1:8")


@pytest.mark.parametrize("name, value, message", [
    ("MTF_CLUSTER", None, "MTF_CLUSTER is not set (is this task rendered by marathon-tf?)"),
    ("MTF_JOB", "", "MTF_JOB is not set"),
    ("MTF_CLUSTER", "[1]", 'MTF_CLUSTER must be a JSON object of role counts, e.g. {"ps":1,"worker":2}'),
    ("MTF_INDEX", "x", "MTF_INDEX must be an integer"),
    ("MTF_RESTART_BUDGET", "", "MTF_RESTART_BUDGET must look like N/SECONDS, e.g. 5/600"),
    ("MTF_PREEMPTION_BUDGET", "x/1", "MTF_PREEMPTION_BUDGET must look like N/SECONDS, e.g. 100/86400"),
    ("MTF_PERMANENT_EXIT_CODES", "none", "MTF_PERMANENT_EXIT_CODES must be comma-separated integers"),
    ("MTF_GRACE_SECONDS", "soon", "MTF_GRACE_SECONDS must be a number of seconds"),
    ("MTF_PROGRESS_TIMEOUT", "a/b", "MTF_PROGRESS_TIMEOUT must look like SECONDS[/FIRST_STEP_SECONDS]"),
    ("MTF_GPUS", "1.5", "MTF_GPUS must be a whole number of GPUs"),
    ("MTF_ADMISSION", "600/3", "MTF_ADMISSION must look like TIMEOUT/RETRIES/BACKOFF"),
])
def test_a_wrong_variable_is_named(name, value, message):
    env = TaskContext(**BASE).to_env()
    if value is None:
        env.pop(name)
    else:
        env[name] = value
    with pytest.raises(ValueError) as caught:
        TaskContext.from_env(env)
    assert str(caught.value).startswith(message)


def test_empty_values_mean_the_default_unless_empty_says_something():
    env = {**TaskContext(**BASE).to_env(), "MTF_GRACE_SECONDS": "", "MTF_DISCOVERY": "", "MTF_PREWARM": "",
           "MTF_PREEMPTION_EXIT_CODES": ""}
    ctx = TaskContext.from_env(env)
    assert (ctx.grace_seconds, ctx.discovery) == (30.0, "mesos-dns")
    assert ctx.prewarm == () and ctx.preemption_exit_codes == ()  # "": none at all
