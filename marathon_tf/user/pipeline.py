"""The deploy use case, one for every way a job is deployed: ``marathon-tf deploy``, the Python API's
:meth:`~marathon_tf.user.api.Marathon.deploy`, and ``deploy --local`` / ``Job.run_local`` on the local
cluster (:mod:`marathon_tf.user.localrun`).

:func:`deploy`, before anything is sent:

1. what this Marathon refuses of the job (what its version cannot run, a file of this machine in
   ``fetch``, a relative volume, GPUs without the feature: :func:`marathon_tf.user.jobs.check_deployable`);
2. the job's group, rendered **once**, for this Marathon's version (:func:`marathon_tf.user.render.render_group`);
3. admission, checked **once**, with that group's apps (:func:`marathon_tf.user.admission.check`);
4. what an earlier run left (:mod:`marathon_tf.user.redeploy`): a job that ended is deployed again
   only with ``resume`` said; one that runs exactly so is left alone (``no change``);

then the PUT (:func:`marathon_tf.user.jobs.put`).

:func:`follow` is the one way a job is followed to its end (``deploy``, ``deploy --local``,
``status --watch``, the API's ``wait``): its deployment first, then the job, in the one wait loop
(:func:`marathon_tf.user.watch.wait_job`), looking at each status for what a follower does: release
a job past its admission deadline and re-submit a ``Queued`` one (:func:`marathon_tf.user.release.drive`),
fail a job a task of which can never start (:func:`marathon_tf.marathon.record.fail_if_hopeless`).

Returns data; never prints.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from marathon_tf.contract import naming
from marathon_tf.contract.errors import MarathonError
from marathon_tf.marathon.events import EventStream
from marathon_tf.marathon.record import fail_if_hopeless
from marathon_tf.user import admission, gang, jobs, redeploy, release, watch
from marathon_tf.user.render import render_group
from marathon_tf.user.results import Deployment, JobStatus
from marathon_tf.user.spec import JobSpec

__all__ = ["deploy", "follow", "HOPELESS_EVERY"]

#: How often a follower looks for a task that can never start (a group GET each time), seconds.
HOPELESS_EVERY = 10.0


def deploy(client: Any, spec: JobSpec, *, resume: bool | None = None, force: bool = False,
           dry_run: bool = False, templates_dir: str | None = None, wait_for_resources: bool = True,
           earlier_run: bool = True, mesos: str | None = None) -> Deployment:
    """Deploy (PUT) the job's group (see the module): creates it, or changes only what changed.
    ``spec``: the job as it is deployed (its admission timeout already set,
    :func:`marathon_tf.user.admission.effective`). Raises :class:`UsageError` for what is refused
    (a task that fits on no agent; a job that ended, without ``resume``), :class:`NotPlaced` for a
    job that does not fit now when not ``wait_for_resources``. ``earlier_run`` False: a cluster just
    started, where no earlier run can be (``deploy --local``, whose own lock is already in its logdir).
    ``mesos``: the Mesos master the user named (``--mesos`` / ``MESOS_URL``; None: the one Marathon names)."""
    jobs.check_deployable(client, spec)  # refused before anything is removed (--fresh) or sent
    caps = jobs.marathon_capabilities(client)  # what this Marathon's version takes (read once, by the check)
    group = render_group(spec, templates_dir=templates_dir, marathon_version=caps)
    verdict = admission.check(client, spec, wait=wait_for_resources, templates_dir=templates_dir, group=group,
                              mesos=mesos)
    previous, current = redeploy.previous_run(client, spec) if earlier_run else (None, None)
    if previous is not None and resume is None:
        raise previous.question(spec.name)
    released = current is not None and gang.released(current)  # NotPlaced: it starts again, attempt 1
    running = current is not None and previous is None and not released and redeploy.ended(current) is None
    deployed = (redeploy.deployed_group(current, spec, templates_dir, marathon_version=caps)
                if running and current is not None else None)
    if running and not dry_run and deployed == group:
        return Deployment(spec.name, naming.group_id(spec.name), changed=False, marathon_url=client.url)
    # a running job changed: what starts, stops and restarts (said before anything is sent)
    tasks = jobs.plan_scale(deployed, group).to_dict() if deployed is not None else None
    note = None
    if previous is not None:
        ended = "left its volumes" if previous.state == "deleted" else f"had ended ({previous.state})"
        where = f" in {previous.checkpoints}" if previous.checkpoints else ""
        note = f"job {spec.name} {ended}: it resumes from its checkpoints{where}"
        if resume is False:
            removed = None if dry_run else redeploy.start_fresh(client, spec.name, previous)
            note = (f"job {spec.name} {ended}: it starts from scratch"
                    + (f" (removed {removed})" if removed else ""))
    if (previous is not None and previous.group is not None or released) and not dry_run:
        redeploy.await_stopped(client, spec.name)  # its end's deployment would lock the apps (409)
    result = jobs.put(client, spec.name, group, force=force, dry_run=dry_run, current=current)
    return Deployment(job=result.job, group_id=result.group_id, deployment_id=result.deployment_id,
                      version=result.version, plan=result.plan, marathon_url=client.url, note=note,
                      resumed=None if previous is None else bool(resume), admission=verdict.shortfall,
                      admission_note=verdict.note, tasks=tasks)


def follow(client: Any, job: str, *, deployment_id: str | None = None, timeout: float | None = None,
           on_progress: Callable[[JobStatus], None] = lambda s: None, decide: bool = True, admit: bool = True,
           poll: float = 2.0, events: bool = True, hopeless_every: float = HOPELESS_EVERY,
           mesos: str | None = None) -> JobStatus:
    """Follow the deployment (when given), then the job, until its record says Succeeded, Failed or
    NotPlaced; the final status. Raises :class:`~marathon_tf.contract.errors.Timeout` after
    ``timeout`` seconds. ``decide``: a task that can never start fails the job (looked for every
    ``hopeless_every`` s); ``admit``: past the admission deadline the job is released, and submitted
    again when its next attempt is due. ``events``: woken early by Marathon's event stream (else
    every ``poll`` s). ``mesos``: the master the user named, for the job's waits."""
    start = time.monotonic()
    next_look = [start]

    def look(status: JobStatus) -> None:
        on_progress(status)
        if admit:
            try:
                release.drive(client, job, status.to_dict(), mesos=mesos)
            except MarathonError:
                pass
        # one extra group GET per hopeless_every s, not per poll (as the deciding task's watch does)
        if decide and status.state not in watch.FINAL_STATES and time.monotonic() >= next_look[0]:
            next_look[0] = time.monotonic() + hopeless_every
            try:
                fail_if_hopeless(client, job, final_step=status.step)
            except MarathonError:
                pass

    with (EventStream(client) if events else contextlib.nullcontext()) as stream:
        if deployment_id is not None:
            watch.wait_deployment(client, deployment_id, job, timeout=timeout, on_progress=look, stream=stream,
                                  poll=poll, mesos=mesos)
        left = None if timeout is None else max(0.0, timeout - (time.monotonic() - start))
        return watch.wait_job(client, job, timeout=left, on_progress=look, stream=stream, poll=poll, mesos=mesos)
