"""The user's side of a save round: ``marathon-tf checkpoint``, and the checkpoint ``scale`` and ``delete --save``
have the job save before they stop its tasks.

A save round runs on the job's deciding task (:mod:`marathon_tf.task.saving`): :func:`deciding_task` finds it
(its status port, in Marathon's group of the job) and :meth:`DecidingTask.save` asks it (``POST /save`` through
the task API's one client, with the job's key), waiting within its timeout for a program still starting. With
``hold`` the job's training stays held at that checkpoint until the stop it was saved for comes; a stop that does
not come (Marathon refused the change) is said at once (:meth:`DecidingTask.release`), so the programs go on
instead of waiting out the hold's limit. Returns plain data; never prints (the CLI does).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from marathon_tf.contract import labels as L
from marathon_tf.contract import naming, taskauth
from marathon_tf.contract.errors import MarathonNotFound, SaveFailed, UsageError
from marathon_tf.contract.taskapi import HoldRequest, SaveRequest, SaveResult, TaskClient
from marathon_tf.marathon import transport
from marathon_tf.marathon.client import Client
from marathon_tf.marathon.jobstate import job_state, stored_spec
from marathon_tf.marathon.model import job_apps
from marathon_tf.marathon.record import GROUP_EMBEDS
from marathon_tf.marathon.tasks import newest_running, task_url

__all__ = ["DecidingTask", "deciding_task", "save_round", "SAVE_TIMEOUT", "SCALE_SAVE_TIMEOUT", "STARTING_POLL"]

#: Seconds a save round asked from here may take (the program's next step boundary, its save, the look).
SAVE_TIMEOUT = 120.0
#: ... before a scale, which goes on without it.
SCALE_SAVE_TIMEOUT = 30.0
#: How often a save request is asked again while the program is starting, seconds.
STARTING_POLL = 1.0


def save_round(client: Client, job: str, *, reason: str = "marathon-tf checkpoint",
               timeout: float = SAVE_TIMEOUT, sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """Have the job save a checkpoint now, without stopping it: ``POST /save`` to its deciding task
    (:func:`marathon_tf.contract.naming.deciding_task`), which asks its program through the save hook
    and confirms the checkpoint in the logdir. ``{"task", "step", "path", "seconds"}``;
    :class:`SaveFailed` with the reason when it cannot (no hook, no program running, not in time)."""
    return deciding_task(client, job).save(job, reason=reason, timeout=timeout, sleep=sleep)


@dataclass(frozen=True)
class DecidingTask:
    """The job's deciding task, where its save rounds run: its name, its status port's base URL, the job's key."""

    task: str
    url: str
    key: str | None

    @contextmanager
    def _client(self) -> Iterator[TaskClient]:
        """The task API's client (the tasks' own) with the job's key, on a session bounded in size (closed after)."""
        with transport.session(max_bytes=1 << 20) as session:
            yield TaskClient(session, headers=taskauth.headers(self.key))

    def save(self, job: str, *, reason: str, timeout: float, hold: bool = False,
             sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
        """A save round (:func:`save_round`); ``hold``: the job's training stays held at the checkpoint until a
        stop comes (at most the hold's limit; ``held`` in the answer says it is)."""
        with self._client() as client:
            deadline = time.monotonic() + timeout
            while True:  # a program still starting (importing TensorFlow) is waited for, within the timeout
                left = max(0.5, deadline - time.monotonic())
                reply = client.save(self.url, SaveRequest(job, reason, hold=hold, timeout=round(left, 1)),
                                    timeout=left + 10)
                code, body = reply.code, reply.body
                if code is None:
                    raise SaveFailed(f"job {job}: its deciding task {self.task} did not answer the save request "
                                     f"({transport.short(reply.error) if reply.error is not None else 'no answer'})")
                answer = SaveResult.from_dict(body)
                if code == 200 and answer.ok:
                    return {"task": self.task, "step": answer.step, "path": answer.path, "seconds": answer.seconds,
                            **({"held": True} if hold and answer.held else {})}
                starting = code == 409 and answer.starting is True
                if not starting or time.monotonic() + STARTING_POLL >= deadline:
                    break
                sleep(STARTING_POLL)
        if starting:
            raise SaveFailed(f"job {job} could not save a checkpoint within {timeout:g} s: {answer.message}",
                             hint=f"its program is still starting; ask again once it trains (marathon-tf status "
                                  f"{job}), or give it longer: --timeout")
        message = body.get("message") if isinstance(body, dict) else None
        raise SaveFailed(f"job {job} could not save a checkpoint: {message or f'HTTP {code}'}",
                         hint="the save hook a program implements: docs/restarts.md" if "save hook" in str(message)
                         else None)

    def release(self, job: str, why: str) -> None:
        """The stop a held round was for did not come: the job's training goes on now, not at its hold's end (a
        deciding task that does not answer lets go by itself then)."""
        with self._client() as client:
            client.hold({self.task: self.url}, HoldRequest(job, why, release=True), timeout=10)


def deciding_task(client: Client, job: str) -> DecidingTask:
    """Where the job's save rounds run (its deciding task, running); :class:`SaveFailed` when no program runs
    that could save (the job ended, waits to be placed, or its deciding task is not running now)."""
    try:
        group = client.get_group(naming.group_id(job), embed=GROUP_EMBEDS)
    except MarathonNotFound:
        raise UsageError(f"job {job!r} does not exist on {client.url}",
                         hint="see the jobs with: marathon-tf list") from None
    apps = job_apps(group)
    state = job_state(apps.values())
    if state in (L.JobState.SUCCEEDED, L.JobState.FAILED, L.JobState.NOT_PLACED, L.JobState.QUEUED,
                 L.JobState.STOPPED):
        raise SaveFailed(f"job {job} is {state}: no program runs that could save")
    decider = naming.deciding_task(str(stored_spec(apps.values()).get("completion") or ""))
    app = apps.get(decider)
    task = newest_running(app)
    url = task_url(app, task, "status", "/save") if app is not None and task is not None else None
    if url is None:
        raise SaveFailed(f"job {job}: its deciding task {decider} is not running, so nothing can be saved now",
                         hint=f"see why with: marathon-tf status {job}")
    # the control routes need the job's key
    return DecidingTask(decider, url[:-len("/save")], taskauth.owners_job_key(naming.group_id(job), create=False))
