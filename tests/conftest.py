"""Makes the shared test utilities (``tests/leaks.py`` …) importable from every test folder; fixtures
every side's tests use."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest  # noqa: E402
from fake_marathon import FakeMarathon  # noqa: E402

if os.environ.get("MTF_TEST_CPU"):  # each test's wall and CPU seconds (tests/cputime.py)
    from cputime import pytest_runtest_protocol  # noqa: E402, F401


@pytest.fixture
def fake_marathon(httpserver) -> FakeMarathon:
    """Marathon's group GET and bulk app PUT for job ml/mnist, over pytest-httpserver."""
    return FakeMarathon(httpserver)
