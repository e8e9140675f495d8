"""The job's placement rules, enforced by its leader through Marathon (``MTF_PLACEMENT``).

A job-level or role-level ``["hostname", "UNIQUE"]``, ``MAX_PER``, ``GROUP_BY`` or ``CLUSTER`` means
"across the tasks" (:mod:`marathon_tf.contract.spread`); Marathon only compares an app's instances with
each other, and each task is an app of its own. So the job's deciding task (``chief-0`` / ``worker-0``,
the rendezvous leader) runs a :class:`Placer`: a thread that reads the job's group with every task's
host (``GET /v2/groups/<job>?embed=group.apps&embed=group.apps.tasks``), runs one round of
:func:`marathon_tf.contract.spread.plan` per scope and writes what it decides in ONE bulk
``PUT /v2/apps?force=true`` of ``constraints`` and the ``marathon-tf/placement`` label:

* the render held every task of a scope but its first (``["hostname", "UNLIKE", ".*"]``); the placer
  releases them one at a time, each with ``UNLIKE`` / ``LIKE`` constraints naming the values (hosts,
  attribute texts) its siblings hold, and the next once it has a host: two of them never meet in one
  offer, so no race at the start;
* a task that breaks a rule where it runs (Marathon relaunched it beside a sibling, or a race) gets
  constraints that exclude its host: a new app version, which Marathon rolls out by killing it and
  launching it elsewhere (``upgradeStrategy`` 0/0); the leader never moves itself, and the task placed
  longest keeps its place;
* only apps that wait (or must move) are written to: a constraint change restarts a running task.

``force=true``: the deployment that holds a held task's app waits for it and so locks that app; forcing
cancels it. On 1.8+ that deployment is the group's (a cancelled deployment leaves the launch queue as it is:
no purge on stop), and Marathon goes on launching the other apps' queued tasks; a follower of the deployment
sees it fail and follows the job instead (:mod:`marathon_tf.user.watch`). On 1.4 – 1.7 a cancel purges the
queue of every app of the cancelled plan (``deploymentFailed``), so there a held task is deployed apart from
the group (:mod:`marathon_tf.user.apart`): the write cancels only its own deployment, and queues the app again
itself. Each write says it is the leader's (``label_value`` ``written``): it does not move the job's admission
deadline (``waiting.attempt_started``).

The rendezvous waits for the rules (:meth:`hold`): a peer that breaks a rule, or whose place changed
since the placer last looked, is missing from the leader's view, so no program starts before the
rules hold. Rules on agent attributes need the agents' attributes: read from the Mesos master
``/v2/info`` names (``mesos_leader_ui_url`` + ``/master/slaves``; Marathon's credentials only when it
is Marathon's own origin); when it cannot be read such a rule is not enforced, said once.

Cost: one group read per round (fast, every :data:`FAST` s, while a task waits or moves; every
:data:`CALM` s, or at once when the rendezvous sees a peer change, once settled) and one write per
release. Imports no TensorFlow.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from marathon_tf.contract import naming, spread
from marathon_tf.contract.errors import MarathonError
from marathon_tf.marathon import tasks as T
from marathon_tf.marathon import transport
from marathon_tf.marathon.model import App, Info, apps_by_id

__all__ = ["Placer", "FAST", "CALM"]

FAST = 0.5     # seconds between rounds while a task waits or moves
CALM = 10.0    # ... once every scope is settled (a peer change wakes it at once)
ATTRIBUTES_EVERY = 10.0  # the agents' attributes are read again at most this often
_EMBED = ("group.apps", "group.apps.tasks")


def _order(task: str) -> tuple[int, int]:
    role, index = naming.parse_task_name(task) or ("", 0)
    return (naming.ROLES.index(role) if role in naming.ROLES else len(naming.ROLES), index)


class Placer:
    """The leader's placement of its job (see the module). ``client``: a Marathon client with the
    task's credentials; ``leader``: this task's name (it keeps its place)."""

    def __init__(self, client: Any, job: str, leader: str, *, stop: threading.Event | None = None,
                 log: Callable[[str], None] = lambda m: None, fast: float = FAST, calm: float = CALM):
        self.client, self.job, self.leader, self.log = client, job, leader, log
        self.fast, self.calm = fast, calm
        self.stop = stop or threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._evaluated_from: float | None = None  # when the read of the last round began (monotonic)
        self._blocking: dict[str, str] = {}
        self._scoped: set[str] | None = None  # None: not read yet
        self._attributes: dict[str, dict[str, str | None]] = {}
        self._attributes_at = -1e9
        self._said: set[str] = set()
        self.rounds = 0
        self.writes = 0
        #: called after every round (the leader re-checks its view)
        self.listeners: list[Callable[[], None]] = []
        self._thread: threading.Thread | None = None

    @classmethod
    def of(cls, client: Any, ctx: Any, stop: threading.Event, log: Callable[[str], None]) -> Placer:
        """The placer of the task ``ctx`` (a :class:`~marathon_tf.contract.taskenv.TaskContext`: the job's leader)."""
        return cls(client, ctx.job, ctx.task, stop=stop, log=log)

    # -- for the rendezvous ------------------------------------------------------------------------
    def wake(self) -> None:
        self._wake.set()

    def hold(self, changed: Mapping[str, float]) -> dict[str, str]:
        """Of the peers whose place last changed at ``changed[name]`` (monotonic), those the
        rendezvous must not count yet, with why: one that breaks a rule or waits for its turn, or whose
        place changed since the placer last looked."""
        with self._lock:
            scoped, since, blocking = self._scoped, self._evaluated_from, dict(self._blocking)
        if since is None:
            return {t: "placement: not checked yet" for t in changed if scoped is None or t in scoped}
        out = {t: why for t, why in blocking.items() if t in changed}
        for t, when in changed.items():
            if t not in out and (scoped is None or t in scoped) and when >= since:
                out[t] = "placement: its place is being checked"
        return out

    # -- the loop --------------------------------------------------------------------------------
    def start(self) -> Placer:
        self._thread = threading.Thread(target=self._loop, name="placement", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        self._wake.set()

    def _loop(self) -> None:
        pause, seen = self.fast, None
        while not self.stop.is_set():
            writes = self.writes
            try:
                settled = self.round()
            except MarathonError as e:
                self._say("read", f"placement: Marathon: {e.message}; trying again")
                settled = False
            except Exception as e:  # a bug must not end the leader; the rendezvous keeps waiting for it
                self._say("bug", f"placement: {type(e).__name__}: {e}")
                settled = False
            with self._lock:
                now = (self.writes != writes, dict(self._blocking))
            # nothing changes (a released task no offer fits): look less often, up to the calm pace
            pause = self.calm if settled else min(self.calm, pause * 2) if now == (False, seen) else self.fast
            seen = now[1]
            self._wake.wait(pause)
            self._wake.clear()

    def round(self) -> bool:
        """One round: read, plan every scope, write; whether every scope is settled."""
        began = time.monotonic()
        group = self.client.get_group(naming.group_id(self.job), embed=_EMBED)
        apps: dict[str, App] = {}
        for app in apps_by_id(group).values():
            key = naming.parse_app_id(self.job, app.id or "")
            if key is not None:
                apps[naming.task_name(*key)] = app
        scopes: dict[str, tuple[tuple[spread.Rule, ...], list[str]]] = {}
        for name, app in apps.items():
            found = spread.scope_of_app(app)
            if found is not None:
                scopes.setdefault(found[0], (found[1], []))[1].append(name)
        writes: list[dict[str, Any]] = []
        blocking: dict[str, str] = {}
        for scope_name, (rules, names) in sorted(scopes.items()):
            rules = self._enforceable(scope_name, rules, [apps[n] for n in names])
            scope = spread.Scope(scope_name, "", rules, tuple(sorted(names, key=_order)), "")
            members = {n: self._member(n, apps[n], rules) for n in names}
            plan = spread.plan(scope, members, self.leader if self.leader in members else None)
            blocking.update(plan.blocking)
            for name, (added, why) in plan.writes.items():
                writes.append(self._write(apps[name], members[name], added, why))
            for name in plan.moves:
                if members[name].host is not None and name in plan.writes:
                    self.log(f"placement: moving {name} off {members[name].host}: {plan.blocking[name]}")
        if writes:
            self.client.update_apps(writes, force=True)
            self.writes += 1
            for item in writes:
                self.log(f"placement: {str(item['id']).rsplit('/', 1)[-1]}: "
                         f"{spread.split(item)[2] or 'constraints written'}")
        with self._lock:
            self._scoped = {n for _, names in scopes.values() for n in names}
            self._blocking = blocking
            self._evaluated_from = began
            self.rounds += 1
        for listener in self.listeners:
            listener()
        return not blocking and not writes

    # -- reading ---------------------------------------------------------------------------------
    def _member(self, name: str, app: App, rules: tuple[spread.Rule, ...]) -> spread.Member:
        base, added, why = spread.split(app)
        task = app.newest_task(T.ACTIVE)
        host = task.host if task is not None else None
        values: dict[str, str | None] = {}
        for rule in rules:
            if spread.is_hostname(rule.field):
                values[rule.field] = host
            elif host is not None and host in self._attributes:  # an agent not read yet: not judged
                values[rule.field] = self._attributes[host].get(rule.field)
        return spread.Member(name, base, added, why, host, (task.staged_at if task is not None else None) or "",
                             values)

    def _enforceable(self, scope: str, rules: tuple[spread.Rule, ...], apps: list[App]) -> tuple[spread.Rule, ...]:
        """The rules it can enforce: an attribute rule needs the agents' attributes (read again when a
        task runs on a host it does not know)."""
        if all(spread.is_hostname(r.field) for r in rules):
            return rules
        hosts = {t.host for a in apps for t in a.tasks if t.host}
        if (hosts - set(self._attributes)) and time.monotonic() - self._attributes_at >= ATTRIBUTES_EVERY:
            self._attributes_at = time.monotonic()
            found = self._read_attributes()
            if found is not None:
                self._attributes = found
        if self._attributes:
            return rules
        dropped = [r for r in rules if not spread.is_hostname(r.field)]
        self._say(f"attributes-{scope}", "placement: " + ", ".join(r.text(scope) for r in dropped)
                  + " not enforced: the agents' attributes cannot be read from the Mesos master")
        return tuple(r for r in rules if spread.is_hostname(r.field))

    def _read_attributes(self) -> dict[str, dict[str, str | None]] | None:
        """hostname → {attribute: its text} of every registered agent; None when the master cannot be read."""
        try:
            url = Info.parse(self.client.info()).mesos_url or ""
        except MarathonError:
            return None
        if not url:
            return None
        body: Any = None
        mine = transport.same_origin(url, getattr(self.client, "urls", []))
        if mine is not None:  # Marathon's own origin (DC/OS's admin router, the local runner): its credentials
            try:
                body = self.client.request("GET", urlsplit(url).path.rstrip("/") + "/master/slaves").body
            except MarathonError:
                body = None
        else:
            body = transport.get_json(url.rstrip("/") + "/master/slaves", timeout=5.0)
        if not isinstance(body, dict) or not isinstance(body.get("slaves"), list):
            return None
        return {str(s.get("hostname")): {**{k: spread.value_text(v) for k, v in (s.get("attributes") or {}).items()},
                                         **_domain(s)}
                for s in body["slaves"] if isinstance(s, dict) and s.get("hostname")}

    # -- writing ---------------------------------------------------------------------------------
    @staticmethod
    def _write(app: App, member: spread.Member, added: tuple[tuple[str, ...], ...], why: str) -> dict[str, Any]:
        labels = dict(app.labels)
        task = app.newest_task(T.ACTIVE)  # the write restarts it: the placement's own stop
        # a write to a task that waits stops nothing: the app's last stop is still the placement's earlier one
        off = task.id if task is not None and task.id else spread.displaced(app)
        labels[spread.LABEL] = spread.label_value(added, why, off, written=True)
        return {"id": app.id, "constraints": [list(c) for c in member.base + added], "labels": labels}

    def _say(self, key: str, message: str) -> None:
        if key not in self._said:
            self._said.add(key)
            self.log(message)


def _domain(slave: Mapping[str, Any]) -> dict[str, str | None]:
    """``@region`` / ``@zone`` of an agent's fault domain (Marathon 1.6+'s fields: its constraints read them
    from the offer's domain), None where it has none."""
    fault = ((slave.get("domain") or {}).get("fault_domain") or {}) if isinstance(slave.get("domain"), dict) else {}
    return {"@region": (fault.get("region") or {}).get("name"), "@zone": (fault.get("zone") or {}).get("name")}
