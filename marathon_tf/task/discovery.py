"""Peers' ``host:port`` from Mesos-DNS (SRV or its HTTP API) or Marathon's tasks API.

A :class:`Backend` answers "where is each of these peers now?" with one
:class:`Observation` per peer: an address, or what was seen instead (NXDOMAIN,
no task, task not running: TASK_STAGING, ...). The rendezvous (:mod:`marathon_tf.task.rendezvous`)
asks a backend until every peer is known, and later watches for peers that moved; the polling
schedule of a job's size is here (:func:`poll_schedule`, :func:`watch_interval`). Everything
external (DNS client, HTTP session, clock, sleep, random) is passed in; a session made here is a
bounded one (:func:`marathon_tf.marathon.transport.session`). Marathon's tasks are read as
:mod:`marathon_tf.marathon.tasks` reads them (the newest running task, its port by name).

Scale: the Marathon backend makes ONE request per poll for the whole job; the DNS
backends ask only for the peers they are given (the rendezvous passes only the
still-missing ones) with bounded concurrency.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from marathon_tf.contract import naming
from marathon_tf.contract.taskenv import TaskContext, marathon_token
from marathon_tf.marathon import transport
from marathon_tf.marathon.jobstate import replaced
from marathon_tf.marathon.model import App, apps_by_id
from marathon_tf.marathon.tasks import RUNNING, port_index, task_address

__all__ = [
    "PeerKey", "Observation", "Backend", "SrvRecord", "LookupFailure", "DnsClient", "DnspythonClient",
    "MesosDnsBackend", "MesosDnsHttpBackend", "MarathonBackend", "make_backend", "missing_message",
    "poll_schedule", "watch_interval", "JOB_POLLS_PER_SECOND",
]

PeerKey = tuple[str, int]
DEFAULT_TIMEOUT = 5.0
MAX_CONCURRENCY = 16


@dataclass(frozen=True)
class Observation:
    """What a backend saw for one peer: ``address`` ("host:port") or None, and a detail."""

    address: str | None
    detail: str


class Backend(Protocol):
    def lookup(self, peers: Sequence[PeerKey]) -> dict[PeerKey, Observation]:
        """One observation for every peer asked about."""


def _name(peer: PeerKey) -> str:
    return naming.task_name(*peer)


def _single(addresses: Sequence[str], what: str) -> Observation:
    distinct = sorted(set(addresses))
    if not distinct:
        return Observation(None, f"{what}: no address")
    if len(distinct) > 1:
        # Two live records for one task (a relaunch overlapping): wait rather than guess.
        return Observation(None, f"{what}: {len(distinct)} records ({', '.join(distinct)}), waiting for one")
    return Observation(distinct[0], "ok")


def _parallel(fn: Callable[[PeerKey], Observation], peers: Sequence[PeerKey],
              workers: int) -> dict[PeerKey, Observation]:
    if len(peers) <= 1:
        return {p: fn(p) for p in peers}
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(peers)))) as pool:
        return dict(zip(peers, pool.map(fn, peers)))


# --- Mesos-DNS over DNS -----------------------------------------------------------------------

@dataclass(frozen=True)
class SrvRecord:
    target: str
    port: int
    addresses: tuple[str, ...] = ()   # A records of the target found in the additional section


class LookupFailure(Exception):
    """A DNS lookup gave no usable answer; ``str()`` says why (NXDOMAIN, timeout, ...)."""


class DnsClient(Protocol):
    def srv(self, name: str) -> list[SrvRecord]: ...

    def a(self, name: str) -> list[str]: ...


class DnspythonClient:
    """:class:`DnsClient` through dnspython, against ``nameserver`` (``ip[:port]``) or the
    system resolver when it is empty."""

    def __init__(self, nameserver: str = "", *, timeout: float = 3.0):
        import dns.resolver

        if nameserver:
            host, _, port = nameserver.rpartition(":") if nameserver.count(":") == 1 else (nameserver, "", "")
            resolver = dns.resolver.Resolver(configure=False)
            resolver.nameservers = [host]
            resolver.port = int(port or 53)
        else:
            resolver = dns.resolver.Resolver()
        resolver.timeout = resolver.lifetime = timeout
        resolver.cache = None
        self._resolver = resolver

    def _query(self, name: str, rdtype: str):
        import dns.exception
        import dns.resolver

        try:
            return self._resolver.resolve(name, rdtype, search=False)
        except dns.resolver.NXDOMAIN:
            raise LookupFailure("NXDOMAIN") from None
        except dns.resolver.NoAnswer:
            raise LookupFailure(f"no {rdtype} record") from None
        except dns.resolver.NoNameservers:
            raise LookupFailure("no nameserver answered (SERVFAIL)") from None
        except dns.exception.Timeout:
            raise LookupFailure("DNS timeout") from None

    def srv(self, name: str) -> list[SrvRecord]:
        import dns.rdatatype

        answer = self._query(name, "SRV")
        extra: dict[str, list[str]] = {}
        for rrset in answer.response.additional:
            if rrset.rdtype == dns.rdatatype.A:
                extra.setdefault(str(rrset.name).lower(), []).extend(r.address for r in rrset)
        out = []
        for r in answer:
            target = str(r.target).lower()
            out.append(SrvRecord(target, int(r.port), tuple(extra.get(target, ()))))
        return out

    def a(self, name: str) -> list[str]:
        return [r.address for r in self._query(name, "A")]


class MesosDnsBackend:
    """SRV ``_<port>._<task label>._tcp.<framework>.<domain>.`` then the target's A record."""

    def __init__(self, client: DnsClient | None, *, job: str, port_name: str = "tf", framework: str = "marathon",
                 domain: str = "mesos", concurrency: int = MAX_CONCURRENCY):
        # client None: only srv_name() is used (MesosDnsHttpBackend)
        self.client, self.job, self.port_name = client, job, port_name
        self.framework, self.domain, self.concurrency = framework, domain, concurrency

    def srv_name(self, peer: PeerKey) -> str:
        return naming.srv_name(naming.app_id(self.job, *peer), port_name=self.port_name,
                               framework=self.framework, domain=self.domain)

    def _one(self, peer: PeerKey) -> Observation:
        name = self.srv_name(peer)
        client = self.client
        assert client is not None, "a backend without a DNS client only names records"
        try:
            records = client.srv(name)
            addresses: list[str] = []
            for rec in records:
                ips = list(rec.addresses) or client.a(rec.target)
                addresses.extend(f"{ip}:{rec.port}" for ip in sorted(ips)[:1])
        except LookupFailure as e:
            return Observation(None, f"{e} ({name})")
        return _single(addresses, name)

    def lookup(self, peers: Sequence[PeerKey]) -> dict[PeerKey, Observation]:
        return _parallel(self._one, peers, self.concurrency)


# --- Mesos-DNS HTTP API ---------------------------------------------------------------------

class MesosDnsHttpBackend:
    """``GET {base}/v1/services/<srv name>``; not found is 200 with one empty record."""

    def __init__(self, session, base_url: str, *, job: str, port_name: str = "tf", framework: str = "marathon",
                 domain: str = "mesos", timeout: float = DEFAULT_TIMEOUT, concurrency: int = MAX_CONCURRENCY,
                 headers: Mapping[str, str] | None = None):
        self.session, self.base = session, base_url.rstrip("/")
        self.headers = dict(headers or {})
        self.dns = MesosDnsBackend(None, job=job, port_name=port_name, framework=framework, domain=domain)
        self.timeout, self.concurrency = timeout, concurrency

    def _one(self, peer: PeerKey) -> Observation:
        name = self.dns.srv_name(peer).rstrip(".")
        try:
            resp = self.session.get(f"{self.base}/v1/services/{name}", headers=self.headers, timeout=self.timeout)
            if resp.status_code != 200:
                return Observation(None, f"Mesos-DNS HTTP {resp.status_code} ({name})")
            entries = resp.json()
        except ValueError:
            return Observation(None, f"Mesos-DNS sent invalid JSON ({name})")
        except Exception as e:  # requests' connection errors, without importing requests here
            return Observation(None, f"Mesos-DNS unreachable: {type(e).__name__} ({name})")
        addresses = [f"{e['ip']}:{e['port']}" for e in entries or []
                     if isinstance(e, dict) and e.get("ip") and e.get("port") and ":" not in str(e["ip"])]
        if not addresses:
            return Observation(None, f"not in Mesos-DNS ({name})")
        return _single(addresses, name)

    def lookup(self, peers: Sequence[PeerKey]) -> dict[PeerKey, Observation]:
        return _parallel(self._one, peers, self.concurrency)


# --- Marathon tasks API ---------------------------------------------------------------------

class MarathonBackend:
    """One ``GET /v2/groups/<job>?embed=...`` per poll for the whole job; only TASK_RUNNING
    tasks count, the newest (the latest to start) when a relaunch overlaps."""

    EMBED = [("embed", "group.apps"), ("embed", "group.apps.tasks"), ("embed", "group.groups")]

    def __init__(self, session, urls: Sequence[str] | str, *, job: str, port_name: str = "tf",
                 network: str = "host", headers: Mapping[str, str] | None = None,
                 timeout: float = DEFAULT_TIMEOUT, also_port: str | None = None):
        if isinstance(urls, str):
            urls = [u.strip() for u in urls.split(",") if u.strip()]
        if not urls:
            raise ValueError("MTF_MARATHON_URL is not set (needed for MTF_DISCOVERY=marathon)")
        self.session, self.urls, self.job = session, [u.rstrip("/") for u in urls], job
        self.port_name, self.network = port_name, network
        self.headers, self.timeout = dict(headers or {}), timeout
        self._current = 0
        self.requests = 0       # GETs sent to Marathon, and the bytes of their bodies
        self.bytes_read = 0
        self.last_bytes = 0     # the size of the last answer (the group grows with the job)
        self.last_error: str | None = None  # why the last lookup() got no group at all, else None
        self.port_indexes: dict[PeerKey, int] = {}  # each app's index of the port named port_name (once read)
        self.also_port = also_port  # another port whose addresses lookup() records (the leader's hints)
        self.also_indexes: dict[PeerKey, int] = {}
        self.also_addresses: dict[PeerKey, str | None] = {}

    def _get(self, path: str, params) -> tuple[Any | None, str]:
        """GET ``path`` with failover between the URLs: (response, "ok") or (None, why)."""
        why = "no Marathon URL"
        for attempt in range(len(self.urls)):
            i = (self._current + attempt) % len(self.urls)
            try:
                resp = self.session.get(f"{self.urls[i]}{path}", params=params, headers=self.headers,
                                        timeout=self.timeout)
            except Exception as e:  # connection error / timeout: try the next URL
                why = f"Marathon unreachable ({type(e).__name__})"
                continue
            self.requests += 1
            content = getattr(resp, "content", None)
            self.last_bytes = len(content) if isinstance(content, (bytes, bytearray)) else 0
            self.bytes_read += self.last_bytes
            if resp.status_code == 503:
                why = "Marathon 503 (no leader?)"
                continue
            self._current = i
            return resp, "ok"
        return None, why

    def fetch_group(self) -> tuple[dict | None, str]:
        """The job's group (apps with tasks), or None and why; fails over between URLs."""
        resp, why = self._get(f"/v2/groups{naming.group_id(self.job)}", self.EMBED)
        if resp is None:
            return None, why
        if resp.status_code == 404:
            return None, f"no Marathon group {naming.group_id(self.job)}"
        if resp.status_code != 200:
            return None, f"Marathon HTTP {resp.status_code}"
        try:
            return resp.json(), "ok"
        except ValueError:
            return None, "Marathon sent invalid JSON"

    def lookup_app(self, peer: PeerKey) -> Observation:
        """One peer through ``GET /v2/apps/<job>/<task>?embed=app.tasks`` (a few KB, whatever
        the job's size): how a follower finds its leader."""
        app_id = naming.app_id(self.job, *peer)
        resp, why = self._get(f"/v2/apps{app_id}", [("embed", "app.tasks")])
        if resp is None:
            return Observation(None, why)
        if resp.status_code == 404:
            return Observation(None, f"no app {app_id}")
        if resp.status_code != 200:
            return Observation(None, f"Marathon HTTP {resp.status_code}")
        try:
            app = resp.json().get("app")
        except (ValueError, AttributeError):
            return Observation(None, "Marathon sent invalid JSON")
        return self._observe(App.parse(app)) if isinstance(app, dict) else Observation(None, "Marathon sent no app")

    def _observe(self, app: App, port_name: str | None = None) -> Observation:
        """Where the app's newest running task serves its port named ``port_name`` (default: the TF port)."""
        if not app.tasks:
            return Observation(None, "no task")
        task = app.newest_task((RUNNING,))
        if task is None:
            return Observation(None, "task not running: " + ", ".join(sorted({str(t.state) for t in app.tasks})))
        if replaced(app, task):
            return Observation(None, "its task is being replaced (launched with an earlier configuration of its "
                                     "app; a deployment under way)")
        name = port_name or self.port_name
        address = task_address(app, task, name, container_network=self.network == "container")
        if address is None:
            return Observation(None, f"running task has no host/port {name!r}")
        return Observation(address, "ok")

    def lookup(self, peers: Sequence[PeerKey]) -> dict[PeerKey, Observation]:
        group, why = self.fetch_group()
        self.last_error = None if group is not None else why
        if group is None:
            return {p: Observation(None, why) for p in peers}
        apps: dict[PeerKey, App] = {}
        for app in apps_by_id(group).values():  # (its subgroups' too)
            key = naming.parse_app_id(self.job, app.id or "")
            if key is not None:
                apps[key] = app
                index = port_index(app, self.port_name)
                if index is not None:
                    self.port_indexes[key] = index
                if self.also_port:
                    index = port_index(app, self.also_port)
                    if index is not None:
                        self.also_indexes[key] = index
                    self.also_addresses[key] = self._observe(app, self.also_port).address
        return {p: self._observe(apps[p]) if p in apps else Observation(None, f"no app {naming.app_id(self.job, *p)}")
                for p in peers}


def marathon_headers(environ: Mapping[str, str]) -> dict[str, str]:
    """Auth headers from ``MARATHON_TOKEN`` (or the file ``MARATHON_TOKEN_FILE`` names) or
    ``MARATHON_USER``/``MARATHON_PASSWORD``."""
    import base64

    token = marathon_token(environ)
    if token:
        return {"Authorization": f"token={token}"}
    if environ.get("MARATHON_USER"):
        raw = f"{environ['MARATHON_USER']}:{environ.get('MARATHON_PASSWORD', '')}".encode()
        return {"Authorization": "Basic " + base64.b64encode(raw).decode()}
    return {}


def make_backend(ctx: TaskContext, environ: Mapping[str, str], *, session=None,
                 dns_client: DnsClient | None = None, also_port: str | None = None) -> Backend:
    """The backend ``ctx.discovery`` names, built from the task's context and environment. ``also_port``: the
    rendezvous leader's Marathon backend also records the followers' addresses of that port (its hints)."""
    common: dict[str, Any] = {"job": ctx.job, "port_name": ctx.port_name}
    if ctx.discovery == "mesos-dns":
        client = dns_client or DnspythonClient(ctx.mesos_dns)
        return MesosDnsBackend(client, framework=ctx.dns_framework, domain=ctx.dns_domain, **common)
    if session is None:
        session = transport.session()
    if ctx.discovery == "mesos-dns-http":
        if not ctx.mesos_dns_http:
            raise ValueError("MTF_MESOS_DNS_HTTP is not set (needed for MTF_DISCOVERY=mesos-dns-http)")
        # Marathon's credentials go only to the local runner's own Mesos-DNS (behind the runner's auth);
        # a cluster's Mesos-DNS has no auth, and is not to be handed Marathon's secrets
        own = environ.get("MTF_RUNNER_MESOS_DNS_HTTP") == ctx.mesos_dns_http
        return MesosDnsHttpBackend(session, ctx.mesos_dns_http, framework=ctx.dns_framework, domain=ctx.dns_domain,
                                   headers=marathon_headers(environ) if own else None, **common)
    if ctx.discovery == "marathon":
        return MarathonBackend(session, ctx.marathon_url, network=ctx.network,
                               headers=marathon_headers(environ), also_port=also_port, **common)
    raise ValueError(f"MTF_DISCOVERY must be mesos-dns, mesos-dns-http or marathon, not {ctx.discovery!r}")


# --- rendezvous -------------------------------------------------------------------------------

def missing_message(missing: Mapping[PeerKey, str], timeout: float) -> str:
    """The deadline error: every missing peer and what was last seen for it."""
    lines = [f"{_name(p)}: {detail}" for p, detail in sorted(missing.items())]
    shown = lines[:50] + ([f"... and {len(lines) - 50} more"] if len(lines) > 50 else [])
    return (f"{len(missing)} peer(s) not found within {timeout:g}s: " + "; ".join(shown))


#: The polling budget of a whole job: the job's tasks together should not ask Marathon or
#: Mesos-DNS more than this many times per second once their backoff has reached its cap.
JOB_POLLS_PER_SECOND = 50.0


def poll_schedule(tasks: int) -> tuple[float, float]:
    """(first delay, cap) of the rendezvous backoff for a job of ``tasks`` tasks.

    Small jobs poll quickly (a 3-task job: 0.25 s doubling to 1 s), so a late peer is seen
    within a second of appearing; a large job's cap grows with its size so that all its
    tasks together stay near :data:`JOB_POLLS_PER_SECOND` (1,000 tasks: 2.5 s doubling to 20 s).
    """
    n = max(1, tasks)
    return min(5.0, max(0.25, n / (8 * JOB_POLLS_PER_SECOND))), min(60.0, max(1.0, n / JOB_POLLS_PER_SECOND))


def watch_interval(tasks: int, base: float) -> float:
    """Mean seconds between watch polls once formed: ``base``, longer for large jobs so that
    the job's watch load stays under a fifth of :data:`JOB_POLLS_PER_SECOND`."""
    return max(base, max(1, tasks) / (JOB_POLLS_PER_SECOND / 5))
