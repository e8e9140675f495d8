"""The task side: what runs inside every Marathon task, with no CLI around it.

Marathon starts ``marathon-tf bootstrap -- <the training command>`` (also
``python -m marathon_tf.bootstrap``) in each task's sandbox; :mod:`.bootstrap` then finds every
peer, writes the cluster spec and runs, supervises and restarts the training program, and the job's
deciding task ends the whole job. A task's state is a :class:`marathon_tf.contract.phases.Phase`;
what leads from one to the next is an :class:`.policy.Action` (docs/architecture.md, "Task states
and transitions").

===================  ==========================================================================
``bootstrap``        the task's main loop: discovery → cluster spec → program → its end
``invocation``       its command line and the task's own addresses from the environment (pure)
``discovery``        the peers' host:port from Mesos-DNS (SRV / HTTP API) or Marathon's tasks API
``rendezvous/``      finding the peers: the interface (``base``), one task reading for the job
                     (``leader``) and the others asking it (``follower``, ``hints``, ``view``), or
                     each reading for itself (``direct``)
``policy``           what a program's end leads to (pure): Action, Decision, the table, the reasons
``machine``          the task's state machine: phase × event → phase, the one writer of its phase
``reconcile``        the reconcile step (pure): one look each tick (Seen) → the one thing to do (Step)
``sizing``           an elastic job's size (pure): each change (form, grow, shrink, below min) and who restarts
``jobpolicy``        the job-aware exit policy: each end recorded in the job's ledger, then decided
``restarts``         the bootstrap's restart half (Restarter): rounds, in place, backoff, the stop
``saving``           save rounds: the deciding task's program saves now (on request, before every
                     planned stop), the job's training held meanwhile, the checkpoint confirmed
``hooklines``        what the program said of the save hook (ready, each saved line, counted)
``restoring``        when a TF1 worker's program may start: not while a save round holds the job's
                     training, nor while the deciding program restores the job's checkpoint
``resize``           an elastic job's size, decided by its deciding task (Resizer): form, grow after a
                     save, shrink, wait below min; the membership and resize rounds it publishes
``membership``       which tasks train and with which spec: the bootstrap's strategy, the job file's
                     (fixed) or an elastic job's
``elastic``          every task's side of an elastic job: taken in (standby meanwhile), its peers and
                     its spec by TF index from the membership
``budget``           a task's own restart count (RestartBudget) and the one backoff
``ledger``           the job's restart ledger: entries, counts, the keeper's Answer, its file
``keeper``           the deciding task keeps the ledger (Keeper); the others report to it (Reporter)
``jobcontrol``       the job as a whole: wait for the workers, record its end, hopeless tasks
``jobview``          the deciding task's view of the job: tasks per role, its start, stragglers
``admission``        a placed task watches the job's admission deadline and releases it (NotPlaced)
``logdir``           the logdir as a task sees it: its path, whether it is usable, its lock
``supervisor``       the training program as a child process (output pump, stop); stop signals
``prewarm``          pre-warmed trainers, the bootstrap's side (fork server client)
``prewarm_child``    the fork server itself: run by path in the program's own Python (stdlib only)
``warmpool``         fork servers shared by the tasks of one machine (handed to the local runner)
``watchdog``         the progress watchdog: no new step for N s is a failed program
``observer``         what the bootstrap watches besides the exit: steps, stalls, its TF server, events
``tflog``            TensorFlow's lines naming a peer it waits for or lost
``placer``           the job's placement rules across its tasks (UNIQUE …), enforced by its leader
``peers``            the peer a stalled task waits for (TensorFlow's words, else a look at its server)
``timeline``         the task's events, in memory and in the logdir's ``events.jsonl``
``status_server``    the task's HTTP endpoint: ``/health``, ``/status``, the rendezvous routes
``metrics``          ``/metrics``: Prometheus' text format, built on scrape from the status
``checkpoints``      the logdir's newest checkpoint and TensorBoard step, without TensorFlow
``gpucheck``         whether a task given GPUs can see them (one line naming the likely cause)
``stderr``           what the bootstrap writes on stderr, every credential it holds scrubbed
===================  ==========================================================================

It builds on :mod:`marathon_tf.contract` and :mod:`marathon_tf.marathon`, never on the user's
side (:mod:`marathon_tf.user`): a task has no CLI, no job file and no terminal.
"""
