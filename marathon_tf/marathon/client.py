"""Marathon's REST API: one ``requests.Session``, retries, auth, TLS, deadlines, errors.

* Base URL(s): a comma-separated list fails over to the next one on a connection error or a
  502/503/504: Marathon 1.7–1.11 answer "Could not determine the current leader" with 502, 1.4–1.6
  with 503 (its leader proxy filter); a standby that cannot reach the leader answers 502 (1.7+)
  or 503/504 (1.4–1.6).
* Auth: HTTP basic or a DC/OS token (``Authorization: token=<t>``), never in messages. TLS verified
  by default (``verify``: a CA bundle path, or False).
* Bounded (:mod:`.transport`): every request is over — connect to the last byte — within the sum of
  its (connect, read) timeouts and the caller's time limit (:meth:`Client.limit`: past it
  :class:`~marathon_tf.contract.errors.Timeout`); no answer is read past ``max_bytes``; at most 3
  redirects (a write only through 307/308; never https to http), named in errors.
* Retries (tenacity, jittered backoff, bounded budget): 502/503/504, dropped connections, 409 "locked".
  An unreachable Marathon is retried only with another URL to fail over to or when the policy says so
  (``connection_errors``: the bootstrap); 400/401/403/404/422 never.
* Writes are sent again only when the earlier try provably did not reach Marathon: no connection,
  "no leader" (503; 502 "Could not determine the current leader" / "Detected proxying loop."), or a
  refusal (4xx, 409 locked). After a proxy's 5xx, a timeout, a reset or an unreadable answer the
  write may have been applied: not sent again; ``reconcile`` looks at Marathon's state and adopts what
  it finds (:mod:`.marker`: a group PUT carries a digest label per app), else the error says it was
  sent once. A 409 lock also gets a look first (our write may hold it).
* A standby that cannot reach its leader (an election: it forwards to the dead one until Marathon's
  ZooKeeper session times out) answers "Connection to leader refused." (502; 503 in 1.4.8–1.4.13), or on
  1.4–1.6.392, for a GET or DELETE, 502 "Failed to successfully establish a connection to the leader." (a
  write so answered is always looked for first: it may have reached the leader), or on 1.4.8–1.6.392, for a
  leader's host that does not answer, 504 "Connection to leader timed out." (looked for first from 1.5.1). Such a
  write is sent again once a leader answers, within the time limit and ``retry.budget`` (these answers
  count no try): at once where that answer proves nothing was forwarded (up to 1.6.392), else only after a
  look at Marathon's state — through a leader — shows it was not applied (1.6.486+'s forwarder says so also
  for a connection that broke after it was made: :attr:`.versions.Capabilities.leader_refused_means_unsent`);
  a write without such a look (each is idempotent: instances and labels set, not added) is sent again.
* A server that does not answer like Marathon (not its JSON and ``/v2/info`` without ``version``, or
  a body not of the shape we read: :mod:`.shapes`) is one line saying so. 401/403 (Jetty's HTML page
  too) name the credentials sent, except Marathon 1.5+'s 403 for too many running deployments.
* The event stream (:meth:`Client.events`) follows a standby's 302 to the leader, keeping the
  credentials (``requests`` drops ``Authorization`` when a redirect changes host or port); one that
  cannot be followed is :class:`RedirectNotFollowed` (the stream then finds the leader: :mod:`.events`).
* What differs between Marathon versions is asked of :meth:`Client.capabilities` (:mod:`.versions`).

Over 600 lines: every request's retry, failover and error rules are here, in one place; the API methods
at the end are a few lines each over them.
* Everything returned is a plain dict/list as Marathon sent it, checked against the shape we read.
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import requests
import tenacity

from marathon_tf.contract.errors import (
    MarathonAuthError,
    MarathonConflict,
    MarathonError,
    MarathonInvalid,
    MarathonNotFound,
    MarathonUnavailable,
    Timeout,
)
from marathon_tf.contract.progress import duration
from marathon_tf.marathon import marker, shapes, transport, versions
from marathon_tf.marathon.transport import redact_url

__all__ = ["Client", "RetryPolicy", "RedirectNotFollowed", "redact_url", "DEFAULT_TIMEOUT", "CLI_TIMEOUT"]

log = logging.getLogger("marathon_tf.marathon")  # what -v shows before each request line

DEFAULT_TIMEOUT = (5.0, 30.0)  # (connect, read) seconds; the whole exchange within their sum
#: The CLI's: an unreachable Marathon is reported within 3 s.
CLI_TIMEOUT = (2.5, 30.0)
_RETRY_STATUS = {502, 503, 504}
_READS = ("GET", "HEAD")
#: Marathon 1.5+'s 403 for ``TooManyRunningDeploymentsException`` ("Max number (100) of running deployments
#: is achieved. Wait for existing deployments to complete or cancel one…", which its exception mapper answers
#: with 403).
_TOO_MANY_DEPLOYMENTS = "of running deployments is achieved"
#: What Marathon's LeaderProxyFilter says when it forwarded nothing: no leader (502 in 1.7+, 503 in 1.4–1.6),
#: a proxying loop (502), and 1.4–1.6's 503 for a refused connection to the leader (a ConnectException).
#: 1.7+'s 502 "Connection to leader refused." also covers a leader that took the request and never answered
#: (as Marathon's own comment on its akka-http forwarder's StreamTcpException says): not proof there.
_NOT_FORWARDED = re.compile(r"Could not determine the current leader|Detected proxying loop", re.I)
#: A standby that forwarded to a leader it could not reach (Marathon's ``ERROR_STATUS_CONNECTION_REFUSED``;
#: 502, or 503 in 1.4.8–1.4.13: versions.py).
_LEADER_REFUSED = re.compile(r"Connection to leader refused", re.I)
#: What a 1.4 – 1.6.392 standby says when the leader it forwards to gave no status line: a GET or DELETE
#: (whose ``HttpURLConnection`` first connects when the status is read) to a leader that is gone, or any
#: request whose leader died before answering (502 ``ERROR_STATUS_BAD_CONNECTION``, from the standby's
#: ``copyConnectionResponse``).
#: An election, as "Connection to leader refused." is; a write so answered is looked for before it is sent
#: again (the request may have reached the leader), never taken for a proxy's "maybe applied".
_BAD_CONNECTION = re.compile(r"Failed to successfully establish a connection to the leader", re.I)
#: What a 1.4.8 – 1.6.392 standby (and a later one forwarding with ``HttpURLConnection``) says, 504, when the
#: leader's host did not answer in time (packets dropped: a host that is gone, not a refused port): on 1.4.8 – 1.4.x
#: only for a write's connect, so nothing was sent (:attr:`.versions.Capabilities.leader_timeout_means_unsent`);
#: from 1.5.1 also for a leader that took the request and gave no status in time. An election, as "Connection to
#: leader refused." is: never taken for a proxy's "maybe applied".
_LEADER_TIMED_OUT = re.compile(r"Connection to leader timed out", re.I)


def _electing(message: str) -> bool:
    """Whether ``message`` is what Marathon's leader proxy says when it forwarded nothing or could not reach the
    leader (the texts above): Marathon's own answer during an election, whatever its page looks like."""
    return any(p.search(message) for p in (_NOT_FORWARDED, _LEADER_REFUSED, _BAD_CONNECTION, _LEADER_TIMED_OUT))


#: Seconds an answer of ``/v2/info`` is taken as it is (it changes with an upgrade, a restart with other flags).
INFO_FRESH = 30.0
#: The longest wait between tries while Marathon answers "no leader" (an election lasts seconds: Marathon's
#: --zk_session_timeout, 10 s by default, after a crash; a longer backoff would only answer later).
ELECTION_POLL = 1.0
#: How many redirects a request follows (a standby names the leader, a proxy its https URL: one is enough).
_MAX_REDIRECTS = 3
_USER_AGENT = "marathon-tf"


@dataclass
class RetryPolicy:
    """How long transient faults are retried: at most ``attempts`` tries within
    ``budget`` seconds, waiting ``initial``·2ⁿ (capped at ``max_wait``) plus jitter. ``settle``: how
    long a write whose answer was lost is looked for in Marathon's state (it may still be applied)."""

    attempts: int = 8
    budget: float = 90.0
    initial: float = 0.5
    max_wait: float = 10.0
    jitter: float = 1.0
    #: Retry "cannot connect" also with a single URL (with several, they fail over).
    connection_errors: bool = True
    settle: float = 20.0


class _Retryable(Exception):
    """A transient fault; carries the error to raise when the budget runs out. ``moved_on``: the client
    failed over to its next URL, which may be tried at once (nothing reached Marathon's state).
    ``ambiguous``: a write that may have been applied. ``leader_refused``: a standby could not reach its
    leader (an election); such answers count no try (the time budget bounds them)."""

    def __init__(self, error: MarathonError, ambiguous: bool = False, moved_on: bool = False,
                 leader_refused: bool = False):
        super().__init__(error.message)
        self.error = error
        self.ambiguous = ambiguous
        self.moved_on = moved_on
        self.leader_refused = leader_refused


class RedirectNotFollowed(MarathonUnavailable):
    """A standby's redirect of the event stream that cannot be followed from here: ``standby`` is the URL
    asked, ``target`` where it led (Marathon's leader proxy filter builds it from the leader's ``--hostname``
    and, unless ``--disable_http``, ``http://`` and its http port)."""

    def __init__(self, message: str, *, standby: str, target: str | None):
        super().__init__(message, hint="give the leader's own URL too (--marathon URL,URL…), reachable from here")
        self.standby, self.target = standby, target


class _Unsure(Exception):
    """A write that may have been applied: not sent again. ``in_flight``: it may still be (no whole
    answer came), so Marathon's state is looked at for a while, not once."""

    def __init__(self, error: MarathonError, in_flight: bool = True):
        super().__init__(error.message)
        self.error, self.in_flight = error, in_flight


@dataclass
class _Response:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


class Client:
    """A Marathon client. ``session``, ``sleep`` and ``clock`` can be injected for tests."""

    def __init__(
        self,
        urls: str | Iterable[str],
        *,
        user: str | None = None,
        password: str | None = None,
        token: str | None = None,
        verify: bool | str = True,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
        max_bytes: int | None = None,
        quote_refusals: bool = True,
    ):
        if isinstance(urls, str):
            urls = urls.split(",")
        self.urls = [u.strip().rstrip("/") for u in urls if u and u.strip()]
        if not self.urls:
            raise MarathonError("no Marathon URL given", hint="pass --marathon URL or set MARATHON_URL")
        self._current = 0
        self._marathon_ok: set[str] = set()
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.sleep = sleep
        #: The ``time.monotonic()`` instant every request must be over by (None: no limit): :meth:`limit`.
        self.deadline: float | None = None
        self._limit = 0.0
        self._looking = threading.local()  # a look at Marathon's state for a write: one try per read
        self._capabilities: versions.Capabilities | None = None  # what /v2/info's version says, once read
        self._info: tuple[float, dict[str, Any]] | None = None  # /v2/info's answer and when it came (info())
        self.max_bytes = transport.max_bytes_from_env() if max_bytes is None else max_bytes
        deadline = lambda: self.deadline  # noqa: E731
        self.session = (transport.mount(session, max_bytes=self.max_bytes, deadline=deadline) if session is not None
                        else transport.session(max_bytes=self.max_bytes, deadline=deadline))
        self.session.max_redirects = _MAX_REDIRECTS
        self.session.verify = verify
        self.session.headers["User-Agent"] = _USER_AGENT
        self.session.headers["Accept"] = "application/json"
        self.verify = verify
        url_passwords = [unquote(p) for p in (urlsplit(u).password for u in self.urls) if p]
        self._secrets = transport.secret_forms(password, token, *url_passwords, user=user)
        #: whether a 401/403 error repeats what Marathon said (False: a task's, whose output is a log
        #: anyone reading the sandbox sees; a careless Marathon echoes credentials it was sent)
        self.quote_refusals = quote_refusals
        if token:
            self.session.headers["Authorization"] = f"token={token}"
            self._credentials_shown = "a token (MARATHON_TOKEN)"
        elif user is not None and password is not None:
            self.session.auth = (user, password)
            self._credentials_shown = f"user {user!r} (MARATHON_USER/MARATHON_PASSWORD)"
        elif any(urlsplit(u).username for u in self.urls):
            self._credentials_shown = "the user in the URL"
        else:
            self._credentials_shown = ""

    # ------------------------------------------------------------------ plumbing
    @property
    def url(self) -> str:
        """The Marathon URL in use now (failover moves it), without credentials."""
        return redact_url(self.urls[self._current])

    def limit(self, seconds: float | None) -> None:
        """Every request from now on must be over within ``seconds`` (None: no limit); past it, requests
        raise :class:`~marathon_tf.contract.errors.Timeout` (the CLI's ``--timeout``: exit 3)."""
        self._limit = seconds or 0.0
        self.deadline = None if seconds is None else time.monotonic() + seconds

    def time_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    @property
    def limit_shown(self) -> str:
        """The time limit set by :meth:`limit`, as the CLI shows it (``1m30s``)."""
        return duration(self._limit)

    def _past_limit(self, shown: str, last: MarathonError | None) -> Timeout:
        limit = self.limit_shown
        if last is not None:
            return Timeout(f"{last.message} (gave up at the time limit, {limit})", hint="give it more time: --timeout")
        return Timeout(f"{shown}: not sent: the time limit ({limit}) has passed", hint="give it more time: --timeout")

    def _scrub(self, text: str) -> str:
        return transport.oneline(transport.scrub(text, self._secrets))

    def _retry_unreachable(self) -> bool:
        return self.retry.connection_errors or len(self.urls) > 1

    def _require_marathon(self, base: str, status: int, body: Any) -> None:
        """Raise when ``base`` is not Marathon: its answer was not Marathon's JSON and ``/v2/info``
        has no ``version`` (checked once per URL)."""
        if base in self._marathon_ok:
            return
        try:
            r = self.session.get(base + "/v2/info", timeout=self.timeout, verify=self.verify, allow_redirects=False)
            info = transport.body(r) if r.status_code == 200 else None
        except requests.RequestException:
            r, info = None, None
        if isinstance(info, dict) and isinstance(info.get("version"), str) and info["version"]:
            self._marathon_ok.add(base)
            return
        if r is not None and r.status_code in _RETRY_STATUS and _electing(shapes.message(transport.body(r)) or ""):
            return  # a standby's own answer while it cannot reach a leader: Marathon, electing (not remembered)
        what = f"HTTP {r.status_code}" + (f" {r.headers.get('Content-Type', '')}".rstrip() if r is not None else "") \
            if r is not None else "no answer"
        raise MarathonError(self._scrub(
            f"{redact_url(base)} does not answer like Marathon (GET /v2/info: {what}; the request got "
            f"HTTP {status}{': ' + shapes.message(body)[:80] if shapes.message(body) else ''})"),
            hint="check --marathon / MARATHON_URL: Marathon's API answers /v2/info and /ping (usually port 8080)")

    def _not_marathon(self, shown: str, problem: str, body: Any = None) -> MarathonError:
        return MarathonError(self._scrub(f"{shown}: does not answer like Marathon: {problem}"), body=body,
                             hint="check --marathon / MARATHON_URL: is it Marathon's API (usually port 8080), "
                                  "not a proxy's or another server's page?")

    def _auth_error(self, shown: str, status: int, message: str, body: Any) -> MarathonAuthError:
        """401/403 as one line naming the credentials (Jetty's HTML page included)."""
        what = "refused the credentials" if status == 401 else "denied access"
        sent = f"{self._credentials_shown} was sent" if self._credentials_shown else "no credentials were sent"
        hint = ("set MARATHON_USER and MARATHON_PASSWORD (HTTP basic auth, Marathon's --http_credentials), or "
                "MARATHON_TOKEN (DC/OS)" if not self._credentials_shown else
                "check MARATHON_USER/MARATHON_PASSWORD or MARATHON_TOKEN" if status == 401 else
                "these credentials lack the permission for this request")
        said = f"{status} {message.rstrip('.')}".rstrip() if self.quote_refusals else str(status)
        return MarathonAuthError(self._scrub(f"{shown}: {said}: Marathon {what}; {sent}"),
                                 status=status, body=body, hint=hint)

    def _failover(self) -> None:
        if len(self.urls) > 1:
            self._current = (self._current + 1) % len(self.urls)

    def _exchange(self, method: str, url: str, *, timeout: tuple[float, float] | None = None,
                  **kw: Any) -> tuple[requests.Response, str]:
        # verify is passed on every request: requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE
        # override the session's setting, which would silently drop --ca-bundle/--insecure.
        return transport.exchange(self.session, method, url, timeout=timeout or self.timeout, verify=self.verify,
                                  max_redirects=_MAX_REDIRECTS, **kw)

    def _once(self, method: str, path: str, params: Any, json_body: Any, stream: bool) -> _Response:
        """One request to the current URL: its answer, or the error it is (see the module's table)."""
        base = self.urls[self._current]
        write = method not in _READS
        shown = f"{method} {redact_url(base)}{path}"
        log.debug("%s", shown)
        r, answered = self._sent(method, base, path, params, json_body, stream, shown=shown, write=write)
        status = r.status_code
        if stream and status == 200:
            return _Response(status, r, dict(r.headers))
        body = transport.body(r)
        if answered != base + path:
            shown = f"{shown} (redirected to {redact_url(answered)})"
        log.debug("%s -> %s (%.0f ms, %d bytes)", shown, status, r.elapsed.total_seconds() * 1000, len(r.content))
        ok = 200 <= status < 300
        if (path != "/ping" and status not in _RETRY_STATUS and status not in (401, 403)
                and not isinstance(body, (dict, list)) and (body is not None or not ok)):
            self._require_marathon(base, status, body)
        elif status == 404 and not (isinstance(body, dict) and "message" in body):
            self._require_marathon(base, status, body)
        if ok:
            return _Response(status, body, dict(r.headers))
        raise self._refused(shown, status, shapes.message(body) or r.reason or "", body, write=write)

    def _sent(self, method: str, base: str, path: str, params: Any, json_body: Any, stream: bool, *, shown: str,
              write: bool) -> tuple[requests.Response, str]:
        """The exchange (the answer and the URL that gave it); a transport fault raised as its one-line error,
        retried where that can help."""
        try:
            return self._exchange(method, base + path, params=params, json_body=json_body, stream=stream)
        except transport.RedirectRefused as e:
            raise MarathonError(self._scrub(f"{shown}: {e}"),
                                hint="check --marathon / MARATHON_URL: give Marathon's own URL (scheme, host, port)"
                                ) from None
        except requests.exceptions.SSLError as e:
            raise MarathonUnavailable(
                self._scrub(f"TLS verification failed for {redact_url(base)}: {e}"),
                hint="pass --ca-bundle FILE for a private CA (or --insecure to skip verification)") from None
        except transport.AnswerTooLarge as e:
            status = e.response.status_code if e.response is not None else "?"
            error = MarathonError(self._scrub(f"{shown}: HTTP {status}: {e}"),
                                  hint="if this Marathon's answers are that large, raise the limit with --max-response "
                                       f"SIZE (or {transport.MAX_BYTES_ENV})")
            if write:
                raise _Unsure(error, in_flight=False) from None
            raise error from None
        except transport.NotSent:
            raise self._past_limit(shown, None) from None
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout,
                requests.exceptions.ChunkedEncodingError) as e:
            self._failover()
            unreachable = transport.unreachable(e)
            # A write whose bytes may have reached Marathon (a timeout, a reset) is ambiguous.
            ambiguous = write and not unreachable
            kind = "timed out" if isinstance(e, requests.exceptions.Timeout) else "connection failed"
            redirected = getattr(e, transport.URL_ATTR, None)
            via = f" (redirected to {redact_url(redirected)})" if redirected else ""
            error = MarathonUnavailable(self._scrub(f"{shown}{via}: {kind}: {transport.short(e)}"),
                                        hint="is Marathon running at that address? (--marathon URL / MARATHON_URL)")
            if unreachable and not self._retry_unreachable():
                raise error from None  # nothing listens there: trying again does not help
            raise _Retryable(error, ambiguous=ambiguous, moved_on=not ambiguous and len(self.urls) > 1) from None
        except requests.RequestException as e:  # a broken answer: bad encoding, invalid headers…
            error = self._not_marathon(shown, transport.short(e))
            if write:
                raise _Unsure(error, in_flight=False) from None
            raise error from None

    def _refused(self, shown: str, status: int, message: str, body: Any, *, write: bool) -> Exception:
        """The error a refusal (an answer other than 2xx) is, to raise: retried where Marathon's answer means
        nothing was applied or trying again can help, "maybe applied" where a write may have gone through."""
        text = self._scrub(f"{shown}: {status} {message}".rstrip())
        if status < 400:  # 1xx, or a 3xx that is no redirect
            error = self._not_marathon(shown, f"HTTP {status} {message}".rstrip(), body)
            if write:
                return _Unsure(error, in_flight=False)
            return error
        if status == 507:  # Insufficient Storage (RFC 4918 §11.5): refused, nothing applied; not retried
            return MarathonError(text, status=status, body=body,
                                 hint="the server could not store the change (its message says why, e.g. a full "
                                      "disk): fix that, then send it again")
        if status >= 500:
            return self._server_error(text, status, message, body, write=write)
        if status == 409:
            err = MarathonConflict(text, status=status, body=body,
                                   hint="another deployment holds the app; wait for it, or pass --force to override it")
            if "locked" in message.lower():
                return _Retryable(err)
            return err
        if status == 403 and _TOO_MANY_DEPLOYMENTS in message:
            return MarathonError(text, status=status, body=body,
                                 hint="Marathon runs as many deployments as its --max_running_deployments allows: "
                                      "wait for some to finish, or cancel one")
        if status in (401, 403):
            return self._auth_error(shown, status, message, body)
        if status == 404:
            return MarathonNotFound(self._scrub(message) or text, status=status, body=body)
        if status in (400, 422):
            return MarathonInvalid(text, status=status, body=body)
        return MarathonError(text, status=status, body=body)

    def _server_error(self, text: str, status: int, message: str, body: Any, *, write: bool) -> Exception:
        """A 5xx: an election's answers (a standby that could not reach the leader: what each version means by
        it), no leader, or a failure that a write may have survived."""
        bad_connection = status == 502 and bool(_BAD_CONNECTION.search(message))
        timed_out = status == 504 and bool(_LEADER_TIMED_OUT.search(message))
        if (status in (502, 503) and _LEADER_REFUSED.search(message)) or bad_connection or timed_out:
            self._failover()
            caps = self._capabilities
            if timed_out:  # what proves that nothing was forwarded, by answer and version
                proven = caps is not None and caps.leader_timeout_means_unsent
            else:
                proven = not bad_connection and (
                    status == 503 or (caps is not None and caps.leader_refused_means_unsent))
            unsent = not write or proven
            return _Retryable(MarathonUnavailable(
                text, status=status, body=body,
                hint="Marathon is electing a leader (its standby could not reach the old one); try again shortly"),
                moved_on=unsent and len(self.urls) > 1, leader_refused=True, ambiguous=not unsent)
        forwarded = not (status == 503 or (status == 502 and _NOT_FORWARDED.search(message)))
        error: MarathonError
        if status in _RETRY_STATUS:
            self._failover()
            error = MarathonUnavailable(
                text, status=status, body=body,
                hint="Marathon is unavailable or has no leader; check its /ping and leader election")
        else:
            error = MarathonError(text, status=status, body=body)
        if write and forwarded:
            return _Retryable(error, ambiguous=True)  # it may have reached Marathon: not sent again
        if status in _RETRY_STATUS:
            return _Retryable(error, moved_on=status in (502, 503) and len(self.urls) > 1)
        return error

    def _round(self, method: str, path: str, params: Any, json_body: Any, stream: bool) -> _Response:
        """One try of every URL at most, from the current one on: a URL that cannot be connected to or
        answers "no leader" (502/503: nothing was applied) hands over to the next one at once, so a
        dead leader costs no backoff while a standby answers."""
        for tried in range(1, len(self.urls) + 1):
            try:
                return self._once(method, path, params, json_body, stream)
            except _Retryable as r:
                if not r.moved_on or tried == len(self.urls):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    # Over ruff's complexity limit (C901), as one piece: the retries across URLs, elections and a lost answer, in one
    # loop.
    def request(self, method: str, path: str, *, params: Any = None, json_body: Any = None,  # noqa: C901
                stream: bool = False, retry: bool = True,
                reconcile: Callable[[], dict[str, Any] | None] | None = None) -> _Response:
        """One API call with retries (see the module for what a write is sent again after).
        ``reconcile``: for a write, a look at Marathon's state returning what the write would have
        answered when it went through, else None (see :meth:`put_group`)."""
        policy = self.retry
        write = method not in _READS
        attempts = 0
        last: list[MarathonError] = []
        shown = f"{method} {self.url}{path}"
        backoff = tenacity.wait_exponential(multiplier=policy.initial, max=policy.max_wait)

        def wait(state: tenacity.RetryCallState) -> float:
            """Exponential backoff and jitter; at most ``ELECTION_POLL`` while Marathon says it has no leader
            (502/503); never past the time limit."""
            seconds = backoff(state)
            failed = state.outcome.exception() if state.outcome is not None else None
            if isinstance(failed, _Retryable) and failed.error.status in (502, 503):
                seconds = min(seconds, ELECTION_POLL)
            seconds += random.uniform(0, policy.jitter)
            left = self.time_left()
            return seconds if left is None else max(0.0, min(seconds, left))

        single = getattr(self._looking, "depth", 0) > 0 or not retry
        counted = [0]  # tries that count towards policy.attempts: all but "Connection to leader refused."
        #: a write answered "Connection to leader refused." that may have reached a leader: looked for first
        pending: list[_Retryable] = []

        def stop(state: tenacity.RetryCallState) -> bool:
            return single or counted[0] >= policy.attempts or (state.seconds_since_start or 0.0) >= policy.budget

        retrying = tenacity.Retrying(
            stop=stop,
            wait=wait,
            retry=tenacity.retry_if_exception_type(_Retryable),
            sleep=self.sleep,
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    left = self.time_left()
                    if left is not None and left <= 0:
                        raise self._past_limit(shown, last[0] if last else None)
                    if pending and reconcile is not None:
                        try:
                            found, answered = self.look_answered(reconcile)
                        except Timeout:  # the time limit came during the look: say what the write met
                            raise self._past_limit(shown, pending[0].error) from None
                        if found is not None:
                            return _Response(200, found)
                        if not answered:
                            raise pending[0]  # no leader to ask yet: wait, send nothing
                        pending.clear()  # a leader says it was not applied: send it again
                    attempts += 1
                    try:
                        return self._round(method, path, params, json_body, stream)
                    except _Retryable as r:
                        last[:] = [r.error]
                        counted[0] += 0 if r.leader_refused else 1
                        if write and r.leader_refused and r.ambiguous and reconcile is not None:
                            pending[:] = [r]
                        elif write and r.ambiguous and not r.leader_refused:
                            raise _Unsure(r.error) from None
                        if write and reconcile is not None and isinstance(r.error, MarathonConflict):
                            found = self.look(reconcile)  # the lock may be our own write's
                            if found is not None:
                                return _Response(200, found)
                        log.debug("try %d failed, will retry if the budget allows: %s", attempts, r.error.message)
                        raise
        except _Retryable as r:
            err = r.error
            if attempts > 1:
                err.message = f"{err.message} (gave up after {attempts} tries)"
            if pending:
                err.message += "; no leader answered to tell whether it was applied (marathon-tf status shows it)"
            err.args = (err.message,)
            raise err from None
        except _Unsure as u:
            return _Response(200, marker.settle(self, u.error, reconcile, in_flight=u.in_flight))
        raise AssertionError("unreachable")  # pragma: no cover

    def look(self, reconcile: Callable[[], dict[str, Any] | None]) -> dict[str, Any] | None:
        """One look at Marathon's state for a write (each read tried once); None when it cannot tell."""
        return self.look_answered(reconcile)[0]

    def look_answered(self, reconcile: Callable[[], dict[str, Any] | None]) -> tuple[dict[str, Any] | None, bool]:
        """:meth:`look`, and whether Marathon answered it (False: it could not tell, e.g. no leader)."""
        self._looking.depth = getattr(self._looking, "depth", 0) + 1
        try:
            return reconcile(), True
        except (Timeout, MarathonAuthError):
            raise
        except MarathonError as e:
            log.debug("could not look at Marathon's state: %s", e.message)
            return None, False
        finally:
            self._looking.depth -= 1

    def _shaped(self, body: Any, shape: Any, shown: str) -> Any:
        try:
            return shapes.check(body, shape)
        except shapes.ShapeError as e:
            raise self._not_marathon(shown, str(e), body) from None

    def _get(self, path: str, shape: Any, params: Any = None) -> Any:
        body = self.request("GET", path, params=params).body
        return self._shaped(body, shape, f"GET {self.url}{path}")

    # ------------------------------------------------------------------ API
    def ping(self) -> bool:
        return self.request("GET", "/ping").status == 200

    def info(self) -> dict[str, Any]:
        """``GET /v2/info`` (its version, features, Mesos master, framework); an answer younger than
        :data:`INFO_FRESH` s is not asked again (a verb's steps each read it: the version, the GPU feature,
        the master for the agents' capacity). Not to be changed by the caller."""
        if self._info is not None and time.monotonic() - self._info[0] < INFO_FRESH:
            return self._info[1]
        info = self._get("/v2/info", shapes.INFO)
        self._capabilities = versions.from_info(info)
        self._info = (time.monotonic(), info)
        return info

    def capabilities(self) -> versions.Capabilities:
        """What this Marathon's version allows and which features it runs with (:mod:`.versions`), from
        ``/v2/info`` (read once per client); when it cannot be read or parsed, the newest Marathon's (what
        marathon-tf does without a version), features unknown."""
        if self._capabilities is None:
            try:
                self.info()
            except Timeout:
                raise
            except MarathonError as e:
                log.debug("Marathon's version is not known (%s): taken for the newest", e.message)
                self._capabilities = versions.Capabilities()
        assert self._capabilities is not None
        return self._capabilities

    def leader(self, *, retry: bool = True) -> str | None:
        """``GET /v2/leader``: the leader's ``host:port`` as Marathon names it (its ``--hostname`` and http
        port, or https port with ``--disable_http``); None when there is none (404 "There is no leader").
        ``retry`` False: one try (the event stream's thread asks it between its own reconnects)."""
        try:
            body = self._shaped(self.request("GET", "/v2/leader", retry=retry).body, {"leader": str},
                                f"GET {self.url}/v2/leader")
        except MarathonNotFound:
            return None
        leader = body.get("leader") if isinstance(body, dict) else None
        return leader if isinstance(leader, str) and leader.strip() else None

    def is_local(self) -> bool:
        """Whether this is marathon-tf's own single-machine runner (``/v2/info`` ``buildref: local``);
        asked once per client."""
        if not hasattr(self, "_local"):
            try:
                self._local = self.info().get("buildref") == "local"
            except MarathonError:
                return False
        return self._local

    def get_group(self, group_id: str, *, embed: Iterable[str] = ("group.groups", "group.apps")) -> dict[str, Any]:
        """A group with the given embeds (pass them all: any embed drops Marathon's defaults)."""
        params = [("embed", e) for e in embed]
        return self._get(f"/v2/groups{_path(group_id)}", shapes.GROUP, params)

    def put_group(self, group: dict[str, Any], *, force: bool = False, dry_run: bool = False) -> dict[str, Any]:
        """Create or update a group (PUT: unchanged apps are not restarted).

        Every app is sent with its ``marathon-tf/digest`` label (:mod:`.marker`). Returns
        ``{"deploymentId", "version"}``, or with ``dry_run`` Marathon's plan ``{"steps": [...]}``. When
        the answer was lost (a proxy's 502/504, a timeout, a reset) or Marathon says the apps are
        locked, Marathon's group is looked at: if it carries our digests, the PUT went through and its
        deployment is returned (``"adopted": True``; ``deploymentId`` None when it has finished) instead
        of sending it again. An answer without a deployment id is an error, unless the group shows it
        applied."""
        params = {}
        if force:
            params["force"] = "true"
        if dry_run:
            params["dryRun"] = "true"
        sent = marker.stamp(group)
        path = f"/v2/groups{_path(group['id'])}"
        if dry_run:
            body = self.request("PUT", path, params=params, json_body=sent).body
            return self._shaped(body, shapes.PLAN, f"PUT {self.url}{path}?dryRun=true")

        def applied() -> dict[str, Any] | None:
            return marker.group_applied(self, sent)

        r = self.request("PUT", path, params=params, json_body=sent, reconcile=applied)
        body = r.body if isinstance(r.body, dict) else {}
        if body.get("adopted"):
            return body
        deployment = body.get("deploymentId") or r.headers.get("Marathon-Deployment-Id")
        if isinstance(deployment, str) and deployment.strip():
            version = body.get("version")
            return {"deploymentId": deployment.strip(), "version": version if isinstance(version, str) else None}
        found = self.look(applied)  # it answered: nothing is in flight, one look tells
        if found is not None:
            return found
        what = "an empty body" if r.body is None else shapes.kind(r.body)
        what += " without a deploymentId"
        raise self._not_marathon(f"PUT {self.url}{path}", f"HTTP {r.status} with {what}, and the group does "
                                                          f"not show the change", r.body)

    def put_app(self, app: dict[str, Any], *, force: bool = False) -> dict[str, Any]:
        """Create or update one app (``PUT /v2/apps/<id>``: a deployment of that app alone). ``app``
        carries its ``marathon-tf/digest`` (:func:`.marker.stamp`): when the answer was lost, the app
        found with it counts as applied, as for :meth:`put_group`. ``{"deploymentId", "version"}``."""
        path = f"/v2/apps{_path(app['id'])}"
        r = self.request("PUT", path, params={"force": "true"} if force else None, json_body=app,
                         reconcile=lambda: marker.app_applied(self, app))
        body = self._shaped({} if r.body is None else r.body, shapes.OBJECT, f"PUT {self.url}{path}")
        deployment = body.get("deploymentId") or r.headers.get("Marathon-Deployment-Id")
        version = body.get("version")
        return {"deploymentId": deployment if isinstance(deployment, str) else None,
                "version": version if isinstance(version, str) else None, **({"adopted": True}
                                                                              if body.get("adopted") else {})}

    def delete_group(self, group_id: str, *, force: bool = False) -> dict[str, Any]:
        """``DELETE`` the group; when its answer was lost, a group that is gone counts as deleted."""
        params = {"force": "true"} if force else None
        path = f"/v2/groups{_path(group_id)}"
        body = self.request("DELETE", path, params=params, reconcile=lambda: marker.group_gone(self, group_id)).body
        return self._shaped({} if body is None else body, shapes.DEPLOYED, f"DELETE {self.url}{path}")

    def list_apps(self, *, label: str | None = None, embed: Iterable[str] = ()) -> list[dict[str, Any]]:
        params: list[tuple[str, str]] = [("embed", e) for e in embed]
        if label:
            params.append(("label", label))
        return self._get("/v2/apps", shapes.APPS, params).get("apps") or []

    def get_app(self, app_id: str) -> dict[str, Any]:
        return self._get(f"/v2/apps{_path(app_id)}", shapes.APP_ONE).get("app") or {}

    def update_apps(self, apps: list[dict[str, Any]], *, force: bool = False,
                    reconcile: Callable[[], dict[str, Any] | None] | None = None) -> dict[str, Any]:
        """Bulk partial update (``PUT /v2/apps``): e.g. ``[{"id": ..., "instances": 0}]``. ``reconcile``:
        how to tell it went through when its answer was lost (see :meth:`request`)."""
        params = {"force": "true"} if force else None
        body = self.request("PUT", "/v2/apps", params=params, json_body=apps, reconcile=reconcile).body
        return self._shaped({} if body is None else body, shapes.OBJECT, f"PUT {self.url}/v2/apps")

    def kill_task(self, app_id: str, task_id: str) -> dict[str, Any]:
        return self.request("DELETE", f"/v2/apps{_path(app_id)}/tasks/{quote(task_id, safe='')}").body

    def local_agents(self) -> list[dict[str, Any]]:
        """marathon-tf's local runner's agents (``GET /_local/agents``: ``id``, ``name``, ``state``,
        ``enforced``); a :class:`MarathonError` from any other Marathon (404)."""
        return self._get("/_local/agents", shapes.LOCAL_AGENTS)

    def deployments(self) -> list[dict[str, Any]]:
        return self._get("/v2/deployments", shapes.DEPLOYMENTS)

    def queue(self) -> list[dict[str, Any]]:
        return self._get("/v2/queue", shapes.QUEUE).get("queue") or []

    def restart_app(self, app_id: str) -> dict[str, Any]:
        """``POST /v2/apps/<id>/restart``: a deployment of that app alone that replaces its tasks, and launches
        those it lacks (``{"deploymentId", "version"}``). Sent once (a restart sent twice could replace what the
        first launched): a 409, a deployment holds the app, is raised at once (:class:`MarathonConflict`)."""
        path = f"/v2/apps{_path(app_id)}/restart"
        r = self.request("POST", path, retry=False)
        return self._shaped({} if r.body is None else r.body, shapes.DEPLOYED, f"POST {self.url}{path}")

    def events(self, event_types: Iterable[str] = (), *, read_timeout: float = 60.0,
               base: str | None = None) -> requests.Response:
        """Open ``/v2/events`` (SSE). Marathon wants ``Accept`` exactly ``text/event-stream``.
        The caller reads the stream (see :mod:`marathon_tf.marathon.events`) and closes it; each read
        waits at most ``read_timeout`` (Marathon sends a heartbeat every 10 s: a silent stream is dead).

        ``plan-format=light``: deployment events without the whole original and target groups;
        1.5–1.7 read it, 1.4 and 1.8+ read only ``event_type`` and ignore it (1.8+ always send light
        plans).
        Asked for unless the version is known not to read it (:attr:`.versions.Capabilities.reads_plan_format_light`).
        A standby's 302 to the leader (1.7.50+) is followed here, with the credentials; a 401/403 from
        where it led is a :class:`MarathonUnavailable` (the leader may change again), not an auth error.
        A redirect that cannot be followed (https to http, a leader name that does not resolve here, a
        refused connection) is :class:`RedirectNotFollowed`: the caller looks for the leader elsewhere
        (:class:`~marathon_tf.marathon.events.EventStream`). ``base``: the Marathon URL to ask (default:
        the one in use).
        """
        base = (base or self.urls[self._current]).rstrip("/")
        url = base + "/v2/events"
        shown = f"GET {redact_url(url)}"
        params: Any = [("event_type", t) for t in event_types]
        if self._capabilities is None or self._capabilities.reads_plan_format_light:
            params.append(("plan-format", "light"))
        try:
            r, answered = self._exchange("GET", url, params=params, stream=True,
                                         headers={"Accept": "text/event-stream"},
                                         timeout=(self.timeout[0], read_timeout))
        except transport.RedirectRefused as e:
            raise RedirectNotFollowed(self._scrub(f"{shown}: {e}"), standby=base, target=e.target) from None
        except requests.exceptions.RequestException as e:
            where = getattr(e, transport.URL_ATTR, None)
            if where:  # the standby's redirect led where this machine cannot connect
                raise RedirectNotFollowed(self._scrub(f"{shown} (redirected to {redact_url(where)}): "
                                                      f"{transport.short(e)}"), standby=base, target=where) from None
            if base == self.urls[self._current]:
                self._failover()
            raise MarathonUnavailable(self._scrub(f"{shown}: {transport.short(e)}")) from None
        if r.status_code == 200:
            return r
        redirected = answered != url
        shown = f"GET {redact_url(answered)}"
        body = transport.body(r)
        r.close()
        if r.status_code in _RETRY_STATUS and not redirected and base == self.urls[self._current]:
            self._failover()
        message = f"{shown}: {r.status_code} {shapes.message(body)}".rstrip()
        if r.status_code in (401, 403) and not redirected:
            raise self._auth_error(shown, r.status_code, shapes.message(body), body)
        if r.status_code in (401, 403) or r.status_code in _RETRY_STATUS:
            raise MarathonUnavailable(self._scrub(message), status=r.status_code, body=body)
        raise MarathonError(self._scrub(message), status=r.status_code, body=body)


def _path(marathon_id: str) -> str:
    """``ml/mnist`` or ``/ml/mnist`` → ``/ml/mnist`` (ids are validated; quote anything else)."""
    return "/" + quote(marathon_id.strip("/"), safe="/")

