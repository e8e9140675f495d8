"""Talking to Marathon: used on the user's machine (deploy, scale, status, …) and inside tasks
(the deciding task records the job's end; the rendezvous leader follows status updates). Every
reading of Marathon's JSON is here: the other sides get values, not Marathon's fields.

=============  ==============================================================================
``client``     the REST client (requests + tenacity): retries, failover, one-line errors
``transport``  bounded HTTP for every session: a deadline per exchange, a size cap, redirects
``shapes``     the shape of every Marathon answer we read, said in one line when it is wrong
``marker``     our own write whose answer was lost: the digest label, the looks that adopt it
``versions``   what differs between Marathon 1.4 and 1.11, each answer citing Marathon's source
``events``     the event stream (``/v2/events``, server-sent events) in a daemon thread
``model``      Marathon's JSON as typed values (``App``, ``Task``, ``Deployment``, ``Info``, ``Event``), parsed once
``tasks``      an app's tasks: the newest, ports by name, addresses, health, timestamps
``queue``      ``/v2/queue``: why a task is not placed, its launch delay, Marathon's reason names
``waiting``    why a job's tasks wait, per role and in numbers; whether the job is still starting
``jobstate``   a job as its apps say it: its labels, deployed job file, state (one ``JobState``)
``record``     the job's record in Marathon's labels: written when the job ends, by the deciding
               task or by whoever follows a job that can never start or was not placed
=============  ==============================================================================

It builds on :mod:`marathon_tf.contract` only.
"""
