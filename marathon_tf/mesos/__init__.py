"""The Mesos model: resources, attributes, agents, their offers and Marathon's offer matching (pure).

What a Mesos cluster is made of, as Mesos and Marathon 1.8 define it, with no I/O, no threads and
no clock: the local cluster (:mod:`marathon_tf.local`) plays a Mesos master and its agents with it,
and the user's admission check (:mod:`marathon_tf.user.admission`, :mod:`marathon_tf.user.capacity`)
asks it whether a job fits a real master's agents. One model for both, so that the local runner
and production decline a task for the same reasons. It imports nothing of marathon_tf but
``contract`` (``tests/test_layout.py``).

================  =================================================================================
``resources.py``  Mesos resources and attributes: the agents' ``--resources`` / ``--attributes``
                  syntax, values (scalar, ranges, set) by role, range arithmetic, ``ports_resource``,
                  the text constraints compare an attribute by
``views.py``      their JSON: Mesos's (summary, ``*_full``, attributes) and Marathon's offer JSON
                  (``lastUnusedOffers``) written, and a master's JSON read back
``agents.py``     an agent as the offer matcher reads it (``AgentInfo``: hostname, total resources,
                  attributes, GPUs, roles) and what it has free to offer (``free_resources``)
``master.py``     a master's ``/master/slaves`` and ``/master/frameworks`` read: each agent's total and
                  free resources (less what its tasks use and what is offered to others), Marathon's offers
``placement.py``  Marathon 1.8's offer matching: does an offer fit a task (resources of the roles,
                  constraints, GPU scheduling, ports), every reason it does not, the reason funnel
================  =================================================================================
"""
