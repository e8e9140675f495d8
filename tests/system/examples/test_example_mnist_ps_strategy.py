"""mnist-ps-strategy: TF2 ParameterServerStrategy + ClusterCoordinator, hand-launched
(chief + 1 ps + 2 workers, cluster in TF_CONFIG)."""

import pytest

NAME = "mnist-ps-strategy"
pytestmark = pytest.mark.tf


@pytest.mark.timeout(150)
def test_trains_to_target_then_resumes_from_checkpoint(run_example, ckpt_dir):
    first = run_example(NAME, chief=1, args=["--train_steps=150", f"--checkpoint_dir={ckpt_dir}",
                                             "--log_every=10"])
    assert first.codes == {"chief-0": 0}, first.describe()
    chief = first.tasks["chief-0"]
    assert chief.final_step is not None and chief.final_step >= 150, chief.describe()
    assert chief.first_step_time is not None, chief.describe()
    losses = [loss for _, loss in chief.steps]
    assert losses[0] > 2.0 and losses[-1] < 0.5 * losses[0], chief.describe()  # ln(10) ≈ 2.3 at start
    # ps and workers never exit by themselves: the launcher stopped them.
    assert all(first.tasks[n].returncode != 0 for n in ("ps-0", "worker-0", "worker-1"))

    second = run_example(NAME, chief=1, args=["--train_steps=190", f"--checkpoint_dir={ckpt_dir}",
                                              "--log_every=10"])
    assert second.codes == {"chief-0": 0}, second.describe()
    chief = second.tasks["chief-0"]
    assert "restored" in chief.stdout and "global step 150/190" in chief.stdout, chief.describe()
    assert chief.steps[0][0] > 150 and chief.final_step >= 190, chief.describe()
    assert chief.steps[0][1] < losses[0], chief.describe()  # resumed weights, not fresh ones
