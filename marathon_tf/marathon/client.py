"""Marathon's REST API: one ``requests.Session``, retries, auth, TLS, errors.

* Base URL(s): a comma-separated list means failover to the next one on a
  connection error or a 502/503/504: Marathon 1.7–1.11 answer "Could not determine
  the current leader" with 502, 1.4–1.6 with 503 (``LeaderProxyFilter.scala``), and
  a standby that cannot reach the leader it forwards to answers 502 (1.7+) or
  503/504 (1.4–1.6).
* Auth: HTTP basic (``user``/``password``) or a DC/OS token
  (``Authorization: token=<t>``). Credentials never appear in messages.
* TLS is verified by default (``verify`` may be a CA bundle path, or False).
* Every request has a timeout. 502/503/504, dropped connections and 409 "locked
  by a deployment" are retried with jittered exponential backoff within a
  bounded budget (tenacity). A Marathon that cannot be connected to at all
  (refused, unknown host, connect timeout) is retried only when there is another
  URL to fail over to, or when the policy says so (``connection_errors``: the
  bootstrap, which must outlive a Marathon restart): for the CLI a single
  unreachable Marathon fails at once. 400/401/403/404/422 are never retried.
* A server that does not answer like Marathon (an answer that is not Marathon's
  JSON, and ``/v2/info`` without a ``version``) is named as such. A 401/403 is an
  auth error naming the credentials sent, also with Jetty's HTML page (what
  ``--http_credentials`` answers), except Marathon 1.5+'s 403 for too many running
  deployments.
* The event stream (:meth:`Client.events`) follows a standby's 302 to the leader
  itself, keeping the credentials (``requests`` drops ``Authorization`` when a
  redirect changes host or port).
* Everything returned is a plain dict/list as Marathon sent it; callers read
  the fields they need with ``.get()``.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable
from urllib.parse import quote, unquote, urljoin, urlsplit, urlunsplit

import requests
import tenacity

from marathon_tf.contract.errors import (MarathonAuthError, MarathonConflict, MarathonError, MarathonInvalid,
                                         MarathonNotFound, MarathonUnavailable)

__all__ = ["Client", "RetryPolicy", "redact_url", "DEFAULT_TIMEOUT", "CLI_TIMEOUT"]

log = logging.getLogger("marathon_tf.marathon")  # what -v shows before each request line

DEFAULT_TIMEOUT = (5.0, 30.0)  # (connect, read) seconds
#: The CLI's: an unreachable Marathon is reported within 3 s.
CLI_TIMEOUT = (2.5, 30.0)
_RETRY_STATUS = {502, 503, 504}
#: Marathon 1.5+'s 403 for ``TooManyRunningDeploymentsException`` ("Max number (100) of running deployments
#: is achieved. Wait for existing deployments to complete or cancel one…": M@1.11:src/main/scala/mesosphere/
#: marathon/Exception.scala, mapped to 403 by .../api/MarathonExceptionMapper.scala).
_TOO_MANY_DEPLOYMENTS = "of running deployments is achieved"
#: The longest wait between tries while Marathon answers "no leader" (an election lasts seconds: Marathon's
#: --zk_session_timeout, 10 s by default, after a crash; a longer backoff would only answer later).
ELECTION_POLL = 1.0
#: How many redirects the event stream follows (a standby names the leader: one is enough).
_MAX_REDIRECTS = 3
_USER_AGENT = "marathon-tf"


def redact_url(url: str) -> str:
    """Drop any ``user:password@`` from a URL before it is shown."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        parts = parts._replace(netloc=host)
    return urlunsplit(parts)


@dataclass
class RetryPolicy:
    """How long transient faults are retried: at most ``attempts`` tries within
    ``budget`` seconds, waiting ``initial``·2ⁿ (capped at ``max_wait``) plus jitter."""

    attempts: int = 8
    budget: float = 90.0
    initial: float = 0.5
    max_wait: float = 10.0
    jitter: float = 1.0
    #: Retry "cannot connect" also with a single URL (with several, they fail over).
    connection_errors: bool = True


class _Retryable(Exception):
    """A transient fault; carries the error to raise when the budget runs out. ``moved_on``: the client
    failed over to its next URL, which may be tried at once (nothing reached Marathon's state)."""

    def __init__(self, error: MarathonError, ambiguous: bool = False, moved_on: bool = False):
        super().__init__(error.message)
        self.error = error
        self.ambiguous = ambiguous
        self.moved_on = moved_on


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
        self._sleep = sleep
        self.session = session or requests.Session()
        self.session.verify = verify
        self.session.headers["User-Agent"] = _USER_AGENT
        self.session.headers["Accept"] = "application/json"
        self.verify = verify
        url_passwords = [unquote(urlsplit(u).password) for u in self.urls if urlsplit(u).password]
        self._secrets: list[str] = [s for s in (password, token, *url_passwords) if s]
        self._secrets += [quote(s, safe="") for s in self._secrets if quote(s, safe="") != s]
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

    def _scrub(self, text: str) -> str:
        for s in self._secrets:
            text = text.replace(s, "***")
        return text

    def _retry_unreachable(self) -> bool:
        return self.retry.connection_errors or len(self.urls) > 1

    def _require_marathon(self, base: str, status: int, body: Any) -> None:
        """Raise when ``base`` is not Marathon: its answer was not Marathon's JSON and ``/v2/info``
        has no ``version`` (checked once per URL)."""
        if base in self._marathon_ok:
            return
        try:
            r = self.session.get(base + "/v2/info", timeout=self.timeout, verify=self.verify)
            info = r.json() if r.status_code == 200 else None
        except (requests.RequestException, ValueError):
            r, info = None, None
        if isinstance(info, dict) and info.get("version"):
            self._marathon_ok.add(base)
            return
        what = f"HTTP {r.status_code}" + (f" {r.headers.get('Content-Type', '')}".rstrip() if r is not None else "") \
            if r is not None else "no answer"
        raise MarathonError(
            f"{redact_url(base)} does not answer like Marathon (GET /v2/info: {what}; the request got "
            f"HTTP {status}{': ' + _message(body)[:80] if _message(body) else ''})",
            hint="check --marathon / MARATHON_URL: Marathon's API answers /v2/info and /ping (usually port 8080)")

    def _auth_error(self, shown: str, status: int, message: str, body: Any) -> MarathonAuthError:
        """401/403 as one line naming the credentials (Jetty's HTML page included)."""
        what = "refused the credentials" if status == 401 else "denied access"
        sent = f"{self._credentials_shown} was sent" if self._credentials_shown else "no credentials were sent"
        hint = ("set MARATHON_USER and MARATHON_PASSWORD (HTTP basic auth, Marathon's --http_credentials), or "
                "MARATHON_TOKEN (DC/OS)" if not self._credentials_shown else
                "check MARATHON_USER/MARATHON_PASSWORD or MARATHON_TOKEN" if status == 401 else
                "these credentials lack the permission for this request")
        said = f"{status} {message.rstrip('.')}".rstrip()
        return MarathonAuthError(self._scrub(f"{shown}: {said}: Marathon {what}; {sent}"),
                                 status=status, body=body, hint=hint)

    def _failover(self) -> None:
        if len(self.urls) > 1:
            self._current = (self._current + 1) % len(self.urls)

    def _once(self, method: str, path: str, params: Any, json_body: Any, stream: bool) -> _Response:
        base = self.urls[self._current]
        shown = f"{method} {redact_url(base)}{path}"
        log.debug("%s", shown)
        try:
            # verify is passed on every request: requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE
            # override the session's setting, which would silently drop --ca-bundle/--insecure.
            r = self.session.request(method, base + path, params=params, json=json_body,
                                     timeout=self.timeout, stream=stream, verify=self.verify)
        except requests.exceptions.SSLError as e:
            raise MarathonUnavailable(
                self._scrub(f"TLS verification failed for {redact_url(base)}: {e}"),
                hint="pass --ca-bundle FILE for a private CA (or --insecure to skip verification)") from None
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as e:
            self._failover()
            # A request whose bytes may have reached Marathon (read timeout, reset) is ambiguous.
            ambiguous = method != "GET" and not isinstance(e, requests.exceptions.ConnectTimeout)
            kind = "timed out" if isinstance(e, requests.exceptions.Timeout) else "connection failed"
            error = MarathonUnavailable(f"{shown}: {kind}: {self._scrub(_short(e))}",
                                        hint="is Marathon running at that address? (--marathon URL / MARATHON_URL)")
            if _unreachable(e) and not self._retry_unreachable():
                raise error from None  # nothing listens there: trying again does not help
            raise _Retryable(error, ambiguous=ambiguous, moved_on=not ambiguous and len(self.urls) > 1) from None
        if stream and r.status_code == 200:
            return _Response(r.status_code, r, dict(r.headers))
        body = _body(r)
        status = r.status_code
        log.debug("%s -> %s (%.0f ms, %d bytes)", shown, status, r.elapsed.total_seconds() * 1000, len(r.content))
        if (path != "/ping" and status not in _RETRY_STATUS and status not in (401, 403)
                and not isinstance(body, (dict, list)) and (body is not None or status >= 400)):
            self._require_marathon(base, status, body)
        elif status == 404 and not (isinstance(body, dict) and "message" in body):
            self._require_marathon(base, status, body)
        if status < 400:
            return _Response(status, body, dict(r.headers))
        message = _message(body) or r.reason or ""
        text = self._scrub(f"{shown}: {status} {message}".rstrip())
        if status in _RETRY_STATUS:
            self._failover()
            raise _Retryable(MarathonUnavailable(
                text, status=status, body=body,
                hint="Marathon is unavailable or has no leader; check its /ping and leader election"),
                moved_on=status in (502, 503) and len(self.urls) > 1)
        if status == 409:
            err = MarathonConflict(text, status=status, body=body,
                                   hint="another deployment holds the app; wait for it, or pass --force to override it")
            if "locked" in message.lower():
                raise _Retryable(err)
            raise err
        if status == 403 and _TOO_MANY_DEPLOYMENTS in message:
            raise MarathonError(text, status=status, body=body,
                                hint="Marathon runs as many deployments as its --max_running_deployments allows: "
                                     "wait for some to finish, or cancel one")
        if status in (401, 403):
            raise self._auth_error(shown, status, message, body)
        if status == 404:
            raise MarathonNotFound(self._scrub(message) or text, status=status, body=body)
        if status in (400, 422):
            raise MarathonInvalid(text, status=status, body=body)
        raise MarathonError(text, status=status, body=body)

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

    def request(self, method: str, path: str, *, params: Any = None, json_body: Any = None,
                stream: bool = False, retry: bool = True,
                on_ambiguous_conflict: Callable[[MarathonConflict], Any] | None = None) -> _Response:
        """One API call with retries. ``on_ambiguous_conflict`` decides what a 409 lock means
        after an earlier try may already have been applied (see :meth:`put_group`)."""
        policy = self.retry
        ambiguous = False
        attempts = 0

        backoff = tenacity.wait_exponential(multiplier=policy.initial, max=policy.max_wait)

        def wait(state: tenacity.RetryCallState) -> float:
            """Exponential backoff; at most ``ELECTION_POLL`` while Marathon says it has no leader (502/503)."""
            seconds = backoff(state)
            failed = state.outcome.exception() if state.outcome is not None else None
            if isinstance(failed, _Retryable) and failed.error.status in (502, 503):
                seconds = min(seconds, ELECTION_POLL)
            return seconds

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(policy.attempts if retry else 1)
            | tenacity.stop_after_delay(policy.budget),
            wait=wait + tenacity.wait_random(0, policy.jitter),
            retry=tenacity.retry_if_exception_type(_Retryable),
            sleep=self._sleep,
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    attempts += 1
                    try:
                        return self._round(method, path, params, json_body, stream)
                    except _Retryable as r:
                        if (ambiguous and on_ambiguous_conflict is not None
                                and isinstance(r.error, MarathonConflict)):
                            return on_ambiguous_conflict(r.error)
                        ambiguous = ambiguous or r.ambiguous
                        log.debug("try %d failed, will retry if the budget allows: %s", attempts, r.error.message)
                        raise
        except _Retryable as r:
            err = r.error
            if attempts > 1:
                err.message = f"{err.message} (gave up after {attempts} tries)"
                err.args = (err.message,)
            raise err from None
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------------ API
    def ping(self) -> bool:
        return self.request("GET", "/ping").status == 200

    def info(self) -> dict[str, Any]:
        return self.request("GET", "/v2/info").body

    def is_local(self) -> bool:
        """Whether this is marathon-tf's own single-machine runner (``/v2/info`` ``buildref: local``);
        asked once per client."""
        if not hasattr(self, "_local"):
            try:
                info = self.info()
                self._local = isinstance(info, dict) and info.get("buildref") == "local"
            except MarathonError:
                return False
        return self._local

    def get_group(self, group_id: str, *, embed: Iterable[str] = ("group.groups", "group.apps")) -> dict[str, Any]:
        """A group with the given embeds (pass them all: any embed drops Marathon's defaults)."""
        params = [("embed", e) for e in embed]
        return self.request("GET", f"/v2/groups{_path(group_id)}", params=params).body

    def put_group(self, group: dict[str, Any], *, force: bool = False, dry_run: bool = False) -> dict[str, Any]:
        """Create or update a group (PUT is idempotent: unchanged apps are not restarted).

        Returns ``{"deploymentId", "version"}``, or with ``dry_run`` Marathon's plan
        ``{"steps": [...]}``. If an earlier try may have been applied (its answer was
        lost) and Marathon now says the apps are locked, the lock is our own
        deployment when the deployed apps already equal ours: that deployment is
        returned instead of starting a second one.
        """
        params = {}
        if force:
            params["force"] = "true"
        if dry_run:
            params["dryRun"] = "true"

        def adopt(conflict: MarathonConflict) -> _Response:
            ids = conflict.deployment_ids
            if ids and self._group_matches(group):
                return _Response(200, {"deploymentId": ids[0], "version": None, "adopted": True})
            raise _Retryable(conflict)

        r = self.request("PUT", f"/v2/groups{_path(group['id'])}", params=params, json_body=group,
                         on_ambiguous_conflict=None if dry_run else adopt)
        body = r.body if isinstance(r.body, dict) else {}
        if not dry_run and "deploymentId" not in body and r.headers.get("Marathon-Deployment-Id"):
            body["deploymentId"] = r.headers["Marathon-Deployment-Id"]
        return body

    def _group_matches(self, group: dict[str, Any]) -> bool:
        try:
            current = self.get_group(group["id"])
        except MarathonError:
            return False
        deployed = {a.get("id"): a for a in current.get("apps") or []}
        keys = ("cmd", "env", "labels", "instances", "cpus", "mem", "gpus")
        for app in group.get("apps") or []:
            have = deployed.get(app["id"])
            if have is None or any(have.get(k) != app.get(k) for k in keys if k in app):
                return False
        return True

    def delete_group(self, group_id: str, *, force: bool = False) -> dict[str, Any]:
        params = {"force": "true"} if force else None
        return self.request("DELETE", f"/v2/groups{_path(group_id)}", params=params).body

    def list_apps(self, *, label: str | None = None, embed: Iterable[str] = ()) -> list[dict[str, Any]]:
        params: list[tuple[str, str]] = [("embed", e) for e in embed]
        if label:
            params.append(("label", label))
        return (self.request("GET", "/v2/apps", params=params).body or {}).get("apps") or []

    def get_app(self, app_id: str) -> dict[str, Any]:
        return (self.request("GET", f"/v2/apps{_path(app_id)}").body or {}).get("app") or {}

    def app_tasks(self, app_id: str) -> list[dict[str, Any]]:
        return (self.request("GET", f"/v2/apps{_path(app_id)}/tasks").body or {}).get("tasks") or []

    def update_apps(self, apps: list[dict[str, Any]], *, force: bool = False) -> dict[str, Any]:
        """Bulk partial update (``PUT /v2/apps``): e.g. ``[{"id": ..., "instances": 0}]``."""
        params = {"force": "true"} if force else None
        return self.request("PUT", "/v2/apps", params=params, json_body=apps).body

    def restart_app(self, app_id: str, *, force: bool = False) -> dict[str, Any]:
        params = {"force": "true"} if force else None
        return self.request("POST", f"/v2/apps{_path(app_id)}/restart", params=params).body

    def kill_task(self, app_id: str, task_id: str) -> dict[str, Any]:
        return self.request("DELETE", f"/v2/apps{_path(app_id)}/tasks/{quote(task_id, safe='')}").body

    def deployments(self) -> list[dict[str, Any]]:
        return self.request("GET", "/v2/deployments").body or []

    def delete_deployment(self, deployment_id: str, *, force: bool = False) -> Any:
        params = {"force": "true"} if force else None
        return self.request("DELETE", f"/v2/deployments/{quote(deployment_id, safe='')}", params=params).body

    def queue(self) -> list[dict[str, Any]]:
        return (self.request("GET", "/v2/queue").body or {}).get("queue") or []

    def events(self, event_types: Iterable[str] = (), *, read_timeout: float = 60.0) -> requests.Response:
        """Open ``/v2/events`` (SSE). Marathon wants ``Accept`` exactly ``text/event-stream``.
        The caller reads the stream (see :mod:`marathon_tf.marathon.events`) and closes it.

        ``plan-format=light``: deployment events without the whole original and target groups;
        1.5–1.7 read it, 1.4 and 1.8+ read only ``event_type`` and ignore it (1.8+ always send light
        plans): ``M@1.x:src/main/scala/mesosphere/marathon/core/event/impl/stream/HttpEventStreamServlet.scala``.
        A standby's 302 to the leader (1.7+) is followed here, with the credentials; a 401/403 from
        where it led is a :class:`MarathonUnavailable` (the leader may change again), not an auth error.
        """
        url = self.urls[self._current] + "/v2/events"
        params: Any = [("event_type", t) for t in event_types] + [("plan-format", "light")]
        for hop in range(_MAX_REDIRECTS + 1):
            shown = f"GET {redact_url(url)}"
            try:
                r = self.session.get(url, params=params, stream=True, headers={"Accept": "text/event-stream"},
                                     timeout=(self.timeout[0], read_timeout), verify=self.verify,
                                     allow_redirects=False)
            except requests.exceptions.RequestException as e:
                if not hop:
                    self._failover()
                raise MarathonUnavailable(f"{shown}: {self._scrub(_short(e))}") from None
            if r.status_code == 200:
                return r
            location = r.headers.get("Location") if r.is_redirect else None
            if location is None:
                break
            r.close()
            target = urljoin(url, location)
            if urlsplit(url).scheme == "https" and urlsplit(target).scheme != "https":
                raise MarathonUnavailable(f"{shown}: redirected to {redact_url(target)}: not following it "
                                          f"without TLS (the credentials would travel in clear)")
            url, params = target, None  # the Location carries the query
        else:
            raise MarathonUnavailable(f"GET {redact_url(url)}: more than {_MAX_REDIRECTS} redirects")
        body = _body(r)
        r.close()
        if r.status_code in _RETRY_STATUS and not hop:
            self._failover()
        message = f"{shown}: {r.status_code} {_message(body)}".rstrip()
        if r.status_code in (401, 403) and not hop:
            raise self._auth_error(shown, r.status_code, _message(body), body)
        if r.status_code in (401, 403) or r.status_code in _RETRY_STATUS:
            raise MarathonUnavailable(self._scrub(message), status=r.status_code, body=body)
        raise MarathonError(self._scrub(message), status=r.status_code, body=body)


def _path(marathon_id: str) -> str:
    """``ml/mnist`` or ``/ml/mnist`` → ``/ml/mnist`` (ids are validated; quote anything else)."""
    return "/" + quote(marathon_id.strip("/"), safe="/")


def _body(r: requests.Response) -> Any:
    if not r.content:
        return None
    try:
        return r.json()
    except ValueError:
        return r.text


def _message(body: Any) -> str:
    if isinstance(body, dict):
        return str(body.get("message") or "")
    if isinstance(body, str):
        # Jetty error pages (e.g. 503 "Could not determine the current leader"): keep the gist.
        m = re.search(r"<title>(.*?)</title>", body, re.S | re.I)
        text = m.group(1) if m else re.sub(r"<[^>]+>", " ", body)
        return " ".join(text.split())[:200]
    return ""


def _unreachable(e: Exception) -> bool:
    """No connection could be made (refused, no route, unknown host, connect timeout); a reset or
    a read timeout means something answered, and may answer next time."""
    if isinstance(e, requests.exceptions.ConnectTimeout):
        return True
    reason = getattr(e.args[0], "reason", None) if e.args else None
    import urllib3

    return isinstance(reason, urllib3.exceptions.NewConnectionError)


def _short(e: Exception) -> str:
    text = str(e)
    m = re.search(r"\[Errno -?\d+\] ([^')\]\"]+)", text)
    if m:
        return m.group(1)
    if "Read timed out" in text:
        return "read timed out"
    return text[:200]
