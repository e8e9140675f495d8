"""The user's side: what runs on the user's machine (or a notebook, a CI job, a scheduler).

The way of a command: ``cli`` (arguments, printing) → ``api`` (the Python API) → the use cases
(``pipeline``: deploy and follow; ``status``: a job's status; ``jobs``: find, scale, delete;
``history``; ``logs``) → :mod:`marathon_tf.marathon` (the REST client, and every reading of
Marathon's JSON). Errors are raised, never printed, and carry their exit code
(:mod:`marathon_tf.contract.errors`); ``cli`` handles them in one place.

==================  ====================================================================
``cli/``            the ``marathon-tf`` command: arguments, printing, exit codes (the only package that prints
                    with ``output``), one module per group of verbs: the job file, changing a job, looking
                    at jobs, ``marathon-tf local``
``output``          everything shown to a person: tables, progress and errors on stderr, ``-o json``
``api``             the Python API (``Job``, ``Marathon``, ``LocalCluster``, ``JobHandle``) every verb goes through
``results``         what the API returns: typed, immutable views of the same data as ``-o json``
``config``          where Marathon is and how to log in: flags, then environment, then a config file
``spec/``           untrusted ``job.json`` → an immutable, validated ``JobSpec`` (marshmallow)
``render``          ``JobSpec`` → a Marathon app group, through the Jinja templates in ``app_templates/``
``versioned``       a job's constraints for one Marathon version: refused, or written as that version reads them
``pipeline``        the deploy use case, one for every way a job is deployed
``admission``       before anything is sent: does the job fit the cluster (the Mesos model's answer)
``capacity``        the cluster's capacity as the Mesos master tells it: agents' total and free resources
``gang``            the gang deadline and the retries: what ``status`` says of a starting job
``release``         the admission deadline and the retries, driven from the user's side
``redeploy``        deploying a job again: what is left of its earlier run, what deploying now would do
``jobs``            the verbs on top of the Marathon client: scale, delete, find, what a Marathon refuses
``saveround``       ``checkpoint``, and the checkpoint ``scale`` and ``delete --save`` have saved first (held)
``apart``           Marathon 1.4 – 1.7: what may wait (standbys, held tasks) deployed apart from what must start
``status``          a job's status (``status``, what ``watch`` and ``deploy`` follow, ``JobStatus``)
``observe``         what ``status`` adds from the tasks' own view: waits named by the peer, stragglers
``watch``           following a deployment and a job: Marathon's event stream, polling as the fallback
``history``         a job's events and timeline (``status --timeline``, ``events``)
``logs``            task logs from the Mesos agents' sandbox files API
``localrun``        ``deploy --local``: the same pipeline on one machine
``local_options``   the local cluster's options shared by ``local serve`` and ``deploy --local``
``localstate``      the local runner's state on this machine: runs, their locks, ``local clean``
``inuse``           which live processes use a folder (their working directory or open files): what clean keeps
``announce``        the lines ``deploy --local`` and ``local serve`` print once per job (scrape targets …)
``uibuild``         ``local ui-install``: the Marathon web UI built on this machine
``stopsignals``     SIGTERM and SIGHUP stop a foreground command the way Ctrl-C does
``targets/``        the same job for another orchestrator (``export --to jobset``)
==================  ====================================================================

It builds on :mod:`marathon_tf.contract` and :mod:`marathon_tf.marathon`, asks the Mesos model
(:mod:`marathon_tf.mesos`) whether a job fits the cluster (``capacity``, ``admission``), starts the
local cluster (:mod:`marathon_tf.local`) for ``--local`` and ``local serve``, and reaches into the task
side only for ``marathon-tf bootstrap`` and the shared pre-warmed interpreters it hands the local
cluster (:mod:`marathon_tf.task.warmpool`). No module here imports another that imports it back
(``tests/test_layout.py``).
"""
