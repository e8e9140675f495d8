"""A raw-socket HTTP server on 127.0.0.1 that answers whatever a test tells it to, also what no
well-behaved server would: a body dripped one byte at a time, hundreds of MB, a lying Content-Length,
truncated JSON, bytes that are not UTF-8, redirect loops. A connection stays open for the client's next
request (HTTP/1.1 keep-alive) only after an answer framed exactly: a bytes body, no ``drip``, its
``Content-Length`` its true length, a status that has a body (not 1xx, 204 or 304); after any other answer
(a lying or missing length, a generated body, a drip) the server says ``Connection: close`` and closes it, as
before. Every connection is closed by :meth:`Hostile.stop`.

``handler(request) -> Answer``; ``Answer.body`` is bytes or an iterable of bytes (generated as it is
sent, so a 400 MB answer costs the server nothing); ``drip``: seconds between single bytes (of the
head and the body).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field


@dataclass
class Request:
    method: str
    path: str  # without the query
    query: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Answer:
    status: int = 200
    body: bytes | Iterable[bytes] = b""
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    reason: str = ""
    drip: float = 0.0
    length: bool = True  # send Content-Length for a bytes body


def json_answer(text: str, status: int = 200, **kw) -> Answer:
    return Answer(status, text.encode(), **kw)


class Hostile:
    def __init__(self, handler: Callable[[Request], Answer]):
        self.handler = handler
        self.log: list[Request] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._threads: set[threading.Thread] = set()  # the connections' threads still running
        self._accept = threading.Thread(target=self._run, name="hostile-accept", daemon=True)
        self._accept.start()

    def __enter__(self) -> Hostile:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def requests(self, method: str | None = None, path: str | None = None) -> list[Request]:
        with self._lock:
            return [r for r in self.log if (method is None or r.method == method) and (path is None or r.path == path)]

    def stop(self) -> None:
        self._stop.set()
        try:  # wakes the accept at once (Linux); elsewhere its 0.2 s timeout does
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._accept.join(5)
        self._sock.close()
        with self._lock:
            conns = list(self._conns)
            threads = list(self._threads)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in threads:
            t.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            t = threading.Thread(target=self._serve, args=(conn,), name="hostile-conn", daemon=True)
            with self._lock:
                self._conns.add(conn)
                self._threads.add(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            buffered: bytes | None = b""
            first = True
            while buffered is not None and not self._stop.is_set():
                request, buffered = self._read(conn, buffered, first)
                first = False
                if request is None:
                    return
                with self._lock:
                    self.log.append(request)
                if not self._write(conn, self.handler(request), request):
                    return
        except OSError:
            pass  # the client hung up (it should, past its deadline or its size cap)
        finally:
            with self._lock:
                self._conns.discard(conn)
                self._threads.discard(threading.current_thread())
            try:
                conn.close()
            except OSError:
                pass

    def _read(self, conn: socket.socket, data: bytes, first: bool) -> tuple[Request | None, bytes | None]:
        """The next request and what came after it (``None``: the connection cannot carry another)."""
        # a connection's first request within 10 s; a kept one's next request whenever the client sends it
        # (a client that keeps its connection idle holds no read open: stop ends the wait)
        conn.settimeout(10 if first or data else None)
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return None, None
            data += chunk
            conn.settimeout(10)
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        want = int(headers.get("content-length") or 0)
        while len(rest) < want:
            chunk = conn.recv(65536)
            if not chunk:
                break
            rest += chunk
        path, _, query = target.partition("?")
        framed = (version == "HTTP/1.1" and "transfer-encoding" not in headers and len(rest) >= want
                  and headers.get("connection", "").lower() != "close")
        if not framed:  # what came is the body, as ever; no other request follows on this connection
            return Request(method, path, query, headers, rest), None
        return Request(method, path, query, headers, rest[:want]), rest[want:]

    def _write(self, conn: socket.socket, answer: Answer, request: Request) -> bool:
        """Sends the answer; whether the connection may carry the client's next request."""
        headers = dict(answer.headers)
        body = answer.body
        if isinstance(body, (bytes, bytearray)) and answer.length:
            headers.setdefault("Content-Length", str(len(body)))
        told = {k.lower(): v for k, v in headers.items()}
        keep = (isinstance(body, (bytes, bytearray)) and not answer.drip and request.method != "HEAD"
                and answer.status >= 200 and answer.status not in (204, 304) and "transfer-encoding" not in told
                and told.get("content-length") == str(len(body)) and "connection" not in told)
        headers["Connection"] = "keep-alive" if keep else "close"
        head = f"HTTP/1.1 {answer.status} {answer.reason or 'X'}\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        if isinstance(body, (bytes, bytearray)) and not answer.drip:
            conn.sendall(head.encode("latin-1") + body)
            return keep
        parts = [head.encode("latin-1")]
        parts = parts + [body] if isinstance(body, (bytes, bytearray)) else parts
        for part in parts:
            self._send(conn, part, answer.drip)
        if not isinstance(body, (bytes, bytearray)):
            for chunk in body:
                if self._stop.is_set():
                    return False
                self._send(conn, chunk, answer.drip)
        return False

    def _send(self, conn: socket.socket, data: bytes, drip: float) -> None:
        if not drip:
            conn.sendall(data)
            return
        for i in range(len(data)):
            if self._stop.wait(drip):
                return
            conn.sendall(data[i:i + 1])


def repeat(chunk: bytes, total: int) -> Iterable[bytes]:
    """``total`` bytes made of ``chunk``, generated as they are sent."""
    sent = 0
    while sent < total:
        part = chunk[: total - sent]
        sent += len(part)
        yield part


def wait_until(predicate: Callable[[], bool], seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


DEPLOYMENT = "5ed4c0c5-9ff8-4a6f-a0cd-f57f59a34b43"
VERSION = "2026-11-25T10:00:00.000Z"
INFO = json_answer('{"version": "1.11.0", "name": "marathon"}')
#: Marathon's 409 for a locked app (FACTS.md §1.5, AppLockedException).
LOCKED = json.dumps({"message": "App is locked by one or more deployments. Override with the option '?force=true'. "
                                f"View details at '/v2/deployments/{DEPLOYMENT}'.",
                     "deployments": [{"id": DEPLOYMENT}]})


class ProxiedMarathon:
    """A Marathon behind a proxy that answers ``first_put`` to the first group PUT after passing it on
    (Marathon applied it: a group PUT replaces the group's apps, and Marathon keeps labels as sent,
    FACTS.md §1.1/§1.3), and 409 "locked" to any later PUT while that deployment runs (the issue's
    504-then-409)."""

    def __init__(self, first_put: Answer, job: str = "mnist"):
        self.first_put, self.group, self.puts, self.path = first_put, None, 0, f"/v2/groups/{job}"

    def __call__(self, request) -> Answer:
        if request.path == "/v2/info":
            return INFO
        if request.path == self.path and request.method == "PUT":
            self.puts += 1
            if self.puts > 1:
                return json_answer(LOCKED, 409)
            self.group = json.loads(request.body)
            for app in self.group["apps"]:
                app["version"] = VERSION
            return self.first_put
        if request.path == self.path and request.method == "GET":
            if self.group is None:
                return json_answer('{"message": "Group \'/mnist\' does not exist"}', 404)
            return json_answer(json.dumps(self.group))
        if request.path == "/v2/deployments":
            return json_answer(json.dumps([{"id": DEPLOYMENT, "version": VERSION,
                                            "affectedApps": [a["id"] for a in self.group["apps"]] if self.group else [],
                                            "currentStep": 1, "totalSteps": 1, "steps": []}]))
        return json_answer('{"message": "no"}', 404)
