"""Two local runners of one machine never hand one host port to two tasks: each claims the ports it gives out
(marathon_tf.local.ports.PortAllocator, claim). A CI run: two runners' agents both offered ``[31000-32000]``, both
handed out one port in the seconds before either task bound it, and worker-2's TensorFlow server failed with
"Could not start gRPC server"."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

import pytest

from marathon_tf.local.ports import PortAllocator, claim

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="claims are Linux's abstract sockets")


def _claimable(port: int) -> bool:
    """Whether no runner claims ``port`` now (the claim taken to find out is let go)."""
    claimed = claim(port)
    if isinstance(claimed, socket.socket):
        claimed.close()
    return claimed is not False


def _free_run(n: int) -> list[int]:
    """``n`` consecutive ports, free now, below the ephemeral range (no other test's runner offers them)."""
    for base in range(21000, 29000, 97):
        ports = list(range(base, base + n))
        if all(_claimable(p) and PortAllocator()._free(p) for p in ports):
            return ports
    pytest.skip("no free run of ports")


@pytest.fixture
def runner():
    """Makes a runner's allocator (as many as a test wants); every claim is let go at the end."""
    made: list[PortAllocator] = []

    def make(**kw) -> PortAllocator:
        made.append(PortAllocator(**kw))
        return made[-1]
    yield make
    for allocator in made:
        allocator.close()


def test_a_port_one_runner_handed_out_is_not_handed_out_by_another_until_let_go(runner):
    ports = _free_run(3)
    first, second = runner(), runner()
    mine = first.allocate(2, candidates=ports)
    with pytest.raises(OSError, match="no free ports"):
        second.allocate(2, candidates=ports)  # nothing bound yet: the bind test alone would hand them out again
    theirs = second.allocate(1, candidates=ports)
    assert theirs == [p for p in ports if p not in mine]
    with pytest.raises(OSError):
        second.allocate(1, candidates=mine)
    first.close()
    assert sorted(second.allocate(2, candidates=mine)) == sorted(mine)
    second.close()


def test_a_failed_allocation_keeps_no_claim(runner):
    ports = _free_run(2)
    first = runner()
    with pytest.raises(OSError):
        first.allocate(3, candidates=ports)
    assert sorted(runner().allocate(2, candidates=ports)) == ports


def test_claims_outlive_the_quarantine_while_a_task_holds_the_port_and_end_with_it(runner):
    ports = _free_run(2)
    allocator = runner(quarantine=0.0)
    held = allocator.allocate(1, candidates=ports)
    other = [p for p in ports if p not in held]
    allocator.allocate(0, candidates=other, keep=held)  # past its quarantine, but its task runs
    with pytest.raises(OSError):
        runner().allocate(1, candidates=held)
    allocator.allocate(0, candidates=other)  # its task ended
    assert runner().allocate(1, candidates=held) == held


def test_a_runner_killed_lets_go_of_its_claims_with_its_process(runner):
    port = _free_run(1)[0]
    program = textwrap.dedent(f"""
        import time
        from marathon_tf.local.ports import PortAllocator
        allocator = PortAllocator()
        print(allocator.allocate(1, candidates=[{port}])[0], flush=True)
        time.sleep(60)
        """)
    with subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout.readline().strip() == str(port)
            with pytest.raises(OSError):
                runner().allocate(1, candidates=[port])
        finally:
            holder.kill()
    assert runner().allocate(1, candidates=[port]) == [port]


def test_the_default_agents_ports_lie_below_the_ephemeral_range_and_none_is_handed_out_twice(runner, tmp_path):
    """A CI run (tests/system/lifecycle/test_save_e2e.py, the default agent): worker-0's TensorFlow server
    could not bind the port handed out 5 s before ("Failed to add port to server … '0.0.0.0:47585'", "Could not
    start gRPC server"; the job failed, its budget 0). The default agent's ports came from the kernel (a bind
    to port 0), inside its ephemeral range, where any outgoing connection or bind to port 0 of the machine
    could take it before the task bound it. They now come from below that range, where only a program that
    names the port takes it (the range is the agent's ``ports`` resource too)."""
    from marathon_tf.local.agents import Agents
    from marathon_tf.local.ports import dynamic_range, ephemeral_range

    low, _ = ephemeral_range()
    first, last = dynamic_range()
    assert last == low - 1 and last - first + 1 >= 1000
    ports = runner().allocate(20)
    assert len(set(ports)) == 20 and all(first <= p <= last for p in ports), ports
    agent = Agents(tmp_path, "127.0.0.1", 1).all[0]
    assert next(r.value for r in agent.resources if r.name == "ports") == ((first, last),)


def test_with_no_room_below_the_ephemeral_range_a_port_is_the_kernels_choice(runner, monkeypatch):
    from marathon_tf.local import ports as ports_mod

    monkeypatch.setattr(ports_mod, "ephemeral_range", lambda: (1500, 65000))  # 476 ports below: too few
    assert ports_mod.dynamic_range() is None
    port = runner().allocate(1)[0]
    assert port >= 1500  # the kernel's choice, from its range


def test_the_default_agents_ports_are_claimed_too_and_a_task_binds_its_port_freely(runner):
    allocator = runner()
    port = allocator.allocate(1)[0]
    assert not _claimable(port)
    with socket.socket() as tcp, socket.socket(type=socket.SOCK_DGRAM) as udp:  # the claim takes neither
        tcp.bind(("0.0.0.0", port))
        udp.bind(("0.0.0.0", port))
    allocator.close()
    assert _claimable(port)
