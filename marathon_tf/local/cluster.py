"""``LocalCluster``: the local Marathon + Mesos-DNS on a background event loop.

For the CLI (``marathon-tf deploy --local``, ``marathon-tf local serve`` via
:func:`serve`) and for tests. Synchronous callers use it as a context manager;
everything (aiohttp server, DNS server, scheduler, task processes) runs on one
event loop in a daemon thread. Stopping kills every task process group; an
``atexit`` hook and the tasks' parent-death signal cover a crashing caller.
"""

from __future__ import annotations

import asyncio
import atexit
import math
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from .agents import Agents
from .faults import FaultInjector
from .launcher import Launcher, WarmPoolFactory
from .leadership import Leadership
from .mesos_dns import MesosDns
from .ports import PortInUse, busy_ports, runner_ports
from .revive import DECLINE_OFFER_DURATION, MIN_REVIVE_OFFERS_INTERVAL
from .security import Credentials, Security
from .server import DEFAULT_FEATURES, FEATURES, Runtime, create_app
from .taskscope import read_only
from .versions import SCALE_APPS_INTERVAL, played

#: Marathon 1.11's ``--zk_session_timeout`` default, 10 s: how long a crashed leader is still named.
ZK_SESSION_TIMEOUT = 10.0

__all__ = ["LocalCluster", "PortInUse", "busy_ports", "serve"]


#: How long the caller's thread blocks at a time while it waits on the loop (see :func:`_result`).
WAKE_SLICE = 0.2


def _result(future: Any, timeout: float) -> Any:
    """``future.result(timeout)``, waited for in slices of :data:`WAKE_SLICE`. A signal the kernel hands
    to another of the process's threads only sets Python's flag: the main thread runs the handler (a
    second Ctrl-C's kill of every task) when it next wakes, which in one long wait is when the stop's
    graces are over."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return future.result(timeout=min(WAKE_SLICE, max(0.0, deadline - time.monotonic())))
        except TimeoutError:
            if future.done() or time.monotonic() >= deadline:
                raise


def _wait(event: threading.Event, timeout: float | None = None) -> bool:
    """``event.wait(timeout)`` in slices of :data:`WAKE_SLICE` (as :func:`_result`)."""
    deadline = math.inf if timeout is None else time.monotonic() + timeout
    while not event.wait(min(WAKE_SLICE, max(0.0, deadline - time.monotonic()))):
        if time.monotonic() >= deadline:
            return False
    return True


def _url_host(host: str) -> str:
    """``::1`` → ``[::1]`` (an IPv6 literal in a URL), other hosts as they are."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


async def _listen(what: str, host: str, port: int, start: Any) -> None:
    import errno

    try:
        await start
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise PortInUse(what, host, port) from None
        raise


class LocalCluster:
    """A single-machine Marathon (1.8 API) and Mesos-DNS.

    Ports 0 mean "pick a free one". ``dns_refresh`` is Mesos-DNS's
    ``RefreshSeconds`` (0: records follow the task state live); ``heartbeat`` the
    SSE heartbeat period; ``kill_grace`` the default SIGTERM->SIGKILL grace when an
    app sets no ``taskKillGracePeriodSeconds`` (capped at ``kill_grace_cap``);
    ``shutdown_grace`` the grace tasks get when the cluster stops. ``warm_pool``: a factory of
    pre-warmed interpreters shared by the tasks (see :class:`~marathon_tf.local.launcher.WarmPool`;
    marathon-tf's is :class:`marathon_tf.task.warmpool.WarmPool`); None: every task starts cold.
    ``marathon_instances``: HA Marathon, that many API instances over the one state (ports
    ``marathon_port``, ``+1``, …; all free ones for 0), the first one elected; a killed leader
    (:meth:`kill_leader`) is replaced ``zk_session_timeout`` seconds later (Marathon's
    ``--zk_session_timeout``, 10 s: meanwhile the standbys forward to the dead one and answer 502
    "Connection to leader refused."; ``election_gap``, if given, is the same and wins; see
    :mod:`marathon_tf.local.leadership`).

    ``agents`` Mesos agents, each offering ``agent_resources`` and carrying ``agent_attributes``
    (Mesos syntax; ``a|b`` or several values: one per agent in turn; see :mod:`~marathon_tf.local.agents`);
    none given: one agent as large as the machine whose resources are not enforced.
    ``features``: Marathon's ``--enable_features`` (``task_killing``: a kill is TASK_KILLING first;
    ``gpu_resources``: GPUs, and agents with GPUs offered at all); ``gpu_scheduling_behavior``: its
    ``--gpu_scheduling_behavior`` (``restricted``: tasks without GPUs decline agents with GPUs);
    ``filter_gpu_resources``: the Mesos master's ``--filter_gpu_resources`` (agents with GPUs are not
    offered to a Marathon without ``gpu_resources``); ``offer_filter``: Marathon's
    ``--decline_offer_duration`` in seconds (a declined offer is filtered that long; 0: never);
    ``revive_interval``: its ``--min_revive_offers_interval`` (0: every suppress/revive at once); see
    :mod:`marathon_tf.local.revive`.
    ``marathon_version``: the Marathon the local one plays (``"1.4.3"``, ``"1.7.236"``; None: the newest,
    1.11): ``/v2/info``'s version, the deployment lock and the queue purge of 1.4 – 1.7, a standby's
    answers (:mod:`marathon_tf.local.versions`); ``gpu_scheduling_behavior`` None is that version's
    default (``restricted`` from 1.8, ``unrestricted`` before; none before 1.5.7). ``scale_apps_interval``:
    Marathon's ``--scale_apps_interval`` in seconds (300), the periodic check that queues again the
    missing tasks of apps no deployment holds.
    ``persist``: keep the state (apps, groups, deployments) in ``state_dir`` and reload it when a cluster
    starts there again (``local serve``; see :mod:`~marathon_tf.local.extras.persist`).
    Bad values raise ValueError.
    """

    def __init__(self, state_dir: str | Path | None = None, host: str = "127.0.0.1",
                 marathon_port: int = 0, dns_port: int = 0, dns_http_port: int = 0, dns_refresh: float = 1.0,
                 dns_ttl: int = 5, heartbeat: float = 10.0, kill_grace: float = 3.0, kill_grace_cap: float = 30.0,
                 shutdown_grace: float = 2.0, auth: Credentials | None = None, allow_origins: tuple = (),
                 ui_dir: str | Path | None = None, warm_pool: WarmPoolFactory | None = None,
                 marathon_instances: int = 1, election_gap: float | None = None,
                 agents: int = 1, agent_resources: Sequence[str] = (), agent_attributes: Sequence[str] = (),
                 features: Sequence[str] = DEFAULT_FEATURES, gpu_scheduling_behavior: str | None = None,
                 persist: bool = False, zk_session_timeout: float = ZK_SESSION_TIMEOUT,
                 filter_gpu_resources: bool = True, offer_filter: float = DECLINE_OFFER_DURATION,
                 revive_interval: float = MIN_REVIVE_OFFERS_INTERVAL, marathon_version: str | None = None,
                 scale_apps_interval: float = SCALE_APPS_INTERVAL) -> None:
        if marathon_instances < 1:
            raise ValueError("marathon_instances must be at least 1")
        self.security = Security(host, allow_origins, auth)  # raises AuthError for an unsafe setup
        unknown = sorted(set(features) - set(FEATURES))
        if unknown:
            raise ValueError(f"features: {', '.join(unknown)} unknown to Marathon 1.8 (it knows {', '.join(FEATURES)})")
        version = played(marathon_version)
        if gpu_scheduling_behavior is None:
            gpu_scheduling_behavior = version.gpu_scheduling_default
        if gpu_scheduling_behavior not in ("restricted", "unrestricted"):
            raise ValueError(f"gpu scheduling behavior {gpu_scheduling_behavior!r}: restricted or unrestricted")
        if gpu_scheduling_behavior == "restricted" and not version.knows_gpu_scheduling_behavior:
            raise ValueError(f"gpu scheduling behavior restricted: Marathon {version.text} has no "
                             "--gpu_scheduling_behavior (from 1.5.7)")
        if scale_apps_interval <= 0:
            raise ValueError("scale_apps_interval must be positive")
        self._ui_dir = ui_dir
        self._own_dir = state_dir is None
        self.state_dir = Path(tempfile.mkdtemp(prefix="marathon-tf-local-") if state_dir is None else state_dir)
        self.host = host
        self._ports = (marathon_port, dns_port, dns_http_port)
        gap = zk_session_timeout if election_gap is None else election_gap
        if gap < 0 or offer_filter < 0 or revive_interval < 0:
            raise ValueError("zk_session_timeout, offer_filter and revive_interval cannot be negative")
        self._ha: dict[str, Any] = dict(instances=marathon_instances, election_gap=float(gap))
        self._leadership: Leadership | None = None
        self._agents = Agents(self.state_dir, host, agents, agent_resources, agent_attributes)
        self._options: dict[str, Any] = dict(heartbeat=heartbeat, kill_grace=kill_grace, kill_grace_cap=kill_grace_cap,
                             shutdown_grace=shutdown_grace, agents=self._agents, features=features,
                             gpu_scheduling_behavior=gpu_scheduling_behavior, persist=persist,
                             filter_gpu_resources=filter_gpu_resources, offer_filter=float(offer_filter),
                             revive_interval=float(revive_interval), marathon_version=version,
                             scale_apps_interval=float(scale_apps_interval))
        self._played = version
        self._dns_options: dict[str, Any] = dict(refresh=dns_refresh, ttl=dns_ttl)
        #: Built before the servers start, so that :meth:`prewarm` can start interpreters first.
        self.launcher = Launcher(self.state_dir, host, kill_grace_cap, warm_pool=warm_pool)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._rt: Runtime | None = None
        self._dns: MesosDns | None = None
        self._runners: list[web.AppRunner] = []
        self._background: list[asyncio.Task] = []
        self._stopping = False
        self._done = threading.Event()
        self.marathon_url = ""
        #: Every Marathon instance's URL (one unless ``marathon_instances`` > 1).
        self.marathon_urls: list[str] = []
        self.mesos_dns = ""
        self.mesos_dns_http = ""

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> LocalCluster:
        """Start the servers; returns when they listen."""
        if self._thread is not None:
            return self
        busy = busy_ports(self.host, runner_ports(*self._ports, instances=self._ha["instances"]))  # all, first
        if busy:
            raise PortInUse(busy[0][0], self.host, busy[0][1], busy)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="marathon-tf-local", daemon=True)
        self._thread.start()
        try:
            self.call(self._startup())
        except BaseException:
            self.stop()
            raise
        atexit.register(self._atexit)
        return self

    async def _startup(self) -> None:
        marathon_port, dns_port, dns_http_port = self._ports
        self._rt = Runtime(self.state_dir, self.host, security=self.security, launcher=self.launcher, **self._options)
        rt = self._rt  # for the closures below
        self._rt.restore()
        n = self._ha["instances"]
        ports = [marathon_port + i if marathon_port else 0 for i in range(n)]
        self._rt.ha = n > 1  # /v2/info's marathon_config.ha, as Marathon's --[disable_]ha says
        self._rt.zk_session_timeout = self._ha["election_gap"]

        def elected(url: str) -> None:
            previous, rt.url = rt.url, url
            if previous:  # a failover: the new leader's revive stream starts over (the first is "long ago")
                rt.scheduler.leader_elected()

        self._leadership = Leadership(lambda: create_app(rt, self._ui_dir), self.host, _url_host(self.host),
                                      ports, on_elected=elected, listen=_listen,
                                      election_gap=self._ha["election_gap"], played=self._played)
        await self._leadership.start()
        self.marathon_urls = [i.url for i in self._leadership.instances]
        self.marathon_url = self.marathon_urls[0]
        self._dns = MesosDns(self._rt.state, host=self.host, **self._dns_options)
        await _listen("Mesos-DNS", self.host, dns_port, self._dns.start_dns(dns_port))
        dns_api = self._dns.http_app()
        self.security.install(dns_api, scope=read_only)  # the Marathon API's Host check and auth, read-only tokens
        http = web.AppRunner(dns_api, access_log=None)
        await http.setup()
        self._runners.append(http)
        await _listen("Mesos-DNS HTTP API", self.host, dns_http_port,
                      web.TCPSite(http, self.host, dns_http_port).start())
        self._dns.http_port = http.addresses[0][1]
        self._background.append(asyncio.ensure_future(self._dns.refresher()))
        self.mesos_dns = f"{self.host}:{self._dns.dns_port}"
        self.mesos_dns_http = f"http://{_url_host(self.host)}:{self._dns.http_port}"
        # Tasks find this runner, not the cluster addresses the app was rendered with.
        self._rt.launcher.runner_env = {"MTF_RUNNER_MESOS_DNS": self.mesos_dns,
                                        "MTF_RUNNER_MESOS_DNS_HTTP": self.mesos_dns_http,
                                        "MTF_RUNNER_MARATHON_URL": ",".join(self.marathon_urls)}
        self._rt.start()  # tasks are launched from now on (a reloaded state's at once): with those addresses

    def prewarm(self, apps: list[dict]) -> int:
        """Start the shared pre-warmed interpreters these apps' tasks will use, now (before
        :meth:`start`: the import overlaps the runner's own start-up); how many apps have one."""
        return sum(1 for app in apps if self.launcher.prewarm(app))

    async def _shutdown(self) -> None:
        if self._rt is not None:
            await self._rt.stop()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)  # ended before the loop closes
        if self._leadership is not None:
            await self._leadership.stop()
        for runner in self._runners:
            await runner.cleanup()
        if self._dns is not None:
            await self._dns.stop_dns()

    def stop(self) -> None:
        """Stop every task process and the servers (idempotent)."""
        if self._loop is None:
            self.launcher.kill_all_now()  # interpreters pre-warmed before a start that never came
            return
        if self._stopping:
            _wait(self._done, 90)
            return
        self._stopping = True
        try:
            if self._thread and self._thread.is_alive():
                _result(asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop), 60)
        finally:
            if self._rt is not None:
                self._rt.launcher.kill_all_now()
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread:
                self._thread.join(timeout=10)
            self._loop.close()
            atexit.unregister(self._atexit)
            if self._own_dir:
                shutil.rmtree(self.state_dir, ignore_errors=True)
            self._done.set()

    def shutdown_plan(self) -> tuple[int, float]:
        """(tasks, the longest grace one gets) that :meth:`stop` would stop now; (0, 0.0) before a start."""
        if self._rt is None or self._loop is None or self._stopping:
            return 0, 0.0
        return self.call(self._rt.scheduler.shutdown_plan, timeout=10)

    def kill_tasks_now(self) -> None:
        """The runner is stopping: kill every task at once (SIGKILL, no grace) and launch none, also
        while :meth:`stop` waits for their graces (from any thread, a signal handler included)."""
        if self._rt is not None and self._loop is not None and not self._loop.is_closed():
            scheduler = self._rt.scheduler
            self._loop.call_soon_threadsafe(setattr, scheduler, "stopping", True)
        self.launcher.kill_tasks_now()

    def _atexit(self) -> None:
        if self._rt is not None:
            self._rt.launcher.kill_all_now()

    def serve_forever(self) -> None:
        """Block until :meth:`stop` has finished (called from another thread)."""
        _wait(self._done)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- access for tests and the CLI ---------------------------------------------------
    def call(self, coro_or_fn: Any, timeout: float = 60) -> Any:
        """Run a coroutine, or a plain function, on the cluster's loop and return its result."""
        assert self._loop is not None, "cluster not started"
        if asyncio.iscoroutine(coro_or_fn):
            return _result(asyncio.run_coroutine_threadsafe(coro_or_fn, self._loop), timeout)

        async def run() -> Any:
            return coro_or_fn()
        return _result(asyncio.run_coroutine_threadsafe(run(), self._loop), timeout)

    @property
    def faults(self) -> FaultInjector:
        """Fault rules (``faults.add(path=..., method=..., status=..., times=...)``, ``faults.clear()``)."""
        assert self._rt is not None, "cluster not started"
        return self._rt.faults

    def request_log(self) -> list[dict]:
        """Requests that reached the Marathon API: ``{method, path, query, status, fault, time}``."""
        return self.faults.requests()

    def kill_task(self, app_id: str, sig: str | int = "KILL", task_id: str | None = None) -> list[str]:
        """Signal the process group of an app's running tasks (a crash Marathon did not ask for)."""
        signum = sig if isinstance(sig, int) else int(getattr(signal, "SIG" + sig.upper().removeprefix("SIG")))
        assert self._rt is not None, "cluster not started"
        return self.call(lambda: self._rt.kill_task(app_id, signum, task_id))

    # -- HA Marathon (marathon_instances > 1) ------------------------------------------------
    @property
    def leader_url(self) -> str | None:
        """The elected leader's URL; None during an election."""
        assert self._leadership is not None, "cluster not started"
        return self.call(lambda: (self._leadership.leader.url if self._leadership.leader else None))

    def kill_leader(self) -> str:
        """Crash the leader instance (it stops answering at once); returns its URL. Another is elected
        ``zk_session_timeout`` seconds later; the tasks run on."""
        return self.kill_instance(None)

    def kill_instance(self, url: str | None, *, unreachable: bool = False, connect_timeout: float | None = None) -> str:
        """Crash the instance at ``url`` (None: the leader); returns its URL. ``unreachable``: its host drops
        every packet too, so its standbys' forwards wait their connect timeout (Marathon's
        ``--leader_proxy_connection_timeout``, 5 s; ``connect_timeout`` sets it until it starts again)."""
        assert self._leadership is not None, "cluster not started"
        inst = self.call(lambda: self._leadership.find(url))
        if inst is None or not inst.alive:
            raise ValueError(f"no live Marathon instance {url or '(leader)'}")
        self.call(self._leadership.kill(inst, unreachable=unreachable, connect_timeout=connect_timeout))
        return inst.url

    def freeze_instance(self, url: str | None, frozen: bool = True, read_timeout: float | None = None) -> str:
        """Freeze (``frozen``) or thaw the instance at ``url`` (None: the leader): frozen, the requests it would
        serve get no answer (a host that takes connections and answers nothing) and are never applied, so its
        standbys' forwards run into their read timeout (Marathon's ``--leader_proxy_read_timeout``, 10 s;
        ``read_timeout`` sets it while the instance is frozen, for tests; thawed, it is 10 s again). Returns its URL."""
        assert self._leadership is not None, "cluster not started"
        leadership = self._leadership
        inst = self.call(lambda: leadership.find(url))
        if inst is None or not inst.alive:
            raise ValueError(f"no live Marathon instance {url or '(leader)'}")
        self.call(lambda: leadership.freeze(inst, frozen, read_timeout))
        return inst.url

    def start_instance(self, url: str) -> None:
        """Start a killed instance again, on its port, as a standby."""
        assert self._leadership is not None, "cluster not started"
        inst = self.call(lambda: self._leadership.find(url))
        if inst is None:
            raise ValueError(f"no Marathon instance {url}")
        self.call(self._leadership.start_instance(inst))

    def events(self, event_type: str | None = None) -> list[dict]:
        """Events published so far (oldest first)."""
        assert self._rt is not None, "cluster not started"
        return self._rt.bus.recent(event_type)

    def agents(self) -> list[dict]:
        """Every agent: ``id``, ``name``, ``hostname``, ``state``, ``sandboxes``, ``resources``, ``attributes``."""
        return self.call(lambda: [a.describe() for a in self._agents.all])

    def add_agent(self, resources: str | None = None, attributes: str | None = None) -> dict:
        """A new agent joins (Mesos syntax as for ``agent_resources``; None: as large as the machine)."""
        assert self._rt is not None, "cluster not started"
        return self.call(lambda: self._rt.agent_admin.add(resources, attributes).describe())

    def agent_unreachable(self, agent: str) -> list[str]:
        """The master loses contact with ``agent`` (id, name or hostname); its processes run on and its
        tasks become TASK_UNREACHABLE (their ids are returned)."""
        assert self._rt is not None, "cluster not started"
        return self.call(lambda: self._rt.agent_admin.lose(agent))

    def kill_agent(self, agent: str) -> list[str]:
        """``agent`` dies: its tasks' processes are killed and the tasks become TASK_UNREACHABLE."""
        assert self._rt is not None, "cluster not started"
        return self.call(lambda: self._rt.agent_admin.lose(agent, kill=True))

    def reconnect_agent(self, agent: str) -> None:
        """A lost ``agent`` re-registers (after :meth:`kill_agent`, empty)."""
        assert self._rt is not None, "cluster not started"
        self.call(lambda: self._rt.agent_admin.reconnect(agent))

    def task_pids(self) -> list[int]:
        """Process (group) ids of the running tasks."""
        assert self._rt is not None, "cluster not started"
        return self.call(lambda: [t.pid for a in self._rt.state.apps.values() for t in a.tasks.values() if t.pid])


def serve(port: int = 8080, host: str = "127.0.0.1", state_dir: str | Path | None = None,
          dns_port: int = 0, dns_http_port: int = 0, dns_refresh: float = 1.0,
          on_ready: Callable[[LocalCluster], None] | None = None,
          on_stopping: Callable[[int, float], None] | None = None, **options: Any) -> int:
    """Run a local cluster until SIGINT/SIGTERM/SIGHUP, then stop everything; returns the signal.

    ``on_ready(cluster)`` is called once it listens (default: print the endpoints on stderr);
    ``on_stopping(tasks, longest grace)`` at once on the first signal, before the tasks get their
    grace; a second signal kills every task at once. Must be called from the main thread (it
    installs signal handlers).
    """
    cluster = LocalCluster(state_dir=state_dir, host=host, marathon_port=port, dns_port=dns_port,
                           dns_http_port=dns_http_port, dns_refresh=dns_refresh, **options)
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}

    interrupted = threading.Event()
    received: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        received.append(signum)
        if interrupted.is_set():  # a second signal: no more waiting for the graces
            cluster.kill_tasks_now()
        interrupted.set()

    for sig in previous:
        signal.signal(sig, handler)
    try:
        cluster.start()
        if on_ready is None:
            print(f"marathon: {','.join(cluster.marathon_urls)}\nmesos-dns: {cluster.mesos_dns} "
                  f"(http {cluster.mesos_dns_http})\nstate: {cluster.state_dir}", file=sys.stderr, flush=True)
        else:
            on_ready(cluster)
        while not interrupted.wait(0.5):
            pass
        if on_stopping is not None:
            tasks, grace = cluster.shutdown_plan()
            if tasks:
                on_stopping(tasks, grace)
        return received[0]
    finally:
        cluster.stop()
        for sig, old in previous.items():
            signal.signal(sig, old)
