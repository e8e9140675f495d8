"""The job's restart ledger (task/ledger.py) and its keeper (task/keeper.py): failures counted for the
whole job across relaunches, preemptions and infrastructure deaths kept out of the failure budget,
stops marathon-tf asked for not counted (issue 21; issue 24's "infrastructure deaths").
Pure bookkeeping: no network, an injected clock.

Marathon keeps an app's ``lastTaskFailure`` (what ``Keeper.observe_group`` reads) for TASK_FAILED, ERROR, LOST,
DROPPED, GONE, GONE_BY_OPERATOR, UNKNOWN and a health check's kill, not for an ordinary TASK_KILLED
(mesosphere/marathon ``src/main/scala/mesosphere/marathon/state/TaskFailure.scala`` ``isFailureState``, 1.4 to
1.11)."""

from __future__ import annotations

import time

import pytest
from polling import wait_for

from marathon_tf.contract import labels as L
from marathon_tf.contract.errors import MarathonNotFound
from marathon_tf.task.budget import RestartBudget
from marathon_tf.task.jobpolicy import JobPolicy
from marathon_tf.task.keeper import Keeper
from marathon_tf.task.ledger import (
    ATTRIBUTION,
    FAILURE,
    INFRASTRUCTURE,
    PREEMPTION,
    Entry,
    Ledger,
    classify_status,
    read_file,
)
from marathon_tf.task.policy import Action, decide


class Clock:
    def __init__(self, now=1_000_000.0):
        self.now = now

    def __call__(self):
        return self.now


def entry(n, task="worker-1", kind=FAILURE, t=1_000_000.0, task_id=None, **kw):
    return Entry(id=f"{task_id or task}#{n}", task=task, kind=kind, time=t, code=kw.pop("code", 3),
                 task_id=task_id or f"{task}.mesos-{n}", reason=kw.pop("reason", "exited with 3"), **kw)


def keeper(make_ctx, budget=(3, 600.0), preemptions=(2, 3600.0), client=None, **fields):
    clock = Clock()
    ctx = make_ctx("worker", 0, restart_budget=budget, **fields)
    k = Keeper(ctx, Ledger(budget, preemptions, clock=clock), client=client, clock=clock, sleep=lambda s: None)
    return k, clock


def test_failures_of_every_relaunch_of_every_task_count_against_one_budget(make_ctx):
    """Each relaunch has a fresh bootstrap (a new Mesos task id): the keeper still counts them all."""
    k, clock = keeper(make_ctx)
    answers = []
    for n, task in enumerate(["worker-1", "worker-1", "ps-0", "worker-1"]):
        clock.now += 30  # well apart: no attribution
        answers.append(k.record(entry(n, task, t=clock.now, task_id=f"{task}.relaunch-{n}", final=True)))
    assert [a.failures for a in answers] == [1, 2, 3, 4]
    assert answers[-1].max_failures == 3 and k.ledger.over(entry(3, "worker-1", t=clock.now))
    action = decide(style="tf1", role="worker", code=3, decider=False, completion="all_workers",
                    permanent=False, failures=answers[-1].failures, max_failures=3)
    assert action == Action.FAIL_JOB


def test_failures_leave_the_window(make_ctx):
    k, clock = keeper(make_ctx, budget=(1, 60.0))
    k.record(entry(0, t=clock.now))
    clock.now += 61
    assert k.record(entry(1, t=clock.now)).failures == 1


def test_preemptions_have_their_own_budget_and_never_spend_the_failures(make_ctx):
    k, clock = keeper(make_ctx, budget=(0, 600.0), preemptions=(2, 3600.0))
    for n in range(3):
        clock.now += 30
        answer = k.record(entry(n, kind=PREEMPTION, t=clock.now, code=42))
        assert answer.failures == 0 and answer.counted
    assert answer.preemptions == 3 and answer.max_preemptions == 2
    action = decide(style="tf1", role="worker", code=42, decider=False, completion="all_workers", permanent=False,
                       failures=0, max_failures=0, kind=PREEMPTION, preemptions=3, max_preemptions=2)
    assert action == Action.FAIL_JOB  # a job preempted for ever ends too


def test_an_infrastructure_death_and_the_failures_it_causes_are_not_counted(make_ctx):
    k, clock = keeper(make_ctx, budget=(0, 600.0))
    infra = k.record(entry(0, "worker-1", INFRASTRUCTURE, t=clock.now, code=137,
                           reason="the pre-warmed interpreter that forked it died"))
    assert infra.failures == 0 and k.ledger.summary()["infrastructure"] == 1
    clock.now += ATTRIBUTION / 2  # its peer's program fails because worker-1 went away
    peer = k.record(entry(1, "worker-0", t=clock.now))
    assert not peer.counted and peer.failures == 0
    clock.now += 10 * ATTRIBUTION  # a failure of its own, later: counted
    assert k.record(entry(2, "worker-0", t=clock.now)).failures == 1


def test_a_failure_reported_just_before_the_preemption_that_caused_it_is_uncounted(make_ctx):
    k, clock = keeper(make_ctx)
    assert k.record(entry(0, "chief-0", t=clock.now)).failures == 1
    clock.now += 0.5
    k.record(entry(1, "ps-0", PREEMPTION, t=clock.now, code=None))
    assert k.ledger.summary()["failures"] == 0 and k.ledger.summary()["preemptions"] == 1


def test_marathon_s_word_and_the_bootstrap_s_are_one_entry(make_ctx):
    k, clock = keeper(make_ctx)
    k.observe_events([{"eventType": "status_update_event", "appId": "/ml/mnist/worker-1",
                       "taskId": "t1", "taskStatus": "TASK_FAILED", "message": "Command exited with status 3",
                       "timestamp": "2026-11-25T10:00:00.000Z"}])
    assert k.ledger.summary()["failures"] == 1
    k.record(entry(0, "worker-1", t=clock.now, task_id="t1", final=True))  # the bootstrap's report comes later
    assert k.ledger.summary()["failures"] == 1 and [e.source for e in k.ledger.entries()] == ["bootstrap"]
    k.observe_events([{"eventType": "status_update_event", "appId": "/ml/mnist/worker-1", "taskId": "t1",
                       "taskStatus": "TASK_FAILED", "message": "again"}])
    assert len(k.ledger.entries()) == 1


@pytest.mark.parametrize("state, message, kind", [
    ("TASK_FAILED", "Command exited with status 3", FAILURE),
    ("TASK_FAILED", "Command exited with status 42", PREEMPTION),  # a preemption exit code
    ("TASK_GONE_BY_OPERATOR", "", PREEMPTION),
    ("TASK_UNREACHABLE", "", PREEMPTION),
    ("TASK_KILLED", "", PREEMPTION),
    ("TASK_FINISHED", "", None),
    ("TASK_RUNNING", "", None),
])
def test_classify_status(state, message, kind):
    assert classify_status(state, message, (42, 143)) == kind


class FakeClient:
    def __init__(self, app=None, missing=False):
        self.app, self.missing = app, missing

    def get_app(self, app_id):
        if self.missing:
            raise MarathonNotFound(f"{app_id} does not exist")
        return self.app


@pytest.mark.parametrize("app, missing, counted", [
    ({"versionInfo": {"lastConfigChangeAt": "2026-11-25T10:00:00.000Z"}, "labels": {}}, False, True),
    ({"versionInfo": {"lastConfigChangeAt": "2026-11-25T11:00:00.000Z"}, "labels": {}}, False, False),  # scaled
    ({"versionInfo": {}, "labels": {L.STATE: L.SUCCEEDED}}, False, False),  # the job ended
    (None, True, False),  # the app was removed
])
def test_a_stop_is_a_preemption_unless_marathon_tf_asked_for_it(make_ctx, app, missing, counted):
    k, clock = keeper(make_ctx, client=FakeClient(app, missing))
    stop = entry(0, "worker-1", PREEMPTION, t=clock.now, code=None, reason="stopped by SIGTERM")
    k._classify_stop(stop, "2026-11-25T10:00:00.000Z")  # what stopped() runs in its thread
    assert k.ledger.summary()["preemptions"] == (1 if counted else 0)
    assert k.ledger.summary()["failures"] == 0


@pytest.mark.parametrize("missing, counted", [(True, 0), (False, 1)], ids=["app-removed", "app-current"])
def test_a_failure_marathon_saw_is_counted_only_when_the_tasks_stop_was_not_planned(make_ctx, missing, counted):
    """A ps whose program ends while a ``delete`` stops the job exits for a relaunch its removed app never gets:
    Marathon's TASK_FAILED (no report from its bootstrap, which counted nothing) must not be counted either."""
    app = {"versionInfo": {"lastConfigChangeAt": "2026-11-25T10:00:00.000Z"}, "labels": {}}
    k, clock = keeper(make_ctx, client=FakeClient(app, missing))
    k.observe_events([{"eventType": "status_update_event", "appId": "/ml/mnist/ps-0", "taskId": "p1",
                       "taskStatus": "TASK_FAILED", "message": "Command exited with status 1",
                       "timestamp": "2026-11-25T10:01:00.000Z", "version": "2026-11-25T10:00:00.000Z"}])
    deadline = time.monotonic() + 5
    while counted and not k.ledger.summary()["failures"] and time.monotonic() < deadline:
        time.sleep(0.01)  # (classified in a thread: it asks Marathon)
    time.sleep(0.2)
    assert k.ledger.summary()["failures"] == counted


def test_reports_are_checked(make_ctx):
    k, clock = keeper(make_ctx)
    good = {"job": "ml/mnist", "entry": entry(0, "worker-1", t=clock.now).to_dict()}
    assert k.post({"_client": "10.9.9.9"}, good)[0] == 200  # who may report: the status server's check
    assert k.post({}, {**good, "job": "other"})[0] == 400
    assert k.post({}, {"job": "ml/mnist", "entry": {"kind": "nonsense"}})[0] == 400
    assert k.get({})[1]["summary"]["failures"] == 1


def test_a_relaunched_keeper_reads_the_logdir_file(make_ctx, tmp_path):
    path = str(tmp_path / "failures.jsonl")
    k, clock = keeper(make_ctx)
    k.path = path
    k.record(entry(0, t=clock.now))
    k.record(entry(1, "ps-0", PREEMPTION, t=clock.now + 30))
    assert [e.kind for e in read_file(path)] == [FAILURE, PREEMPTION]
    again = Keeper(k.ctx, Ledger((3, 600.0), (2, 3600.0), clock=clock), path=path, clock=clock)
    assert again.ledger.summary()["failures"] == 1 and again.ledger.summary()["preemptions"] == 1


def policy(make_ctx, keeper=None, **fields):
    ctx = make_ctx("worker", 1, restart_budget=(0, 600.0), **fields)
    return JobPolicy(ctx, RestartBudget(0, 600, task=ctx.task, clock=Clock()), wall=Clock(), keeper=keeper)


def test_a_preemption_exit_code_restarts_without_spending_the_failure_budget(make_ctx):
    outcome = policy(make_ctx).decide(42, kind=PREEMPTION, stderr_tail="saving a checkpoint")
    assert outcome.restart and not outcome.finish and outcome.kind == PREEMPTION and outcome.counted
    assert "was preempted (preemption 1 of at most" in outcome.reason
    assert "exited with 42" in outcome.reason


def test_an_infrastructure_death_restarts_uncounted_and_its_reason_is_the_kill(make_ctx):
    why = "the pre-warmed interpreter that forked it (pid 99) died of SIGKILL: the program got SIGKILL with it"
    outcome = policy(make_ctx).decide(137, kind=INFRASTRUCTURE, why=why, killed_by=9,
                                      stderr_tail="E0000 cuda_executor.cc failed call to cuInit: UNKNOWN ERROR (303)")
    assert outcome.restart and not outcome.counted and outcome.kind == INFRASTRUCTURE
    assert why in outcome.reason and "cuInit" not in outcome.reason
    assert "not counted" in outcome.reason


def test_a_failure_s_reason_leaves_out_the_lines_every_tensorflow_run_prints(make_ctx):
    tail = ("E0000 00:00:1.2 cuda_executor.cc:1228] failed call to cuInit: UNKNOWN ERROR (303)\n"
            "I0000 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use available CPU instructions\n"
            "ValueError: bad batch\n")
    outcome = policy(make_ctx, permanent_exit_codes=(3,)).decide(3, stderr_tail=tail)
    assert outcome.reason.endswith("(permanent): ValueError: bad batch"), outcome.reason


def test_one_group_restart_is_one_failure_whatever_fails_before_the_round_reaches_it(make_ctx):
    """Issue 32: a job that restarted once showed `restarts 3/1` and failed `3 times … more than
    restart.max_failures (1)`: the ps failed (the round's first report, counted), and the chief's program,
    failing because its ps went away before the round reached it, was counted too (its own restart scope
    is in place: its report is not a group one). A program that still ran in an older generation than the
    round another task's end started is a consequence of that round."""
    k, clock = keeper(make_ctx, budget=(1, 600.0), style="parameter_server")
    ps = k.record(entry(0, "ps-0", t=clock.now), generation=0, group=True)
    assert ps.counted and ps.failures == 1 and k.generation == 1 and k.round.cause == "ps-0 failed (exit 3)"
    clock.now += 5 * ATTRIBUTION  # later than any attribution: the chief's RPCs to the lost ps time out
    chief = k.record(entry(1, "chief-0", t=clock.now), generation=0)
    assert not chief.counted and chief.failures == 1 and not k.ledger.over(entry(1, "chief-0"))
    assert k.ledger.summary()["failures"] == 1
    clock.now += 60  # a failure of the chief's own, in the new generation: counted (and past the budget)
    assert k.record(entry(2, "chief-0", t=clock.now), generation=1).failures == 2
    # the round's own root, failing again before it applied its round, is its own failure
    k2, clock2 = keeper(make_ctx, budget=(5, 600.0), style="parameter_server")
    k2.record(entry(0, "ps-0", t=clock2.now), generation=0, group=True)
    clock2.now += 10
    assert k2.record(entry(1, "ps-0", t=clock2.now), generation=0).counted


def test_a_report_reaches_a_keeper_whose_job_has_a_key_only_with_the_key(make_ctx):
    """The keeper's ``POST /ledger`` behind the status server's one check (contract/taskauth.py): a
    bootstrap that installed its job's key reports; one without it is refused and decides alone."""
    from marathon_tf.contract import taskauth
    from marathon_tf.task.keeper import PATH, Reporter
    from marathon_tf.task.status_server import StatusServer, TaskStatus

    k, clock = keeper(make_ctx)
    key = "f" * 64
    server = StatusServer(TaskStatus(job="ml/mnist", task="worker-0", role="worker", index=0), "127.0.0.1", 0,
                          guard=taskauth.Guard(key)).start()
    server.add_post_route(PATH, k.post)
    try:
        address = f"127.0.0.1:{server.port}"
        stranger = Reporter(make_ctx("worker", 1), lambda: address, tries=1)
        assert stranger.report(entry(0, t=clock.now)) is None and k.ledger.summary()["failures"] == 0
        taskauth.install(key)
        try:
            member = Reporter(make_ctx("worker", 1), lambda: address, tries=1)
        finally:
            taskauth.install(None)
        answer = member.report(entry(1, t=clock.now))
        assert answer is not None and answer.failures == 1 and k.ledger.summary()["failures"] == 1
    finally:
        server.close()


def test_a_hang_on_a_frozen_ps_restarts_the_group_for_the_ps_and_counts_one_failure(make_ctx):
    """Issue 44 item 4: a worker hung on a frozen ps (the watchdog's verdict names it: its TF server does not
    answer) was restarted alone, hung on the frozen ps again, and the job Failed. Its failure now starts the
    job's group round for that ps (every member restarts in place, the ps too, with no grace: its variables
    are lost anyway), counted once; the other worker's hang on the same ps is that round's consequence."""
    k, clock = keeper(make_ctx, budget=(2, 600.0), style="tf1")
    worker = policy(make_ctx, keeper=k, style="tf1")
    hung = "no progress for 10 s since step 640; waiting for ps-0 (its TF server does not answer)"
    decision = worker.decide(143, stderr_tail=hung, killed_by=15, generation=0, peer="ps-0", rounds=True)
    assert decision.action is Action.GROUP_RESTART and decision.counted, decision
    assert decision.round is not None and decision.round.generation == 1 and decision.round.grace == 0.0
    assert k.round.cause == "ps-0 does not answer (worker-1 hung waiting for it)", k.round
    assert "the job's group restarts, ps-0 with it (its program does not answer)" in decision.reason, decision.reason
    recorded = k.ledger.entries()[-1]
    assert (recorded.task, recorded.peer, recorded.counted) == ("worker-1", "ps-0", True)
    assert Entry.from_dict(recorded.to_dict()) == recorded  # (the file and the report carry it)
    clock.now += 3
    other = k.record(entry(1, "worker-0", t=clock.now, peer="ps-0"), generation=0, group=True)
    assert not other.counted and k.ledger.summary()["failures"] == 1 and k.generation == 1
    # without rounds (no rendezvous leader) nothing restarts the ps: the task's own scope, as before
    alone = policy(make_ctx, style="tf1")
    assert alone.decide(143, stderr_tail=hung, generation=0, peer="ps-0").action is not Action.GROUP_RESTART
    # a worker named as the frozen peer restarts itself (its own watchdog): no group round for it
    assert policy(make_ctx, style="tf1").decide(
        143, stderr_tail=hung, generation=0, peer="worker-0").action is not Action.GROUP_RESTART
    assert Entry.from_dict({**recorded.to_dict(), "peer": "../etc"}).peer == ""  # a report's peer is a task name


def test_the_keeper_shows_its_counts_publishes_its_rounds_and_records_its_own_entries_through_its_parts(make_ctx):
    """Issue 40 (assembly through constructors): the keeper is given the deciding task's status, events and the
    job's plan's coordinator when it is made, and writes to them itself — nothing is wired into it afterwards. A
    failure shows in the status's ``ledger`` and in the plan's counts; a group member's failure is the plan's
    round; a stop Marathon does not explain is the keeper's own entry, an event of the deciding task."""
    from marathon_tf.contract import timeline as T
    from marathon_tf.contract.plan import RoundKind
    from marathon_tf.task.rendezvous import Coordinator, View
    from marathon_tf.task.status_server import TaskStatus
    from marathon_tf.task.timeline import TaskEvents

    clock = Clock()
    ctx = make_ctx("worker", 0, restart_budget=(3, 600.0), style="multi_worker_mirrored")
    status, events, coordinator = TaskStatus(job=ctx.job, task="worker-0", role="worker", index=0), \
        TaskEvents("worker-0"), Coordinator(View())
    k = Keeper(ctx, Ledger((3, 600.0), (2, 3600.0), clock=clock), clock=clock, sleep=lambda s: None,
               coordinator=coordinator, status=status, events=events)
    k.record(entry(1, t=clock.now), generation=0, group=True)
    assert status.snapshot()["ledger"]["failures"] == 1
    plan = coordinator.plan
    assert plan.counts.failures == 1 and plan.round is not None and plan.round == k.round
    assert (plan.round.kind, plan.round.generation) == (RoundKind.RESTART, 1)
    clock.now += 100
    k.stopped(entry(2, kind=PREEMPTION, t=clock.now, task="worker-2"), None)  # no Marathon: a preemption
    wait_for(lambda: [e for e in events.mine() if e["kind"] == T.PREEMPTED], 5, interval=0.01,
             what="the keeper's own entry as an event")
    assert status.snapshot()["ledger"]["preemptions"] == 1 and coordinator.plan.counts.preemptions == 1
