"""Keras 3's failures under the multi-worker strategies become one line with the fix (real stderr:
tests/data/keras3/SOURCE.md); other failures are left alone.

Keras 3's ``model.fit`` does not run under ``MultiWorkerMirroredStrategy`` or ``ParameterServerStrategy``
(keras-team/keras#20585, #18624); ``TF_USE_LEGACY_KERAS`` routes ``tf.keras`` to ``tf_keras``, read on the
first use of ``tf.keras`` (tensorflow/tensorflow v2.21.0 ``tensorflow/python/util/lazy_loader.py``,
``KerasLazyLoader._initialize``)."""

from pathlib import Path

import pytest

from marathon_tf.contract import keras3

DATA = Path(__file__).resolve().parent.parent / "data" / "keras3"


def tail(name: str, lines: int = 20) -> str:
    """What the bootstrap keeps of the program's stderr (supervisor.STDERR_TAIL_LINES lines)."""
    return "\n".join((DATA / name).read_text().splitlines()[-lines:])


@pytest.mark.parametrize("name,strategy", [("mwms.stderr", "MultiWorkerMirroredStrategy"),
                                           ("pss.stderr", "ParameterServerStrategy")])
def test_the_real_errors_become_one_line_with_the_fix(name, strategy):
    line = keras3.runtime_failure(tail(name))
    assert line == f"Keras 3 does not run model.fit under {strategy}: {keras3.FIX}"
    assert "\n" not in line and '"TF_USE_LEGACY_KERAS": "1"' in line and "tf_keras" in line


def test_the_parameter_server_text_counts_only_from_keras_3s_frames():
    # a custom training loop can raise the same ValueError for its own mistake: no Keras frame, no hint
    own = "\n".join(line for line in tail("pss.stderr").splitlines() if "keras/src" not in line)
    assert "create_per_worker_dataset" in own and keras3.runtime_failure(own) is None
    legacy = tail("pss.stderr").replace("/keras/src/", "/tf_keras/src/")  # tf_keras frames are not Keras 3's
    assert keras3.runtime_failure(legacy) is None


def test_legacy_keras_without_tf_keras_names_the_package():
    text = ("WARNING:tensorflow:Your environment has TF_USE_LEGACY_KERAS set to True, but you do not have the "
            "tf_keras package installed. You must install it in order to use the legacy tf.keras. Install it via: "
            "`pip install tf_keras`\nImportError: Keras cannot be imported. Check that it is installed.")
    assert "tf_keras package is not installed" in keras3.runtime_failure(text)


@pytest.mark.parametrize("text", ["", "Traceback\nValueError: boom", "OOM killed",
                                  "TypeError: unsupported operand type(s) for +: 'PerReplica' and 'int'"])
def test_other_failures_are_not_keras(text):
    assert keras3.runtime_failure(text) is None


@pytest.mark.parametrize("value,legacy", [("1", True), ("true", True), ("True", True), ("0", False),
                                          ("yes", False), (None, False)])
def test_legacy_keras_takes_tensorflows_values(value, legacy):
    assert keras3.uses_legacy_keras({} if value is None else {"TF_USE_LEGACY_KERAS": value}) is legacy
