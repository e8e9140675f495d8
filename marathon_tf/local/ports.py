"""The runner's ports: which of its fixed ports are taken, all checked at once before anything starts (stdlib
only, so that ``local serve`` says it within a fraction of a second, before it imports its servers), and the
host ports its tasks are given (:class:`PortAllocator`)."""

from __future__ import annotations

import errno
import random
import socket
import sys
import time
from collections.abc import Iterable, Sequence

__all__ = ["PortAllocator", "PortInUse", "busy_ports", "runner_ports", "ephemeral_range", "dynamic_range"]

#: How many ports below the kernel's ephemeral range the default agent offers (fewer where there is no room).
DYNAMIC_PORTS = 12000
#: The fewest ports worth offering below that range; with less room, the ephemeral range itself (the kernel's choice).
MIN_DYNAMIC_PORTS = 1000


def ephemeral_range() -> tuple[int, int]:
    """The kernel's ephemeral port range: where outgoing connections and binds to port 0 take their ports."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def dynamic_range() -> tuple[int, int] | None:
    """The ports the default agent hands its tasks: up to :data:`DYNAMIC_PORTS` just *below* the ephemeral
    range. A port inside it, handed out seconds before the task's TensorFlow server binds it, can be taken
    meanwhile by any outgoing connection or any bind to port 0 of this machine (a task's status server, another
    program's): the job's server then fails with "Could not start gRPC server". Below it only a program that
    names the port takes it. None where there is no room for :data:`MIN_DYNAMIC_PORTS` (an unusual range)."""
    low, _ = ephemeral_range()
    first = max(1024, low - DYNAMIC_PORTS)
    return (first, low - 1) if low - first >= MIN_DYNAMIC_PORTS else None


class PortInUse(OSError):
    """The runner's ports that are taken: ``busy`` lists every one as ``(what, port)``, ``what`` naming
    it (``Marathon API``, ``Mesos-DNS``, ``Mesos-DNS HTTP API``); ``what``/``port`` are the first."""

    def __init__(self, what: str, host: str, port: int, busy: list[tuple[str, int]] | None = None) -> None:
        self.busy = busy or [(what, port)]
        super().__init__(", ".join(f"{w} port {host}:{p}" for w, p in self.busy) + " already in use")
        self.what, self.host, self.port = what, host, port

    def describe(self, options: dict[str, str] | None = None) -> tuple[str, str]:
        """``(one line naming every busy port, a hint)``; ``options``: the option that sets each port
        (``{"Marathon API": "--port", …}``)."""
        if len(self.busy) == 1:
            what, port = self.busy[0]
            line = f"{what} port {port} on {self.host} is already in use"
        else:
            line = f"ports in use on {self.host}: " + ", ".join(
                f"{what} {port}" + (f" ({options[what]})" if options else "") for what, port in self.busy)
        them = "it" if len(self.busy) == 1 else "them"
        how = (f"choose another port with {' / '.join(dict.fromkeys(options[w] for w, _ in self.busy))} PORT" if options
               else "choose other ports")
        return f"{line} (another `local serve`?)", f"stop what holds {them}, or {how} (0 picks a free one)"


def runner_ports(marathon_port: int, dns_port: int, dns_http_port: int,
                 instances: int = 1) -> list[tuple[str, int, tuple[int, ...]]]:
    """The runner's ports as :func:`busy_ports` takes them: the Marathon API (TCP; ``instances`` of
    them from ``marathon_port`` on, for an HA Marathon), Mesos-DNS (UDP and TCP on one port), its
    HTTP API (TCP)."""
    api = [("Marathon API", marathon_port + i if marathon_port else 0, (socket.SOCK_STREAM,)) for i in range(instances)]
    return api + [("Mesos-DNS", dns_port, (socket.SOCK_DGRAM, socket.SOCK_STREAM)),
                  ("Mesos-DNS HTTP API", dns_http_port, (socket.SOCK_STREAM,))]


def busy_ports(host: str, wanted: list[tuple[str, int, tuple[int, ...]]]) -> list[tuple[str, int]]:
    """``(what, port)`` of every fixed port in ``wanted`` (``(what, port, socket types)``; port 0 is
    skipped) that cannot be bound on ``host`` now, each tried once and let go: the runner reports
    them all in one line before it starts anything."""
    busy = []
    for what, port, kinds in wanted:
        if not port:
            continue
        for kind in kinds:
            try:
                family, _, _, _, address = socket.getaddrinfo(host, port, type=kind)[0]
                with socket.socket(family, kind) as sock:
                    if kind == socket.SOCK_STREAM:  # as asyncio's servers do: a port in TIME_WAIT is free
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    sock.bind(address)
            except OSError as e:  # any other problem (an address not of this machine…): the servers say it
                if e.errno == errno.EADDRINUSE:
                    busy.append((what, port))
                    break
    return busy


#: The name (in Linux's abstract Unix socket namespace) under which a runner claims a host port it gave a task.
CLAIM_NAME = "marathon-tf-local-port-{}"


def claim(port: int) -> socket.socket | bool:
    """Claim ``port`` among every local runner of this machine, whoever runs it: a socket bound to an
    abstract Unix address named after it, which the kernel lets one socket hold at a time and frees when
    its holder exits (SIGKILL included). Neither TCP's nor UDP's ports are touched: the task binds it
    freely. The socket: claimed; False: another runner holds the claim; True: claims cannot be made here
    (not Linux), go on unclaimed."""
    if not sys.platform.startswith("linux"):
        return True
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind("\0" + CLAIM_NAME.format(port))
    except OSError as e:
        sock.close()
        return e.errno != errno.EADDRINUSE
    return sock


class PortAllocator:
    """Free host ports for tasks: bind-tested, not reused soon after being handed out, and claimed
    against every other local runner of this machine (:func:`claim`) while they are new or in use.

    Two runners of one machine (two users, or a test suite's parallel workers) whose agents offer the
    same ranges would otherwise hand one port to two tasks in the seconds before either binds it (a
    TensorFlow server takes seconds to start): the later one fails with "Could not start gRPC server"."""

    def __init__(self, host: str = "127.0.0.1", quarantine: float = 120.0) -> None:
        self.host = host
        self.quarantine = quarantine
        #: where the default agent's ports come from (read once: the range its ``ports`` resource says)
        self.dynamic = dynamic_range()
        #: port -> (when handed out, its claim: the socket, or True where claims cannot be made)
        self._recent: dict[int, tuple[float, socket.socket | bool]] = {}

    def _free(self, port: int, host: str | None = None) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host or self.host, port))
            except OSError:
                return False
        return True

    def _expire(self, now: float, keep: Iterable[int]) -> None:
        """Forget (and let go of the claims on) the ports handed out over ``quarantine`` ago that no
        task holds now (``keep``)."""
        held = set(keep)
        for port, (when, claimed) in list(self._recent.items()):
            if when < now - self.quarantine and port not in held:
                del self._recent[port]
                if isinstance(claimed, socket.socket):
                    claimed.close()

    def _take(self, port: int, hosts: Iterable[str], now: float) -> bool:
        """Hand out ``port`` if it is free on ``hosts`` and no other runner claims it."""
        if port in self._recent or not all(self._free(port, h) for h in hosts):
            return False
        claimed = claim(port)
        if claimed is False:
            return False
        self._recent[port] = (now, claimed)
        return True

    def allocate(self, n: int, candidates: Sequence[int] | None = None, host: str | None = None,
                 keep: Iterable[int] = ()) -> list[int]:
        """``n`` distinct free ports chosen at random among ``candidates`` (an agent's free port ranges), as
        Marathon picks dynamic ports from an offer; without them (the default agent) among :func:`dynamic_range`'s,
        else any the kernel hands out.
        ``host``: the address they are tested on (the agent's); ``keep``: the ports this runner's
        tasks hold now, whose claims are kept however old. Raises OSError when none are free."""
        now = time.monotonic()
        self._expire(now, keep)
        ports: list[int] = []
        if candidates is None and self.dynamic is not None:
            candidates = range(self.dynamic[0], self.dynamic[1] + 1)
        if candidates is None:  # no room below the ephemeral range: the kernel's choice
            for _ in range(1000):
                if len(ports) == n:
                    break
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                    s.bind((self.host, 0))
                    port = s.getsockname()[1]
                if port not in ports and self._take(port, [self.host], now):
                    ports.append(port)
        else:
            hosts = {host or self.host, self.host}  # free on the agent's address and the runner's: TF binds all
            for port in random.sample(candidates, len(candidates)):
                if len(ports) == n:
                    break
                if self._take(port, hosts, now):
                    ports.append(port)
        if len(ports) != n:
            self.release(ports)
            raise OSError("no free ports")
        return ports

    def release(self, ports: Iterable[int]) -> None:
        """Let go of these ports now (handed out, then not used)."""
        for port in ports:
            _, claimed = self._recent.pop(port, (0.0, True))
            if isinstance(claimed, socket.socket):
                claimed.close()

    def close(self) -> None:
        """Let go of every claim (the runner stops)."""
        self.release(list(self._recent))
