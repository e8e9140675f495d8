"""The local cluster's options, shared by ``local serve`` and ``deploy --local``: agents and their
resources and attributes, Marathon's features and GPU scheduling, Mesos-DNS's refresh and TTL, and
how far the local cluster is a stock Marathon 1.11 on Mesos 1.11 (their defaults; each friendlier
behaviour is an option): the ZooKeeper session an election waits out, the master's GPU filter, the
filter on declined offers and the suppress/revive rate (see ``marathon_tf/local/revive.py``), and which
Marathon it plays (``--marathon-version``, 1.4.0 – 1.11.x; see ``marathon_tf/local/versions.py``) with
its ``--scale_apps_interval``.

:func:`cluster_options` adds them to a click command; :func:`to_cluster` checks the values (one
:class:`UsageError` naming the option) and turns them into
:class:`~marathon_tf.local.LocalCluster` keyword arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from marathon_tf.contract.errors import UsageError

__all__ = ["cluster_options", "to_cluster", "OPTION_NAMES", "given", "DEPLOY_DNS_REFRESH", "SERVE_DNS_REFRESH",
           "ZK_SESSION_TIMEOUT", "OFFER_FILTER", "REVIVE_INTERVAL", "SCALE_APPS_INTERVAL"]

#: Mesos-DNS's refresh by default (a cluster's is 60 s; one machine can afford less): ``deploy --local``
#: (one job, as fast as it can form) and ``local serve``.
DEPLOY_DNS_REFRESH = 0.25
SERVE_DNS_REFRESH = 1.0

#: Stock Marathon 1.11's defaults: ``--zk_session_timeout`` 10 s, ``--decline_offer_duration`` 120 s,
#: ``--min_revive_offers_interval`` 5 s.
ZK_SESSION_TIMEOUT, OFFER_FILTER, REVIVE_INTERVAL = 10.0, 120.0, 5.0
#: Marathon's ``--scale_apps_interval`` default, 300 s.
SCALE_APPS_INTERVAL = 300.0

#: The click parameter names these options fill.
OPTION_NAMES = ("agents", "agent_resources", "agent_attributes", "features", "gpu_scheduling_behavior",
                "dns_refresh", "dns_ttl", "zk_session_timeout", "filter_gpu_resources", "offer_filter",
                "revive_interval", "marathon_version", "scale_apps_interval")


def cluster_options(dns_refresh: float, prefix: str = "") -> Callable:
    """The options as a decorator (``dns_refresh``: this command's default Mesos-DNS refresh;
    ``prefix``: put before each help text, e.g. ``"(--local) "``)."""
    opts = [
        click.option("--agents", type=click.IntRange(1, 254), default=1, show_default=True,
                     help=prefix + "Mesos agents, each with its own address 127.0.0.N (its hostname) and sandboxes."),
        click.option("--agent-resources", multiple=True, metavar="RESOURCES",
                     help=prefix + "What each agent offers, in Mesos's --resources syntax, e.g. "
                          "'cpus:4;mem:8192;disk:20000;gpus:2;ports:[31000-32000]' ('cpus(role):2' reserves for a "
                          "role); 'A|B' or the option repeated: agent 1 gets A, agent 2 B, agent 3 A … "
                          "Default: as large as this machine, not enforced."),
        click.option("--agent-attributes", multiple=True, metavar="ATTRIBUTES",
                     help=prefix + "Each agent's attributes, in Mesos's --attributes syntax, e.g. "
                          "'rack:r1;zone:a' (for constraints); 'A|B' or repeated: in turn, as --agent-resources."),
        click.option("--features", default="gpu_resources", show_default=True, metavar="LIST",
                     help=prefix + "Marathon's --enable_features, comma-separated ('' for none; without "
                          "gpu_resources Marathon refuses apps with gpus and is offered no agent with GPUs; "
                          "task_killing: a killed task is TASK_KILLING before TASK_KILLED, else it stays "
                          "TASK_RUNNING until it is gone, as on a stock Marathon)."),
        click.option("--gpu-scheduling-behavior", type=click.Choice(["restricted", "unrestricted"]),
                     default=None,
                     help=prefix + "Marathon's --gpu_scheduling_behavior: restricted keeps tasks without GPUs "
                          "off agents with GPUs (DeclinedScarceResources). Default: the --marathon-version's, "
                          "restricted from 1.8, unrestricted before (1.5.7 – 1.7's undefined; no such option "
                          "before 1.5.7)."),
        click.option("--marathon-version", default=None, metavar="VERSION",
                     help=prefix + "The Marathon the local one plays, 1.4.0 to 1.11.x (default: the newest, "
                          "1.11): /v2/info's version and, on 1.4 - 1.7, the deployment lock (a task of an app "
                          "an open deployment holds is not relaunched once the app has started) and the "
                          "queue purge of a cancelled deployment; a standby's answers."),
        click.option("--scale-apps-interval", type=click.FloatRange(0, min_open=True), default=SCALE_APPS_INTERVAL,
                     show_default=True, metavar="SECONDS",
                     help=prefix + "Marathon's --scale_apps_interval: how often it queues again the missing "
                          "tasks of apps no deployment holds (on 1.4 - 1.7, those a lock or a purge left out)."),
        click.option("--dns-refresh", type=click.FloatRange(0), default=dns_refresh, show_default=True,
                     metavar="SECONDS",
                     help=prefix + "Mesos-DNS RefreshSeconds: how long new and moved tasks take to show up "
                          "(a cluster's default: 60)."),
        click.option("--dns-ttl", type=click.IntRange(0), default=5, show_default=True, metavar="SECONDS",
                     help=prefix + "Mesos-DNS TTL of its answers (a cluster's default: 60)."),
        click.option("--zk-session-timeout", type=click.FloatRange(0, 600), default=ZK_SESSION_TIMEOUT,
                     show_default=True, metavar="SECONDS",
                     help=prefix + "Marathon's --zk_session_timeout: how long after the leader's death (or "
                          "abdication) another instance is elected; meanwhile the standbys forward to the dead "
                          "one and answer 502 'Connection to leader refused.' (with --marathon-instances)."),
        click.option("--filter-gpu-resources/--no-filter-gpu-resources", default=True, show_default=True,
                     help=prefix + "The Mesos master's --filter_gpu_resources: agents with GPUs are offered only "
                          "to a Marathon with the gpu_resources feature."),
        click.option("--offer-filter", type=click.FloatRange(0), default=OFFER_FILTER, show_default=True,
                     metavar="SECONDS",
                     help=prefix + "Marathon's --decline_offer_duration: an offer no waiting task could use is "
                          "not made again for this long, unless the agent frees resources or a task is "
                          "queued (0: offers come back at once)."),
        click.option("--revive-interval", type=click.FloatRange(0), default=REVIVE_INTERVAL, show_default=True,
                     metavar="SECONDS",
                     help=prefix + "Marathon's --min_revive_offers_interval: its suppress/revive calls to Mesos "
                          "are at most this often, so a task queued right after another change may wait up to "
                          "this long for offers (0: at once)."),
    ]

    def decorate(f: Callable) -> Callable:
        _election_gap_is_an_alias(f)
        for opt in reversed(opts):
            f = opt(f)
        return f

    return decorate


def _election_gap_is_an_alias(f: Callable) -> None:
    """``local serve``'s own ``--election-gap`` (in ``cli/local.py``, default 3) is what ``--zk-session-timeout``
    now says: it becomes an alias that wins only when given (default None: LocalCluster takes
    ``zk_session_timeout``, 10 s, stock Marathon's)."""
    for param in getattr(f, "__click_params__", []):
        if getattr(param, "name", None) == "election_gap":
            param.default = None
            param.show_default = False
            param.help = "Deprecated alias of --zk-session-timeout (wins when given)."


def given(ctx: click.Context) -> list[str]:
    """The cluster options given on the command line (``--agents``, …)."""
    return ["--" + name.replace("_", "-") for name in OPTION_NAMES
            if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)]


def to_cluster(agents: int, agent_resources: tuple[str, ...], agent_attributes: tuple[str, ...], features: str,
               gpu_scheduling_behavior: str | None, dns_refresh: float, dns_ttl: int,
               zk_session_timeout: float = ZK_SESSION_TIMEOUT, filter_gpu_resources: bool = True,
               offer_filter: float = OFFER_FILTER, revive_interval: float = REVIVE_INTERVAL,
               marathon_version: str | None = None,
               scale_apps_interval: float = SCALE_APPS_INTERVAL) -> dict[str, Any]:
    """LocalCluster's keyword arguments; raises UsageError naming the option for a bad value."""
    from marathon_tf.local import per_agent
    from marathon_tf.local.server import FEATURES
    from marathon_tf.mesos.resources import parse_attributes, parse_resources

    for option, values, parse in (("--agent-resources", agent_resources, parse_resources),
                                  ("--agent-attributes", agent_attributes, parse_attributes)):
        try:
            for value in per_agent(values, agents, option):
                if value is not None:
                    parse(value)
        except ValueError as e:
            message = str(e) if str(e).startswith(option) else f"{option}: {e}"
            raise UsageError(message, hint="see --help for the syntax (Mesos agents' --resources / --attributes)") \
                from None
    wanted = tuple(f.strip() for f in features.split(",") if f.strip())
    unknown = sorted(set(wanted) - set(FEATURES))
    if unknown:
        raise UsageError(f"--features: {', '.join(unknown)} unknown to Marathon 1.8 (it knows {', '.join(FEATURES)})")
    from marathon_tf.local.versions import played

    try:
        version = played(marathon_version)
    except ValueError as e:
        raise UsageError(f"--marathon-version: {e}") from None
    if gpu_scheduling_behavior == "restricted" and not version.knows_gpu_scheduling_behavior:
        raise UsageError(f"--gpu-scheduling-behavior: Marathon {version.text} has no --gpu_scheduling_behavior "
                         "(it came with 1.5.7)")
    return {"agents": agents, "agent_resources": agent_resources, "agent_attributes": agent_attributes,
            "features": wanted, "gpu_scheduling_behavior": gpu_scheduling_behavior, "dns_refresh": dns_refresh,
            "dns_ttl": dns_ttl, "zk_session_timeout": zk_session_timeout,
            "filter_gpu_resources": filter_gpu_resources, "offer_filter": offer_filter,
            "revive_interval": revive_interval, "marathon_version": marathon_version,
            "scale_apps_interval": scale_apps_interval}
