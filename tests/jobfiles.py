"""Copies of the examples' job files for tests: checkpoint volumes in a tmp dir, absolute fetch paths."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: linear-regression-tf1 training until it is stopped (for tests that disturb a running job).
ENDLESS_TF1 = ["python3", "train.py", "--train_steps", "10000000", "--checkpoint_dir", "ckpt", "--log_every", "50"]


def example_job(example: str, tmp_path: Path, job_file: str = "job.json", **changes) -> Path:
    """A copy of ``examples/<example>/<job_file>`` with its volumes under ``tmp_path/shared``,
    absolute fetch paths and ``changes`` applied; returns the new file's path."""
    src = ROOT / "examples" / example / job_file
    job = json.loads(src.read_text())
    job["fetch"] = [str((src.parent / f).resolve()) if isinstance(f, str) and "://" not in f else f
                    for f in job.get("fetch", [])]
    for v in job.get("volumes", []):
        v["host_path"] = str(tmp_path / "shared" / v["container_path"])
        Path(v["host_path"]).mkdir(parents=True, exist_ok=True)
    job.update(changes)
    out = tmp_path / f"{example}.json"
    out.write_text(json.dumps(job, indent=2))
    return out
