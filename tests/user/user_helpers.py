"""Shared builders for the core tests."""


def minimal(**overrides):
    job = {"name": "mnist", "style": "tf1", "command": ["python3", "train.py"],
           "roles": {"ps": {"count": 1}, "worker": {"count": 2}}}
    job.update(overrides)
    return job


def no_job_yet(httpserver, job="mnist"):
    """What a Marathon answers before the job exists, which ``deploy`` asks first (is it running
    already, has it ended?): its group is 404 with Marathon's message (GroupsResource)."""
    httpserver.expect_request(f"/v2/groups/{job}", method="GET").respond_with_json(
        {"message": f"Group '/{job}' does not exist"}, status=404)
