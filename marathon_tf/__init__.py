"""marathon-tf: run distributed TensorFlow on Apache Mesos through Marathon.

The package is three programs that run in different places, and what they share:

==============  ===================================================================================
``user/``       on the user's machine: the CLI, the job spec, rendering, the verbs, logs, ``--local``
``task/``       inside every Marathon task: the bootstrap, discovery, rendezvous, the program's life
``local/``      on the user's machine, as Marathon + Mesos + Mesos-DNS: the single-machine cluster
``marathon/``   talking to Marathon's REST API and event stream (used by ``user/`` and ``task/``)
``contract/``   what the sides agree on: names, the task environment, labels, errors, cluster spec
==============  ===================================================================================

Imports go one way (``tests/test_layout.py`` keeps them so): ``contract`` imports nothing else of
marathon_tf; ``marathon`` only ``contract``; ``task`` never imports ``user`` or ``local``;
``local`` knows marathon-tf only through ``contract``, as a real Mesos agent knows nothing of it.
``bootstrap.py`` here is the task's entry point (``python -m marathon_tf.bootstrap``).

Importing this package is cheap: it never imports TensorFlow, and the heavy
modules (the CLI, the local runner) are imported only when used.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
