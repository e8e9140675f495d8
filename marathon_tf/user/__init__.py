"""The user's side: what runs on the user's machine (or a notebook, a CI job, a scheduler).

The way of a command: ``cli`` (arguments, printing) → ``api`` (the Python API) → the use cases
(``pipeline``: deploy and follow; ``status``: a job's status; ``jobs``: find, scale, delete;
``history``; ``logs``) → :mod:`marathon_tf.marathon` (the REST client, and every reading of
Marathon's JSON). Errors are raised, never printed, and carry their exit code
(:mod:`marathon_tf.contract.errors`); ``cli`` handles them in one place.

==================  ===========================================================================
``cli``             the ``marathon-tf`` command (click): parses, calls ``api``, prints through ``output``
``output``          how results, progress and errors are shown (text, ``-o json``): the only printing
``api``             the Python API (``Job``, ``Marathon``, ``LocalCluster``, ``JobHandle``)
``results``         what the API returns: typed views of ``-o json`` (``JobStatus`` …)
``pipeline``        the deploy use case: render once, check admission once, PUT; ``follow`` a job to its end
``watch``           the one loop that waits for a job's end, and the wait for one deployment
``status``          a job's status: ``fetch`` (all the I/O of one look) and ``build`` (pure)
``observe``         pure annotator of a status: waits named by the peer, stragglers, restarts
``gang``            pure annotator of a status: a starting job's placement and admission deadline
``release``         the admission deadline and the retries driven from here: release, re-submit
``jobs``            what Marathon refuses of a job, the PUT, finding jobs, scale, delete
``redeploy``        deploying a job again: ``no change``, or (it ended) ``--resume`` / ``--fresh``
``admission``       before anything is sent: a task that fits on no agent, a job larger than what is free
``capacity``        the cluster's agents, total and free, from the Mesos master
``history``         a job's events and timeline (record, the tasks' ``/events``, Marathon)
``logs``            task output through the Mesos agents' files API
``announce``        what ``deploy --local`` and ``local serve`` print once: metrics URLs, TensorBoard
``config``          where Marathon is and with which credentials (options, environment, config file)
``spec/``           untrusted ``job.json`` → an immutable, validated ``JobSpec`` (marshmallow)
``render``          ``JobSpec`` → the Marathon app group (Jinja templates in ``app_templates/``)
``localrun``        ``deploy --local``: the same use case on a local cluster, output streamed
``local_options``   the local cluster's options, shared by ``local serve`` and ``deploy --local``
``localstate``      the local runner's state on this machine: locks, volumes, ended runs
``uibuild``         ``local ui-install``: the Marathon web UI built from its source release
``stopsignals``     SIGTERM / SIGHUP stop a foreground command like Ctrl-C
==================  ===========================================================================

It builds on :mod:`marathon_tf.contract` and :mod:`marathon_tf.marathon`, asks the Mesos model
(:mod:`marathon_tf.mesos`) whether a job fits the cluster (``capacity``, ``admission``), starts the
local cluster (:mod:`marathon_tf.local`) for ``--local`` and ``local serve``, and reaches into the task
side only for ``marathon-tf bootstrap`` and the shared pre-warmed interpreters it hands the local
cluster (:mod:`marathon_tf.task.warmpool`). No module here imports another that imports it back
(``tests/test_layout.py``).
"""
