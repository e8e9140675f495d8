"""Fixtures for the example tests (they live in example_helpers.py so tests can import its helpers
by a name no other test folder uses)."""

from example_helpers import *  # noqa: F401,F403 (fixtures and helpers)
