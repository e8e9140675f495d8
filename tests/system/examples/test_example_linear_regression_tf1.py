"""linear-regression-tf1: classic between-graph replication, hand-launched (1 ps + 2 workers)."""

import re

import pytest

NAME = "linear-regression-tf1"
pytestmark = pytest.mark.tf


def _check_trained(result, target):
    assert result.codes == {"worker-0": 0, "worker-1": 0}, result.describe()
    for name in ("worker-0", "worker-1"):
        task = result.tasks[name]
        assert task.final_step is not None and task.final_step >= target, task.describe()
    # Somebody trained, and every task that ran steps says when its first one was. Either task may find the
    # job already done when its session is ready: on a loaded machine the other worker can run all of a short
    # job's steps while the chief's session is still being created (seen: "session ready at global step
    # 100/100 ... local_steps=0").
    trained = [result.tasks[n] for n in ("worker-0", "worker-1") if _local_steps(result.tasks[n])]
    assert trained, result.describe()
    assert all(t.first_step_time is not None for t in trained), result.describe()


def _local_steps(task) -> int:
    found = re.search(r"local_steps=(\d+)", task.stdout)
    assert found, task.describe()
    return int(found.group(1))


@pytest.mark.timeout(120)
def test_trains_to_target_and_loss_goes_down(run_example, ckpt_dir):
    result = run_example(NAME, args=["--train_steps=200", f"--checkpoint_dir={ckpt_dir}", "--log_every=10"])
    _check_trained(result, 200)
    steps = sorted(s for t in ("worker-0", "worker-1") for s in result.tasks[t].steps)
    assert steps[0][1] > 5 * steps[-1][1], steps  # y = 2x + 1: loss falls from ~2 to the noise floor
    assert steps[-1][1] < 0.05, steps
    assert any(p.name.startswith("model.ckpt-") for p in ckpt_dir.iterdir())


@pytest.mark.timeout(150)
def test_resumes_global_step_from_checkpoint(run_example, ckpt_dir):
    first = run_example(NAME, args=["--train_steps=100", f"--checkpoint_dir={ckpt_dir}", "--log_every=10"])
    _check_trained(first, 100)
    second = run_example(NAME, args=["--train_steps=160", f"--checkpoint_dir={ckpt_dir}", "--log_every=10"])
    _check_trained(second, 160)
    # continued, not restarted at 0 (whichever worker trained the steps)
    for task in (second.tasks["worker-0"], second.tasks["worker-1"]):
        assert "session ready at global step 0/" not in task.stdout, second.describe()
    steps = sorted(s for n in ("worker-0", "worker-1") for s in second.tasks[n].steps)
    assert steps and steps[0][0] > 100, second.describe()
    # Already-trained model: the resumed run starts at a low loss.
    assert steps[0][1] < 0.1, second.describe()


@pytest.mark.timeout(120)
def test_non_chief_does_not_stall_when_chief_starts_late(run_example, ckpt_dir):
    """A stock WorkerSessionCreator polls every 30 s; ours notices the chief's init within ~1 s."""
    result = run_example(NAME, args=["--train_steps=3000", f"--checkpoint_dir={ckpt_dir}"],
                         delays={"worker-0": 4.0})
    _check_trained(result, 3000)
    chief, other = result.tasks["worker-0"], result.tasks["worker-1"]
    assert other.first_step_time is not None, result.describe()
    assert other.first_step_time - chief.first_step_time < 10, result.describe()
