"""The hand launcher's ports (``examples/handlaunch.py``, the benchmarks' baseline and the examples' tests):
picked below the kernel's ephemeral range, where no outgoing connection or bind to port 0 takes them before
TensorFlow binds (a CI run: ``Failed to add port to server … '0.0.0.0:33851'``, ``Could not start gRPC
server``, one worker of the Keras group restart test)."""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path

_spec = importlib.util.spec_from_file_location("handlaunch",
                                               Path(__file__).parent.parent / "examples" / "handlaunch.py")
handlaunch = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(handlaunch)


def test_ports_are_distinct_free_and_below_the_ephemeral_range():
    low, _ = handlaunch.ephemeral_range()
    ports = handlaunch.free_ports(8)
    assert len(set(ports)) == 8 and all(1024 <= p < low for p in ports), (ports, low)
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_an_unusual_ephemeral_range_falls_back_on_the_kernels_choice(monkeypatch):
    monkeypatch.setattr(handlaunch, "ephemeral_range", lambda: (1030, 65000))  # no room below it
    ports = handlaunch.free_ports(3)
    assert len(set(ports)) == 3 and all(p >= 1024 for p in ports)


def test_a_taken_port_is_never_handed_out(monkeypatch):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        held.listen()
        monkeypatch.setattr(handlaunch, "ephemeral_range", lambda: (taken + 1, 65000))
        monkeypatch.setattr(handlaunch.random, "SystemRandom", lambda: _Fixed(taken))
        assert taken not in handlaunch.free_ports(2)


class _Fixed:
    """A SystemRandom whose sample puts ``first`` first (the taken port is tried before any other)."""

    def __init__(self, first):
        self.first = first

    def sample(self, pool, k):
        return [self.first] + [p for p in pool if p != self.first][:k - 1]
