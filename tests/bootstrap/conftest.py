"""Fixtures for the bootstrap tests (the helpers themselves are in bootstrap_helpers.py)."""

from __future__ import annotations

import pytest

from bootstrap_helpers import FakeClock, FakeDns, FakeMarathon, MesosDnsDouble, Procs


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fake_dns() -> FakeDns:
    return FakeDns()


@pytest.fixture
def marathon() -> FakeMarathon:
    return FakeMarathon()


@pytest.fixture
def mesos_dns():
    """A real DNS server on 127.0.0.1 with Mesos-DNS-style SRV + A records."""
    double = MesosDnsDouble()
    double.server.start_thread()
    try:
        yield double
    finally:
        double.server.stop()
        double.server.server.server_close()  # dnslib's stop() leaves the UDP socket open


@pytest.fixture
def procs(tmp_path):
    """Start bootstraps as real processes; all of them (and their trainers) die at teardown."""
    p = Procs(tmp_path)
    try:
        yield p
    finally:
        p.stop_all()
