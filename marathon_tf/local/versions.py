"""Which Marathon the local cluster plays (``--marathon-version``, ``LocalCluster(marathon_version=...)``).

The local Marathon is 1.11 by default; given an older version it behaves as that one where marathon-tf
depends on it (tests/local/test_local_marathon_versions.py cites the Marathon source of each row):

=====================================  ==============  ===============================================
what                                   versions        the local cluster
=====================================  ==============  ===============================================
``/v2/info``'s ``version``             all             the version played
the deployment lock                    1.4 – 1.7       a task of an app a deployment holds, once that
                                                       app's own step is done, is not relaunched (nor
                                                       replaced when its agent is lost): a
                                                       ``ScaleRunSpec`` of a locked app is dropped;
                                                       1.8+ relaunches regardless
the periodic scale check               all             every ``scale_apps_interval`` s, apps not
                                                       locked get their missing tasks queued again
                                                       (``--scale_apps_interval``, 300 s)
a forced cancel purges the queue       1.4 – 1.7       every app of the cancelled plan loses its
                                                       queued tasks (``deploymentFailed``; gone in
                                                       1.8)
a standby's failed forward             1.4 – 1.6.392   GET/DELETE: 502 "Failed to successfully
                                                       establish a connection to the leader."; writes:
                                                       "Connection to leader refused." (503 on
                                                       1.4.8 – 1.4.x, else 502)
no leader                              < 1.7.149       503 (502 from 1.7.149)
``DeclinedScarceResources``            1.5.7+          only with ``restricted``; before 1.5.7 there is
                                                       no such option (tasks may take GPU agents)
``GROUP_BY n`` at offer time           1.4 – 1.10.33,  a value no instance of the app has yet always
                                       1.11.0 – 17     fits; a taken one only while it has the fewest,
                                                       once ``n`` are taken
                                       1.10.34+,       the app's ``instances`` spread evenly over ``n``
                                       1.11.18+        values: ``instances // n`` each, the remainder
                                                       one more; a new value only while fewer than ``n``
                                                       are taken; no value (``n`` 0): nothing fits (a
                                                       division by zero)
no ``unreachableStrategy``             1.4.0 – 1.4.8,  300/600 s: a lost task is replaced after 5 min
                                       1.5.0           (``UnreachableEnabled``'s default)
                                       1.4.9+, 1.5.1+  0/0: replaced at once
``unreachableStrategy``'s validator    1.4.0 – 1.4.5   ``inactiveAfterSeconds`` >= 1 and <
                                                       ``expungeAfterSeconds``, else 422 (0/0 among
                                                       them), accord's texts under ``…/inactiveAfter``;
                                                       1.4.6+: >= 0 and <=
a standby's connect to a leader        1.4 – 1.6.392   after the connect timeout: GET/DELETE 502 "Failed
whose host drops packets                               …" up to 1.5.0, writes a 500 (up to 1.4.7, 1.5.0)
                                                       or 504 "Connection to leader timed out." (1.4.8 –
                                                       1.4.x); 1.5.1 – 1.6.392 504 for both
                                       1.6.486+        502 "Connection to leader refused."
=====================================  ==============  ===============================================

What is not modelled: the asynchronous purge of 1.5 – 1.7 is done at once (before the next deployment's
first step queues its apps); ``--scale_apps_initial_delay`` (the first check comes one interval after
the start); ``GROUP_BY``'s instance count
is the app's ``instances`` (1.10.34+ reads the run spec a placed instance was launched with, which a
scale without a new configuration leaves behind).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from .validation import AppRules

__all__ = ["Played", "played", "DEFAULT_VERSION", "SCALE_APPS_INTERVAL", "BAD_CONNECTION"]

#: What the local Marathon is by default: the newest marathon-tf supports.
DEFAULT_VERSION = "1.11.0"
#: Marathon's ``--scale_apps_interval`` default, 300 000 ms (1.4 – 1.11).
SCALE_APPS_INTERVAL = 300.0
#: ``JavaUrlConnectionRequestForwarder.ERROR_STATUS_BAD_CONNECTION``: what a 1.4 – 1.6.392 standby answers a
#: GET/DELETE it cannot forward.
BAD_CONNECTION = "Failed to successfully establish a connection to the leader."
LEADER_TIMED_OUT = "Connection to leader timed out."

#: ``1.4.3``, ``1.6.322-2bf46b341`` (what ``/v2/info`` says; the local cluster knows no client's parser:
#: it knows marathon-tf only through ``contract/``).
_VERSION = re.compile(r"^(\d{1,4})\.(\d{1,4})(?:\.(\d{1,9}))?(?:[-+][0-9A-Za-z.+-]*)?$")


def _v(major: int, minor: int, patch: int = 0) -> tuple[int, int, int]:
    return (major, minor, patch)


_OLDEST, _NEWEST = _v(1, 4, 0), _v(1, 11, 999999999)


@dataclass(frozen=True)
class Played:
    """The Marathon version the local cluster plays and what follows from it."""

    version: tuple[int, int, int]
    #: What ``/v2/info`` says.
    text: str

    @property
    def deployment_lock(self) -> bool:
        """A deployment's lock keeps a failed task of its app from being relaunched (1.4 – 1.7)."""
        return self.version < _v(1, 8)

    @property
    def purge_on_cancel(self) -> bool:
        """A cancelled deployment's apps lose their queued tasks (1.4 – 1.7)."""
        return self.version < _v(1, 8)

    @property
    def read_forward_failure(self) -> str:
        """What a standby answers a GET/DELETE it cannot forward (the leader's port refuses)."""
        return BAD_CONNECTION if self.version < _v(1, 6, 486) else "Connection to leader refused."

    @property
    def scalars_grouped(self) -> bool:
        """A scalar agent attribute reads ``1,024`` in a constraint up to 1.6.0: ``NumberFormat.getInstance``
        (the JVM's locale, English here); from 1.6.322 ``DecimalFormat("0.###")``, ``1024`` (it came with the
        IS operator)."""
        return self.version < _v(1, 6, 322)

    @property
    def read_timeout_answer(self) -> tuple[int, str] | None:
        """What a standby answers when its leader took the request and gave no status within
        ``--leader_proxy_read_timeout``: up to 1.5.0 the status is read inside a ``Try`` whose every failure is
        502 "Failed to successfully establish a connection to the leader."; 1.5.1 – 1.6.392 tell a timeout
        apart: 504 "Connection to leader timed out.". None from 1.6.486 (akka-http's idle timeout: not played;
        the refused answers stand)."""
        if self.version < _v(1, 5, 1):
            return 502, BAD_CONNECTION
        if self.version < _v(1, 6, 486):
            return 504, LEADER_TIMED_OUT
        return None

    def connect_timeout_answer(self, *, write: bool) -> tuple[int, str]:
        """What a standby answers when its connect to the leader times out (a host that drops packets;
        ``--leader_proxy_connection_timeout``). A write (a body to send) connects while it copies the request
        and a GET/DELETE while it reads the status: up to 1.5.0 that read is a ``Try`` whose every failure is
        502 :data:`BAD_CONNECTION`; a write's timeout escapes up to 1.4.7 and on 1.5.0 (Jetty's 500 page) and is
        a 504 on 1.4.8 – 1.4.x; 1.5.1 – 1.6.392 answer both 504; the akka-http forwarder (1.6.486+) cannot
        tell a timeout from a refusal: 502 "Connection to leader refused."."""
        if self.version >= _v(1, 6, 486):
            return 502, "Connection to leader refused."
        if self.version >= _v(1, 5, 1):
            return 504, LEADER_TIMED_OUT
        if not write:
            return 502, BAD_CONNECTION
        if _v(1, 4, 8) <= self.version < _v(1, 5):
            return 504, LEADER_TIMED_OUT
        return 500, "Server Error"

    @property
    def write_forward_status(self) -> int:
        """The status of "Connection to leader refused." (503 on 1.4.8 – 1.4.x, else 502)."""
        return 503 if _v(1, 4, 8) <= self.version < _v(1, 5) else 502

    @property
    def no_leader_status(self) -> int:
        """"Could not determine the current leader": 503 before 1.7.149, then 502."""
        return 503 if self.version < _v(1, 7, 149) else 502

    @property
    def gpu_scheduling_default(self) -> str:
        """``--gpu_scheduling_behavior``'s default: ``restricted`` from 1.8; ``undefined`` before, which lets
        tasks without GPUs take GPU agents (played as ``unrestricted``)."""
        return "restricted" if self.version >= _v(1, 8) else "unrestricted"

    @property
    def group_by_even(self) -> bool:
        """``GROUP_BY n`` spreads an app's instances evenly over at most ``n`` values (1.10.34+ and 1.11.18+);
        before, a value no instance has yet always fits (:func:`marathon_tf.mesos.placement.meets_constraint`)."""
        return _v(1, 10, 34) <= self.version < _v(1, 11) or self.version >= _v(1, 11, 18)

    @property
    def unreachable_default(self) -> dict[str, int]:
        """The ``unreachableStrategy`` of an app that sets none: 300/600 s on 1.4.0 – 1.4.8 and 1.5.0,
        0/0 from 1.4.9 and 1.5.1 (``UnreachableEnabled.DefaultInactiveAfter`` / ``DefaultExpungeAfter``)."""
        if self.version < _v(1, 4, 9) or _v(1, 5) <= self.version < _v(1, 5, 1):
            return {"inactiveAfterSeconds": 300, "expungeAfterSeconds": 600}
        return {"inactiveAfterSeconds": 0, "expungeAfterSeconds": 0}

    @property
    def unreachable_strict(self) -> bool:
        """1.4.0 – 1.4.5 refuse an ``unreachableStrategy`` with ``inactiveAfterSeconds`` under 1 or not under
        ``expungeAfterSeconds`` (0/0 among them); 1.4.6 relaxed it to ``>= 0`` and ``<=``."""
        return self.version < _v(1, 4, 6)

    def app_rules(self, features: Iterable[str]) -> AppRules:
        """The app rules of this version with ``features`` (its ``--enable_features``) enabled."""
        return AppRules(frozenset(features), self.unreachable_default, self.unreachable_strict)

    @property
    def knows_gpu_scheduling_behavior(self) -> bool:
        """``--gpu_scheduling_behavior`` exists (1.5.7+), so ``DeclinedScarceResources`` can happen."""
        return self.version >= _v(1, 5, 7)


def played(text: object = None) -> Played:
    """``"1.7.236"`` → what the local cluster plays (None: :data:`DEFAULT_VERSION`); ValueError naming the
    range for anything else."""
    said = (DEFAULT_VERSION if text is None else text)
    m = _VERSION.match(said.strip()) if isinstance(said, str) else None
    version = _v(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) if m else None
    if version is None or not (_OLDEST <= version <= _NEWEST):
        raise ValueError(f"marathon version {text!r}: the local cluster plays 1.4.0 to 1.11.x (e.g. 1.4.3, 1.7.236)")
    assert isinstance(said, str)
    return Played(version, said.strip())
