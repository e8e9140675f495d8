"""Keras 3 and the multi-worker strategies: what both sides say about it, in the same words.

TensorFlow 2.16+ ships Keras 3 as ``tf.keras``, and Keras 3's ``model.fit`` does not run under
``MultiWorkerMirroredStrategy`` or ``ParameterServerStrategy`` (Keras says so itself: "Parameter
server training is not supported in Keras 3"). The Keras 2 package ``tf_keras`` does, and TensorFlow
routes ``tf.keras`` to it when ``TF_USE_LEGACY_KERAS`` is ``1``/``true``/``True`` (read on the first
use of ``tf.keras``). The user's side warns before a job is sent
(:mod:`marathon_tf.user.spec.lint`); the task side turns the error at run time into one line
(:func:`runtime_failure`, used by the job's exit policy). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["LEGACY_VAR", "LEGACY_VALUES", "FIX", "uses_legacy_keras", "runtime_failure"]

LEGACY_VAR = "TF_USE_LEGACY_KERAS"
#: The values TensorFlow's lazy loader takes for "route tf.keras to tf_keras".
LEGACY_VALUES = ("1", "true", "True")

#: The fix, as both sides print it.
FIX = (f'set "{LEGACY_VAR}": "1" in the job\'s env and install tf_keras where the task runs '
       "(pip install --no-deps tf_keras==<your TensorFlow version>); the program uses tf.keras "
       "or `import tf_keras as keras`, not `import keras`")

#: What Keras 3's model.fit raises under each strategy (TensorFlow 2.21 + Keras 3.15, measured:
#: the last line of the program's stderr).
_RUNTIME = (
    # MultiWorkerMirroredStrategy: "ValueError: Attempt to convert a value (PerReplica:{ ... }) with an
    # unsupported type (<class 'tensorflow.python.distribute.values.PerReplica'>) to a Tensor."
    ("MultiWorkerMirroredStrategy", re.compile(r"unsupported type \(?<class '[\w.]*PerReplica'>\)? to a Tensor")),
    # ParameterServerStrategy: "ValueError: To use this dataset, you need to pass this dataset to
    # ClusterCoordinator.create_per_worker_dataset." (only Keras 3's frames count: a custom loop can
    # raise it too, for its own mistake)
    ("ParameterServerStrategy", re.compile(r"you need to pass this dataset to ClusterCoordinator\."
                                           r"create_per_worker_dataset")),
)
#: A frame of Keras 3's package in a traceback (tf_keras's are ``tf_keras/src/``).
_KERAS3_FRAME = re.compile(r"(?<![\w_])keras/src/")
#: TF_USE_LEGACY_KERAS set without tf_keras: TensorFlow logs this, then ``tf.keras`` fails.
_NO_TF_KERAS = "you do not have the tf_keras package installed"


def uses_legacy_keras(env: Mapping[str, str]) -> bool:
    """Whether ``tf.keras`` is ``tf_keras`` (Keras 2) in this environment."""
    return env.get(LEGACY_VAR) in LEGACY_VALUES


def runtime_failure(stderr_tail: str) -> str | None:
    """One line naming the Keras 3 failure and its fix, when the program's last stderr lines show
    one; else None."""
    if _NO_TF_KERAS in stderr_tail:
        return (f"{LEGACY_VAR} is set but the tf_keras package is not installed where the task runs: "
                "pip install --no-deps tf_keras==<your TensorFlow version> (in the image)")
    for strategy, pattern in _RUNTIME:
        if pattern.search(stderr_tail) and (strategy != "ParameterServerStrategy" or _KERAS3_FRAME.search(stderr_tail)):
            return f"Keras 3 does not run model.fit under {strategy}: {FIX}"
    return None
