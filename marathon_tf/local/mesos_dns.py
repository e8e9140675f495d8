"""Mesos-DNS for the local Marathon: A/SRV records over DNS (dnslib) and its HTTP API.

Records follow Mesos-DNS's (tests/local/test_local_mesos_dns.py cites its source) for every TASK_RUNNING
task of app ``/g/app`` (label ``app-g``, legacy name ``app.g``; the task's host is its agent's address,
127.0.0.N, and the canonical name ends in its agent id's tail, ``-s0`` for agent 1):
``<label>.marathon.mesos.`` and ``<label>.marathon.slave.mesos.`` (A), the
canonical ``<label>-<hash5>-s0.marathon[.slave].mesos.`` (A),
``_<label>._<proto>.marathon.mesos.`` (SRV, every port), ``_<name>._<label>._<proto>
.marathon.mesos.`` (SRV, named ports), ``_<label>._tcp|_udp.marathon.slave.mesos.``
(SRV, every port); the same again for the legacy dotted name. Records are rebuilt
from the task state every ``refresh`` seconds only (0: on every query), which
reproduces Mesos-DNS's propagation lag (it reloads every ``RefreshSeconds``; its defaults: a reload and a
TTL of 60 s).
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from dataclasses import dataclass, field
from typing import cast

from aiohttp import web
from dnslib import QTYPE, RCODE, RR, SOA, SRV, A, DNSRecord

from marathon_tf.contract import naming

from .state import State

__all__ = ["Records", "build_records", "MesosDns", "zbase32_hash"]

_ZBASE32 = "ybndrfg8ejkmcpqxot1uwisza345h769"


def zbase32_hash(text: str, length: int = 5) -> str:
    """The first ``length`` zbase32 characters of SHA-1(``text``) (Mesos-DNS ``hashString``)."""
    bits = "".join(f"{b:08b}" for b in hashlib.sha1(text.encode()).digest())
    return "".join(_ZBASE32[int(bits[i:i + 5].ljust(5, "0"), 2)] for i in range(0, len(bits), 5))[:length]


@dataclass
class Records:
    """A snapshot of the DNS records: name -> IPs, name -> (target, port)."""

    a: dict[str, list[str]] = field(default_factory=dict)
    srv: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

    def add_a(self, name: str, ip: str) -> None:
        self.a.setdefault(name.lower(), [])
        if ip not in self.a[name.lower()]:
            self.a[name.lower()].append(ip)

    def add_srv(self, name: str, target: str, port: int) -> None:
        entries = self.srv.setdefault(name.lower(), [])
        if (target.lower(), port) not in entries:
            entries.append((target.lower(), port))


def build_records(state: State, domain: str = "mesos", framework: str = "marathon") -> Records:
    """Records for every running task in ``state``."""
    rec = Records()
    for app in list(state.apps.values()):
        spec = app.run_def or app.definition
        definitions = spec.get("portDefinitions") or []
        label, legacy = naming.mesos_dns_label(app.id), naming.mesos_dns_legacy_name(app.id)
        for task in list(app.tasks.values()):
            if task.state != "TASK_RUNNING":
                continue
            digest = zbase32_hash(task.id)
            tail = task.agent_id.rsplit("-", 1)[-1].lower()
            for name in dict.fromkeys([label, legacy]):
                canon = f"{name}-{digest}-{tail}"
                fw, slave = f"{framework}.{domain}.", f"{framework}.slave.{domain}."
                for host in (f"{name}.{fw}", f"{name}.{slave}", f"{canon}.{fw}", f"{canon}.{slave}"):
                    rec.add_a(host, task.host)
                for i, port in enumerate(task.ports):
                    pd = definitions[i] if i < len(definitions) else {}
                    for proto in (pd.get("protocol") or "tcp").split(","):
                        rec.add_srv(f"_{name}._{proto}.{fw}", f"{canon}.{fw}", port)
                        if pd.get("name"):
                            rec.add_srv(f"_{pd['name']}._{name}._{proto}.{fw}", f"{canon}.{fw}", port)
                    for proto in ("tcp", "udp"):
                        rec.add_srv(f"_{name}._{proto}.{slave}", f"{canon}.{slave}", port)
    return rec


class MesosDns:
    """Serves the records over UDP/TCP DNS and the ``/v1`` HTTP API."""

    def __init__(self, state: State, refresh: float = 1.0, ttl: int = 5, domain: str = "mesos",
                 host: str = "127.0.0.1") -> None:
        self.state = state
        self.refresh = refresh
        self.ttl = ttl
        self.domain = domain
        self.host = host
        self.dns_port = 0
        self.http_port = 0
        self._records = Records()
        self._built = 0.0
        self._serial = int(time.time())
        self._udp: asyncio.DatagramTransport | None = None
        self._tcp: asyncio.AbstractServer | None = None
        self._connections: dict[asyncio.Task, asyncio.StreamWriter] = {}  # the open TCP connections' handlers

    # -- records --------------------------------------------------------------------
    def records(self) -> Records:
        """The current snapshot, rebuilt when ``refresh`` seconds have passed (0: always)."""
        now = time.monotonic()
        if self.refresh <= 0 or now - self._built >= self.refresh:
            self._records = build_records(self.state, self.domain)
            self._built = now
            self._serial += 1
        return self._records

    async def refresher(self) -> None:
        """Rebuild on schedule even when nobody asks (so lag is bounded by ``refresh``)."""
        while True:
            self.records()
            await asyncio.sleep(max(self.refresh, 0.05))

    # -- DNS ------------------------------------------------------------------------
    def answer(self, data: bytes) -> bytes | None:
        """The reply to one DNS query packet."""
        try:
            request = DNSRecord.parse(data)
        except Exception:  # dnslib raises DNSError and struct errors on junk
            return None
        reply = request.reply()
        qname = str(request.q.qname).lower()
        qtype = QTYPE[request.q.qtype]
        if not qname.endswith(f".{self.domain}.") and qname != f"{self.domain}.":
            reply.header.rcode = RCODE.REFUSED
            return reply.pack()
        rec = self.records()
        if qtype in ("A", "ANY"):
            ips = list(rec.a.get(qname, []))
            random.shuffle(ips)
            for ip in ips:
                reply.add_answer(RR(qname, QTYPE.A, rdata=A(ip), ttl=self.ttl))
        if qtype in ("SRV", "ANY"):
            targets = list(rec.srv.get(qname, []))
            random.shuffle(targets)
            for target, port in targets:
                reply.add_answer(RR(qname, QTYPE.SRV, rdata=SRV(0, 1, port, target), ttl=self.ttl))
            for target in dict.fromkeys(t for t, _ in targets):
                for ip in rec.a.get(target, []):
                    reply.add_ar(RR(target, QTYPE.A, rdata=A(ip), ttl=self.ttl))
        if qtype == "SOA" and qname == f"{self.domain}.":
            reply.add_answer(self._soa())
        if not reply.rr:
            known = qname in rec.a or qname in rec.srv or qname == f"{self.domain}."
            reply.header.rcode = RCODE.NOERROR if known else RCODE.NXDOMAIN
            reply.add_auth(self._soa())
        return reply.pack()

    def _soa(self) -> RR:
        return RR(f"{self.domain}.", QTYPE.SOA, ttl=self.ttl,
                  rdata=SOA(f"ns1.{self.domain}.", f"root.ns1.{self.domain}.", (self._serial, 60, 600, 86400, 60)))

    async def start_dns(self, port: int = 0) -> None:
        """Listen on UDP (and TCP on the same port)."""
        loop = asyncio.get_running_loop()
        outer = self

        class _Udp(asyncio.DatagramProtocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                # a datagram endpoint's protocol: its transport is a DatagramTransport
                self.transport = cast(asyncio.DatagramTransport, transport)

            def datagram_received(self, data: bytes, addr) -> None:
                out = outer.answer(data)
                if out is not None:
                    self.transport.sendto(out, addr)

        for attempt in range(50):
            self._udp, _ = await loop.create_datagram_endpoint(_Udp, local_addr=(self.host, port))
            self.dns_port = self._udp.get_extra_info("sockname")[1]
            try:
                self._tcp = await asyncio.start_server(self._serve_tcp, self.host, self.dns_port)
                return
            except OSError:  # the UDP port is taken on TCP: with a fixed port that is fatal
                self._udp.close()
                self._udp = None
                if port or attempt == 49:
                    raise

    async def _serve_tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """DNS over TCP: 2-byte length-prefixed messages; the connection is tracked until it ends, so
        that :meth:`stop_dns` ends it before the loop closes."""
        task = asyncio.current_task()
        if task is not None:
            self._connections[task] = writer
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(2), "big")
                out = self.answer(await reader.readexactly(size))
                if out is None:
                    break
                writer.write(len(out).to_bytes(2, "big") + out)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            if task is not None:
                self._connections.pop(task, None)

    async def stop_dns(self) -> None:
        """Stop listening and end every open TCP connection (a resolver may keep one open): a
        connection's handler left pending when the loop closes is a traceback at the program's exit."""
        if self._udp is not None:
            self._udp.close()
        if self._tcp is not None:
            self._tcp.close()
            # Closing its transport ends a handler's read (not a cancel: a cancelled handler is an error
            # the stream's own callback reports).
            handlers = list(self._connections)
            for writer in self._connections.values():
                writer.close()
            await asyncio.gather(*handlers, return_exceptions=True)
            await self._tcp.wait_closed()

    # -- HTTP API ---------------------------------------------------------------------
    def config(self) -> dict:
        """``/v1/config``: the Config struct with Go field names."""
        return {"RefreshSeconds": self.refresh, "Port": self.dns_port, "Timeout": 5, "StateTimeoutSeconds": 300,
                "ZkDetectionTimeout": 30, "HttpPort": self.http_port, "TTL": self.ttl,
                "SRVRecordDefaultWeight": 1, "SOASerial": self._serial, "SOARefresh": 60, "SOARetry": 600,
                "SOAExpire": 86400, "SOAMinttl": 60, "SOAMname": f"ns1.{self.domain}.",
                "SOARname": f"root.ns1.{self.domain}.", "Masters": [], "ZoneResolvers": {}, "Resolvers": [],
                "IPSources": ["host"], "Zk": "", "Domain": self.domain, "File": "", "Listener": self.host,
                "HTTPListener": self.host, "RecurseOn": False, "DnsOn": True, "HttpOn": True,
                "ExternalOn": False, "EnforceRFC952": False, "SetTruncateBit": True, "EnumerationOn": False,
                "MesosHTTPSOn": False, "CACertFile": "", "CertFile": "", "KeyFile": "",
                "MesosCredentials": {"Principal": "", "Secret": ""}, "IAMConfigFile": "",
                "MesosAuthentication": ""}

    def http_app(self) -> web.Application:
        """The ``/v1`` API (every route GET, JSON; not-found shapes as Mesos-DNS's REST handlers answer
        them)."""

        def key(name: str) -> str:
            name = name.lower().replace(".*", "")
            return name if name.endswith(".") else name + "."

        async def version(request: web.Request) -> web.Response:
            return web.json_response({"Service": "Mesos-DNS", "Version": "local",
                                      "URL": "https://github.com/mesosphere/mesos-dns"})

        async def config(request: web.Request) -> web.Response:
            return web.json_response(self.config())

        async def hosts(request: web.Request) -> web.Response:
            name = key(request.match_info["host"])
            ips = self.records().a.get(name, [])
            return web.json_response([{"host": name, "ip": ip} for ip in ips] or [{"host": "", "ip": ""}])

        async def ports(request: web.Request) -> web.Response:
            return web.Response(status=501, text="To be implemented...")

        async def services(request: web.Request) -> web.Response:
            given = request.match_info["service"]
            rec = self.records()
            out = [{"service": given, "host": target, "ip": ip, "port": str(port)}
                   for target, port in rec.srv.get(key(given), []) for ip in rec.a.get(target, [])]
            return web.json_response(out or [{"service": "", "host": "", "ip": "", "port": ""}])

        app = web.Application()
        app.router.add_get("/v1/version", version)
        app.router.add_get("/v1/config", config)
        app.router.add_get("/v1/hosts/{host}", hosts)
        app.router.add_get("/v1/hosts/{host}/ports", ports)
        app.router.add_get("/v1/services/{service}", services)
        return app

