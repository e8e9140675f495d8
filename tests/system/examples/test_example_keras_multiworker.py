"""keras-multiworker: tf_keras model.fit with MultiWorkerMirroredStrategy, hand-launched
(2 workers, cluster in TF_CONFIG)."""

import os
import signal
import time

import pytest
from example_helpers import EXAMPLES, STEP_RE, collect, handlaunch

NAME = "keras-multiworker"
pytestmark = pytest.mark.tf


@pytest.mark.timeout(120)
def test_fit_trains_on_all_workers_and_saves(run_example, ckpt_dir):
    result = run_example(NAME, ps=0, args=["--epochs=2", "--steps_per_epoch=30", "--log_every=10",
                                           f"--checkpoint_dir={ckpt_dir}"])
    assert result.codes == {"worker-0": 0, "worker-1": 0}, result.describe()
    for name in ("worker-0", "worker-1"):
        task = result.tasks[name]
        assert task.final_step == 60 and task.first_step_time is not None, task.describe()
        losses = [loss for _, loss in task.steps]
        assert losses[-1] < 0.5 * losses[0], task.describe()
    assert (ckpt_dir / "final" / "weights.index").exists()
    assert not any(p.name.startswith("workertemp") for p in (ckpt_dir / "final").iterdir())


@pytest.mark.timeout(150)
def test_whole_group_restart_resumes_from_backup(tmp_path, launched, ckpt_dir):
    """Kill a worker after the first epoch's backup; restarting the group resumes from it."""
    args = ["--epochs=30", "--steps_per_epoch=20", "--log_every=5", f"--checkpoint_dir={ckpt_dir}"]
    procs = handlaunch.launch(EXAMPLES / NAME, ps=0, workers=2, extra_args=args, logdir=tmp_path / "run1")
    launched.extend(procs)
    chief = procs[0]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        steps = [int(s) for s, _ in STEP_RE.findall(chief.stdout_path.read_text())]
        if steps and steps[-1] >= 30:  # epoch 1 (steps 1-20) finished and backed up
            break
        assert chief.poll() is None, collect(procs, {}).describe()
        time.sleep(0.05)
    else:
        pytest.fail("no progress:\n" + collect(procs, {}).describe())
    procs[1].send_signal(signal.SIGKILL)
    handlaunch.stop(procs)  # MultiWorkerMirroredStrategy cannot recover in place: restart the group

    args[0] = "--epochs=3"
    procs = handlaunch.launch(EXAMPLES / NAME, ps=0, workers=2, extra_args=args, logdir=tmp_path / "run2")
    launched.extend(procs)
    try:
        codes = handlaunch.wait(procs, completion="all_workers", timeout=90)
    finally:
        handlaunch.stop(procs)
    result = collect(procs, codes)
    assert codes == {"worker-0": 0, "worker-1": 0}, result.describe()
    for task in result.tasks.values():
        assert "training from global step 0" not in task.stdout, task.describe()
        assert task.steps[0][0] > 20 and task.final_step == 60, task.describe()


@pytest.mark.timeout(180)
def test_every_worker_exits_promptly_after_its_done_line(tmp_path, launched, ckpt_dir):
    """Issue 43, item 7: the example lingered 12-21 s at its end on a loaded machine (``UNAVAILABLE: Failed
    to send RPC to coordination service``): worker 0, whose process hosts TensorFlow's coordination service,
    left while another worker was still shutting down through it. Made deterministic here: worker-1 is held
    (SIGSTOP) for 3 s right after its ``done`` line, so worker 0 gets there first. Every worker now meets the
    others once the final weights are saved and leaves without TensorFlow's teardown, as the
    ParameterServerStrategy example's coordinator does: each exits within 10 s of the moment it could (a bound
    for a hang, not a speed goal)."""
    args = ["--epochs=1", "--steps_per_epoch=20", "--log_every=10", f"--checkpoint_dir={ckpt_dir}"]
    procs = handlaunch.launch(EXAMPLES / NAME, ps=0, workers=2, extra_args=args, logdir=tmp_path / "run")
    launched.extend(procs)
    ready: dict[str, float] = {}  # when each could leave: its done line (worker-1: once continued)
    exited: dict[str, float] = {}
    held = None
    deadline = time.monotonic() + 150
    while len(exited) < len(procs) and time.monotonic() < deadline:
        for p in procs:
            if p.name not in ready and "done final_step=" in p.stdout_path.read_text(errors="replace"):
                ready[p.name] = time.monotonic()
                if p.name == "worker-1" and p.poll() is None:
                    os.killpg(p.pid, signal.SIGSTOP)
                    held = p
            if p.name not in exited and p.poll() is not None:
                exited[p.name] = time.monotonic()
        if held is not None and time.monotonic() - ready["worker-1"] >= 3:
            os.killpg(held.pid, signal.SIGCONT)
            ready["worker-1"], held = time.monotonic(), None
        time.sleep(0.05)
    result = collect(procs, {p.name: p.returncode for p in procs})
    assert {p.name: p.returncode for p in procs} == {"worker-0": 0, "worker-1": 0}, result.describe()
    lingered = {name: round(exited[name] - ready[name], 1) for name in ready}
    assert set(lingered) == {"worker-0", "worker-1"}, result.describe()
    assert lingered["worker-1"] <= 10 and lingered["worker-0"] <= 13, (lingered, result.describe())
    # the symptom itself: no worker shut down through a coordination service that had gone
    assert not any("Failed to send RPC to coordination service" in t.stderr for t in result.tasks.values()), \
        result.describe()
