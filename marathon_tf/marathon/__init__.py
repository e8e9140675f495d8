"""Talking to Marathon: used on the user's machine (deploy, scale, status, …) and inside tasks
(the deciding task records the job's end; the rendezvous leader follows status updates).

==========  ============================================================================
``client``  the REST client (requests + tenacity): retries, failover, one-line errors
``events``  the event stream (``/v2/events``, server-sent events) in a daemon thread
``record``  the job's record in Marathon's labels: written when the job ends, by the deciding
            task or by whoever follows a job that can never start
==========  ============================================================================

It builds on :mod:`marathon_tf.contract` only.
"""
