"""The Marathon labels marathon-tf puts on every app (they show in the Marathon UI).

Identity (set at render time): ``marathon-tf/job``, ``/role``, ``/index``, ``/version``;
worker-0 also carries ``marathon-tf/spec``, the normalized job spec, so ``scale``
can re-render the job without the original file.

``marathon-tf/digest`` (added when deploy or scale sends the group, :mod:`marathon_tf.marathon.marker`):
a hash of the app's definition as sent, which changes only when the definition does; it tells a
deploy whose answer was lost whether Marathon applied it. The record drops it.

The job's record, written when it ends (by the bootstrap that decides, see
:mod:`marathon_tf.task.jobcontrol`), on every app of the job, whose instances are set to 0
so that Marathon relaunches nothing: ``marathon-tf/state`` (``Succeeded`` | ``Failed``),
``/finished-at`` (ISO time), ``/final-step``, ``/reason``; the deciding task's app also gets
``marathon-tf/events``, the job's events (:func:`marathon_tf.contract.timeline.compact`, at most 32 kB),
for ``status --timeline`` and ``events`` once the tasks are gone; ``marathon-tf/restarts`` holds
the job's restart counts (JSON: failures, max_failures, window_seconds, preemptions, max_preemptions,
infrastructure: :meth:`marathon_tf.task.ledger.Ledger.summary`).
for ``status --timeline`` and ``events`` once the tasks are gone.

A job that was not placed by its admission deadline (issue 20: :mod:`marathon_tf.user.gang`,
:mod:`marathon_tf.task.admission`) gets the same record with ``marathon-tf/state`` ``NotPlaced``
and, per role, why its tasks waited in ``/reason``; ``/attempt`` and ``/attempts`` say which
attempt it was of how many (``admission.retries`` + 1), and ``/next-attempt-at`` (ISO time)
when it is submitted again (status shows it ``Queued``). A re-submission removes the record,
keeps the attempt labels and moves the events to ``/earlier-events``. Labels are written only on
apps whose tasks are stopped (instances 0): a label change is a new app version, which Marathon
rolls out by restarting the task.
"""

import enum

PREFIX = "marathon-tf/"
JOB = PREFIX + "job"
ROLE = PREFIX + "role"
INDEX = PREFIX + "index"
VERSION = PREFIX + "version"
SPEC = PREFIX + "spec"
DIGEST = PREFIX + "digest"
STATE = PREFIX + "state"
FINISHED_AT = PREFIX + "finished-at"
FINAL_STEP = PREFIX + "final-step"
REASON = PREFIX + "reason"
EVENTS = PREFIX + "events"
RESTARTS = PREFIX + "restarts"
ATTEMPT = PREFIX + "attempt"
ATTEMPTS = PREFIX + "attempts"
NEXT_ATTEMPT_AT = PREFIX + "next-attempt-at"
EARLIER_EVENTS = PREFIX + "earlier-events"



class JobState(str, enum.Enum):
    """A job's state, as ``status``, ``list``, ``watch`` and the Python API say it (one vocabulary).

    The first three are the record's (``marathon-tf/state``): the job's tasks are stopped and
    Marathon relaunches nothing. The others are read from Marathon while there is no record:
    ``Queued`` (NotPlaced, with a next attempt due), ``Stopped`` (every app at 0 instances, no
    record: stopped by hand), ``Running`` (every task running), ``Deploying`` (a deployment is in
    flight), ``Starting`` (tasks not all running, nothing deploying). A ``str``: it compares equal
    to its value and shows as it in JSON.
    """

    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    NOT_PLACED = "NotPlaced"
    QUEUED = "Queued"
    STOPPED = "Stopped"
    RUNNING = "Running"
    DEPLOYING = "Deploying"
    STARTING = "Starting"

    def __str__(self) -> str:
        return self.value

    @property
    def ended(self) -> bool:
        """Whether the job is over for good (a record, or stopped by hand; Queued comes back)."""
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.NOT_PLACED, JobState.STOPPED)


SUCCEEDED = JobState.SUCCEEDED.value
FAILED = JobState.FAILED.value
NOT_PLACED = JobState.NOT_PLACED.value
#: Not a label value: the state ``status`` shows for a NotPlaced job with a next attempt.
QUEUED = JobState.QUEUED.value
#: The record's states: the job's tasks are stopped and Marathon relaunches nothing.
RECORDED = (SUCCEEDED, FAILED, NOT_PLACED)
