"""What the local Marathon refuses: the HTTP security boundary of ``local serve``.

The runner executes whatever command a request asks for, so a web page the user
visits must not be able to reach it. One aiohttp middleware checks, in order:

1. ``Host`` names the address the server listens on (the bind address; plus
   ``localhost`` for loopback/wildcard binds, this machine's host names for
   non-loopback binds, and hosts of allowed origins). Anything else is a DNS
   rebinding attempt: 403.
2. Cross-origin callers: an ``Origin`` other than the server's own (``http://`` +
   ``Host``) or an allowed one (``--allow-origin``) gets 403, preflights included.
   Requests a browser marks ``Sec-Fetch-Site: cross-site``/``same-site`` without
   an ``Origin`` (``<script>`` JSONP reads of sandboxes, images) get 403 too,
   except top-level GET navigations. Allowed origins get CORS headers.
   A script-typed answer (JSONP, ``?jsonp=callback``, as Mesos' endpoints give it) is read by a
   ``<script src>``, which any page may include whatever the answer's headers say, and which an older
   browser (or ``referrerpolicy="no-referrer"``) sends with no ``Origin`` and no ``Sec-Fetch-*``: it
   is given only to a request that shows it comes from this server's own pages (an ``Origin`` or
   ``Referer`` of this server or an allowed origin, or ``Sec-Fetch-Site: same-origin``/``none``); else 403.
3. Authentication (optional, required off loopback): HTTP basic
   (``Authorization: Basic ...``) or a DC/OS-style token
   (``Authorization: token=...``), what ``marathon-tf``'s ``MARATHON_USER``/
   ``MARATHON_PASSWORD``/``MARATHON_TOKEN`` send. The runner's own tasks each get a
   token of their own in a sandbox file, scoped to their job (:mod:`~marathon_tf.local.taskscope`:
   read the job, record its end; anything else is 403). Refused basic auth is answered
   as Marathon's ``--http_credentials`` does: Jetty's ``BasicAuthenticator``
   (a ``ConstraintSecurityHandler`` on ``/*``) sends 401, ``WWW-Authenticate: basic
   realm="Mesosphere"`` (``--http_realm``'s default) and its HTML error page; a token is
   refused with JSON, as DC/OS's auth plugin does.
4. Bodies of state-changing requests must be ``application/json``: 415
   ``{"message": "Unsupported Media Type"}`` as Marathon's Jersey resources answer.

The same checks guard the Mesos-DNS HTTP API (``install(app, scope=taskscope.read_only)``): a real
Mesos-DNS has no auth, but this one runs on a machine that runs whatever its Marathon is asked to.
"""

from __future__ import annotations

import base64
import hmac
import ipaddress
import json
import os
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from aiohttp import web

from .errors import jetty_error
from .taskscope import Grant, Grants, refusal

__all__ = ["Credentials", "Security", "parse_auth", "is_loopback", "AuthError", "GRANT_KEY"]

_UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}
#: Content types a ``<script src>`` runs (what a cross-site page could read through a callback).
_SCRIPT_TYPES = {"text/javascript", "application/javascript", "application/x-javascript", "text/ecmascript",
                 "application/ecmascript"}
#: What Jetty 9.4's ``BasicAuthenticator`` sends: ``basic realm="<realm>"`` (a charset only when one is
#: configured)
_REALM = 'basic realm="Mesosphere"'
_CORS_KEY = web.RequestKey("mtf_cors", str)
#: The task whose token a request carries (absent: the configured credentials, or no auth).
GRANT_KEY = web.RequestKey("mtf_grant", Grant)
#: ``scope(request, grant)``: why a task's token may not make this request (None: it may).
Scope = Callable[[web.Request, Grant], Awaitable[str | None]]
#: Who a request authenticated as: the configured credentials, or a task.
ADMIN = "admin"


class AuthError(ValueError):
    """A bad ``--auth`` value or an unsafe configuration (one line, for the CLI)."""


@dataclass(frozen=True)
class Credentials:
    """Either ``user``/``password`` (HTTP basic) or ``token``."""

    user: str | None = None
    password: str | None = None
    token: str | None = None

    @property
    def kind(self) -> str:
        return "token" if self.token else "basic"


def parse_auth(value: str, environ: Mapping[str, str] = os.environ) -> Credentials:
    """``--auth`` value -> credentials: ``USER:PASSWORD``, ``token=TOKEN``, or ``env``
    (``MARATHON_TOKEN``, else ``MARATHON_USER``/``MARATHON_PASSWORD``, as the CLI reads them;
    keeps the secret out of the process list)."""
    value = value.strip()
    if value == "env":
        if environ.get("MARATHON_TOKEN"):
            return Credentials(token=environ["MARATHON_TOKEN"])
        if environ.get("MARATHON_USER") and environ.get("MARATHON_PASSWORD"):
            return Credentials(user=environ["MARATHON_USER"], password=environ["MARATHON_PASSWORD"])
        raise AuthError("--auth env: set MARATHON_TOKEN, or MARATHON_USER and MARATHON_PASSWORD")
    if value.startswith("token="):
        if len(value) == len("token="):
            raise AuthError("--auth token=: the token is empty")
        return Credentials(token=value[len("token="):])
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise AuthError("--auth takes USER:PASSWORD, token=TOKEN or env")
    return Credentials(user=user, password=password)


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _is_wildcard(host: str) -> bool:
    return host in ("", "0.0.0.0", "::", "[::]")


def _hostname(host_header: str) -> str:
    """``Host`` header -> host name (lower case, no port, no IPv6 brackets)."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host[1:]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _origin(url: str) -> str:
    """``scheme://host[:port]`` of a URL or Origin value (lower case); '' when it has none."""
    parts = urlsplit(url.strip())
    if not parts.scheme or not parts.netloc:
        return ""
    return f"{parts.scheme.lower()}://{parts.netloc.lower().rsplit('@', 1)[-1]}"


@dataclass
class Security:
    """The checks for one server bound to ``host``."""

    host: str = "127.0.0.1"
    allow_origins: Iterable[str] = ()
    credentials: Credentials | None = None
    #: The tokens of the runner's tasks (issued only with auth on: without it anyone may call anyway).
    grants: Grants = field(default_factory=Grants)

    def __post_init__(self) -> None:
        origins = set()
        for origin in self.allow_origins:
            normalized = _origin(origin)
            if origin.strip() == "*":
                raise AuthError("--allow-origin '*' is refused: any web page could then act as you; "
                                "name the origins (scheme://host[:port])")
            if not normalized:
                raise AuthError(f"--allow-origin {origin!r}: give scheme://host[:port], e.g. http://localhost:3000")
            origins.add(normalized)
        self.allow_origins = frozenset(origins)
        if not is_loopback(self.host) and self.credentials is None:
            raise AuthError(f"binding {self.host or '0.0.0.0'} (not loopback) needs --auth: anyone who can "
                            "reach it could run commands on this machine")
        names = {self.host.strip("[]").lower()}
        if is_loopback(self.host) or _is_wildcard(self.host):
            names |= {"localhost", "127.0.0.1", "::1"}
        if not is_loopback(self.host):
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
        names |= {_hostname(urlsplit(o).netloc) for o in self.allow_origins}
        self._names = frozenset(n for n in names if n)

    # -- the checks ---------------------------------------------------------------------
    def host_allowed(self, host_header: str) -> bool:
        """Does ``Host`` name this server? IP literals cannot be DNS-rebound: any is fine on a wildcard bind."""
        name = _hostname(host_header)
        if name in self._names:
            return True
        ip = _ip(name)
        if ip is None:
            return False
        if _is_wildcard(self.host):
            return True
        return is_loopback(self.host) and ip.is_loopback

    def origin_allowed(self, origin: str, own: str) -> bool:
        origin = _origin(origin) if origin != "null" else "null"
        return origin == own or origin in self.allow_origins

    def authenticated(self, header: str) -> bool:
        """Does the ``Authorization`` header carry the configured credentials or a task's token?"""
        return self.principal(header) is not None

    def principal(self, header: str) -> str | Grant | None:
        """Who the ``Authorization`` header authenticates: :data:`ADMIN` (the configured
        credentials), a task's :class:`~marathon_tf.local.taskscope.Grant`, or None."""
        header = header.strip()
        if header.startswith("token="):
            given = header[len("token="):]
            own = (self.credentials and self.credentials.token) or ""
            if own and hmac.compare_digest(given.encode(), own.encode()):
                return ADMIN
            return self.grants.find(given)
        if header[:6].lower() == "basic " and self.credentials and self.credentials.user:
            try:
                user, _, password = base64.b64decode(header[6:].strip(), validate=True).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                return None
            if (hmac.compare_digest(user.encode(), self.credentials.user.encode())
                    & hmac.compare_digest(password.encode(), (self.credentials.password or "").encode())):
                return ADMIN
        return None

    @property
    def issues_tokens(self) -> bool:
        """Whether tasks get tokens of their own (only with auth on)."""
        return self.credentials is not None

    # -- the middleware -----------------------------------------------------------------
    def middleware(self, scope: Scope = refusal) -> Callable:
        """The checks as an aiohttp middleware; ``scope`` says what a task's token may do."""

        @web.middleware
        async def security(request: web.Request,
                           handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
            return await self._check(request, handler, scope)

        return security

    async def _check(self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
                     scope: Scope) -> web.StreamResponse:
        host = request.headers.get("Host", "")
        if not self.host_allowed(host):
            return _refuse(403, f"Host {host!r} does not name this server (refused: DNS rebinding protection; "
                                "use the address it listens on)")
        own = "http://" + host.lower()
        origin = request.headers.get("Origin")
        cors = None
        if origin is not None and _origin(origin) != own:
            if not self.origin_allowed(origin, own):
                return _refuse(403, f"Origin {origin!r} is not allowed (start local serve with --allow-origin "
                                    f"{origin} to allow it)")
            cors = origin
        elif origin is None and request.headers.get("Sec-Fetch-Site") in ("cross-site", "same-site"):
            navigation = request.method == "GET" and request.headers.get("Sec-Fetch-Mode") == "navigate"
            referer = _origin(request.headers.get("Referer", ""))
            if not navigation and not (referer and self.origin_allowed(referer, own)):
                return _refuse(403, "cross-site request refused (no allowed Origin)")
        if cors and request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers:
            return web.Response(status=204, headers={
                **_cors_headers(cors), "Access-Control-Max-Age": "600",
                "Access-Control-Allow-Methods": "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
                "Access-Control-Allow-Headers": request.headers.get("Access-Control-Request-Headers", "")})
        who = self.principal(request.headers.get("Authorization", "")) if self.credentials is not None else None
        if self.credentials is not None and who is None:
            if self.credentials.kind == "basic":
                return jetty_error(401, "Unauthorized", request.path, {"WWW-Authenticate": _REALM,
                                                                        **_cors_headers(cors)})
            return _refuse(401, "Invalid username or password.", _cors_headers(cors))
        if isinstance(who, Grant):
            why = await scope(request, who)
            if why is not None:
                return _refuse(403, why, _cors_headers(cors))
            request[GRANT_KEY] = who
        if request.method in _UNSAFE and (request.can_read_body or "Content-Type" in request.headers):
            if request.content_type != "application/json":
                return _refuse(415, "Unsupported Media Type", _cors_headers(cors))
        request[_CORS_KEY] = cors or ""
        same_origin = self._same_origin(request, own)
        if "jsonp" in request.query and not same_origin:
            return _script_refused(cors)
        response = await handler(request)
        if not same_origin and isinstance(response, web.Response) and response.content_type in _SCRIPT_TYPES:
            return _script_refused(cors)
        return response

    def _same_origin(self, request: web.Request, own: str) -> bool:
        """Does the request show it comes from this server's own pages (or an allowed origin, or the
        address bar)? One with no such evidence may be a ``<script src>`` on any page."""
        if request.headers.get("Origin"):
            return True  # checked above: this server's or an allowed origin
        referer = request.headers.get("Referer", "")
        from_own_page = bool(referer) and self.origin_allowed(referer, own)
        return from_own_page or request.headers.get("Sec-Fetch-Site") in ("same-origin", "none")

    async def on_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        """``on_response_prepare`` hook: CORS headers for an allowed origin (also on streams like SSE)."""
        cors = request.get(_CORS_KEY)
        if cors:
            response.headers.update(_cors_headers(cors))

    def install(self, app: web.Application, scope: Scope = refusal) -> None:
        """Put the checks in front of every route of ``app`` (``scope``: what a task's token may do there;
        the default is the Marathon API's)."""
        app.middlewares.insert(0, self.middleware(scope))
        app.on_response_prepare.append(self.on_prepare)


def _cors_headers(origin: str | None) -> dict[str, str]:
    if not origin:
        return {}
    return {"Access-Control-Allow-Origin": origin, "Access-Control-Allow-Credentials": "true",
            "Access-Control-Expose-Headers": "Marathon-Deployment-Id, X-Marathon-Leader, Location",
            "Vary": "Origin"}


def _script_refused(cors: str | None) -> web.Response:
    return _refuse(403, "a script (JSONP) answer is given only to this server's own pages "
                        "(cross-site request refused)", _cors_headers(cors))


def _refuse(status: int, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(status=status, text=json.dumps({"message": message}), content_type="application/json",
                        headers=dict(headers or {}))
