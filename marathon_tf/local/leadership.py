"""HA Marathon in the local cluster: several API instances over one state, one of them the leader.

Modelled on Marathon 1.11, whose defaults the local cluster has (1.8, whose REST API the runner speaks,
does the same here; tests/local/test_local_leadership.py cites the code):

* Every request passes Marathon's ``LeaderProxyFilter`` (mounted on ``/*``). The leader serves it,
  adding ``X-Marathon-Leader: http://host:port`` (here: ``server.py``). A standby that knows the
  leader redirects ``/v2/events`` to it with a 302 (``shouldBeRedirectedToLeader``) and forwards
  everything else (the request's headers except ``Connection``/``Host``, plus ``X-Marathon-Via: 1.1
  host:port`` to catch loops and ``X-Forwarded-For``; the leader's status, headers and body back, plus
  ``X-Marathon-Via``);
  a leader it cannot connect to gives ``sendError(502, "Connection to leader refused.")`` (Jetty's HTML
  error page, no ``X-Marathon-Leader``). With no leader known it waits for one
  (``waitForConsistentLeadership``: 11 looks, 250 ms apart), then answers 502 "Could not determine
  the current leader" as a Jetty error page (1.4–1.6: 503).
* ``/v2/leader``: GET ``{"leader": "host:port"}``; DELETE on the leader answers
  ``{"message": "Leadership abdicated"}`` and abdicates 500 ms later.
* A killed leader (a crash: :meth:`Leadership.kill`) stops answering at once; for ``election_gap`` seconds —
  ``LocalCluster``'s ``zk_session_timeout``, Marathon's ``--zk_session_timeout``, 10 s by default: its ZooKeeper
  session has not expired, so its leader node is still there — the standbys still name it, so every request they
  forward fails with that 502 and ``/v2/events`` is redirected to the dead port; then the next live instance is
  elected. After an abdication there is no leader for ``election_gap`` seconds (standbys hold requests, then 502),
  then the next live instance is elected (a simplification: a real 1.11 leader that abdicates closes its leader
  latch and exits, so the next one leads once it has started).

Playing an older Marathon (``versions.py``): up to 1.6.392 a standby forwards with ``HttpURLConnection``,
so a GET or DELETE whose leader refuses the connection gets 502 "Failed to successfully establish a
connection to the leader." (the failure surfaces while the status is read) and only a PUT/POST, which
fails writing its body, gets "Connection to leader refused." (503 on 1.4.8 – 1.4.x); "no leader" is a 503
before 1.7.149.

Only Marathon's routes (``/v2/…``, ``/ping``) go through the leader. The admin API (``/_local/``),
the Mesos master and agent endpoints and the UI are served by every live instance. The state, the
scheduler and the tasks are shared and keep running through an election (tasks on Mesos agents
outlive their framework's leader; what a new leader reconciles is not modelled, but its suppress/revive
stream starts over: ``revive.py``).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from .errors import jetty_error
from .faults import ADMIN_PREFIX
from .versions import Played
from .versions import played as _played

__all__ = ["Leadership", "Instance", "NO_LEADER", "LEADER_REFUSED", "HOLD_LOOKS", "HOLD_INTERVAL"]

NO_LEADER = "Could not determine the current leader"
LEADER_REFUSED = "Connection to leader refused."
PROXY_LOOP = "Detected proxying loop."
#: ``waitForConsistentLeadership``: up to 11 looks at the election, 250 ms apart, before a 502.
HOLD_LOOKS, HOLD_INTERVAL = 11, 0.25
#: How long after its DELETE ``/v2/leader`` a leader abdicates (Marathon's 500 ms).
ABDICATION_DELAY = 0.5
#: Marathon's ``--leader_proxy_connection_timeout`` 5 s and ``--leader_proxy_read_timeout`` 10 s defaults
PROXY_TIMEOUT = aiohttp.ClientTimeout(sock_connect=5.0, sock_read=10.0)
#: Not forwarded: hop-by-hop, recomputed, or already checked by this instance's security (a browser's
#: same-origin request to a standby would read as cross-origin on the leader's port).
_NOT_FORWARDED = {"connection", "host", "content-length", "transfer-encoding", "keep-alive", "upgrade",
                  "origin", "referer", "sec-fetch-site", "sec-fetch-mode", "sec-fetch-dest"}
_NOT_RETURNED = {"connection", "content-length", "transfer-encoding", "keep-alive", "date", "server"}


def _reserve(host: str, port: int) -> socket.socket | None:
    """Hold ``port`` on ``host`` without listening (None: it cannot be held: taken already, or another error)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server's: its closed connections' TIME_WAIT
        sock.bind((host, port))
    except OSError:
        sock.close()
        return None
    return sock


def _let_go(inst: Instance) -> None:
    if inst.reserved is not None:
        inst.reserved.close()
        inst.reserved = None


def marathon_route(path: str) -> bool:
    """Whether ``path`` is one of Marathon's own routes (which only the leader serves)."""
    return path == "/ping" or path == "/v2" or path.startswith("/v2/")


@dataclass(eq=False)
class Instance:
    """One Marathon API instance: its port (0: a free one until it first listens) and server."""

    index: int
    port: int
    url: str = ""
    alive: bool = False
    runner: web.AppRunner | None = field(default=None, repr=False)
    #: set while the instance is frozen (a host that takes connections and answers nothing): cleared to thaw
    frozen: asyncio.Event | None = field(default=None, repr=False)
    #: dead with its host off the network (it drops every packet): a connect to it times out, none is refused
    unreachable: bool = False
    #: while dead: its port, bound and not listening (a connect to it is refused, as to a crashed server's), so
    #: that no other socket of this machine (an outgoing connection's ephemeral port) takes it before it starts
    #: again — a host's port stays its Marathon's across a crash
    reserved: socket.socket | None = field(default=None, repr=False)

    @property
    def host_port(self) -> str:
        return self.url.split("://", 1)[-1]


class Leadership:
    """The instances, the election and the leader proxy. ``make_app()`` builds one instance's
    application (over the shared runtime); ``on_elected(url)`` is told every new leader;
    ``listen(what, host, port, coro)`` starts a site (raising the cluster's PortInUse)."""

    def __init__(self, make_app: Callable[[], web.Application], host: str, url_host: str, ports: list[int], *,
                 on_elected: Callable[[str], None], listen: Callable[..., Awaitable[None]],
                 election_gap: float = 10.0, played: Played | None = None) -> None:
        #: The Marathon version played: its standbys' answers.
        self.played = played or _played()
        self.make_app, self.host, self.url_host = make_app, host, url_host
        self.instances = [Instance(i, port) for i, port in enumerate(ports)]
        self.on_elected, self.listen, self.election_gap = on_elected, listen, election_gap
        #: The instance ZooKeeper names as leader (dead during the gap after a crash); None: no leader.
        self.named: Instance | None = None
        self._election: asyncio.Task | None = None
        self._session: aiohttp.ClientSession | None = None
        #: the standbys' forwarding timeouts (Marathon's ``--leader_proxy_connection_timeout``, ``..._read_timeout``)
        self.proxy_timeout = PROXY_TIMEOUT

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        """Start every instance; the first one is elected."""
        for inst in self.instances:
            await self.start_instance(inst)

    async def start_instance(self, inst: Instance) -> None:
        """(Re)start one instance as a standby (the leader when there is none)."""
        if inst.alive:
            return
        app = self.make_app()
        app.middlewares.insert(1, self._middleware(inst))  # after security: Jetty checks credentials first
        self._add_admin_routes(app, inst)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=2.0)
        await runner.setup()
        _let_go(inst)
        try:
            await self.listen("Marathon API", self.host, inst.port, web.TCPSite(runner, self.host, inst.port).start())
        except BaseException:
            await runner.cleanup()
            raise
        inst.port = runner.addresses[0][1]
        inst.url = f"http://{self.url_host}:{inst.port}"
        inst.runner, inst.alive = runner, True
        if inst.unreachable:
            inst.unreachable, self.proxy_timeout = False, PROXY_TIMEOUT
        if self.named is None and self._election is None:
            self._elect(inst)

    async def kill(self, inst: Instance, *, unreachable: bool = False, connect_timeout: float | None = None) -> None:
        """A crash: the instance stops listening and drops every connection at once. ``unreachable``: its host
        drops every packet as well (a partition, a host gone), so its standbys' forwards run into their
        connect timeout (``--leader_proxy_connection_timeout``; ``connect_timeout`` sets it until the instance
        starts again, for tests) instead of being refused."""
        if not inst.alive or inst.runner is None:
            return
        inst.alive = False
        if unreachable:
            inst.unreachable = True
            if connect_timeout is not None:
                self.proxy_timeout = aiohttp.ClientTimeout(sock_connect=connect_timeout,
                                                           sock_read=self.proxy_timeout.sock_read)
        runner, inst.runner = inst.runner, None
        for site in list(runner.sites):
            await site.stop()
        server = runner.server
        for handler in list(server.connections) if server is not None else []:
            if handler.transport is not None:
                handler.transport.abort()
        await runner.cleanup()
        inst.reserved = _reserve(self.host, inst.port)
        if inst is self.named and self._election is None:
            self._schedule_election(after=inst)  # standbys name the dead one until its session expires

    def freeze(self, inst: Instance, frozen: bool, read_timeout: float | None = None) -> None:
        """A leader that hangs (its host takes connections and answers nothing): the Marathon requests it
        would serve get no answer while it is frozen, and are dropped when it thaws (they were never applied).
        Its standbys' forwards run into their read timeout (``--leader_proxy_read_timeout``; ``read_timeout``
        sets it while the instance is frozen, for tests; thawed, it is :data:`PROXY_TIMEOUT`'s again)."""
        if frozen and read_timeout is not None:
            self.proxy_timeout = aiohttp.ClientTimeout(sock_connect=PROXY_TIMEOUT.sock_connect, sock_read=read_timeout)
        elif not frozen:
            self.proxy_timeout = PROXY_TIMEOUT
        if frozen and inst.frozen is None:
            inst.frozen = asyncio.Event()
        elif not frozen and inst.frozen is not None:
            thawed = inst.frozen
            inst.frozen = None
            thawed.set()

    def abdicate(self) -> None:
        """The leader gives up (``DELETE /v2/leader``): no leader until the next election."""
        previous, self.named = self.named, None
        self._schedule_election(after=previous)

    async def stop(self) -> None:
        if self._election is not None:
            self._election.cancel()
            self._election = None
        for inst in self.instances:
            _let_go(inst)
            if inst.runner is not None:
                inst.alive = False
                await inst.runner.cleanup()
                inst.runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- the election -------------------------------------------------------------------
    @property
    def leader(self) -> Instance | None:
        """The live, elected leader (None during an election)."""
        return self.named if self.named is not None and self.named.alive else None

    def _elect(self, inst: Instance) -> None:
        self.named = inst
        self.on_elected(inst.url)

    def _schedule_election(self, after: Instance | None) -> None:
        if self._election is not None:
            self._election.cancel()

        async def elect() -> None:
            try:
                await asyncio.sleep(self.election_gap)
                n = len(self.instances)
                start = after.index + 1 if after is not None else 0
                candidates = [self.instances[(start + i) % n] for i in range(n)]
                winner = next((c for c in candidates if c.alive), None)
                self.named = None
                if winner is not None:
                    self._elect(winner)
            finally:
                if self._election is asyncio.current_task():
                    self._election = None

        self._election = asyncio.ensure_future(elect())

    # -- the filter ---------------------------------------------------------------------
    def _middleware(self, inst: Instance) -> Callable:
        @web.middleware
        async def leader_proxy(request: web.Request, handler: Callable[[web.Request], Awaitable]) -> web.StreamResponse:
            if not marathon_route(request.path):
                return await handler(request)
            for _ in range(HOLD_LOOKS):
                named = self.named
                if named is inst and inst.alive:
                    if inst.frozen is not None:  # hung: no answer, and nothing applied
                        await inst.frozen.wait()
                        return jetty_error(503, "the instance was frozen", request.path)
                    if request.path == "/v2/leader" and request.method == "DELETE":
                        asyncio.get_running_loop().call_later(ABDICATION_DELAY, self._abdicate_if_leader, inst)
                        return web.json_response({"message": "Leadership abdicated"})
                    return await handler(request)
                if named is not None and named is not inst:
                    if request.path == "/v2/events":
                        return web.Response(status=302, headers={"Location": named.url + request.raw_path})
                    return await self._forward(inst, named, request)
                await asyncio.sleep(HOLD_INTERVAL)  # an election is under way: hold the request
            return jetty_error(self.played.no_leader_status, NO_LEADER, request.path)

        return leader_proxy

    def _abdicate_if_leader(self, inst: Instance) -> None:
        if self.named is inst:
            self.abdicate()

    async def _forward(self, inst: Instance, leader: Instance, request: web.Request) -> web.StreamResponse:
        via = f"1.1 {inst.host_port}"
        if via in request.headers.getall("X-Marathon-Via", []):
            return jetty_error(502, PROXY_LOOP, request.path)
        headers = CIMultiDict((k, v) for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED)
        headers.add("X-Marathon-Via", via)
        forwarded_for = [request.headers.get("X-Forwarded-For"), request.remote]
        headers["X-Forwarded-For"] = ",".join(x for x in forwarded_for if x)
        body = await request.read()
        if leader.unreachable:  # no connection ever comes: the connect timeout, then the version's answer
            await asyncio.sleep(self.proxy_timeout.sock_connect or 0.0)
            status, text = self.played.connect_timeout_answer(write=request.method not in ("GET", "HEAD", "DELETE"))
            return jetty_error(status, text, request.path)
        if self._session is None:
            self._session = aiohttp.ClientSession(auto_decompress=False)
        try:
            async with self._session.request(request.method, URL(leader.url + request.raw_path, encoded=True),
                                             headers=headers, data=body or None, allow_redirects=False,
                                             timeout=self.proxy_timeout) as r:
                data = await r.read()
                out = web.Response(status=r.status, body=data)
                for k, v in r.headers.items():
                    if k.lower() not in _NOT_RETURNED:
                        out.headers.add(k, v)
        except aiohttp.SocketTimeoutError:  # the leader took the connection, and no status came in time
            answer = self.played.read_timeout_answer
            if answer is not None:
                return jetty_error(answer[0], answer[1], request.path)
            return jetty_error(502, LEADER_REFUSED, request.path)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            if request.method in ("GET", "HEAD", "DELETE"):
                text = self.played.read_forward_failure
                return jetty_error(502, text, request.path)
            return jetty_error(self.played.write_forward_status, LEADER_REFUSED, request.path)
        out.headers.add("X-Marathon-Via", via)
        return out

    # -- the admin API ------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        leader = self.leader
        return {"leader": leader.url if leader else None,
                "instances": [{"url": i.url, "state": "dead" if not i.alive else "leader" if i is leader
                               else "standby"} for i in self.instances]}

    def find(self, url: str | None) -> Instance | None:
        """The instance with this URL; with None the leader (the one ZooKeeper names, even if dead)."""
        if url is None:
            return self.named
        return next((i for i in self.instances if i.url == url.rstrip("/")), None)

    def _add_admin_routes(self, app: web.Application, me: Instance) -> None:
        async def listing(request: web.Request) -> web.Response:
            return web.json_response(self.describe())

        async def body(request: web.Request) -> dict:
            try:
                data = await request.json() if request.can_read_body else {}
            except ValueError:
                data = None
            if not isinstance(data, dict):
                raise web.HTTPUnprocessableEntity(text='{"message": "the body must be a JSON object"}',
                                                  content_type="application/json")
            return data

        async def kill(request: web.Request) -> web.Response:
            data = await body(request)
            inst = self.find(data.get("url"))
            if inst is None or not inst.alive:
                what = data.get("url") or "the leader"
                return web.json_response({"message": f"no live Marathon instance {what}"}, status=404)
            unreachable = data.get("unreachable") is True
            if inst is me:  # answer first: this connection dies with the instance
                asyncio.get_running_loop().call_later(
                    0.1, lambda: asyncio.ensure_future(self.kill(inst, unreachable=unreachable)))
            else:
                await self.kill(inst, unreachable=unreachable)
            return web.json_response({"killed": inst.url})

        async def start(request: web.Request) -> web.Response:
            inst = self.find((await body(request)).get("url") or "")
            if inst is None:
                return web.json_response({"message": "name the instance's url"}, status=404)
            await self.start_instance(inst)
            return web.json_response({"started": inst.url})

        app.router.add_get(ADMIN_PREFIX + "instances", listing)
        app.router.add_post(ADMIN_PREFIX + "instances/kill", kill)
        app.router.add_post(ADMIN_PREFIX + "instances/start", start)

        async def freeze(request: web.Request) -> web.Response:
            data = await body(request)
            inst = self.find(data.get("url"))
            if inst is None or not inst.alive:
                return web.json_response({"message": f"no live Marathon instance {data.get('url') or 'the leader'}"},
                                         status=404)
            self.freeze(inst, data.get("frozen", True) is not False)
            return web.json_response({"frozen": inst.frozen is not None, "url": inst.url})

        app.router.add_post(ADMIN_PREFIX + "instances/freeze", freeze)
