"""The user's side: what runs on the user's machine (or a notebook, a CI job, a scheduler).

The way of a command: ``cli`` (arguments, printing) → ``api`` (the Python API) → the use cases
(``pipeline``: deploy and follow; ``status``: a job's status; ``jobs``: find, scale, delete;
``history``; ``logs``) → :mod:`marathon_tf.marathon` (the REST client, and every reading of
Marathon's JSON). Errors are raised, never printed, and carry their exit code
(:mod:`marathon_tf.contract.errors`); ``cli`` handles them in one place.

==================  ====================================================================
It builds on :mod:`marathon_tf.contract` and :mod:`marathon_tf.marathon`, asks the Mesos model
(:mod:`marathon_tf.mesos`) whether a job fits the cluster (``capacity``, ``admission``), starts the
local cluster (:mod:`marathon_tf.local`) for ``--local`` and ``local serve``, and reaches into the task
side only for ``marathon-tf bootstrap`` and the shared pre-warmed interpreters it hands the local
cluster (:mod:`marathon_tf.task.warmpool`). No module here imports another that imports it back
(``tests/test_layout.py``).
"""
