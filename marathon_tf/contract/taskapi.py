"""The task HTTP API: every route of a task's status port, the typed requests of its control routes, one client,
and one batched fan-out.

A task's bootstrap serves its status port (:mod:`marathon_tf.task.status_server`); the other tasks of the job and
the job's owner (``checkpoint``, ``scale``'s save, ``status``) call it. The routes (:data:`ROUTES`) are listed
here once, with their method and whether they are *control* routes (they change the job, or tell where it runs:
the job's key is checked for them, once, by :class:`marathon_tf.contract.taskauth.Guard`).

The control routes' requests are typed values (:class:`SaveRequest`, :class:`HoldRequest`,
:class:`LedgerReport`) with one JSON form each: ``to_json()`` for the caller, ``from_json()`` for the server, which
answers a wrong shape with 400 and the one line of :class:`TaskApiError`. :class:`TaskClient` is the one client
(over a ``requests``-like session the caller passes in: a task's carries the job's key,
:func:`marathon_tf.contract.taskauth.install`; the owner's sends :func:`~marathon_tf.contract.taskauth.headers`),
and :func:`broadcast` the one fan-out to many tasks (a bounded pool of threads, the targets taken in batches).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, TypeVar, overload
from urllib.parse import parse_qsl, urlsplit

__all__ = ["Route", "ROUTES", "HEALTH", "STATUS", "PROGRESS", "METRICS", "EVENTS", "LEDGER_VIEW", "RENDEZVOUS",
           "LEADER", "SAVE", "HOLD", "LEDGER", "TaskApiError", "SaveRequest", "SaveResult", "HoldRequest",
           "LedgerReport", "Reply",
           "TaskClient", "broadcast", "FANOUT", "control_gets", "control_paths"]

#: Threads of one fan-out (:func:`broadcast`).
FANOUT = 16


@dataclass(frozen=True)
class Route:
    """One route of a task's status port: ``method`` ``path``; ``control``: the job's key is needed."""

    method: str
    path: str
    control: bool
    what: str


HEALTH = Route("GET", "/health", False, "200 healthy or 503, with the phase (every task)")
STATUS = Route("GET", "/status", False, "the task's whole status (every task)")
PROGRESS = Route("GET", "/progress", False, "the task's step, rate and phase, small (every task)")
METRICS = Route("GET", "/metrics", False, "Prometheus text (every task)")
EVENTS = Route("GET", "/events", False, "the task's events (every task)")
LEDGER_VIEW = Route("GET", "/ledger", False, "the job's restart ledger (the deciding task)")
RENDEZVOUS = Route("GET", "/rendezvous", True, "the job's peers and its last round, a long poll (the leader)")
LEADER = Route("GET", "/leader", True, "the leader's hint: where it serves /rendezvous (a follower)")
SAVE = Route("POST", "/save", True, "a save round (the deciding task): SaveRequest")
HOLD = Route("POST", "/hold", True, "hold or release a program for a save round (chiefs, workers): HoldRequest")
LEDGER = Route("POST", "/ledger", True, "report an end of a program (the deciding task): LedgerReport")
ROUTES = (HEALTH, STATUS, PROGRESS, METRICS, EVENTS, LEDGER_VIEW, RENDEZVOUS, LEADER, SAVE, HOLD, LEDGER)


def control_gets() -> frozenset[str]:
    """The paths of the control routes read with GET."""
    return frozenset(r.path for r in ROUTES if r.control and r.method == "GET")


def control_paths() -> frozenset[str]:
    """The paths of every control route."""
    return frozenset(r.path for r in ROUTES if r.control)


class TaskApiError(ValueError):
    """A request of another shape: its message is one line naming the field (the server's 400)."""


def _object(body: Any, route: Route) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise TaskApiError(f"{route.method} {route.path}: expected a JSON object, got {type(body).__name__}")
    return body


def _seconds(body: Mapping[str, Any], key: str, route: Route) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TaskApiError(f"{key}: a number of seconds") from None
    if not math.isfinite(number):
        raise TaskApiError(f"{key}: a number of seconds")
    return number


@dataclass(frozen=True)
class SaveRequest:
    """``POST /save``: have the deciding task run a save round (``hold``: keep the job's training held after it,
    before a stop; ``exclude``: tasks not to hold; ``timeout``: seconds the round may take, 0.5 to 600)."""

    job: str
    reason: str = "asked"
    hold: bool = False
    timeout: float = 60.0
    exclude: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"job": self.job, "reason": self.reason, "hold": self.hold, "timeout": self.timeout,
                "exclude": list(self.exclude)}

    @classmethod
    def from_json(cls, body: Any) -> SaveRequest:
        body = _object(body, SAVE)
        timeout = _seconds(body, "timeout", SAVE)
        return cls(job=str(body.get("job") or ""), reason=str(body.get("reason") or "asked")[:300],
                   hold=bool(body.get("hold")), timeout=min(600.0, max(0.5, timeout or 60.0)),
                   exclude=tuple(str(t) for t in body.get("exclude") or [])[:1000])


@dataclass(frozen=True)
class SaveResult:
    """``POST /save``'s answer (a save round's): ``ok`` with the ``step`` and ``path`` (under the task's sandbox:
    the logdir's name first) it confirmed, or why not (``message``)."""

    ok: bool
    message: str = ""
    step: int | None = None
    path: str | None = None
    seconds: float = 0.0
    held: bool = False
    #: not now, but soon: the program is starting (or restarting) and has not said yet whether it can save;
    #: the asker may ask again (``checkpoint`` does, within its timeout)
    starting: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: Any) -> SaveResult:
        if not isinstance(data, Mapping) or not isinstance(data.get("ok"), bool):
            return cls(False, f"not a save round's answer: {str(data)[:200]}")
        step = data.get("step")
        return cls(bool(data["ok"]), str(data.get("message") or ""), step if isinstance(step, int) else None,
                   str(data["path"]) if data.get("path") else None, float(data.get("seconds") or 0.0),
                   bool(data.get("held")), True if data.get("starting") is True else None)


@dataclass(frozen=True)
class HoldRequest:
    """``POST /hold`` (from the deciding task): hold this task's program for the round under way for ``seconds``
    (None: the longest a hold may last); ``release``: let it go on; ``extend``: the round confirmed its checkpoint,
    a program still held stays so for ``seconds`` from now."""

    job: str
    reason: str = ""
    seconds: float | None = None
    release: bool = False
    extend: bool = False

    def to_json(self) -> dict[str, Any]:
        if self.release:
            return {"job": self.job, "release": True, **({"reason": self.reason} if self.reason else {})}
        out: dict[str, Any] = {"job": self.job, "reason": self.reason, "seconds": self.seconds}
        if self.extend:
            out["extend"] = True
        return out

    @classmethod
    def from_json(cls, body: Any) -> HoldRequest:
        body = _object(body, HOLD)
        try:
            seconds = _seconds(body, "seconds", HOLD)
        except TaskApiError:
            seconds = None  # a hold is always bounded: the longest one then
        return cls(job=str(body.get("job") or ""), reason=str(body.get("reason") or "")[:300], seconds=seconds,
                   release=bool(body.get("release")), extend=bool(body.get("extend")))


@dataclass(frozen=True)
class LedgerReport:
    """``POST /ledger``: one end of a program, for the keeper (:mod:`marathon_tf.task.keeper`): ``entry`` (the
    ledger's JSON of it; kind ``stopped`` when the task itself was stopped), the round ``generation`` its program
    ran in, whether its restart scope is the job's ``group``, its task's earlier entries (``history``, at most
    200) and the app version it was launched with."""

    job: str
    entry: Mapping[str, Any]
    generation: int | None = None
    group: bool = False
    history: tuple[Mapping[str, Any], ...] = ()
    app_version: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"job": self.job, "entry": dict(self.entry), "generation": self.generation, "group": self.group,
                "app_version": self.app_version, "history": [dict(h) for h in self.history]}

    @classmethod
    def from_json(cls, body: Any) -> LedgerReport:
        body = _object(body, LEDGER)
        entry = body.get("entry")
        if not isinstance(entry, Mapping):
            raise TaskApiError("the report's entry is missing or malformed")
        generation = body.get("generation")
        history = body.get("history") or []
        version = body.get("app_version")
        return cls(job=str(body.get("job") or ""), entry=dict(entry),
                   generation=generation if isinstance(generation, int) and not isinstance(generation, bool)
                   else None, group=bool(body.get("group")),
                   history=tuple(dict(h) for h in (history if isinstance(history, list) else [])[:200]
                                 if isinstance(h, Mapping)),
                   app_version=str(version) if isinstance(version, str) and version else None)


@dataclass(frozen=True)
class Reply:
    """A task's answer: its HTTP ``code`` and JSON ``body`` (None: not JSON); ``error``: why there is none (refused,
    reset, timed out: ``code`` None)."""

    code: int | None
    body: Any = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.code == 200

    def json(self) -> dict[str, Any] | None:
        """The body when it is a JSON object, else None."""
        return self.body if isinstance(self.body, dict) else None


def _base(where: str) -> str:
    return where.rstrip("/") if "://" in where else f"http://{where}"


class TaskClient:
    """The one client of the task API, the tasks' and the user side's. ``session``: a ``requests``-like session
    (``get``/``post(url, json=, params=, headers=, timeout=, allow_redirects=)``; the user side's is
    :func:`marathon_tf.marathon.transport.session`, bounded in size); ``headers``: sent with every request (the
    owner's key, where the session does not carry one)."""

    def __init__(self, session: Any, *, headers: Mapping[str, str] | None = None):
        self.session, self.headers = session, dict(headers or {})

    def call(self, where: str, route: Route, body: Any = None, *, params: Mapping[str, str] | None = None,
             timeout: float | tuple[float, float] = 3.0) -> Reply:
        """``route`` of the task at ``where`` (``host:port`` or a base URL); never raises for what the task does."""
        kwargs: dict[str, Any] = {"timeout": timeout, "allow_redirects": False}  # the task API never redirects:
        # a redirect is not followed with the job's key (a header the session's own redirects would carry on)
        if body is not None:
            kwargs["json"] = body
        if params:
            kwargs["params"] = dict(params)
        if self.headers:
            kwargs["headers"] = dict(self.headers)
        try:
            r = getattr(self.session, route.method.lower())(_base(where) + route.path, **kwargs)
        except Exception as e:  # noqa: BLE001 - refused, reset, timed out, too large: the task is away
            return Reply(None, None, e)
        try:
            data = r.json()
        except Exception:  # noqa: BLE001 - not JSON: said by the code alone
            data = None
        return Reply(r.status_code, data)

    def read(self, url: str, *, timeout: float = 2.0) -> dict[str, Any] | None:
        """A ``GET`` route of the task at ``url`` (``http://host:port/status``, ``…/events?shared=1``): the answer
        when it is a whole 200 JSON object within ``timeout`` s, else None (a task's status is advisory)."""
        parts = urlsplit(url)
        route = next((r for r in ROUTES if r.method == "GET" and r.path == parts.path), None)
        if route is None:
            return None
        reply = self.call(f"{parts.scheme}://{parts.netloc}", route, params=dict(parse_qsl(parts.query)),
                          timeout=(timeout / 2, timeout / 2))
        return reply.json() if reply.ok else None

    def save(self, where: str, request: SaveRequest, *, timeout: float) -> Reply:
        """``POST /save`` to the deciding task at ``where``."""
        return self.call(where, SAVE, request.to_json(), timeout=(2.0, timeout))

    def hold(self, targets: Mapping[str, str], request: HoldRequest, *, timeout: float) -> dict[str, Reply | None]:
        """``POST /hold`` to every task of ``targets`` (``{task: where}``), at once (:func:`broadcast`)."""
        body = request.to_json()
        return broadcast(lambda where: self.call(where, HOLD, body, timeout=(timeout, timeout)), targets)

    def report(self, where: str, report: LedgerReport, *, timeout: tuple[float, float]) -> Reply:
        """``POST /ledger`` to the keeper at ``where``."""
        return self.call(where, LEDGER, report.to_json(), timeout=timeout)


K = TypeVar("K")
T = TypeVar("T")
R = TypeVar("R")


@overload
def broadcast(call: Callable[[T], R], targets: Mapping[K, T], *, workers: int = FANOUT,
              batch: int = 1024) -> dict[K, R | None]: ...


@overload
def broadcast(call: Callable[[T], R], targets: Sequence[T], *, workers: int = FANOUT,
              batch: int = 1024) -> list[R | None]: ...


def broadcast(call: Callable[[T], R], targets: Mapping[K, T] | Sequence[T], *, workers: int = FANOUT,
              batch: int = 1024) -> dict[K, R | None] | list[R | None]:
    """``call`` for every target, on at most ``workers`` threads, ``batch`` targets at a time (a fan-out to 10,000
    tasks never queues them all at once); a call that raises gives None. A mapping gives ``{key: result}`` in its
    order, a sequence the results in its order."""
    keys: list[K] | None = list(targets) if isinstance(targets, Mapping) else None
    values: list[T] = list(targets.values()) if isinstance(targets, Mapping) else list(targets)

    def safe(value: T) -> R | None:
        try:
            return call(value)
        except Exception:  # noqa: BLE001 - one target's fault is its own answer
            return None

    results: list[R | None] = []
    if values:
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(values))), thread_name_prefix="fanout") as pool:
            for start in range(0, len(values), max(1, batch)):
                results.extend(pool.map(safe, values[start:start + batch]))
    return dict(zip(keys, results)) if keys is not None else results
