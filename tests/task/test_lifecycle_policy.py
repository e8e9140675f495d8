"""The failure policy as a pure table, the restart budget (memory + job-wide file), JobPolicy's outcomes."""

import json
import sys

import pytest

from marathon_tf.contract import labels as L
from marathon_tf.contract.plan import PlannedStop, StopReason
from marathon_tf.task.budget import RestartBudget
from marathon_tf.task.jobpolicy import JobPolicy
from marathon_tf.task.logdir import failures_path, logdir_problem
from marathon_tf.task.policy import Action, decide, decider_task, is_decider
from marathon_tf.task.supervisor import Trainer


class Wall:
    def __init__(self, now=1_000_000.0):
        self.now = now

    def __call__(self):
        return self.now


def table(style, role, code, *, decider=False, completion="worker0", permanent=False, failures=1, max_failures=3):
    return decide(style=style, role=role, code=code, decider=decider, completion=completion,
                     permanent=permanent, failures=failures, max_failures=max_failures)


@pytest.mark.parametrize("style", ["tf1", "parameter_server", "custom"])
@pytest.mark.parametrize("role,action", [("worker", Action.RESTART), ("chief", Action.RESTART),
                                         ("evaluator", Action.RESTART), ("ps", Action.EXIT)])
def test_within_budget_workers_restart_in_place_and_a_ps_exits(style, role, action):
    assert table(style, role, 1) == action
    assert table(style, role, 137, failures=3, max_failures=3) == action  # the Nth failure is still allowed


@pytest.mark.parametrize("role,action", [("worker", Action.EXIT), ("chief", Action.EXIT),
                                         ("evaluator", Action.RESTART)])
def test_multi_worker_mirrored_has_no_partial_recovery(role, action):
    assert table("multi_worker_mirrored", role, 1) == action


@pytest.mark.parametrize("style", ["tf1", "parameter_server", "multi_worker_mirrored", "custom"])
@pytest.mark.parametrize("role", ["worker", "chief", "ps", "evaluator"])
def test_permanent_codes_and_an_exhausted_budget_fail_the_job(style, role):
    assert table(style, role, 3, permanent=True, failures=0) == Action.FAIL_JOB
    assert table(style, role, 1, failures=4, max_failures=3) == Action.FAIL_JOB
    assert table(style, role, 1, failures=1, max_failures=0) == Action.FAIL_JOB  # max_failures 0: no retry


@pytest.mark.parametrize("completion,decider,action", [
    ("chief", True, Action.FINISH), ("worker0", True, Action.FINISH), ("all_workers", True, Action.AWAIT_WORKERS),
    ("chief", False, Action.STAY), ("worker0", False, Action.STAY), ("all_workers", False, Action.STAY)])
def test_exit_zero(completion, decider, action):
    assert table("tf1", "worker", 0, decider=decider, completion=completion, failures=0) == action


def test_tensorboard_never_decides_the_job():
    assert table("tf1", "tensorboard", 0, failures=0) == Action.STAY
    assert table("tf1", "tensorboard", 3, permanent=True) == Action.EXIT
    assert table("tf1", "tensorboard", 1, failures=99) == Action.EXIT


def test_decider_task(make_ctx):
    assert decider_task("chief") == "chief-0"
    assert decider_task("worker0") == decider_task("all_workers") == "worker-0"
    assert is_decider(make_ctx("chief", 0, completion="chief", cluster={"chief": 1, "ps": 1, "worker": 1}))
    assert not is_decider(make_ctx("worker", 0, completion="chief", cluster={"chief": 1, "ps": 1, "worker": 1}))
    assert is_decider(make_ctx("worker", 0, completion="all_workers"))
    assert not is_decider(make_ctx("worker", 1, completion="worker0"))


def test_budget_window_slides():
    wall = Wall()
    budget = RestartBudget(2, 60, task="worker-1", clock=wall)
    assert [budget.record(1) for _ in range(3)] == [1, 2, 3]
    wall.now += 61
    assert budget.count() == 0 and budget.record(1) == 1


def test_budget_is_job_wide_through_the_shared_file(tmp_path):
    wall = Wall()
    path = str(tmp_path / "failures.jsonl")
    ps, worker = (RestartBudget(2, 600, task=t, path=path, clock=wall) for t in ("ps-0", "worker-1"))
    assert ps.record(1, "oops") == 1
    wall.now += 10
    assert worker.record(137, "Killed") == 2
    relaunched = RestartBudget(2, 600, task="ps-0", path=path, clock=wall)  # a new process: memory is empty
    assert relaunched.count() == 2 and relaunched.record(1) == 3
    records = [json.loads(line) for line in open(path)]
    assert [(r["task"], r["code"]) for r in records] == [("ps-0", 1), ("worker-1", 137), ("ps-0", 1)]
    assert records[1]["reason"] == "Killed" and records[1]["time"] == wall.now and records[1]["kind"] == "failure"
    wall.now += 595  # the first failure left the window
    assert relaunched.count() == 2


def test_budget_skips_malformed_lines(tmp_path):
    path = tmp_path / "failures.jsonl"
    path.write_text('not json\n{"task": "x"}\n{"task": "w", "time": 999999.0, "code": 1}\n')
    assert RestartBudget(5, 600, task="w", path=str(path), clock=Wall()).count() == 1


def test_failures_path_needs_a_writable_logdir(tmp_path, make_ctx):
    assert failures_path(make_ctx(logdir=""), {}) is None
    assert failures_path(make_ctx(logdir="ckpt"), {"MESOS_SANDBOX": str(tmp_path)}) is None  # not there
    (tmp_path / "ckpt").mkdir()
    path = failures_path(make_ctx(logdir="ckpt"), {"MESOS_SANDBOX": str(tmp_path)})
    assert path == str(tmp_path / "ckpt" / ".marathon-tf" / "failures.jsonl")
    assert (tmp_path / "ckpt" / ".marathon-tf").is_dir()
    assert failures_path(make_ctx(logdir=str(tmp_path / "ckpt")), {}) == path
    locked = tmp_path / "ro"
    locked.mkdir(mode=0o500)
    import os
    if os.geteuid() != 0:  # root can write anywhere
        assert failures_path(make_ctx(logdir=str(locked)), {}) is None


def policy(make_ctx, role="worker", index=1, max_failures=2, **fields):
    ctx = make_ctx(role, index, style=fields.pop("style", "tf1"), permanent_exit_codes=(3,),
                   restart_budget=(max_failures, 600.0), **fields)
    return JobPolicy(ctx, RestartBudget(max_failures, 600, task=ctx.task, clock=Wall()))


def test_job_policy_permanent_failure_names_task_code_and_stderr(make_ctx):
    outcome = policy(make_ctx).decide(3, stderr_tail="Traceback\n  File x\nValueError: boom: bad data")
    assert outcome.finish == L.FAILED and outcome.stay_up and outcome.healthy and outcome.phase == "failed"
    assert outcome.reason == ("worker-1 exited with 3 (permanent): Traceback | File x | "
                              "ValueError: boom: bad data")


def test_job_policy_budget(make_ctx):
    p = policy(make_ctx)
    first, second = p.decide(1, stderr_tail="e1"), p.decide(1, stderr_tail="e2")
    assert first.restart and second.restart and not first.finish and first.healthy
    assert "failure 2 of at most 2 in 600 s" in second.reason
    third = p.decide(1, stderr_tail="OOM")
    assert third.finish == L.FAILED and not third.restart and third.stay_up and third.healthy
    assert third.reason == ("worker-1 failed 3 times in 600 s, more than restart.max_failures (2; counted by the task "
                            "alone: the deciding task did not answer); last: exited with 1: OOM")


def test_job_policy_ps_exits_unhealthy_and_success_outcomes(make_ctx):
    ps = policy(make_ctx, "ps", 0).decide(1, stderr_tail="")
    assert (ps.phase, ps.stay_up, ps.exit_code, ps.healthy, ps.restart, ps.finish) == ("failed", False, 1, False,
                                                                                       False, None)
    assert ps.reason.endswith("exiting so Marathon relaunches the task (no stderr)")
    done = policy(make_ctx, "worker", 0, completion="all_workers").decide(0)
    assert done.finish == L.SUCCEEDED and done.await_workers and done.stay_up
    chief = policy(make_ctx, "chief", 0, completion="chief", cluster={"chief": 1, "ps": 1}).decide(0)
    assert chief.finish == L.SUCCEEDED and not chief.await_workers
    other = policy(make_ctx, "worker", 1, completion="worker0").decide(0)
    assert other.finish is None and other.stay_up and other.phase == "succeeded"


def test_exit_zero_does_not_use_the_budget_but_every_failure_is_recorded(make_ctx):
    p = policy(make_ctx, max_failures=0)
    p.decide(0)
    assert p.budget.count() == 0
    p.decide(3)  # permanent: ends the job, and is still counted (failures.jsonl is the job's trace)
    p.decide(127)
    assert p.budget.count() == 2


@pytest.mark.parametrize("code", [126, 127])
def test_a_program_that_cannot_be_executed_is_permanent_whatever_the_configured_codes(make_ctx, code):
    outcome = policy(make_ctx, max_failures=5).decide(code, stderr_tail="cannot execute 'pythn3': No such file")
    assert outcome.finish == L.FAILED and not outcome.restart and outcome.stay_up
    assert outcome.reason == (f"worker-1 could not run its program (exit {code}, permanent): "
                              "cannot execute 'pythn3': No such file")


def test_a_script_python_cannot_open_is_permanent_like_127(make_ctx):
    """A misspelt script (``python3 trian.py``): Python exits 2 with "can't open file"; no relaunch in
    the same sandbox makes the file appear, so the first failure fails the job (issue 43, item 1)."""
    said = "python3: can't open file '/sandbox/trian.py': [Errno 2] No such file or directory"
    outcome = policy(make_ctx, max_failures=5).decide(2, stderr_tail=said)
    assert outcome.finish == L.FAILED and not outcome.restart and outcome.stay_up
    assert outcome.reason == f"worker-1 could not run its program (exit 2, permanent): {said}"
    # an exit 2 for any other reason (argparse's usage error) stays an ordinary, counted failure
    other = policy(make_ctx, max_failures=5).decide(2, stderr_tail="train.py: error: unrecognized arguments: --x")
    assert other.finish is None and other.restart


def test_a_failure_with_an_unusable_logdir_fails_the_job_at_once(make_ctx, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    ctx = make_ctx("worker", 1, style="tf1", logdir=str(blocker / "ckpt"), restart_budget=(5, 600.0))
    p = JobPolicy(ctx, RestartBudget(5, 600, task=ctx.task, clock=Wall()), {})
    outcome = p.decide(1, stderr_tail="Traceback | NotFoundError")
    assert outcome.finish == L.FAILED and not outcome.restart
    assert outcome.reason == f"worker-1 failed (exit 1): logdir {blocker}/ckpt cannot be created: Not a directory"
    assert "\n" not in outcome.reason


def test_logdir_problem(make_ctx, tmp_path):
    ok = tmp_path / "ok"
    assert logdir_problem(make_ctx(logdir=str(ok)), {}) is None and ok.is_dir()  # created
    assert logdir_problem(make_ctx(logdir="gs://bucket/x"), {}) is None  # not checked
    (tmp_path / "f").write_text("")
    assert "is not a directory" in logdir_problem(make_ctx(logdir="f"), {"MESOS_SANDBOX": str(tmp_path)})
    gone = tmp_path / "box" / "ckpt"
    gone.parent.mkdir()
    gone.symlink_to(tmp_path / "vanished")
    assert logdir_problem(make_ctx(logdir="ckpt"), {"MESOS_SANDBOX": str(gone.parent)}) == (
        f"logdir ckpt ({tmp_path}/vanished) is gone: the volume's host path does not exist any more")


def test_trainer_spawn_error_is_an_exit_127_with_the_reason(tmp_path):
    import io
    err = io.BytesIO()
    trainer = Trainer(["pythn3-no-such", "train.py"], {"PATH": "/usr/bin:/bin"}, stderr=err)
    trainer.start()
    assert trainer.pid is None and trainer.wait(1) == 127 and trainer.stop(1) == 127
    assert trainer.stderr_tail() == "cannot execute 'pythn3-no-such': No such file or directory"
    assert b"cannot execute 'pythn3-no-such'" in err.getvalue()
    script = tmp_path / "x.sh"
    script.write_text("#!/bin/sh\n")
    trainer = Trainer([str(script)], {"PATH": "/usr/bin:/bin"}, stderr=io.BytesIO())
    trainer.start()
    assert trainer.wait(1) == 126 and "Permission denied" in trainer.stderr_tail()


def test_trainer_keeps_the_last_twenty_stderr_lines(tmp_path):
    import io
    code = "import sys\nfor i in range(30): sys.stderr.write('line %d\\n' % i)\nprint('step=5')\nsys.exit(2)"
    out, err = io.BytesIO(), io.BytesIO()
    trainer = Trainer([sys.executable, "-c", code], {"PATH": "/usr/bin:/bin"}, stdout=out, stderr=err)
    trainer.start()
    assert trainer.wait(20) == 2
    assert trainer.stderr_tail().splitlines() == [f"line {i}" for i in range(10, 30)]
    assert b"line 0\n" in err.getvalue() and b"step=5" in out.getvalue()  # still passed through


def test_a_failures_reason_carries_a_bounded_part_of_the_programs_stderr():
    """Issue 32: a Keras dataset's tensor, printed whole by the program, went whole into the failure's
    reason (and the log, the events, the ledger). One place caps it: each line, and all of it."""
    from marathon_tf.task.policy import TAIL_CHARS, TAIL_LINE_CHARS, tail_for_reason

    tensor = "<_TensorSliceDataset element_spec=(TensorSpec(shape=(28, 28)))> tf.Tensor(" + "0.123 " * 20000 + ")"
    tail = "\n".join(["Traceback (most recent call last):", tensor, tensor[:900], "ValueError: bad input shape"])
    reason = tail_for_reason(tail)
    assert len(reason) <= TAIL_CHARS and reason.endswith(" | ValueError: bad input shape")
    assert all(len(part) <= TAIL_LINE_CHARS for part in reason.split(" | "))
    assert "tf.Tensor(0.123 0.123" in reason and "…" in reason
    assert tail_for_reason("ValueError: short") == "ValueError: short"


# --- a program that fails because a peer's planned stop took its ps away --------------------------------


@pytest.mark.parametrize("alone", [False, True], ids=["keeper-answers", "task-alone"])
def test_a_failure_while_its_own_task_is_being_stopped_by_marathon_tf_is_not_counted_anywhere(make_ctx, tmp_path,
                                                                                               alone):
    """``delete --save`` of a TF1 job: Marathon kills the ps and the workers at about the same time; a worker's
    program that loses its ps before its own SIGTERM arrives exits 1 by itself. Counted, it was the one failure
    that a ``deploy --resume`` of the job showed (a fresh-clone CI: Succeeded, failures 1 under max_failures 0,
    read back from the logdir's failures.jsonl). Its task's stop is marathon-tf's own doing (its app removed):
    not counted, not reported, not written."""
    from marathon_tf.task.keeper import Keeper
    from marathon_tf.task.ledger import Ledger

    path = tmp_path / "failures.jsonl"
    ctx = make_ctx("worker", 1, style="tf1", restart_budget=(0, 600.0))
    keeper = None if alone else Keeper(ctx, Ledger((0, 600.0), (5, 600.0)), path=str(path))
    why: list = [StopReason.APP_REMOVED]
    p = JobPolicy(ctx, RestartBudget(0, 600, task=ctx.task, clock=Wall(), path=str(path)), keeper=keeper,
                  planned=lambda: PlannedStop(why[0]) if why[0] is not None else None)
    outcome = p.decide(1, stderr_tail="UnavailableError: Socket closed")
    assert outcome.action is Action.RESTART and not outcome.counted and not outcome.finish, outcome
    assert outcome.reason == ("training program exited with 1 while its task is being stopped (its app was "
                              "removed): not counted; restarting it in place")
    assert not path.exists() or path.read_text() == ""
    assert keeper is None or keeper.ledger.summary()["failures"] == 0
    why[0] = None  # the same end with nothing planned: the job's one allowed failure was 0
    outcome = p.decide(1, stderr_tail="UnavailableError: Socket closed")
    assert outcome.finish == L.FAILED and outcome.counted, outcome
    assert json.loads(path.read_text().splitlines()[-1])["task"] == "worker-1"


def test_asked_for_reads_a_deleted_app_as_removed_and_a_newer_configuration_as_planned(httpserver):
    """Marathon stores a change's target before its answer (``GroupManagerImpl.updateRootEither``:
    ``storeRoot(plan.target, …)`` then ``root := Option(plan.target)``, mesosphere/marathon@90619da), so
    the app of a deleted group is gone (404, ``{"message": "App '/…' does not exist"}``) while its tasks
    are still being killed."""
    from marathon_tf.marathon.client import Client, RetryPolicy
    from marathon_tf.task.keeper import asked_for, stop_asked

    client = Client(httpserver.url_for(""), retry=RetryPolicy(attempts=1, budget=1, initial=0.1, max_wait=0.1))
    httpserver.expect_request("/v2/apps/ml/mnist/worker-1").respond_with_json(
        {"message": "App '/ml/mnist/worker-1' does not exist"}, status=404)
    assert asked_for(client, "ml/mnist", "worker-1", "2026-11-28T10:00:00.000Z") is StopReason.APP_REMOVED
    httpserver.clear()
    app = {"id": "/ml/mnist/worker-1", "labels": {}, "version": "2026-11-28T10:05:00.000Z",
           "versionInfo": {"lastConfigChangeAt": "2026-11-28T10:05:00.000Z"}}
    httpserver.expect_request("/v2/apps/ml/mnist/worker-1").respond_with_json({"app": app})
    assert asked_for(client, "ml/mnist", "worker-1", "2026-11-28T10:00:00.000Z") is StopReason.NEW_CONFIGURATION
    assert asked_for(client, "ml/mnist", "worker-1", "2026-11-28T10:05:00.000Z") is None
    assert asked_for(None, "ml/mnist", "worker-1", None) is None
    httpserver.clear()
    app["env"] = {"MTF_CLUSTER": '{"ps": 1, "worker": 3}'}
    httpserver.expect_request("/v2/apps/ml/mnist/worker-1").respond_with_json({"app": app})
    asked = stop_asked(client, "ml/mnist", "worker-1", "2026-11-28T10:00:00.000Z")
    assert asked == PlannedStop(StopReason.NEW_CONFIGURATION, {"ps": 1, "worker": 3})
    assert asked.restart({"ps": 1, "worker": 2}) == ("scale", "2 → 3 workers")
    assert asked.restart({"ps": 1, "worker": 3}) == ("redeploy", "")
    assert PlannedStop(StopReason.APP_REMOVED).restart({"ps": 1, "worker": 2}) is None


def test_a_marathon_that_does_not_answer_does_not_hold_up_the_decision(make_ctx, tmp_path):
    """The planned-stop look is one quick request: a program's end is decided (and counted: nothing says the
    stop was planned) within seconds when Marathon is away, not after the job client's 60 s of retries."""
    import socket
    import time

    from marathon_tf.task.jobcontrol import job_lifecycle

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    ctx = make_ctx("worker", 1, style="tf1", restart_budget=(3, 600.0), marathon_url=url)
    p = job_lifecycle(ctx, {"MARATHON_APP_VERSION": "2026-11-28T10:00:00.000Z"})["policy"]
    began = time.monotonic()
    outcome = p.decide(1, stderr_tail="boom")
    assert time.monotonic() - began < 8, "the decision waited on Marathon"
    assert outcome.restart and outcome.counted, outcome
