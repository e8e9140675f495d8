"""The package's face (like httpx's tests/test_exported_members.py): every name in ``marathon_tf.__all__``
can be imported from ``marathon_tf`` and is documented (its own docstring, and the package's docstring
names it); every public error class of ``contract/errors.py`` and every public result class of
``user/results.py`` is exported, so that ``from marathon_tf import NotPlaced`` works for what the API
raises."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest

import marathon_tf
from marathon_tf.contract import errors
from marathon_tf.user import results

NAMES = [n for n in marathon_tf.__all__ if n != "__version__"]


@pytest.mark.parametrize("name", NAMES)
def test_every_exported_name_is_importable_and_documented(name):
    value = getattr(importlib.import_module("marathon_tf"), name)
    doc = inspect.getdoc(value) or ""
    assert doc and not doc.startswith(f"{name}("), f"{name} has no docstring of its own"
    assert f"``{name}``" in (marathon_tf.__doc__ or ""), f"marathon_tf's docstring does not name {name}"


def test_from_marathon_tf_import_works_in_a_fresh_interpreter():
    code = f"from marathon_tf import {', '.join(NAMES)}; import marathon_tf; print(marathon_tf.__version__)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_all_is_what_dir_shows_and_has_no_duplicates():
    public = sorted(n for n in dir(marathon_tf) if (not n.startswith("_") or n == "__version__")
                    and not inspect.ismodule(getattr(marathon_tf, n)))  # subpackages show once imported
    assert len(set(marathon_tf.__all__)) == len(marathon_tf.__all__)
    assert sorted(marathon_tf.__all__) == public


@pytest.mark.parametrize("name", errors.__all__)
def test_every_public_error_class_is_exported(name):
    assert name in marathon_tf.__all__, f"contract/errors.py's {name} is not exported from marathon_tf"
    assert getattr(marathon_tf, name) is getattr(errors, name)


@pytest.mark.parametrize("name", results.__all__)
def test_every_public_result_class_is_exported(name):
    assert name in marathon_tf.__all__, f"user/results.py's {name} is not exported from marathon_tf"
    assert getattr(marathon_tf, name) is getattr(results, name)


def test_what_the_api_raises_is_exported():
    from marathon_tf import JobFailed, JobStatus, NotPlaced

    status = JobStatus.from_dict({"job": "j", "state": "NotPlaced", "reason": "worker: 1/2 placed"})
    assert isinstance(status.error(), NotPlaced) and status.error().exit_code == 4
    assert status.error().status is status
    failed = JobStatus.from_dict({"job": "j", "state": "Failed"})
    assert isinstance(failed.error(), JobFailed) and failed.error().exit_code == 1
    assert JobStatus.from_dict({"job": "j", "state": "Succeeded"}).error() is None
