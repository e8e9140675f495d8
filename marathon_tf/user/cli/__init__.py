"""The ``marathon-tf`` command. Parses arguments, calls the Python API (:mod:`marathon_tf.user.api`),
prints (with :mod:`marathon_tf.user.output`: the only code besides it that prints). One module per group
of verbs:

===============  ====================================================================================
``root``         the ``marathon-tf`` group: global options, errors → exit codes, every verb added, ``main``
``params``       what the command modules share: context settings, DURATION, ``-o``, the connection
                 options (``ctx.obj``, the API object built once per command), ``--timeout`` …
``jobfile``      the job file, offline: ``render``, ``validate``, ``export``, ``schema``
``change``       changing a job: ``deploy`` (and ``--local``), ``scale``, ``checkpoint``, ``delete``
``view``         looking at jobs: ``status``, ``events``, ``list``, ``logs``
``follow``       following a job to its end (``deploy``, ``scale --wait``, ``status --watch``)
``local``        ``marathon-tf local``: ``serve``, ``ui-install``, ``clean`` (the local cluster's group)
``in_task``      ``marathon-tf bootstrap``, the verb each task runs (:mod:`marathon_tf.task.bootstrap`)
``__main__``     ``python -m marathon_tf.user.cli``
===============  ====================================================================================

Exit codes, each on its error class (:mod:`marathon_tf.contract.errors`; commands only raise, and the
group turns an error into its lines and its code, in one place): 0 ok, 1 runtime failure (a job that
failed: ``JobFailed``), 2 usage or spec error (a task that fits on no agent included), 3 timed out while
still in progress, 4 not placed (``NotPlaced``: the cluster has no room for every task: refused with
--no-wait-for-resources, or released at the admission deadline with no attempt left), 128 + the signal's
number when stopped (``Interrupted``: 130 for Ctrl-C). Heavy modules are imported inside the commands so
that ``marathon-tf --help`` starts fast and TensorFlow is never imported here.
"""

from marathon_tf.user.cli.root import cli, main

__all__ = ["cli", "main"]
