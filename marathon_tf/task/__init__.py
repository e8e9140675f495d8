"""The task side: what runs inside every Marathon task, with no CLI around it.

Marathon starts ``marathon-tf bootstrap -- <the training command>`` (also
``python -m marathon_tf.bootstrap``) in each task's sandbox; :mod:`.bootstrap` then finds every
peer, writes the cluster spec and runs, supervises and restarts the training program, and the job's
deciding task ends the whole job.

===================  ==========================================================================
``bootstrap``        the task's main loop: discovery → cluster spec → program → lifecycle
``discovery``        the peers' host:port from Mesos-DNS (SRV / HTTP API) or Marathon's tasks API
``rendezvous/``      the leader rendezvous: one task reads the peers for the job, the others ask it
``lifecycle``        the job's end decided in the tasks: decision table, restart budget, hopeless faults
``supervisor``       the training program as a child process (output pump, stop, exit policy)
``prewarm``          pre-warmed trainers, the bootstrap's side (fork server client)
``prewarm_child``    the fork server itself: run by path in the program's own Python (stdlib only)
``warmpool``         fork servers shared by the tasks of one machine (handed to the local runner)
``watchdog``         the progress watchdog: no new step for N s is a failed program
``status_server``    the task's HTTP endpoint: ``/health``, ``/status``, the rendezvous routes
``checkpoints``      the logdir's newest checkpoint and TensorBoard step, without TensorFlow
===================  ==========================================================================

It builds on :mod:`marathon_tf.contract` and :mod:`marathon_tf.marathon`, never on the user's
side (:mod:`marathon_tf.user`): a task has no CLI, no job file and no terminal.
"""
