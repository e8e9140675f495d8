"""cluster_spec: endpoints -> cluster, TF_CONFIG, classic flags and placeholders (pure)."""

import json

import pytest

from marathon_tf.contract import cluster_spec

COUNTS = {"chief": 1, "ps": 1, "worker": 2, "evaluator": 1}
ENDPOINTS = {("chief", 0): "c:1", ("ps", 0): "p:2", ("worker", 0): "w0:3", ("worker", 1): "w1:4"}


def render(role="worker", index=1, style="both", argv=("python3", "train.py"), shell=False, user=None,
           counts=COUNTS):
    return cluster_spec.render(counts, ENDPOINTS, role, index, style=style, argv=list(argv), shell=shell,
                               user_tf_config=user)


def test_cluster_lists_members_in_index_order_and_omits_empty_roles():
    assert cluster_spec.build_cluster({"ps": 0, "worker": 2, "chief": 1}, ENDPOINTS) == {
        "chief": ["c:1"], "worker": ["w0:3", "w1:4"]}


def test_cluster_with_a_missing_member_names_it():
    with pytest.raises(KeyError, match="worker-1"):
        cluster_spec.build_cluster({"worker": 2}, {("worker", 0): "a:1"})


def test_worker_gets_tf_config_and_appended_flags_with_style_both():
    spec = render()
    assert json.loads(spec.tf_config_env) == {
        "cluster": {"chief": ["c:1"], "ps": ["p:2"], "worker": ["w0:3", "w1:4"]},
        "task": {"type": "worker", "index": 1}}
    assert spec.argv == ["python3", "train.py", "--ps_hosts=p:2", "--worker_hosts=w0:3,w1:4",
                         "--chief_hosts=c:1", "--job_name=worker", "--task_index=1"]


def test_flags_style_exports_no_tf_config():
    spec = render(style="flags", counts={"ps": 1, "worker": 2})
    assert spec.tf_config_env is None and spec.tf_config is None
    assert spec.argv[2:] == ["--ps_hosts=p:2", "--worker_hosts=w0:3,w1:4", "--job_name=worker", "--task_index=1"]


def test_tf_config_style_appends_nothing():
    spec = render(style="tf_config", role="chief", index=0)
    assert spec.argv == ["python3", "train.py"]
    assert json.loads(spec.tf_config_env)["task"] == {"type": "chief", "index": 0}


def test_placeholders_are_substituted_and_nothing_is_appended():
    spec = render(style="flags", role="ps", index=0,
                  argv=["python3", "t.py", "--ps={ps_hosts}", "--w", "{worker_hosts}", "--chief={chief_hosts}",
                        "--role={job_name}:{task_index}", "--other={x}"])
    assert spec.argv == ["python3", "t.py", "--ps=p:2", "--w", "w0:3,w1:4", "--chief=c:1", "--role=ps:0",
                         "--other={x}"]


def test_placeholders_are_substituted_even_with_tf_config_style():
    spec = render(style="tf_config", argv=["python3", "t.py", "--task={task_index}"])
    assert spec.argv == ["python3", "t.py", "--task=1"]


def test_shell_string_gets_quoted_flags_appended():
    spec = render(style="flags", shell=True, argv=["cd x && python3 train.py"], counts={"ps": 1, "worker": 2})
    assert spec.argv == ["cd x && python3 train.py --ps_hosts=p:2 --worker_hosts=w0:3,w1:4 "
                         "--job_name=worker --task_index=1"]


def test_user_tf_config_is_kept_with_a_warning():
    user = '{"cluster": {"worker": ["mine:1"]}, "task": {"type": "worker", "index": 0}}'
    spec = render(user=user)
    assert spec.tf_config_env is None
    assert spec.tf_config == json.loads(user)
    assert len(spec.warnings) == 1 and "TF_CONFIG is already set" in spec.warnings[0]


def test_empty_user_tf_config_counts_as_unset():
    spec = render(user="")
    assert spec.warnings == [] and json.loads(spec.tf_config_env)["task"]["index"] == 1


def test_evaluator_gets_the_cluster_without_being_in_it():
    spec = render(role="evaluator", index=0, style="tf_config")
    config = json.loads(spec.tf_config_env)
    assert config["task"] == {"type": "evaluator", "index": 0}
    assert "evaluator" not in config["cluster"] and config["cluster"]["worker"] == ["w0:3", "w1:4"]


def test_tensorboard_gets_neither_tf_config_nor_flags():
    spec = cluster_spec.render(COUNTS, {}, "tensorboard", 0, style="both", argv=["tensorboard", "--logdir=x"],
                               shell=False, user_tf_config=None)
    assert spec.tf_config_env is None and spec.tf_config is None
    assert spec.argv == ["tensorboard", "--logdir=x"]


def test_unknown_style_is_rejected():
    with pytest.raises(ValueError, match="MTF_SPEC_STYLE"):
        render(style="yaml")


def test_document_holds_cluster_task_and_argv():
    spec = render(role="chief", index=0)
    doc = spec.document("chief", 0)
    assert doc["task"] == {"type": "chief", "index": 0}
    assert doc["cluster"]["ps"] == ["p:2"] and doc["argv"] == spec.argv
