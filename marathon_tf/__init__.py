"""marathon-tf: run distributed TensorFlow on Apache Mesos through Marathon.

The package is three programs that run in different places, and what they share:

==============  ===================================================================================
``user/``       on the user's machine: the CLI, the job spec, rendering, the verbs, logs, ``--local``
``task/``       inside every Marathon task: the bootstrap, discovery, rendezvous, the program's life
``local/``      on the user's machine, as Marathon + Mesos + Mesos-DNS: the single-machine cluster
``marathon/``   talking to Marathon's REST API and event stream (used by ``user/`` and ``task/``)
``mesos/``      the Mesos model: resources, attributes, agents, offers, Marathon's offer matching
                (pure; used by ``local/`` to play the cluster and by ``user/``'s admission check)
``contract/``   what the sides agree on: names, the task environment, labels, errors, cluster spec
==============  ===================================================================================

Imports go one way (``tests/test_layout.py`` keeps them so): ``contract`` imports nothing else of
marathon_tf; ``marathon`` and ``mesos`` only ``contract``; ``task`` never imports ``user`` or ``local``;
``local`` knows marathon-tf only through ``contract``, as a real Mesos agent knows nothing of it, and
plays Mesos with ``mesos``; ``user`` models Mesos with ``mesos`` too, never with ``local``'s modules.
``bootstrap.py`` here is the task's entry point (``python -m marathon_tf.bootstrap``), ``cli.py`` the CLI's under its
first name (``python -m marathon_tf.cli``; the CLI is ``user/cli/``).

Importing this package is cheap: it never imports TensorFlow, and the heavy
modules (the CLI, the local runner) are imported only when used.

The Python API (:mod:`marathon_tf.user.api`) is here, imported on first use::

    from marathon_tf import Job, Marathon, LocalCluster

    job = Job.from_file("job.json")
    with LocalCluster() as cluster:
        print(cluster.deploy(job).wait().state)

What it exports (``__all__``, kept so by ``tests/test_exported_members.py``):

* the API: ``Job``, ``Marathon``, ``LocalCluster``, ``JobHandle``;
* what it returns (:mod:`marathon_tf.user.results`): ``JobStatus``, ``TaskStatus``, ``JobSummary``,
  ``Deployment``, ``ScaleResult``, ``Checkpoint``, ``LogLine``, ``LocalRunResult``; a job's state is a
  ``JobState``;
* what it raises (:mod:`marathon_tf.contract.errors`, each with its exit code): ``MarathonTFError`` and
  below it ``UsageError``, ``SpecError``, ``MarathonError``, ``MarathonUnavailable``,
  ``MarathonAuthError``, ``MarathonNotFound``, ``MarathonConflict``, ``MarathonInvalid``,
  ``DiscoveryError``, ``JobFailed``, ``SaveFailed``, ``NotPlaced``, ``Timeout``, ``Interrupted``.
"""

import typing

__version__ = "0.1.0"

#: The API's names, and the module each is imported from on first use (PEP 562).
_API = {"Job": "marathon_tf.user.api", "Marathon": "marathon_tf.user.api", "LocalCluster": "marathon_tf.user.api",
        "JobHandle": "marathon_tf.user.api", "JobStatus": "marathon_tf.user.results",
        "TaskStatus": "marathon_tf.user.results", "Deployment": "marathon_tf.user.results",
        "ScaleResult": "marathon_tf.user.results", "Checkpoint": "marathon_tf.user.results",
        "LogLine": "marathon_tf.user.results",
        "JobSummary": "marathon_tf.user.results", "LocalRunResult": "marathon_tf.user.results",
        "JobState": "marathon_tf.contract.labels",
        **{name: "marathon_tf.contract.errors" for name in (
            "MarathonTFError", "UsageError", "SpecError", "MarathonError", "MarathonUnavailable", "MarathonAuthError",
            "MarathonNotFound", "MarathonConflict", "MarathonInvalid", "DiscoveryError", "JobFailed", "SaveFailed",
            "NotPlaced", "Timeout", "Interrupted")}}

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> typing.Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'marathon_tf' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
