"""What differs between the Marathons marathon-tf talks to (1.4 – 1.11), in one place.

The version comes from ``/v2/info`` (:meth:`marathon_tf.marathon.client.Client.capabilities`, read once
per client) or, offline, from ``marathon-tf render --marathon-version X``. :class:`Capabilities` answers
each question the renderer, the pre-send checks and the client ask, by name; the Marathon source each
answer was read in is cited in tests/marathon/test_versions.py.
A Marathon whose version is not known (no ``--marathon-version``, a ``/v2/info`` that cannot be read
or parsed) is taken for the newest: what marathon-tf renders and does without a version is what it
renders for 1.11.

=====================================  ==============  ===============================================
question                               versions        what marathon-tf does
=====================================  ==============  ===============================================
``unreachableStrategy`` 0/0 accepted   1.4.6+          writes 0/0; 1/2 on 1.4.0–1.4.5
top-level ``networks``                 1.5+            a container-network job is refused on 1.4
constraint operator ``IS``             1.6+            refused on 1.4–1.5
a scalar attribute reads ``1,024``     ≤ 1.6.0         a value ≥ 1,000 rendered as either form
``@hostname``/``@region``/``@zone``    1.6+            refused on 1.4–1.5
``plan-format=light`` on the stream    1.5.9–1.7       asked for (1.8+ always light; 1.4 heavy)
standby redirects ``/v2/events``       1.7.50+         followed; when it cannot be, the leader's URL
no leader                              503 / 502       both mean "no leader" (502 from 1.7.149)
"Connection to leader refused."        502/503         a write is sent again once a leader answers
"Connection to leader timed out."      504 1.4.8–1.6   the same (at once on 1.4.8–1.4.x: only a connect)
403 too many running deployments       1.5.9+/1.6.486  told apart from an auth error (by its text)
``role`` in ``/v2/queue``              1.9+            not read (the reasons do without it)
``--gpu_scheduling_behavior``          1.5.7+          default ``undefined``; ``restricted`` from 1.8
``maxLaunchDelaySeconds`` default      3600 / 300      always written (the job's ``restart``)
a deployment locks its apps            1.4 – 1.7       new apps that may wait (standbys, held tasks) are
                                                       PUT apart, each its own deployment
a forced cancel purges the queue       1.4 – 1.7       a held task's forced write cancels only its own
                                                       deployment (it is PUT apart, above)
=====================================  ==============  ===============================================

docs/cluster.md has the same table for users. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MarathonVersion", "Capabilities", "capabilities", "from_info", "parse_version", "NEWEST",
           "OLDEST_SUPPORTED"]


@dataclass(frozen=True, order=True)
class MarathonVersion:
    """A Marathon release as ``/v2/info`` names it: ``1.4.3``, ``1.6.322-2bf46b341`` (1.6+ count commits
    in the third number), ``1.5.0-SNAPSHOT``. Compared by (major, minor, patch); ``text`` is what was said."""

    major: int
    minor: int
    patch: int = 0
    text: str = field(default="", compare=False)

    def __str__(self) -> str:
        return self.text or f"{self.major}.{self.minor}.{self.patch}"


_VERSION = re.compile(r"^\s*v?(\d{1,4})\.(\d{1,4})(?:\.(\d{1,9}))?(?:[-+.~][0-9A-Za-z.+~-]*)?\s*$")


def parse_version(text: Any) -> MarathonVersion | None:
    """``"1.4.3"`` → MarathonVersion(1, 4, 3); None when ``text`` is not a version (a missing patch is 0)."""
    if isinstance(text, MarathonVersion):
        return text
    if not isinstance(text, str):
        return None
    m = _VERSION.match(text)
    if m is None:
        return None
    return MarathonVersion(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0), text.strip())


def _v(text: str) -> MarathonVersion:
    version = parse_version(text)
    assert version is not None
    return version


#: What an unknown version is taken for (its answers are the newest's).
NEWEST = _v("1.11.0")
#: marathon-tf is written against 1.4 – 1.11 (``unreachableStrategy``, ``instance_changed_event``, the
#: Mesos-level ``MESOS_HTTP`` health check all came with 1.4).
OLDEST_SUPPORTED = _v("1.4.0")


@dataclass(frozen=True)
class Capabilities:
    """The answers for one Marathon (``version`` None: not known, taken for the newest). ``features``: the
    ``--enable_features`` its ``/v2/info`` lists (``marathon_config.features``, in 1.4 – 1.11 alike); None
    when not known (offline, or not listed)."""

    version: MarathonVersion | None = None
    features: tuple[str, ...] | None = None

    def _since(self, text: str) -> bool:
        return self.version is None or self.version >= _v(text)

    @property
    def shown(self) -> str:
        """``Marathon 1.4.3`` (or ``Marathon (version unknown)``)."""
        return f"Marathon {self.version}" if self.version is not None else "Marathon (version unknown)"

    @property
    def supported(self) -> bool:
        """1.4 or newer (see :data:`OLDEST_SUPPORTED`)."""
        return self._since(str(OLDEST_SUPPORTED))

    # ------------------------------------------------------------------ what is rendered
    @property
    def accepts_zero_unreachable(self) -> bool:
        """``unreachableStrategy`` 0/0 passes the validator from 1.4.6 (``inactiveAfter >= 0``,
        ``<= expungeAfter``); 1.4.0–1.4.5 require ``inactiveAfter >= 1 second`` and ``< expungeAfter``, so
        every app with 0/0 is refused with 422."""
        return self._since("1.4.6")

    @property
    def unreachable_strategy(self) -> dict[str, int]:
        """What every TF task's app carries (app_templates/task.json.j2): 0/0 (replace a lost task at once,
        kill the old copy when it returns) where it is accepted; on 1.4.0–1.4.5 1/2, the closest that
        validator accepts (integer seconds, ``inactiveAfter >= 1 < expungeAfter``) and the value Marathon
        itself treats as 1.4's "instant": its 1.4.6 migration turns 1/2 into 0/0. There the instance becomes
        inactive (and is replaced) only when a later status update for it is processed: at the latest the
        next task reconciliation (``--reconciliation_interval``, 10 min by default)."""
        if self.accepts_zero_unreachable:
            return {"inactiveAfterSeconds": 0, "expungeAfterSeconds": 0}
        return {"inactiveAfterSeconds": 1, "expungeAfterSeconds": 2}

    def accepts_unreachable(self, strategy: Any) -> bool:
        """Whether this version's validator takes ``strategy`` (an app's ``unreachableStrategy`` as sent):
        ``"disabled"``, or whole seconds with ``inactiveAfter >= 0, <= expungeAfter`` (1.4.6+) or
        ``inactiveAfter >= 1, < expungeAfter`` (1.4.0–1.4.5); see :attr:`accepts_zero_unreachable`."""
        if strategy == "disabled":
            return True
        if not isinstance(strategy, dict):
            return False
        inactive, expunge = strategy.get("inactiveAfterSeconds", 0), strategy.get("expungeAfterSeconds", 0)
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (inactive, expunge)):
            return False
        if self.accepts_zero_unreachable:
            return 0 <= inactive <= expunge
        return 1 <= inactive < expunge

    @property
    def has_networks(self) -> bool:
        """Top-level ``networks`` and ``container.portMappings`` are read from 1.5; 1.4 reads ``portMappings``
        only under ``container.docker`` and has no ``networks``: it drops both, and the app then fails with a
        misleading health check ``portIndex`` error."""
        return self._since("1.5.0")

    @property
    def has_constraint_is(self) -> bool:
        """The ``IS`` operator exists from 1.6 (1.5's constraint operators have no ``IS``)."""
        return self._since("1.6.0")

    @property
    def has_pseudo_fields(self) -> bool:
        """``@hostname`` (and ``@region``, ``@zone``) are constraint fields from 1.6; 1.4–1.5 know only
        ``hostname`` and would take ``@hostname`` for an agent attribute no agent has: the task would never
        be placed."""
        return self._since("1.6.0")

    @property
    def scalars_grouped(self) -> bool:
        """Whether a constraint compares a scalar agent attribute as ``1,024`` (with thousands separators): up to
        1.6.0 Marathon formats scalars with Java's ``NumberFormat.getInstance``, from 1.6.322 with
        ``DecimalFormat("0.###")``, ``1024``. Mesos makes every numeric attribute a scalar."""
        return self.version is not None and self.version < _v("1.6.322")

    @property
    def group_by_needs_a_count(self) -> bool:
        """``GROUP_BY`` without a value stops an app's tasks from being placed from 1.10.34 and 1.11.18: the offer
        matcher divides the app's instances by the value, 0 by default (the desired instance count over the
        desired group count; the change came with 1.11 and was backported to 1.10); before, a value none of
        the app's tasks has always fits."""
        if self.version is not None and _v("1.10.0") <= self.version < _v("1.11.0"):
            return self._since("1.10.34")
        return self._since("1.11.18")

    # ------------------------------------------------------------------ the event stream
    @property
    def reads_plan_format_light(self) -> bool:
        """``/v2/events?plan-format=light`` (deployment events without the whole original and target
        groups) is read by 1.5.9–1.7 (back-ported to 1.5, first in 1.5.9); 1.4 does not know it, 1.8+ always
        send light plans and ignore it."""
        return self._since("1.5.9") and not self.light_plans_only

    @property
    def light_plans_only(self) -> bool:
        """1.8+ write ``plan`` as ``{id, steps, version}`` always (their event stream has no
        ``plan-format``)."""
        return self._since("1.8.0")

    # ------------------------------------------------------------------ a standby's answers
    @property
    def no_leader_status(self) -> int:
        """What a standby answers when it knows no leader: 503 before 1.7.149, 502 from then. The client
        fails over on both."""
        return 502 if self._since("1.7.149") else 503

    @property
    def leader_refused_means_unsent(self) -> bool:
        """Whether "Connection to leader refused." proves the request never reached a leader. Up to 1.6.392 the
        standby forwards with ``HttpURLConnection`` and says so only for a ``ConnectException`` (no TCP connection:
        nothing sent). From 1.6.486 it forwards with akka-http by default and says so for any
        ``StreamTcpException``, "if the TCP connection is established, but gives no response, or if the TCP
        connection is refused outright" (Marathon's own comment): almost always a dead leader during an election,
        but a leader that died while handling the request is possible, so a write is looked for before it is sent
        again (:mod:`marathon_tf.marathon.marker`)."""
        return self.version is not None and self.version < _v("1.6.486")

    @property
    def leader_timeout_means_unsent(self) -> bool:
        """Whether 504 "Connection to leader timed out." proves the request never reached a leader. On 1.4.8 – 1.4.x
        the standby says so only for a ``SocketTimeoutException`` out of ``copyRequestToConnection``: a write's
        ``getOutputStream`` connecting (``HttpURLConnection`` buffers the body and sends it with the status read,
        whose failures are 502) — the leader's host took no connection. 1.4.0 – 1.4.7 and 1.5.0 have no such
        case (the exception escapes: a 500). From 1.5.1 ``copyConnectionResponse`` says it too for a status that
        did not come in time: the leader may have taken the write, so it is looked for before it is sent
        again."""
        return self.version is not None and _v("1.4.8") <= self.version < _v("1.5.0")

    # ------------------------------------------------------------------ deployments
    @property
    def deployment_locks_relaunch(self) -> bool:
        """While a deployment holds an app, a failed task of it is not relaunched once the step's own actor
        for the app has stopped (its app first reached its target): the ``ScaleRunSpec`` a failure sends is
        dropped for the lock, "Did not try to scale run spec; it is locked", and so is the periodic scale
        check's. 1.8 reschedules a failed instance whatever locks it (its launch queue takes every scheduled
        instance). What may wait is deployed apart there (:mod:`marathon_tf.user.apart`). An unknown version
        is taken for the newest: False."""
        return self.version is not None and self.version < _v("1.8.0")

    # ------------------------------------------------------------------ what is read back
    @property
    def gpu_scheduling_default(self) -> str | None:
        """``--gpu_scheduling_behavior``'s default, or None where the option does not exist (before 1.5.7,
        its first release): ``undefined`` through 1.7 (a task without GPUs may take a GPU agent),
        ``restricted`` from 1.8 (such a task declines GPU offers, ``DeclinedScarceResources``).
        An app's ``GPU_SCHEDULING_BEHAVIOR`` label overrides it from 1.5.7. Only a default: ``/v2/info`` does
        not say what the operator chose."""
        if not self._since("1.5.7"):
            return None
        return "restricted" if self._since("1.8.0") else "undefined"

    @property
    def gpu_restriction_by_label(self) -> bool:
        """A task without GPUs keeps off an agent with free GPUs only by its app's ``GPU_SCHEDULING_BEHAVIOR:
        restricted`` label here (1.5.7 – 1.7: the default, ``undefined``, lets it take the agent's room, so a
        job's ps could take the only GPU agent its GPU workers need); 1.8's default does it unasked, and before
        1.5.7 there is no such rule at all (:attr:`gpu_scheduling_default`)."""
        return self.gpu_scheduling_default == "undefined"


def from_info(info: Any) -> Capabilities:
    """The answers for the Marathon whose ``/v2/info`` body is ``info``."""
    info = info if isinstance(info, dict) else {}
    features = (info.get("marathon_config") or {}).get("features") if isinstance(info.get("marathon_config"),
                                                                                   dict) else None
    listed = tuple(str(f) for f in features) if isinstance(features, list) else None
    return Capabilities(parse_version(info.get("version")), listed)


def capabilities(version: None | str | MarathonVersion | Capabilities) -> Capabilities:
    """The answers for ``version`` (a string as ``/v2/info`` says it, a parsed one, or answers already);
    an unparsable or missing one is taken for the newest."""
    if isinstance(version, Capabilities):
        return version
    return Capabilities(parse_version(version))
