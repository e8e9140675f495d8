"""The task's states and what leads there, each with one owner: the phases (contract/phases), the
actions and their decision (task/policy), the keeper's answer (task/ledger), the backoff
(task/budget), the exit code of a signal (contract/shellexec) and the rendezvous interface
(task/rendezvous/base). Pure: no process, no network."""

import inspect
import json
import signal
from dataclasses import replace

import pytest

from marathon_tf.contract import labels as L
from marathon_tf.contract.phases import METRIC_PHASES, Phase, StartPhase
from marathon_tf.contract.plan import Round, RoundCause, RoundKind
from marathon_tf.contract.shellexec import exit_status, signal_exit, signal_name
from marathon_tf.task import rendezvous
from marathon_tf.task.budget import RestartBudget, backoff
from marathon_tf.task.ledger import FAILURE, INFRASTRUCTURE, PREEMPTION, Answer, Entry
from marathon_tf.task.metrics import phase_of
from marathon_tf.task.policy import Action, Decision, ExitPolicy
from marathon_tf.task.status_server import TaskStatus

#: action -> (phase, stays up, healthy, the job's record): what the bootstrap did for each before the
#: decision had a type (supervisor.Outcome's flags), kept as it was
BEFORE = {
    Action.FINISH: ("succeeded", True, True, L.SUCCEEDED),
    Action.AWAIT_WORKERS: ("succeeded", True, True, L.SUCCEEDED),
    Action.STAY: ("succeeded", True, True, None),
    Action.FAIL_JOB: ("failed", True, True, L.FAILED),
    Action.RESTART: ("running", False, True, None),
    Action.GROUP_RESTART: ("running", False, True, None),
    Action.EXIT: ("failed", False, False, None),
}


@pytest.mark.parametrize("action", list(Action))
def test_every_action_leads_to_one_phase_with_its_health_and_record(action):
    decision = Decision(action, 3, "why")
    assert (decision.phase, decision.stay_up, decision.healthy, decision.finish) == BEFORE[action]
    assert decision.restart == (action in (Action.RESTART, Action.GROUP_RESTART))
    assert decision.group == (action is Action.GROUP_RESTART)
    assert decision.await_workers == (action is Action.AWAIT_WORKERS)
    assert isinstance(decision.phase, Phase) and str(action) == action.value


def test_the_phases_on_the_wire_and_in_the_metrics():
    assert [p.value for p in Phase] == ["discovering", "running", "saving", "standby", "resizing", "succeeded",
                                        "failed"]
    assert [Phase.DISCOVERING.metric(), Phase.RUNNING.metric(), Phase.RUNNING.metric(stepped=True),
            Phase.SAVING.metric(), Phase.STANDBY.metric(), Phase.RESIZING.metric(), Phase.SUCCEEDED.metric(),
            Phase.FAILED.metric()] == list(METRIC_PHASES)
    assert phase_of({"phase": "standby"}) == "standby" and phase_of({"phase": "resizing"}) == "resizing"
    assert phase_of({"phase": "running", "first_step_at": 1.0}) == "training"
    assert phase_of({"phase": "saving", "first_step_at": 1.0}) == "saving"
    assert phase_of({"phase": "discovering"}) == "waiting_for_peers"
    assert [p.value for p in StartPhase] == ["submitted", "deployment done", "every task running",
                                             "cluster spec complete", "every TF server up", "first step"]


def test_the_status_keeps_the_phase_as_its_plain_value_and_refuses_others():
    status = TaskStatus(job="j", task="worker-0", role="worker", index=0)
    status.update(phase=Phase.RUNNING)
    assert status.light()["phase"] == "running" and type(status.light()["phase"]) is str
    status.update(phase="succeeded")
    assert status.snapshot()["phase"] == Phase.SUCCEEDED
    with pytest.raises(ValueError, match="unknown phase 'training'"):
        status.update(phase="training")


def test_the_exit_policy_of_a_task_without_a_job():
    policy = ExitPolicy((3,))
    assert policy.decide(0).action is Action.STAY
    assert (policy.decide(3).action, policy.decide(3).reason) == (
        Action.FAIL_JOB, "training program exited with permanent code 3: not retried")
    assert (policy.decide(1).action, policy.decide(1).exit_code) == (Action.EXIT, 1)


def test_the_keepers_answer_on_the_wire_and_back():
    answer = Answer(counted=True, failures=2, max_failures=5, window_seconds=600.0, preemptions=1,
                    max_preemptions=100, kind=FAILURE, keeper="k1", generation=3,
                    round=Round(3, RoundKind.RESTART, RoundCause.FAILURE, "ps-0 failed (exit 3)", delay=2.0, grace=5.0))
    wire = answer.to_dict()
    assert wire == {"keeper": "k1", "counted": True, "kind": "failure", "failures": 2, "max_failures": 5,
                    "window_seconds": 600.0, "preemptions": 1, "max_preemptions": 100, "generation": 3,
                    "ended": False, "round": {"generation": 3, "kind": "restart", "reason": "failure",
                                              "cause": "ps-0 failed (exit 3)", "delay": 2.0, "grace": 5.0}}
    assert Answer.from_dict(json.loads(json.dumps(wire))) == answer
    # a round this task cannot read (another shape): the counts still come through, without it
    assert Answer.from_dict({**wire, "round": {"generation": "3"}}) == replace(answer, round=None)
    assert answer.counts() == {"failures": 2, "max_failures": 5, "window_seconds": 600.0, "preemptions": 1,
                               "max_preemptions": 100}
    assert Answer.from_dict({"failures": 1}) is None and Answer.from_dict(["x"]) is None
    assert Answer.from_dict({**wire, "failures": "many"}) is None


def test_a_task_alone_answers_like_the_keeper():
    budget = RestartBudget(2, 600.0, task="worker-1", clock=lambda: 1000.0)

    def entry(n, kind):
        return Entry(id=f"w#{n}", task="worker-1", kind=kind, time=1000.0 + n, code=1)

    first = budget.take(entry(1, FAILURE), (100, 86400.0))
    assert (first.alone, first.counted, first.failures, first.max_failures, first.window_seconds) == (
        True, True, 1, 2, 600.0)
    preempted = budget.take(entry(2, PREEMPTION), (100, 86400.0))
    assert (preempted.failures, preempted.preemptions, preempted.max_preemptions) == (1, 1, 100)
    assert not budget.take(entry(3, INFRASTRUCTURE), (100, 86400.0)).counted


def test_one_backoff():
    assert [backoff(n) for n in range(1, 9)] == [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert [backoff(n, 0.01, 0.05) for n in range(1, 6)] == [0.0, 0.01, 0.02, 0.04, 0.05]


def test_the_exit_code_of_a_signal():
    assert signal_exit(signal.SIGTERM) == 143 and signal_exit(signal.SIGKILL) == 137
    assert exit_status(-signal.SIGINT) == 130 and exit_status(3) == 3
    assert signal_name(signal.SIGTERM) == "SIGTERM" and signal_name(99) == "signal 99"


@pytest.mark.parametrize("side", [rendezvous.DirectRendezvous, rendezvous.LeaderRendezvous,
                                  rendezvous.FollowerRendezvous])
def test_every_rendezvous_is_one_the_bootstrap_can_use(side):
    assert issubclass(side, rendezvous.Rendezvous) and not inspect.isabstract(side)
    carries = side is not rendezvous.DirectRendezvous
    assert side.carries_rounds == carries and (side.watch_every == 0.0) == carries
