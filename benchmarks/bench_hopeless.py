"""Hopeless faults: seconds from `marathon-tf deploy job.json --local` to its exit with the job Failed (or
refused), for a command that does not exist, a file as a volume's host path, a missing tensorboard
binary and a logdir that cannot be created. Goal: each under 30 s (before: never / 100 s).
The baseline is the same job with nothing wrong run to Succeeded (one step), in the same run.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from .common import BIN, Row, median


def _job(work: Path, **changes) -> dict:
    job = {"name": "hopeless", "command": ["python3", "-c", "print('step=1')"], "logdir": "ckpt",
           "volumes": [{"host_path": str(work / "ckpt"), "container_path": "ckpt"}],
           "roles": {"worker": {"count": 2, "cpus": 0.1, "mem": 64}}}
    job.update(changes)
    return job


def _cases(work: Path) -> dict[str, dict]:
    (work / "afile").write_text("")
    tb = _job(work, command=["python3", "-c", "import time\nfor i in range(600): print('step=%d' % i, flush=True); "
                                              "time.sleep(0.5)"])
    tb["roles"]["tensorboard"] = {"count": 1, "command": ["no-such-tensorboard", "--logdir", "ckpt"]}
    return {
        "baseline (nothing wrong, 1 step)": _job(work),
        "command not found (pythn3)": _job(work, command=["pythn3", "train.py"]),
        "volume host_path is a file": _job(work, volumes=[{"host_path": str(work / "afile"),
                                                           "container_path": "ckpt"}]),
        "tensorboard binary missing": tb,
        "logdir cannot be created": _job(work, logdir=str(work / "afile" / "ckpt"), volumes=[]),
    }


def _seconds(job: dict, work: Path, i: int) -> tuple[float, int]:
    path = work / f"job-{i}.json"
    path.write_text(json.dumps(job))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARATHON")}
    env.update(MARATHON_TF_STATE_DIR=str(work / f"state-{i}"), MARATHON_TF_CONFIG="/nonexistent")
    t = time.perf_counter()
    r = subprocess.run([str(BIN / "marathon-tf"), "deploy", str(path), "--local", "--timeout", "120"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=work, timeout=180)
    return time.perf_counter() - t, r.returncode


def bench_hopeless(quick: bool) -> list[Row]:
    rows = []
    repeat = 1 if quick else 3
    with tempfile.TemporaryDirectory(prefix="mtf-hopeless-") as d:
        work = Path(d)
        for name, job in _cases(work).items():
            runs = [_seconds(job, work, i) for i in range(repeat)]
            codes = sorted({code for _, code in runs})
            rows.append(Row(f"deploy --local until it exits: {name}", round(median([s for s, _ in runs]), 2), "s",
                            f"median of {repeat}; exit code(s) {codes}"))
    return rows


BENCHMARKS = {"hopeless": bench_hopeless}
