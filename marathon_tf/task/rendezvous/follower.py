"""A follower's side of the rendezvous: find the leader (its hint, or one small lookup), long-poll
its view; without a leader for a while, read the discovery backend itself
(see :mod:`marathon_tf.task.rendezvous`). Its requests go through a bounded session
(:func:`marathon_tf.marathon.transport.session`) unless one is given."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import requests

from marathon_tf.contract import naming
from marathon_tf.contract.plan import JobPlan, PlanError
from marathon_tf.contract.taskapi import RENDEZVOUS, TaskClient
from marathon_tf.marathon import transport
from marathon_tf.task.discovery import Backend, Observation, PeerKey, poll_schedule
from marathon_tf.task.rendezvous.relay import RELAY_PAUSE, Mirror
from marathon_tf.task.rendezvous.view import LONG_POLL, Side, cluster_key, keys, patch

__all__ = ["FollowerRendezvous", "hint_wait_for", "fallback_after", "BUSY_TRIES"]

BUSY_TRIES = 3           # timeouts of a leader that answered before, before a follower looks it up again


def hint_wait_for(tasks: int) -> float:
    """Seconds a starting follower waits for the leader's hint before it asks Marathon itself:
    nothing to speak of for small jobs, up to 30 s for large ones."""
    return min(30.0, tasks / 50.0)


def fallback_after(tasks: int) -> float:
    """Seconds without a reachable leader before a follower reads the backend itself."""
    return max(10.0, tasks / 10.0)


class FollowerRendezvous(Side):
    """A follower's side: find the leader (``locate() -> Observation`` of its status address),
    long-poll it; without a leader for ``fallback`` seconds, read ``direct`` itself."""

    def __init__(self, locate: Callable[[], Observation], direct: Backend, members: Sequence[PeerKey],
                 me: PeerKey | None, *, job: str, session=None, stop: threading.Event | None = None,
                 clock: Callable[[], float] = time.monotonic, rng: random.Random | None = None,
                 schedule: tuple[float, float] | None = None, fallback: float | None = None,
                 long_poll: float = LONG_POLL, leader_task: str = "", hint_wait: float | None = None,
                 read_slack: float = 10.0, serve: int | None = None, relay_pause: float = RELAY_PAUSE):
        super().__init__(stop=stop, clock=clock)
        #: a relay's status port (it serves the view to its share of a large job's followers: :mod:`.relay`)
        self.serve = serve
        self.mirror = Mirror(job, naming.task_name(*me), self._done) if serve is not None and me else None
        self.relay_address: str | None = None  # the relay this follower long-polls (a redirect of the leader's)
        self.relay_task = ""
        self.relay_pause = relay_pause
        self._relay_failed_at: float | None = None  # when its relay last failed it (it asks the leader meanwhile)
        self.leader_task = leader_task
        self.hint_wait = hint_wait if hint_wait is not None else hint_wait_for(len(members))
        self.hints = 0
        self._hinted: str | None = None
        self._hint_event = threading.Event()
        self.locate, self.direct, self.job, self.me = locate, direct, job, me
        self.others = [m for m in members if m != me]
        self.cluster = cluster_key(members)
        self.session = session if session is not None else transport.session()
        self.rng = rng or random.Random()
        self.schedule = schedule or poll_schedule(len(members))
        self.fallback = fallback if fallback is not None else fallback_after(len(members))
        self.long_poll, self.read_slack = long_poll, read_slack  # a long poll's answer may take this much longer
        self.leader_address: str | None = None
        self.leader_id: str | None = None
        self._bad_plan = ""  # the last unreadable plan a leader sent (said once)
        self.leader_detail = "not looked up yet"
        self.locates = self.long_polls = self.direct_reads = 0
        self._version = -1
        self._formed = False

    def start(self) -> FollowerRendezvous:
        self._start(self._loop, "rendezvous-follower")
        return self

    def _unknown(self) -> str:
        return f"waiting for the leader ({self.leader_detail})"

    def hint(self, query: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        """``GET /leader?job=&task=&at=host:port`` from the leader: where it serves the view.
        Taken only with the job's key (the status server's one check, :mod:`marathon_tf.contract.taskauth`)
        and naming the job's leading task; the follower then checks that the address answers as this
        job's leader before it believes anything it says."""
        at = query.get("at") or ""
        host, _, port = at.rpartition(":")
        if query.get("job") != self.job or query.get("task") != self.leader_task or not host or not port.isdigit():
            return 400, {"message": "not a hint from this job's leader"}
        self.hints += 1
        self._hinted = at
        self._hint_event.set()
        return 200, {"ok": True}

    def _await_hint(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for the leader's hint; True when it is time to end."""
        end = time.monotonic() + max(0.0, seconds)
        while not self._done() and not self._hint_event.is_set():
            left = end - time.monotonic()
            if left <= 0:
                break
            self._hint_event.wait(min(left, 0.2))
        return self._done()

    def _loop(self) -> None:
        first, cap = self.schedule
        delay, busy = first, 0
        lost_since: float | None = self.clock()
        other_spec: str | None = None  # the leader that answered with another cluster spec (a scale under way)
        # a large job's tasks neither ask all at once nor ask Marathon at all if the leader calls first
        if self._await_hint(max(self.hint_wait, self.rng.uniform(0, first))):
            return
        while not self._done():
            if self.leader_address is None:
                if self._hint_event.is_set():
                    self._hint_event.clear()
                    self.leader_address, self.leader_detail = self._hinted, f"leader at {self._hinted} (its hint)"
                else:
                    self.locates += 1
                    obs = self.locate()
                    self.leader_address = obs.address
                    if not (obs.address and obs.address == other_spec):  # (else: still why it waits)
                        self.leader_detail = "leader at " + obs.address if obs.address else "leader: " + obs.detail
            answered = self.leader_address is not None and self._poll_leader()
            other_spec = self.leader_address if answered == "other" else None
            if answered is True:
                lost_since, delay, busy = None, first, 0
                continue
            if answered == "relay":  # its relay failed it: the leader answers it itself for a while
                continue
            if answered == "busy" and busy < BUSY_TRIES:  # the leader answered before: busy, not gone
                busy += 1
                if self._await_hint(delay * self.rng.uniform(0.5, 1.5)):
                    return
                delay = min(cap, delay * 2)
                continue
            busy = 0
            self.leader_address = None
            if answered == "other":  # the leader of another spec: not lost, so no direct reads of the old tasks
                lost_since = None
            if lost_since is None:
                lost_since = self.clock()
            if self.clock() - lost_since >= self.fallback:
                self._read_direct()
            if self._await_hint(delay * self.rng.uniform(0.5, 1.5)):
                return
            delay = min(cap, delay * 2)

    def close(self) -> None:
        super().close()
        if self.mirror is not None:
            self.mirror.wake()

    def _poll_leader(self) -> bool | str:
        """One long poll of the relay the leader sent this follower to, else of the leader (:meth:`_poll`). A relay
        that does not answer as the leader would sends the follower back to the leader, which answers it itself
        for :attr:`relay_pause` s ("relay": poll the leader now)."""
        via = self.relay_address
        answered = self._poll(via or self.leader_address)
        if via is None or answered is True:
            return answered
        self._relay_failed_at = self.clock()
        self.leader_detail = (f"relay {self.relay_task} at {via}: {self.leader_detail}; asking the leader "
                              f"{self.leader_task} at {self.leader_address} itself")
        self.relay_address = None
        return "relay"

    def _poll(self, target: str | None) -> bool | str:
        """One long poll; False when the leader did not answer as a leader of this job,
        "busy" when a leader that answered before timed out (it is still there: ask it again
        rather than Marathon), "other" when it leads another version of the job's cluster spec
        (its view holds the tasks a ``scale`` replaces: a program started with it would register
        with peers that do not expect it)."""
        params = {"job": self.job, "after": str(self._version), "leader": self.leader_id or "",
                  "wait": f"{self.long_poll:g}"}
        if not self._formed:  # no use for the partial views of a forming job (1,000s of them)
            params["complete"] = "1"
        if self.me is not None:  # a large job's leader sends a follower to its relay; a relay says where it serves
            params["me"] = naming.task_name(*self.me)
            if self.serve is not None:
                params["serve"] = str(self.serve)
            elif self._relay_failed_at is not None and self.clock() - self._relay_failed_at < self.relay_pause:
                params["relay"] = "0"
        assert target is not None  # (found before a poll)
        reply = TaskClient(self.session).call(target, RENDEZVOUS, params=params,
                                              timeout=(10.0 if self.leader_id else 3.0,
                                                       self.long_poll + self.read_slack))
        if reply.code is None or (reply.ok and reply.body is None):  # refused / reset / timeout / not JSON
            e = reply.error
            why = type(e).__name__ if e is not None else "not JSON"
            self.leader_detail = f"leader at {target} unreachable ({why})"
            # no whole answer in time
            busy = isinstance(e, (requests.exceptions.ReadTimeout, transport.DeadlineExceeded))
            return "busy" if self.leader_id and busy else False
        doc = reply.body if reply.ok else None
        self.long_polls += 1
        self.polls += 1
        if not isinstance(doc, dict) or doc.get("job") != self.job or not isinstance(doc.get("version"), int):
            self.leader_detail = f"{target} is not this job's leader"
            return False
        if doc.get("cluster") not in (None, self.cluster):  # a scale under way: its tasks have the old spec
            self.leader_detail = (f"the leader at {target} has another cluster spec (a scale or "
                                  f"re-deploy under way): waiting for the new one")
            return "other"
        if "redirect" in doc:  # a large job: the leader sends this follower to its relay
            return self._redirected(doc["redirect"], target)
        peers, missing = keys(doc.get("peers")), keys(doc.get("missing"))
        if doc.get("delta"):
            if str(doc.get("leader")) != self.leader_id:
                return False
            with self.view.cond:
                peers, missing = patch(self.view.peers, doc.get("peers")), patch(self.view.missing, doc.get("missing"))
        self.leader_id, self._version = str(doc.get("leader")), doc["version"]
        self.leader_detail = f"leader {doc.get('leader_task')} at {self.leader_address}" + (
            f" through relay {self.relay_task} at {target}" if target != self.leader_address else "")
        plan = self._plan(doc.get("plan"))  # the job's plan, as its coordinator wrote it (the whole doc carries it)
        with self.view.cond:  # one change: a task that finds its peers here reads the plan they came with
            self.view.update(peers, missing)
            if plan is not None:
                self.view.adopt(plan)
        if self.mirror is not None and target == self.leader_address:  # what this relay's followers get
            self.mirror.take(doc)
        if doc.get("complete"):
            self._formed = True
        return True

    def _redirected(self, redirect: Any, target: str) -> bool:
        """The leader's redirect to this follower's relay: long-poll it from now on (True); not from the leader,
        or not a ``host:port``: False."""
        at = redirect.get("at") if isinstance(redirect, dict) else None
        host, _, port = at.rpartition(":") if isinstance(at, str) else ("", "", "")
        if target != self.leader_address or self.serve is not None or not host or not port.isdigit():
            self.leader_detail = f"{target} sent a redirect this follower cannot take: {redirect!r}"[:300]
            return False
        self.relay_address, self.relay_task = at, str(redirect.get("task") or "its relay")
        return True

    def _plan(self, data: Any) -> JobPlan | None:
        """The plan a leader's document carries (none: the empty plan); one this task cannot read is said once and
        not adopted (the task keeps following the plan it had)."""
        if data is None:
            return JobPlan()
        try:
            return JobPlan.from_wire(data)
        except PlanError as e:
            if str(e) != self._bad_plan:
                self._bad_plan = str(e)
                from marathon_tf.task import stderr

                stderr.log(f"rendezvous: {self.leader_address} sent a plan this task cannot follow: {e}")
            return None

    def _read_direct(self) -> None:
        """No leader for a while: read the backend like a task without a leader would."""
        self.direct_reads += 1
        self.polls += 1
        present, missing = {}, {}
        for peer, obs in self.direct.lookup(self.others).items():
            if obs.address:
                present[peer] = obs.address
            else:
                missing[peer] = obs.detail
        with self.view.cond:
            mine = {p: a for p, a in self.view.peers.items() if p == self.me}
        self.view.update({**mine, **present}, missing)
        self._version = -1  # a leader that comes back answers at once

