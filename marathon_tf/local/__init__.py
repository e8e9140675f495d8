"""A single-machine Marathon (1.8 REST API), Mesos and Mesos-DNS: ``marathon-tf deploy --local`` and the test bed.

Its defaults are a stock Marathon 1.11 on Mesos 1.11 (elections that wait out the ZooKeeper session,
no TASK_KILLING without ``task_killing``, GPU agents offered only with ``gpu_resources``, declined
offers filtered and revived as Marathon does, 1.11's kill order); each friendlier behaviour is an option,
and ``marathon_version`` plays an older Marathon (1.4 – 1.7's deployment lock and queue purge, …).

``LocalCluster`` runs the aiohttp Marathon server, the Mesos-DNS DNS and HTTP
servers and the task processes on a background event loop; ``serve`` blocks
until SIGINT/SIGTERM (``marathon-tf local serve``). ``per_agent`` is how the agent
options (``--agent-resources``, ``--agent-attributes``) are spread over the agents, which the
user's side checks before it starts a cluster. They are imported on first use, so that
``local.ports`` (which ``local serve`` checks first) costs no aiohttp.

What Mesos and Marathon decide about resources, agents and offers (their syntax, JSON and Marathon's
offer matching) is the Mesos model, :mod:`marathon_tf.mesos`, which the user's admission check uses
too; this package plays the cluster with it.

**The imitation** (what ``deploy --local``, the Python API's ``LocalCluster`` and the tests need):

=====================  ==============================================================================
``cluster.py``         ``LocalCluster``: the whole of it on one event loop in a thread; ``serve``
``server.py``          the aiohttp application and the ``Runtime`` that wires the parts below
``api.py``             Marathon's REST resources: ``/v2/apps``, ``/v2/groups``, ``/v2/tasks``, ``/v2/queue`` …
``targets.py``         request bodies → the next root group (a deployment's target)
``validation.py``      the app-definition rules, with Marathon's 422/400 detail shapes
``deployments.py``     deployment plans and their execution
``readiness.py``       readiness checks during deployments
``health.py``          health checks of a running task (MESOS_HTTP, TCP, COMMAND)
``events.py``          the event bus behind ``/v2/events``
``errors.py``          Marathon's API error responses as exceptions
``versions.py``        which Marathon it plays (``--marathon-version``) and what follows from it
``state.py``           the in-memory Marathon state: apps, groups, tasks, their JSON
``leadership.py``      Marathon's API instances over the one state, the leader and the standbys
                       (one by default, several for HA)
``scheduler.py``       keeps every app's tasks at its target: offers matched, launches, backoff, kills
``offers.py``          the offer statistics of ``/v2/queue`` (Marathon's launch queue)
``revive.py``          which agents offer: Mesos's filters on declined offers, Marathon's suppress/revive
``scaling.py``         which surplus tasks Marathon kills first (1.11's ``ScalingProposition``)
``agents.py``          the Mesos agents this machine plays: addresses 127.0.0.N, sandboxes, state;
                       ``per_agent``
``agentloss.py``       an agent lost and found: TASK_UNREACHABLE, ``unreachableStrategy``
``agent_admin.py``     ``/_local/agents``: agents added, lost and found on request
``launcher.py``        runs a task's command as a process, as a Mesos agent would
``proctree.py``        a task's process tree signalled as Mesos's command executor does (``killtree``)
``reaper.py``          nothing outlives the runner: its token in every task, the guardian
``mesos_master.py``    the Mesos master's endpoints (``/master/state``, ``/master/slaves``)
``agent.py``           the Mesos agents' endpoints (``/state``, ``/files/…``) that ``logs`` reads
``mesos_dns.py``       Mesos-DNS: A and SRV records over DNS, its HTTP API
``faults.py``          fault injection and the request log (``/_local/faults``, ``/_local/requests``)
``ports.py``           the runner's fixed ports, all checked at once before anything starts (stdlib)
``security.py``        the HTTP boundary every cluster has (Host, Origin, JSON bodies); its optional
                       auth is ``local serve --auth``'s
=====================  ==============================================================================

**Extras** that only ``local serve`` asks for (and an API user who passes ``persist`` / ``ui_dir``):

=====================  ==============================================================================
``extras/persist.py``  the state kept on disk and reloaded at the next start (``persist=True``)
``extras/ui.py``       the Marathon web UI build served at ``/ui/`` (``--ui``, ``ui_dir``)
``taskscope.py``       what a task's own token may do under ``--auth``; kept beside ``security.py``,
                       not in ``extras/``: the scheduler issues the tokens and the agents' endpoints
                       and the event stream consult it, so moving it would make the imitation's
                       core import ``extras/``
=====================  ==============================================================================

The split is a folder where it is clean: the imitation imports ``extras/`` only when asked for
(``persist``, ``ui_dir``). ``security.py`` stays whole: its guard protects every cluster, and the
optional auth is checked by the same middleware. ``leadership.py`` is how every cluster starts its
API instance(s), so it is part of the imitation, not an extra.
"""

from typing import Any

__all__ = ["LocalCluster", "serve", "per_agent", "MARATHON_VERSION"]

_WHERE = {"LocalCluster": "cluster", "serve": "cluster", "per_agent": "agents", "MARATHON_VERSION": "server"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'marathon_tf.local' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
