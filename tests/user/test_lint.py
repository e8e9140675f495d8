"""`validate` and `deploy` warn about Keras 3 under the multi-worker strategies (its model.fit fails
there at run time, keras-team/keras#20585, #18624) with the fix, and stay quiet where it cannot
happen: the job routes tf.keras to tf_keras, its image's TensorFlow predates Keras 3, its program
(read from the job's own fetch files) uses no Keras, or its style runs no such strategy."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from marathon_tf.contract.keras3 import FIX
from marathon_tf.user.cli import cli
from marathon_tf.user.spec import load_dict, load_job
from marathon_tf.user.spec.lint import warnings

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TF_KERAS = "import tensorflow as tf\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(1)])\nmodel.fit(x)\n"
KERAS3 = "import tensorflow as tf\nimport keras\nmodel = keras.Sequential([keras.layers.Dense(1)])\n"
NO_KERAS = "import tensorflow as tf\nstrategy = tf.distribute.MultiWorkerMirroredStrategy()\n"


def job(tmp_path, program=None, style="multi_worker_mirrored", env=None, **more):
    roles = {"worker": {"count": 2}} if style == "multi_worker_mirrored" else {
        "chief": {"count": 1}, "ps": {"count": 1}, "worker": {"count": 1}}
    data = {"name": "k", "style": style, "command": ["python3", "train.py"], "roles": roles, "env": env or {}, **more}
    if program is not None:
        (tmp_path / "train.py").write_text(program)
        data["fetch"] = ["train.py"]
    return load_dict(data, base_dir=tmp_path)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*/job*.json")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_examples_get_no_warning(path):
    assert warnings(load_job(path)) == []


@pytest.mark.parametrize("style", ["multi_worker_mirrored", "parameter_server"])
def test_a_program_using_tf_keras_without_legacy_keras_is_warned_with_the_fix(tmp_path, style):
    [line] = warnings(job(tmp_path, TF_KERAS, style))
    strategy = "MultiWorkerMirroredStrategy" if style == "multi_worker_mirrored" else "ParameterServerStrategy"
    assert line == (f"job.json: env: train.py uses tf.keras, which is Keras 3 without TF_USE_LEGACY_KERAS, and "
                    f"Keras 3's model.fit fails under {strategy} at run time: {FIX}")
    assert warnings(job(tmp_path, TF_KERAS, style, env={"TF_USE_LEGACY_KERAS": "1"})) == []
    roles = {"worker": {"count": 2, "env": {"TF_USE_LEGACY_KERAS": "true"}}}  # per role works too
    if style == "multi_worker_mirrored":
        assert warnings(job(tmp_path, TF_KERAS, style, roles=roles)) == []


def test_importing_keras_itself_is_keras_3_whatever_the_environment(tmp_path):
    [line] = warnings(job(tmp_path, KERAS3, "parameter_server", env={"TF_USE_LEGACY_KERAS": "1"}))
    assert line.startswith("job.json: fetch train.py: imports keras, which is Keras 3 whatever the environment")


def test_no_warning_where_keras_3_cannot_fail(tmp_path):
    assert warnings(job(tmp_path, NO_KERAS)) == []  # the program uses no Keras
    assert warnings(job(tmp_path, TF_KERAS, "tf1", roles={"ps": {"count": 1}, "worker": {"count": 1}})) == []
    old = job(tmp_path, image="tensorflow/tensorflow:2.15.0-gpu", fetch=["http://example.com/train.py"])
    assert warnings(old) == []  # TensorFlow 2.15's tf.keras is Keras 2


def test_a_program_that_cannot_be_read_here_is_warned_about_unless_the_job_routes_to_tf_keras(tmp_path):
    remote = job(tmp_path, fetch=["http://example.com/train.py"], image="marathon-tf/tensorflow:2.21.0-cpu")
    [line] = warnings(remote)
    assert "if the program uses Keras, it gets Keras 3" in line and FIX in line
    assert warnings(job(tmp_path, fetch=["http://example.com/train.py"], env={"TF_USE_LEGACY_KERAS": "1"})) == []


def test_validate_and_deploy_print_the_warning_and_still_succeed(tmp_path):
    (tmp_path / "train.py").write_text(TF_KERAS)
    path = tmp_path / "job.json"
    path.write_text(json.dumps({"name": "k", "style": "multi_worker_mirrored", "command": ["python3", "train.py"],
                                "fetch": ["train.py"], "roles": {"worker": {"count": 2}}}))
    r = CliRunner().invoke(cli, ["validate", str(path)])
    assert r.exit_code == 0 and r.stdout.startswith(f"{path}: ok")
    assert r.stderr.startswith(f"warning: {path}: env: train.py uses tf.keras") and FIX in r.stderr
    r = CliRunner().invoke(cli, ["validate", str(path), "-o", "json"])
    assert len(json.loads(r.stdout)["warnings"]) == 1
    r = CliRunner().invoke(cli, ["deploy", str(path), "--dry-run"], env={"MARATHON_URL": ""})
    assert r.exit_code == 0 and "warning: " in r.stderr and FIX in r.stderr


def test_a_python3_c_program_is_read_from_the_command_itself(tmp_path):
    """Issue 32: a `python3 -c` program that never uses Keras was warned about Keras 3 (its program could
    not be read here); its code is the command itself."""
    def inline(code, **more):
        return load_dict({"name": "k", "style": "multi_worker_mirrored", "command": ["python3", "-c", code],
                          "roles": {"worker": {"count": 2}}, **more}, base_dir=tmp_path)

    assert warnings(inline(NO_KERAS)) == []
    assert warnings(load_dict({"name": "k", "style": "multi_worker_mirrored", "command": f"python3 -c '{NO_KERAS}'",
                               "roles": {"worker": {"count": 2}}}, base_dir=tmp_path)) == []
    [line] = warnings(inline(TF_KERAS))
    assert line.startswith("job.json: env: the command's python3 -c program uses tf.keras, which is Keras 3")
    [line] = warnings(inline(KERAS3))
    assert line.startswith("job.json: command: its python3 -c program: imports keras, which is Keras 3")


def test_each_fetched_program_is_read_as_itself(tmp_path):
    """Two fetched files, the command naming the first: its own source is read (not the last fetch's)."""
    (tmp_path / "train.py").write_text(TF_KERAS)
    (tmp_path / "util.py").write_text(NO_KERAS)
    spec = load_dict({"name": "k", "style": "multi_worker_mirrored", "command": ["python3", "train.py"],
                      "fetch": ["train.py", "util.py"], "roles": {"worker": {"count": 2}}}, base_dir=tmp_path)
    [line] = warnings(spec)
    assert "train.py uses tf.keras" in line


def _fetched(tmp_path, command, fetch=("train.py",), **more):
    for name in fetch:
        (tmp_path / name).write_text("print('step=1 loss=0.1')\n")
    return load_dict({"name": "t", "style": "tf1", "command": command, "fetch": list(fetch),
                      "roles": {"ps": {"count": 1}, "worker": {"count": 2}}, **more}, base_dir=tmp_path)


def test_a_script_no_fetch_brings_is_warned_with_the_file_it_likely_means(tmp_path):
    """Issue 43, item 1: ``python3 trian.py`` with ``fetch: [train.py]`` ran 7 attempts before failing on
    "can't open file": the task's working directory is its sandbox, which holds only what was fetched."""
    [line] = warnings(_fetched(tmp_path, ["python3", "trian.py", "--steps", "5"]))
    assert line == ("job.json: command: trian.py is neither among the fetched files (train.py) nor in a volume; "
                    "the program cannot start: did you mean train.py?")
    imaged = warnings(_fetched(tmp_path, "python3 -u trian.py", image="tensorflow/tensorflow:2.21.0"))
    assert len(imaged) == 1 and "unless image tensorflow/tensorflow:2.21.0 puts it" in imaged[0]


@pytest.mark.parametrize("command, more", [
    (["python3", "train.py"], {}),                               # fetched
    (["python3", "./train.py"], {}),                             # fetched, written with ./
    (["python3", "ckpt/train.py"], {"volumes": [{"host_path": "/mnt/x", "container_path": "ckpt"}]}),  # a volume
    (["python3", "/opt/app/train.py"], {}),                      # an absolute path: the image's, not known here
    (["python3", "-m", "trainer"], {}),                          # a module
    ("cd src && python3 trian.py", {}),                          # a shell line: not read
])
def test_no_warning_where_the_script_is_there_or_cannot_be_known(tmp_path, command, more):
    assert warnings(_fetched(tmp_path, command, **more)) == []


def test_no_warning_when_an_archive_is_fetched_or_nothing_is(tmp_path):
    (tmp_path / "code.tar.gz").write_bytes(b"")
    assert warnings(_fetched(tmp_path, ["python3", "trian.py"], fetch=("code.tar.gz",))) == []
    assert warnings(load_dict({"name": "t", "style": "tf1", "command": ["python3", "trian.py"],
                               "roles": {"ps": {"count": 1}, "worker": {"count": 2}}})) == []


def test_validate_suggests_the_enumerated_value_a_misspelt_one_means(tmp_path):
    f = tmp_path / "job.json"
    f.write_text(json.dumps({"name": "t", "style": "paramter_server", "command": "true",
                             "roles": {"worker": {"count": 1, "cpu": 1}}}))
    r = CliRunner().invoke(cli, ["validate", str(f)])
    assert r.exit_code == 2
    assert "style: must be one of tf1, parameter_server, multi_worker_mirrored, custom; did you mean " \
           "parameter_server?" in r.stderr
    assert "roles.worker.cpu: unknown key; did you mean cpus?" in r.stderr
    f.write_text(json.dumps({"name": "t", "style": "tf2", "command": "true", "roles": {"worker": {"count": 1}}}))
    r = CliRunner().invoke(cli, ["validate", str(f)])  # tf2 is no misspelt tf1: no guess
    assert "style: must be one of tf1, parameter_server, multi_worker_mirrored, custom\n" in r.stderr + "\n"
