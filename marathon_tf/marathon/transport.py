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

:func:`session` makes a ``requests.Session`` with both (every session marathon-tf uses is made there, but for
:func:`fanout_session`'s, with the same bounds, for one task reaching thousands);
:func:`mount` puts them on one a caller made (a test's); :func:`get_json` is a one-shot GET of a JSON
object (``None`` on any failure: the Mesos master's agents), :func:`task_json` the same of a task's status port
through the task API's one client. Nothing here knows Marathon.

Over 600 lines as one piece: the deadline's watch, the pools whose connections it shuts, the size cap and the two
sessions that apply them (``requests``' and the fan-out's) share private machinery nothing else should reach.
"""

from __future__ import annotations

import heapq
import itertools
import json
import json as _json  # (FanoutSession.request takes a json= argument, as requests does)
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import quote, urlencode, urljoin, urlsplit, urlunsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter
from requests.sessions import merge_setting
from requests.utils import get_environ_proxies
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from marathon_tf.contract import taskauth
from marathon_tf.contract.taskapi import TaskClient

__all__ = ["DEFAULT_MAX_BYTES", "MAX_BYTES_ENV", "URL_ATTR", "AnswerTooLarge", "DeadlineExceeded", "NotSent",
           "RedirectRefused", "BoundedAdapter", "FanoutSession", "FanoutResponse", "mount", "session", "fanout_session",
           "quiet_insecure", "exchange", "body", "task_json",
           "get_json", "parse_size", "show_size", "max_bytes_from_env", "oneline", "short", "unreachable",
           "redact_url", "secret_forms", "scrub", "origin", "same_origin"]

DEFAULT_MAX_BYTES = 32 << 20
#: The attribute an exception raised after a redirect carries: the URL it was sent to (errors name it).
URL_ATTR = "marathon_tf_url"
#: What a write may follow: 307/308 keep the method and the body (RFC 9110 §15.4); 301/302/303 would turn it
#: into a GET, which is not what was asked.
_KEEP_METHOD = (307, 308)
_STREAM_ERROR_BYTES = 64 << 10
MAX_BYTES_ENV = "MARATHON_TF_MAX_RESPONSE"
_CHUNK = 1 << 16
Deadline = Callable[[], float | None]


class AnswerTooLarge(requests.RequestException):
    """The body is larger than the cap; ``announced``: its ``Content-Length`` when that said so."""

    def __init__(self, limit: int, announced: int | None = None, **kw: Any):
        self.limit, self.announced = limit, announced
        said = f" (Content-Length {show_size(announced)})" if announced else ""
        super().__init__(f"the answer is larger than the {show_size(limit)} limit{said}; it was not read", **kw)


class RedirectRefused(requests.RequestException):
    """A redirect not followed: too many, from https to http, or one that would turn a write into a GET.
    ``target``: where it led."""

    def __init__(self, *args: Any, target: str | None = None, **kw: Any):
        super().__init__(*args, **kw)
        self.target = target


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
        _watchdog.add(time.monotonic() + max(seconds, 0.0), self)

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
        _watchdog.remove(self)


class _Watchdog:
    """The one thread that fires every request's watch when its time comes (a ``threading.Timer`` per
    request started a thread per request: a thread start and its hand-over on every request)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._due: list[tuple[float, int, _Watch]] = []  # a heap: (when, order, watch)
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, at: float, watch: _Watch) -> None:
        with self._cond:
            heapq.heappush(self._due, (at, next(self._order), watch))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="marathon-tf-deadlines", daemon=True)
                self._thread.start()
            self._cond.notify()

    def remove(self, watch: _Watch) -> None:
        with self._cond:  # the requests in flight: a few
            self._due = [d for d in self._due if d[2] is not watch]
            heapq.heapify(self._due)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._due or self._due[0][0] > time.monotonic():
                    self._cond.wait(self._due[0][0] - time.monotonic() if self._due else None)
                watch = heapq.heappop(self._due)[2]
            watch._fire()


_watchdog = _Watchdog()


def _forked() -> None:  # a child of fork has no watchdog thread, and its lock may have been held at the fork
    global _watchdog
    _watchdog = _Watchdog()


os.register_at_fork(after_in_child=_forked)


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

    # (ignore[override]: requests' Session.send always passes verify/cert/proxies by keyword; **kwargs takes them)
    def send(self, request: requests.PreparedRequest, stream: bool = False, timeout: Any = None,  # type: ignore[override]
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


class _Outgoing:
    """What :class:`marathon_tf.contract.taskauth.JobKeyAuth` reads and writes of a request: its URL and headers."""

    def __init__(self, url: str, headers: dict[str, str]):
        self.url, self.headers = url, headers


class FanoutResponse:
    """A :class:`FanoutSession`'s answer: what the task API's client reads of a ``requests.Response``."""

    def __init__(self, status_code: int, content: bytes, headers: Mapping[str, str]):
        self.status_code, self.content, self.headers = status_code, content, headers

    def json(self) -> Any:
        return json.loads(self.content)


class FanoutSession:
    """A ``requests``-like session for one task reaching many (the leader's hints, a save round's holds): urllib3's
    pools with this module's watched connections, without ``requests``' layers, at a third of its CPU per request —
    which is what bounds how fast one task reaches 10,000 others. The same bounds as :func:`session`: a deadline for
    the whole exchange (the sum of the timeouts), a size cap; the job's key on control routes. No proxy from the
    environment (the requests go to the job's own tasks) and no redirect. Thread-safe."""

    def __init__(self, *, max_bytes: int = 1 << 20):
        self.max_bytes = max_bytes
        self.auth = taskauth.installed()
        self._pools = urllib3.PoolManager(num_pools=32, retries=False)
        self._pools.pool_classes_by_scheme = dict(_POOLS)

    def get(self, url: str, **kwargs: Any) -> FanoutResponse:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> FanoutResponse:
        return self.request("POST", url, **kwargs)

    def request(self, method: str, url: str, *, params: Mapping[str, str] | None = None, json: Any = None,
                headers: Mapping[str, str] | None = None, timeout: Any = 3.0,
                allow_redirects: bool = False) -> FanoutResponse:
        if params:
            url += ("&" if "?" in url else "?") + urlencode(params)
        head = dict(headers or {})
        body = None
        if json is not None:
            body = _json.dumps(json).encode()
            head["Content-Type"] = "application/json"
        if self.auth is not None:
            self.auth(_Outgoing(url, head))
        connect, read = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        seconds = _budget(timeout)
        watch = _Watch(seconds) if seconds is not None else None
        before = getattr(_current, "watch", None)
        _current.watch = watch
        try:
            try:
                answer = self._pools.request(method, url, body=body, headers=head, redirect=False,
                                             preload_content=False, timeout=urllib3.Timeout(connect=connect, read=read))
                content = self._body(answer)
            except urllib3.exceptions.HTTPError as e:
                if watch is not None and watch.fired:
                    raise DeadlineExceeded(f"no whole answer within {seconds:.3g} s") from None
                raise requests.ConnectionError(str(e)) from None
            if watch is not None and watch.fired:
                raise DeadlineExceeded(f"no whole answer within {seconds:.3g} s")
            return FanoutResponse(answer.status, content, answer.headers)
        finally:
            _current.watch = before
            if watch is not None:
                watch.cancel()

    def _body(self, answer: Any) -> bytes:
        try:
            length = answer.headers.get("Content-Length", "")
            if length.isdigit() and int(length) > self.max_bytes:
                raise AnswerTooLarge(self.max_bytes, int(length))
            chunks, size = [], 0
            for chunk in answer.stream(_CHUNK):
                size += len(chunk)
                if size > self.max_bytes:
                    raise AnswerTooLarge(self.max_bytes)
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            answer.release_conn()

    def close(self) -> None:
        self._pools.clear()

    def __enter__(self) -> FanoutSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def fanout_session(*, max_bytes: int = 1 << 20) -> FanoutSession:
    """A :class:`FanoutSession` (the one place one is made)."""
    return FanoutSession(max_bytes=max_bytes)


def mount(target: requests.Session, *, max_bytes: int | None = None, deadline: Deadline = lambda: None
          ) -> requests.Session:
    """Bound every request of ``target`` (http and https)."""
    adapter = BoundedAdapter(max_bytes=max_bytes_from_env() if max_bytes is None else max_bytes, deadline=deadline)
    target.mount("http://", adapter)
    target.mount("https://", adapter)
    return target


class _Session(requests.Session):
    """``requests``' session, reading the environment's proxies (``*_proxy``, ``no_proxy``) and CA bundle
    (``REQUESTS_CA_BUNDLE``, ``CURL_CA_BUNDLE``) once per origin for its life, as ``requests`` itself would for
    each request (its scan of the whole environment was a fifth of the CPU of a CLI's requests to a local
    server). Settings are merged as ``requests`` merges them."""

    def __init__(self) -> None:
        super().__init__()
        self._environ: dict[tuple[Any, ...], tuple[dict[str, str], str | None]] = {}

    def merge_environment_settings(self, url: Any, proxies: Any, stream: Any, verify: Any, cert: Any) -> Any:
        if not self.trust_env:
            return super().merge_environment_settings(url, proxies, stream, verify, cert)
        no_proxy = proxies.get("no_proxy") if proxies is not None else None
        key = (origin(str(url)), no_proxy)
        if key not in self._environ:
            self._environ[key] = (get_environ_proxies(url, no_proxy=no_proxy),
                                  os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE"))
        env_proxies, bundle = self._environ[key]
        if proxies is not None:
            for k, v in env_proxies.items():
                proxies.setdefault(k, v)
        if (verify is True or verify is None) and bundle:
            verify = bundle
        return {"proxies": merge_setting(proxies, self.proxies), "stream": merge_setting(stream, self.stream),
                "verify": merge_setting(verify, self.verify), "cert": merge_setting(cert, self.cert)}


class _Through(_Session):
    """A session that hands the requests to some origins to another session (see :func:`session`)."""

    def __init__(self, other: requests.Session, urls: Iterable[str]):
        super().__init__()
        self._other = other
        self._origins = {origin(u) for u in urls}

    # (ignore[override]: requests' own also takes bytes; every URL here is a str)
    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        if origin(url) in self._origins:
            return self._other.request(method, url, *args, **kwargs)
        return super().request(method, url, *args, **kwargs)


def origin(url: str) -> tuple[str, str, int | None]:
    """A URL's origin: its scheme, host (lower case, without credentials) and port (the scheme's default when
    none is written)."""
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(parts.scheme)


def same_origin(url: str, others: Iterable[str]) -> str | None:
    """The first of ``others`` at ``url``'s origin (whose credentials may go there), or None."""
    return next((o for o in others if origin(o) == origin(url)), None)


def session(*, max_bytes: int | None = None, deadline: Deadline = lambda: None, verify: bool | str = True,
            headers: Mapping[str, str] | None = None,
            through: tuple[requests.Session, Iterable[str]] | None = None) -> requests.Session:
    """A new ``requests.Session`` with every request bounded: the only place marathon-tf makes one (the REST
    client's, the Mesos master's and agents', the status servers', TensorBoard's, a download's). ``verify``
    and ``headers``: the session's TLS verification and default headers. ``through``: ``(other, urls)``,
    requests to the origins of ``urls`` (scheme, host and port) are sent by ``other`` instead, with its
    credentials and settings (the agent API that the local runner serves on Marathon's own port). In a
    task whose bootstrap installed its job key (:func:`marathon_tf.contract.taskauth.install`), its
    requests to the control routes of the job's other tasks carry it."""
    made = mount(_Session() if through is None else _Through(*through), max_bytes=max_bytes,
                 deadline=deadline)
    made.verify = verify
    made.headers.update(headers or {})
    auth = taskauth.installed()
    if auth is not None:
        made.auth = auth
    return made


def quiet_insecure() -> None:
    """TLS verification is off by the user's choice (``--insecure``): urllib3's warning on every request
    is silenced for this process (the CLI warns once itself)."""
    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)


def exchange(target: requests.Session, method: str, url: str, *, timeout: Any, verify: Any, max_redirects: int = 3,
             params: Any = None, json_body: Any = None, stream: bool = False,
             headers: Mapping[str, str] | None = None) -> tuple[requests.Response, str]:
    """One request following at most ``max_redirects`` redirects itself (a write only through 307/308,
    never from https to http), keeping the session's credentials (``requests`` drops them when a
    redirect changes host or port; a standby's event stream redirect needs them). Returns the final
    response and the URL that answered it. An exception raised after a redirect carries the URL it was
    sent to in :data:`URL_ATTR`; a redirect not followed is :class:`RedirectRefused`, naming its target."""
    data = None if json_body is None else json.dumps(json_body).encode("utf-8")
    sent_headers = dict(headers or {})
    if data is not None:
        sent_headers["Content-Type"] = "application/json"
    for hop in range(max_redirects + 1):
        try:
            r = target.request(method, url, params=params, data=data, headers=sent_headers, timeout=timeout,
                               verify=verify, stream=stream, allow_redirects=False)
        except requests.RequestException as e:
            if hop:
                setattr(e, URL_ATTR, url)
            raise
        location = r.headers.get("Location") if r.is_redirect else None
        if location is None:
            return r, url
        r.close()
        to = urljoin(url, location)
        if method not in ("GET", "HEAD") and r.status_code not in _KEEP_METHOD:
            raise RedirectRefused(f"redirected by {r.status_code} to {redact_url(to)}: not followed (it would turn the "
                                  f"{method} into a GET)", target=to)
        if urlsplit(url).scheme == "https" and urlsplit(to).scheme != "https":
            raise RedirectRefused(f"redirected to {redact_url(to)}: not following it without TLS (the credentials "
                                  f"would travel in clear)", target=to)
        if hop == max_redirects:
            raise RedirectRefused(f"more than {max_redirects} redirects (the last to {redact_url(to)})", target=to)
        url, params = to, None  # the Location carries the query
    raise AssertionError("unreachable")  # pragma: no cover


def redact_url(url: str) -> str:
    """Drop any ``user:password@`` from a URL before it is shown."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        parts = parts._replace(netloc=host)
    return urlunsplit(parts)


def secret_forms(*values: str | None, user: str | None = None) -> list[str]:
    """Every form of these secrets that a message could carry: each as it is and URL-quoted, and, with
    ``user``, the base64 of ``user:secret`` (an echoed basic ``Authorization`` header)."""
    import base64

    forms: list[str] = []
    for value in (v for v in values if v):
        forms += [value, quote(value, safe="")]
        if user:
            forms.append(base64.b64encode(f"{user}:{value}".encode()).decode())
    return sorted({f for f in forms if f}, key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every one of ``secrets`` replaced by ``***`` (what the CLI and a task write)."""
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    return text


def body(r: requests.Response) -> Any:
    """The answer's JSON, else its text (None when empty). A streamed answer (an error to the event
    stream) is read only up to 64 KiB and for as long as its request's timeouts allow."""
    if not r._content_consumed:
        chunks, size, end = [], 0, time.monotonic() + 10.0
        try:
            for chunk in r.iter_content(1024):
                chunks.append(chunk)
                size += len(chunk)
                if size >= _STREAM_ERROR_BYTES or time.monotonic() > end:
                    break
        except requests.RequestException:
            pass
        r._content, r._content_consumed = b"".join(chunks), True
        r.close()
    if not r.content:
        return None
    try:
        return json.loads(r.content)
    except (ValueError, RecursionError):
        try:
            return r.content.decode(r.encoding or "utf-8", errors="replace")
        except LookupError:  # a charset Python does not know
            return r.content.decode("utf-8", errors="replace")


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def oneline(text: str) -> str:
    """``text`` on one line: control characters and runs of whitespace become one space."""
    return " ".join(_CONTROL.sub(" ", text).split())


def short(e: BaseException) -> str:
    """A request exception as a short phrase (``Connection refused``, ``read timed out``...)."""
    if isinstance(e, (DeadlineExceeded, AnswerTooLarge, RedirectRefused)):
        return oneline(str(e))[:300]
    text = str(e)
    m = re.search(r"\[Errno -?\d+\] ([^')\]\"]+)", text)
    if m:
        return oneline(m.group(1))
    if "Read timed out" in text:
        return "read timed out"
    if "timed out" in text:
        return "timed out"
    return oneline(text)[:200] or type(e).__name__


def unreachable(e: BaseException) -> bool:
    """No connection could be made (refused, no route, unknown host, connect timeout): nothing was sent.
    A reset, a read timeout or a missed deadline means something answered, and may have read the request."""
    if isinstance(e, requests.exceptions.ConnectTimeout):
        return True
    reason = getattr(e.args[0], "reason", None) if e.args else None
    return isinstance(reason, urllib3.exceptions.NewConnectionError)


def task_json(url: str, *, timeout: float = 2.0, max_bytes: int = 4 << 20) -> dict[str, Any] | None:
    """A ``GET`` route of a task's status port (``http://host:port/status``, ``…/events?shared=1``) through the
    task API's one client (:meth:`marathon_tf.contract.taskapi.TaskClient.read`) on a session bounded in size:
    the user side's ``status`` and ``events``, the deciding task's reads of its peers. None when no whole 200
    JSON object came within ``timeout`` s (a task's status is advisory)."""
    with session(max_bytes=max_bytes) as s:
        return TaskClient(s).read(url, timeout=timeout)


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
