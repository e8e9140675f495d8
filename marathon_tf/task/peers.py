"""Which peer a stalled task waits for: TensorFlow's own words, else a look at the peers' TF servers.

A chief or worker whose step has not moved for a while (:data:`STALL_AFTER`, or 3 × its usual
interval between steps; at most half the progress watchdog's limit) is *stalled*. :class:`PeerDiagnosis`
then names the peer it waits for:

1. a peer TensorFlow named during the stall (:class:`marathon_tf.task.tflog.TFLogWatcher`:
   ``CreateSession still waiting for response from worker: /job:ps/replica:0/task:0``, a gRPC
   ``UnavailableError`` naming a task, the coordination service's heartbeat errors);
2. else a peer whose TF server does not answer (:func:`probe`): every gRPC server answers the
   HTTP/2 connection preface with its SETTINGS frame at once; a process that is stopped
   (``SIGSTOP``) or frozen still has its socket, the kernel still accepts the connection, but
   nothing answers (``silent``); a dead one refuses the connection (``refused``). Measured against
   a TF 2.21 server: answers in ≈ 30 ms, stopped → silent, killed → refused; the server logs nothing.
   ``refused`` is said only when the connection itself is refused (nothing listens at the address):
   a connection that was made and then reset or dropped without an answer had a listener, which did
   not answer (``silent``): a kernel that resets connections its stopped owner's full accept queue
   cannot take (``net.ipv4.tcp_abort_on_overflow``), or the rare program that closes its socket
   during the look (the next look says ``refused``).

The look happens in a thread of its own, at most every :data:`LOOK_EVERY` seconds while the task is
stalled, at most :data:`MAX_PROBED` peers (ps first, then chief, then workers), so a job that
trains costs nothing. Pure apart from the probe (injected); clocks are injected.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Mapping

from marathon_tf.contract.taskapi import broadcast
from marathon_tf.task.tflog import TFLogWatcher

__all__ = ["probe", "PeerDiagnosis", "frozen_ps", "STALL_AFTER", "LOOK_EVERY", "MAX_PROBED", "ANSWERS", "SILENT",
           "REFUSED"]

#: A task is stalled after this long without a step (or 3 × its usual interval, if longer).
STALL_AFTER = 10.0
#: While stalled, the peers' servers are looked at this often.
LOOK_EVERY = 10.0
#: At most this many peers are looked at (ps, then chief, then workers).
MAX_PROBED = 32
PROBE_TIMEOUT = 2.0

ANSWERS, SILENT, REFUSED, UNREACHABLE = "answers", "silent", "refused", "unreachable"
#: HTTP/2 client connection preface + an empty SETTINGS frame (RFC 7540 §3.5).
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_WHY = {SILENT: "its TF server does not answer", REFUSED: "its TF server refuses connections",
        UNREACHABLE: "its TF server cannot be reached"}
_ORDER = {"ps": 0, "chief": 1, "worker": 2}


def probe(address: str, timeout: float = PROBE_TIMEOUT) -> str:
    """Whether the gRPC server at ``host:port`` answers: :data:`ANSWERS`, :data:`SILENT` (connected,
    no answer within ``timeout``, or the connection reset without one), :data:`REFUSED` (nothing listens)
    or ``unreachable``."""
    host, _, port = address.rpartition(":")
    try:
        conn = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
    except ConnectionRefusedError:
        return REFUSED
    except ConnectionResetError:  # a listener took the connection and reset it before connect() returned
        return SILENT
    except (OSError, ValueError):
        return UNREACHABLE
    try:
        conn.settimeout(timeout)
        conn.sendall(_PREFACE)
        head = conn.recv(9)
        return ANSWERS if len(head) >= 4 and head[3] == 0x04 else SILENT
    except OSError:  # the timeout, or reset / dropped after the connection was made: a listener, no answer
        return SILENT
    finally:
        conn.close()


def frozen_ps(waiting: Mapping[str, object] | None) -> str | None:
    """The ps a stalled task waits for when the evidence says its program is frozen (its TF server takes the
    connection and does not answer: stopped, hung; :func:`probe`'s ``silent``), else None. A ps that refuses
    connections is dead (its own bootstrap sees its end); a chief or worker is restarted by its own watchdog."""
    peer = str((waiting or {}).get("peer") or "")
    why = str((waiting or {}).get("why") or "")
    if not peer.startswith("ps-") or not why.endswith(_WHY[SILENT]):
        return None
    return peer


class PeerDiagnosis:
    """``update(stalled_for, usual_interval, peers)`` from the bootstrap's loop (cheap: it only
    starts a look in a thread now and then); ``waiting_for()`` → ``{"peer", "why", "seconds"}`` or
    None. ``peers``: ``{task: "host:port"}`` of the other cluster members."""

    def __init__(self, tflog: TFLogWatcher, *, probe: Callable[[str], str] = probe,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 stall_after: float = STALL_AFTER, look_every: float = LOOK_EVERY):
        self.tflog, self.probe, self.clock, self.wall = tflog, probe, clock, wall
        self.stall_after, self.look_every = stall_after, look_every
        self._lock = threading.Lock()
        self._looked: dict[str, str] = {}
        self._next_look = 0.0
        self._looking = False
        self._stalled_for: float | None = None

    def update(self, stalled_for: float | None, usual_interval: float | None,
               peers: Mapping[str, str], limit: float | None = None) -> None:
        """``stalled_for``: seconds since the program's last step (or its start); None: not watched.
        ``limit``: the progress watchdog's (a look starts by half of it, so its verdict can name the peer)."""
        threshold = max(self.stall_after, 3 * (usual_interval or 0.0))
        if limit:
            threshold = min(threshold, limit / 2)
        with self._lock:
            if stalled_for is None or stalled_for < threshold:
                self._stalled_for, self._looked = None, {}
                self._next_look = 0.0
                return
            self._stalled_for = stalled_for
            if self._looking or self.clock() < self._next_look or not peers:
                return
            self._looking, self._next_look = True, self.clock() + self.look_every
        threading.Thread(target=self._look, args=(dict(peers),), name="peer-look", daemon=True).start()

    def _look(self, peers: dict[str, str]) -> None:
        chosen = sorted(peers, key=lambda t: (_ORDER.get(t.rsplit("-", 1)[0], 3), t))[:MAX_PROBED]
        try:
            results = {t: r for t, r in broadcast(self.probe, {t: peers[t] for t in chosen}).items() if r is not None}
        finally:
            with self._lock:
                self._looking = False
        with self._lock:
            if self._stalled_for is not None:
                self._looked = results

    def waiting_for(self) -> dict | None:
        """The peer this task waits for, why, and for how long; None when not stalled or unknown."""
        with self._lock:
            stalled, looked = self._stalled_for, dict(self._looked)
        if stalled is None:
            return None
        said = self.tflog.signals(since=self.wall() - stalled)
        quiet = [t for t in sorted(looked, key=lambda t: (_ORDER.get(t.rsplit("-", 1)[0], 3), t))
                 if looked[t] != ANSWERS]
        if said:
            # what TensorFlow said, preferring a peer that also does not answer
            peer = next((t for t in quiet if t in said), None) or max(said, key=lambda t: said[t][0])
            why = said[peer][1] + (f"; {_WHY[looked[peer]]}" if looked.get(peer) in _WHY else "")
            return {"peer": peer, "why": f"TensorFlow: {why}", "seconds": round(stalled, 1),
                    "line": said[peer][2]}
        if quiet:
            peer = quiet[0]
            return {"peer": peer, "why": _WHY[looked[peer]], "seconds": round(stalled, 1),
                    **({"others": quiet[1:]} if len(quiet) > 1 else {})}
        return None
