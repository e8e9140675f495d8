"""A placed task watches its job's admission deadline while it waits for its peers (issue 20).

Every task of a job that Marathon placed runs :class:`AdmissionWatch` while its rendezvous waits
(from the bootstrap's start until every peer is found; the training program starts only after
that, so no TF program starts a step before every peer is placed). It looks at Marathon once when
it starts (the job's attempt: its apps' latest ``versionInfo.lastConfigChangeAt``) and once more
when the deadline (``admission.timeout`` later) has passed: if a task of the TF cluster still
waits to be placed for the first time in this attempt
(:func:`marathon_tf.marathon.waiting.starting_members`), it releases the job
(:func:`marathon_tf.marathon.record.release_job`): the record ``NotPlaced`` with, per role, how many
were placed and why the rest wait (Marathon's queue: :mod:`marathon_tf.marathon.waiting`), and
every app at 0 instances in one request. Marathon then stops every placed task, this one too,
with its grace period.

Why the placed tasks drive it: the task that decides the job's end may be among those not placed,
and any placed task can see Marathon's queue; none of them needs the user's machine (``deploy
--detach``, a laptop closed). A task whose own app failed in this configuration is a relaunch
and does not drive it (the job may have run before); neither does one after its rendezvous. The
first writer wins: the record is never overwritten. Load on Marathon: two group GETs per task and
attempt, and the queue once, spread over :data:`SPREAD_PER_TASK` × the job's size after the deadline.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

from marathon_tf.contract import labels as L
from marathon_tf.contract import naming
from marathon_tf.contract import timeline as T
from marathon_tf.contract.errors import MarathonError
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.marathon.client import Client
from marathon_tf.marathon.model import App, apps_by_id
from marathon_tf.marathon.queue import entries_by_app, fetch
from marathon_tf.marathon.record import release_job
from marathon_tf.marathon.waiting import attempt_started, failed_in_this_config, role_waits, starting_members, summary
from marathon_tf.task.timeline import TaskEvents

__all__ = ["AdmissionWatch", "watch_admission", "SETTLE", "SPREAD_PER_TASK", "RETRY"]

#: A task placed at (or after) the deadline gives the rest of its placement round this long (seconds).
SETTLE = 5.0
#: The looks after the deadline are spread over this many seconds per task of the job (at least 1 s).
SPREAD_PER_TASK = 0.02
#: Seconds between tries while Marathon cannot be read.
RETRY = 10.0
_EMBEDS = ("group.groups", "group.apps", "group.apps.tasks", "group.apps.lastTaskFailure")


class AdmissionWatch:
    """The admission deadline as one placed task sees it (see the module)."""

    def __init__(self, ctx: TaskContext, client: Client, *, events: TaskEvents | None = None,
                 log: Callable[[str], None] = lambda m: None, clock: Callable[[], float] = time.time,
                 rng: random.Random | None = None):
        self.ctx, self.client, self.events, self.log, self.clock = ctx, client, events, log, clock
        self.rng = rng or random.Random()
        self.timeout, retries, self.backoff = ctx.admission
        self.attempts = int(retries) + 1
        self.began = clock()
        self.released: str | None = None  # the reason, once this task released the job
        self._halt = threading.Event()
        size = sum(int(n) for n in ctx.cluster.values())
        self.spread = max(1.0, SPREAD_PER_TASK * size)

    @property
    def app_id(self) -> str:
        return naming.app_id(self.ctx.job, self.ctx.role, self.ctx.index)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name="admission-watch", daemon=True)
        thread.start()
        return thread

    def done(self) -> None:
        """The rendezvous is over (every peer found, or the task stops): stop watching."""
        self._halt.set()

    def _apps(self) -> dict[str, App]:
        group = self.client.get_group(naming.group_id(self.ctx.job), embed=_EMBEDS)
        return apps_by_id(group)

    def _run(self) -> None:
        wake: float | None = None
        while not self._halt.is_set():
            try:
                apps = self._apps()
            except MarathonError as e:
                self.log(f"admission: Marathon: {e.message}")
                self._halt.wait(RETRY)
                continue
            if any(a.labels.get(L.STATE) for a in apps.values()):
                return  # the job has its record
            started = attempt_started(apps.values())
            if started is None:
                self._halt.wait(RETRY)
                continue
            due = max(started + self.timeout, self.began + SETTLE)
            if wake is None or wake < due:  # the first look, or a new attempt since
                wake = due + self.rng.uniform(0.0, self.spread)
            if self.clock() < wake:
                self._halt.wait(wake - self.clock())
                continue
            self.verdict(apps)
            return

    def verdict(self, apps: dict) -> str | None:
        """At the deadline: release the job when a task of its cluster still waits (and this task is
        not a relaunch); the reason, or None."""
        waiting = starting_members(apps.values())
        own = apps.get(self.app_id) or {}
        if not waiting or failed_in_this_config(own) or self._halt.is_set():
            return None
        return self.release(apps)

    def placement_problem(self) -> str | None:
        """For a startup deadline that passed: the reason when peers wait to be placed (the job is then
        released as NotPlaced, not failed), else None."""
        try:
            apps = self._apps()
        except MarathonError:
            return None
        return self.release(apps) if starting_members(apps.values()) else None

    def release(self, apps: dict) -> str | None:
        """Write the record ``NotPlaced`` (why, per role) and scale every app to 0; the reason."""
        try:
            queue = entries_by_app(fetch(self.client))
        except MarathonError:
            queue = {}
        reason = summary(role_waits(apps.values(), queue, now=self.clock()))
        extra = None
        if self.events is not None:
            self.events.record(T.NOT_PLACED, f"NotPlaced: {reason}", task="job")
            extra = {self.app_id: {L.EVENTS: T.compact(self.events.shared() or self.events.mine())}}
        try:
            wrote = release_job(self.client, self.ctx.job, reason, attempts=self.attempts, backoff=self.backoff,
                                now=self.clock, rng=self.rng, extra=extra)
        except MarathonError as e:
            self.log(f"admission: could not release the job: {e.message}")
            return None
        if wrote:
            self.released = reason
            self.log(f"admission deadline ({self.timeout:g}s) passed with tasks not placed; job {self.ctx.job} "
                     f"released (NotPlaced): {reason}")
        return reason


def watch_admission(ctx: TaskContext, control, has_peers: bool, events: TaskEvents | None, *,
                    log: Callable[[str], None] = lambda m: None,
                    rng: random.Random | None = None) -> AdmissionWatch | None:
    """A started watch for a task that waits for peers and can talk to Marathon (``control``: the
    bootstrap's :class:`~marathon_tf.task.jobcontrol.JobControl`), else None."""
    if control is None or not has_peers:
        return None
    watch = AdmissionWatch(ctx, control.client, events=events, log=log, rng=rng)
    watch.start()
    return watch
