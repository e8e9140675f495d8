"""The user's side: what runs on the user's machine (or a notebook, a CI job, a scheduler).

===============  ==============================================================================
``cli``          the ``marathon-tf`` command (click); with ``output``, the only code that prints
``output``       how results, progress and errors are shown (rich), ``-o json``
``config``       where Marathon is and with which credentials (options, environment, config file)
``spec/``        untrusted ``job.json`` → an immutable, validated ``JobSpec`` (marshmallow)
``render``       ``JobSpec`` → the Marathon app group (Jinja templates in ``app_templates/``)
``targets/``     ``JobSpec`` → another orchestrator's manifest (``export --to jobset``: a Kubernetes JobSet)
``jobs``         the verbs against Marathon: deploy, scale, status, delete
``watch``        following a deployment and a job to its end
``logs``         task output through the Mesos agents' files API
``localrun``     ``deploy --local``: the same pipeline on a local cluster, output streamed
``stopsignals``  SIGTERM / SIGHUP stop a foreground command like Ctrl-C
===============  ==============================================================================

It builds on :mod:`marathon_tf.contract` and :mod:`marathon_tf.marathon`, asks the Mesos model
(:mod:`marathon_tf.mesos`) whether a job fits the cluster (``capacity``, ``admission``), starts the
local cluster (:mod:`marathon_tf.local`) for ``--local`` and ``local serve``, and reaches into the task
side only for ``marathon-tf bootstrap`` and the shared pre-warmed interpreters it hands the local
cluster (:mod:`marathon_tf.task.warmpool`).
"""
