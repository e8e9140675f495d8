"""The contract: what the three sides agree on, in one place.

A rendered Marathon app (the user's side) and the bootstrap in its task (the task side) meet only
through what is here; the local cluster knows marathon-tf through nothing else, as a real Mesos
agent knows nothing of it. Change anything here and both sides change with it.

=================  ===========================================================================
``naming``         (job, role, index) → Marathon app ids, task names, Mesos-DNS names; job-name rules
``taskenv``        the ``MTF_*`` variables a rendered app gives its task (:class:`TaskContext`)
``phases``         a task's phase (``/status``, ``/metrics``) and the milestones of a job's start
``labels``         the Marathon labels on every app, and the job's record kept in them
``errors``         the error tree, each with its exit code and hint
``cluster_spec``   the peers' endpoints → ``TF_CONFIG`` and the classic flags a program reads
``joblock``        one run per logdir: the lock both the local runner and the deciding task take
``progress``       the step rate a task reports and how people read it (``step S/T, R/s, ETA``)
``shellexec``      how a task's ``cmd`` runs: ``sh -c``, exec'ing a simple command
``spread``         placement rules across a job's tasks (``UNIQUE`` …) as per-app LIKE/UNLIKE constraints
``savehook``       how a training program is asked to save a checkpoint now, and how it answers
``goodput``        a job's wall time split by cause (placement, start, training, recovery, …)
``timeline``       a job's events, and the timeline of its start and of every recovery built from them
``keras3``         Keras 3 and the multi-worker strategies: what both sides say about it, in the same words
``taskauth``       who may steer a job: the job's key, the one check of a status port's control routes
``plan``           the job's plan: typed rounds (kind, deciding reason), planned-stop reasons, one wire form
``taskapi``        a task's HTTP API: its routes, the control routes' typed requests, one client, one fan-out
``restartscope``   which members restart when a program fails (a ps, a mirrored group: all), the exit codes
                   that mean the program cannot be executed
=================  ===========================================================================

Nothing here imports any other part of marathon_tf.
"""
