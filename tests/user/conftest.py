import json

import pytest


@pytest.fixture
def write_job(tmp_path):
    """Write a job (dict, or raw bytes/str) to a file and return its path."""

    def write(content, name="job.json"):
        path = tmp_path / name
        if isinstance(content, (dict, list)):
            path.write_text(json.dumps(content))
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return path

    return write
