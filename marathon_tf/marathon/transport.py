"""Bounded HTTP for every request marathon-tf makes: to Marathon, to the Mesos agents (``logs``) and
to the tasks' status servers, from the user's machine and from inside a task.

* **A deadline for the whole exchange.** ``requests``' read timeout applies to each socket read, so
  a server that sends one byte every few seconds keeps a request open for ever. Here every request
  must be over — connect, send, status line, headers, body — within its deadline: by default the
  sum of its (connect, read) timeouts, never past the caller's own deadline (``deadline``: a
  function giving a ``time.monotonic()`` instant, e.g. the CLI's ``--timeout``). A timer shuts the
  socket down when it passes, which ends a read blocked in any thread; the request then raises
  :class:`DeadlineExceeded` (a ``requests.Timeout``). A streamed answer (the event stream) is bound
  only until its headers have come: its body has its own liveness check (:mod:`.events`).
* **A size cap.** A body is read in chunks and refused past ``max_bytes`` (counted after
  decoding, so a compressed bomb is refused too); a ``Content-Length`` above it is refused before
  anything is read: :class:`AnswerTooLarge`, naming the limit. Default 32 MiB
  (``MARATHON_TF_MAX_RESPONSE``, e.g. ``64M``); Marathon's largest answers we ask for (a job's
  group with its tasks, the queue) are a few MB on big clusters.

:func:`mount` puts both on a ``requests.Session`` (the REST client's, the agents'); :func:`session`
makes one; :func:`get_json` is a one-shot GET of a JSON object (``None`` on any failure) for the
tasks' status servers. Nothing here knows Marathon.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
from typing import Any, Callable, Mapping, Optional

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

__all__ = ["DEFAULT_MAX_BYTES", "MAX_BYTES_ENV", "AnswerTooLarge", "DeadlineExceeded", "NotSent", "BoundedAdapter", "mount",
           "session", "get_json", "parse_size", "show_size", "max_bytes_from_env"]

DEFAULT_MAX_BYTES = 32 << 20
MAX_BYTES_ENV = "MARATHON_TF_MAX_RESPONSE"
_CHUNK = 1 << 16
Deadline = Callable[[], Optional[float]]


class AnswerTooLarge(requests.RequestException):
    """The body is larger than the cap; ``announced``: its ``Content-Length`` when that said so."""

    def __init__(self, limit: int, announced: int | None = None, **kw: Any):
        self.limit, self.announced = limit, announced
        said = f" (Content-Length {show_size(announced)})" if announced else ""
        super().__init__(f"the answer is larger than the {show_size(limit)} limit{said}; it was not read", **kw)


class DeadlineExceeded(requests.exceptions.Timeout):
    """The whole exchange did not end within its deadline."""


class NotSent(DeadlineExceeded):
    """No time was left for the request: nothing was sent."""


def parse_size(text: str) -> int:
    """``33554432``, ``512k``, ``32M``, ``32MiB``, ``1G`` → bytes (binary units)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgKMG]?)(?:i?[bB])?\s*", str(text))
    if not m:
        raise ValueError(f"{text!r} is not a size (e.g. 32M, 512k, 1G or bytes)")
    size = int(float(m.group(1)) * 1024 ** " kmg".index(m.group(2).lower() or " "))
    if size < 1024:
        raise ValueError(f"{text!r}: at least 1k")
    return size


def show_size(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f}".rstrip("0").rstrip(".") + " " + unit
    return f"{size} bytes"


def max_bytes_from_env(environ: Mapping[str, str] = os.environ) -> int:
    """``MARATHON_TF_MAX_RESPONSE`` if set (and valid), else :data:`DEFAULT_MAX_BYTES`."""
    try:
        return parse_size(environ[MAX_BYTES_ENV]) if environ.get(MAX_BYTES_ENV) else DEFAULT_MAX_BYTES
    except ValueError:
        return DEFAULT_MAX_BYTES


# --- the deadline: a timer that shuts the request's socket down ---------------------------------------

_current = threading.local()  # the watch of the request this thread is sending, while it is sent


class _Watch:
    """Fires once after ``seconds``: shuts down the socket of the connection the request uses (a
    blocked read in any thread then returns)."""

    def __init__(self, seconds: float):
        self.fired = False
        self._conn: Any = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(seconds, 0.0), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def attach(self, conn: Any) -> None:
        with self._lock:
            self._conn = conn
            if self.fired:
                _shut(conn)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            if self._conn is not None:
                _shut(self._conn)

    def cancel(self) -> None:
        self._timer.cancel()


def _shut(conn: Any) -> None:
    sock = getattr(conn, "sock", None)
    if sock is not None:
        try:  # the plain socket's shutdown (an SSLSocket's would also drop its TLS state under a reader)
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:
            pass


class _Watched:
    """A urllib3 connection that tells the current request's watch which socket to shut."""

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        _attach(self)

    def request(self, *args: Any, **kwargs: Any) -> Any:
        _attach(self)
        return super().request(*args, **kwargs)  # type: ignore[misc]


def _attach(conn: Any) -> None:
    watch = getattr(_current, "watch", None)
    if watch is not None:
        watch.attach(conn)


class _Connection(_Watched, HTTPConnection):
    pass


class _TLSConnection(_Watched, HTTPSConnection):
    pass


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Connection


class _TLSPool(HTTPSConnectionPool):
    ConnectionCls = _TLSConnection


_POOLS = {"http": _Pool, "https": _TLSPool}


def _budget(timeout: Any) -> float | None:
    """The whole exchange's seconds for a requests ``timeout``: connect + read."""
    if isinstance(timeout, tuple):
        parts = [t for t in timeout if t is not None]
        return float(sum(parts)) if len(parts) == len(timeout) else None
    return 2.0 * float(timeout) if isinstance(timeout, (int, float)) else None


class BoundedAdapter(HTTPAdapter):
    """``requests``' adapter with a deadline for the whole exchange and a size cap (see the module)."""

    def __init__(self, *, max_bytes: int = DEFAULT_MAX_BYTES, deadline: Deadline = lambda: None, **kw: Any):
        self.max_bytes = max_bytes
        self.deadline = deadline
        super().__init__(**kw)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(_POOLS)

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **kwargs)
        if not proxy.lower().startswith("socks"):
            manager.pool_classes_by_scheme = dict(_POOLS)
        return manager

    def _seconds(self, timeout: Any) -> float | None:
        seconds = _budget(timeout)
        at = self.deadline()
        if at is not None:
            left = at - time.monotonic()
            seconds = left if seconds is None else min(seconds, left)
        return seconds

    def send(self, request: requests.PreparedRequest, stream: bool = False, timeout: Any = None,
             **kwargs: Any) -> requests.Response:
        seconds = self._seconds(timeout)
        if seconds is not None and seconds <= 0:
            raise NotSent("no time left for the request", request=request)
        watch = _Watch(seconds) if seconds is not None else None
        before = getattr(_current, "watch", None)
        _current.watch = watch
        try:
            try:
                response = super().send(request, stream=True, timeout=timeout, **kwargs)
            finally:
                _current.watch = before
            if not stream:
                response._content = self._body(response)
                response._content_consumed = True
            if watch is not None and watch.fired:
                response.close()
                raise DeadlineExceeded(f"no whole answer within {seconds:.3g} s", request=request)
            return response
        except requests.RequestException as e:
            if watch is not None and watch.fired and not isinstance(e, (DeadlineExceeded, AnswerTooLarge)):
                raise DeadlineExceeded(f"no whole answer within {seconds:.3g} s", request=request) from None
            raise
        finally:
            if watch is not None:
                watch.cancel()

    def _body(self, response: requests.Response) -> bytes:
        length = response.headers.get("Content-Length", "")
        if length.isdigit() and int(length) > self.max_bytes:
            response.close()
            raise AnswerTooLarge(self.max_bytes, int(length), response=response)
        chunks, size = [], 0
        for chunk in response.iter_content(_CHUNK):
            size += len(chunk)
            if size > self.max_bytes:
                response.close()
                raise AnswerTooLarge(self.max_bytes, response=response)
            chunks.append(chunk)
        return b"".join(chunks)


def mount(target: requests.Session, *, max_bytes: int | None = None, deadline: Deadline = lambda: None
          ) -> requests.Session:
    """Bound every request of ``target`` (http and https)."""
    adapter = BoundedAdapter(max_bytes=max_bytes_from_env() if max_bytes is None else max_bytes, deadline=deadline)
    target.mount("http://", adapter)
    target.mount("https://", adapter)
    return target


def session(*, max_bytes: int | None = None) -> requests.Session:
    """A new ``requests.Session`` with every request bounded."""
    return mount(requests.Session(), max_bytes=max_bytes)


def get_json(url: str, *, timeout: float = 2.0, max_bytes: int = 4 << 20) -> dict[str, Any] | None:
    """A JSON object from ``url``; None when there is no whole answer within ``timeout`` seconds,
    it is not a 200, not JSON or not an object (a task's status server: advisory)."""
    with session(max_bytes=max_bytes) as s:
        try:
            r = s.get(url, timeout=(timeout / 2, timeout / 2))
            if r.status_code != 200:
                return None
            body = json.loads(r.content)
        except (requests.RequestException, ValueError, RecursionError):
            return None
    return body if isinstance(body, dict) else None
