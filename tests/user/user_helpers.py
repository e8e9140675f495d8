"""Shared builders for the core tests."""


def minimal(**overrides):
    job = {"name": "mnist", "style": "tf1", "command": ["python3", "train.py"],
           "roles": {"ps": {"count": 1}, "worker": {"count": 2}}}
    job.update(overrides)
    return job
