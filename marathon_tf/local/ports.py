"""Which of the runner's fixed ports are taken, all checked at once before anything starts (stdlib
only, so that ``local serve`` says it within a fraction of a second, before it imports its servers)."""

from __future__ import annotations

import errno
import socket

__all__ = ["PortInUse", "busy_ports", "runner_ports"]


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
