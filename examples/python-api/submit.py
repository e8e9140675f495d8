#!/usr/bin/env python3
"""Submit a training job from Python: the way a notebook, an Airflow task or a service does it.

Run it as a script (``python examples/python-api/submit.py``), or cell by cell in a notebook (the
``# %%`` marks). It trains the linear-regression-tf1 example (1 ps + 2 workers, real TensorFlow) on
a local cluster, the single-machine Marathon + Mesos-DNS of ``marathon-tf local serve``; for a real
Marathon, use ``Marathon("http://marathon.example:8080", token=...)`` where it says ``LocalCluster``.
Everything here is what the CLI does with ``-o json``, as Python objects; errors are the exceptions
of ``marathon_tf.contract.errors`` (``SpecError``, ``MarathonError``, ``Timeout``, ``JobFailed``).
"""

# %% The job: from a job file, adjusted in Python
import sys
from pathlib import Path

from marathon_tf import Job, LocalCluster

EXAMPLE = Path(__file__).resolve().parent.parent / "linear-regression-tf1"
STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 300

job_file = Job.from_file(EXAMPLE / "job.json").to_dict()
job_file.update(name="python-api-demo", progress={"target_step": STEPS})
job_file["command"] = ["python3", "train.py", "--train_steps", str(STEPS), "--checkpoint_dir", "ckpt",
                       "--log_every", "20"]
job_file["fetch"] = [str(EXAMPLE / "train.py")]  # a file of this machine: fine for a local cluster
job = Job.from_dict(job_file)  # validated like `marathon-tf validate`: every problem at once
print(job, "warnings:", job.warnings)

# %% Deploy it, follow it to its end, read what it printed
with LocalCluster() as cluster:  # stopped (every task with it) when the block ends
    run = cluster.deploy(job)
    print("deployed", run.deployment.group_id, "on", cluster.url)
    final = run.wait(timeout=600, on_progress=lambda s: print(" ", s.state, s.step or "", flush=True))
    print("job", final.job, final.state, "at step", final.final_step, "-", final.reason)
    print("checkpoints in", final.logdir_path)
    for line in run.logs("worker-0", stream="stdout", tail=2):
        print(f"[{line.task}] {line.text}")
    for task in final.tasks:
        print(f"{task.task:10} {task.state:10} restarts={task.restarts}")
    run.delete(purge=True)  # the group, and its checkpoints

sys.exit(0 if final.succeeded else 1)
