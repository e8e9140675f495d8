"""contract/progress: the job's step, defined once."""


def test_the_jobs_step_is_the_largest_any_chief_or_worker_reported():
    from marathon_tf.contract.progress import job_step

    assert job_step({"worker-0": 300, "worker-1": 301, "ps-0": 400, "evaluator-0": 500}) == 301
    assert job_step([("chief-0", 200), ("worker-0", None), ("worker-1", True)]) == 200
    assert job_step({"ps-0": 3}) is None and job_step({}) is None
