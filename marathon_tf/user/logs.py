"""Task logs from the Mesos agent's sandbox files API.

Marathon tells which agent runs a task (``host``; for a task that ended, its app's
``lastTaskFailure``); the agent's ``/state`` tells every sandbox directory it still
keeps for the app (running executors, and ``completed_executors`` of finished or
restarted instances), and ``/files/read`` returns their ``stdout`` and ``stderr`` in
pieces (``offset``/``length``). The local runner serves the same two endpoints on its
Marathon port and keeps every sandbox, so one code path reads both.

Which instance: the running one; when none runs (the job ended, or the task waits to
be relaunched) the newest one the agent kept; ``previous`` the one before that.

The agents get none of Marathon's credentials (:func:`AgentSession`): they have their own HTTP
authentication (usually none). Only the local runner, whose agent API is served on Marathon's own
port(s), gets them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import requests

from marathon_tf.contract import labels as L
from marathon_tf.contract import naming
from marathon_tf.contract.errors import MarathonNotFound, MarathonTFError, UsageError
from marathon_tf.marathon import shapes, transport
from marathon_tf.marathon.client import Client
from marathon_tf.marathon.jobstate import job_state
from marathon_tf.marathon.model import App, job_apps, oldest_first
from marathon_tf.mesos.views import sandboxes

__all__ = ["TaskLog", "LogError", "AgentSession", "find_task_logs", "read_new", "follow", "agent_base"]

#: How long ``logs -f`` keeps looking for an agent it cannot reach.
AGENT_OUTAGE = 60.0
_CHUNK = 1 << 20
_TAIL_BLOCK = 1 << 16


class LogError(MarathonTFError):
    """There is nothing to read where it was asked for, or an agent could not be read (exit 1: a runtime
    failure; a job or task that does not exist is a usage error, exit 2): never an empty output.
    ``transient``: the agent could not be reached (it may be back, or at its new address, on the next look)."""

    transient = False


def AgentSession(client: Client) -> requests.Session:
    """A session for the Mesos agents (named for what it makes), bounded as Marathon's and without
    Marathon's credentials (``Authorization``, basic auth, a token); its requests to Marathon's own
    addresses (where the local runner serves the agent API) go through Marathon's session, with them."""
    return transport.session(max_bytes=client.max_bytes, deadline=lambda: client.deadline, verify=client.verify,
                             headers={"User-Agent": client.session.headers.get("User-Agent", "marathon-tf")},
                             through=(client.session, client.urls))


@dataclass
class TaskLog:
    task: str            # worker-1
    task_id: str
    agent: str           # agent base URL
    directory: str | None = None
    offsets: dict[str, int] = field(default_factory=dict)
    running: bool = True


def agent_base(client: Client, host: str, agent_port: int, agent_url: str | None,
               local: bool | None = None) -> str:
    if agent_url:
        return agent_url.rstrip("/")
    if local is None:
        local = client.is_local()
    return client.url if local else f"http://{host}:{agent_port}"


def _get(session: requests.Session, url: str, **params: Any) -> requests.Response:
    try:
        return session.get(url, params=params or None, timeout=10)
    except requests.RequestException as e:
        parts = urlsplit(url)
        why = ("timed out" if isinstance(e, requests.Timeout) else "cannot connect"
               if isinstance(e, requests.ConnectionError) else type(e).__name__)
        error = LogError(f"cannot read task logs from the Mesos agent at {parts.scheme}://{parts.netloc}: {why}",
                         hint="the agents' HTTP port is --agent-port (default 5051); --agent-url names one")
        error.transient = True
        raise error from None


def _agent_state(session: requests.Session, agent: str, cache: dict[str, Any]) -> dict:
    if agent not in cache:
        r = _get(session, f"{agent}/state")
        try:
            cache[agent] = r.json() if r.status_code == 200 else None
        except ValueError:
            cache[agent] = None
        if not isinstance(cache[agent], dict):
            raise LogError(f"{agent}/state did not answer like a Mesos agent (HTTP {r.status_code})",
                           hint="the agents' HTTP port is --agent-port (default 5051); --agent-url names one")
        try:
            shapes.check(cache[agent], shapes.MESOS_AGENT_STATE)
        except shapes.ShapeError as e:
            del cache[agent]
            raise LogError(f"{agent}/state did not answer like a Mesos agent: {e}",
                           hint="the agents' HTTP port is --agent-port (default 5051); --agent-url names one") from None
    return cache[agent]


def _instances(client: Client, session: requests.Session, name: str, app: App, *, agent_port: int,
               agent_url: str | None, cache: dict[str, dict], local: bool) -> list[TaskLog]:
    """Every instance of ``app`` whose sandbox an agent still keeps, oldest first, running ones last."""
    running = [t for t in oldest_first(app.tasks) if t.id]
    hosts = [t.host or "" for t in running]
    failure = app.last_failure
    if failure is not None and failure.host:
        hosts.append(failure.host)
    agents = list(dict.fromkeys(agent_base(client, h, agent_port, agent_url, local) for h in hosts))
    if not agents and (agent_url or local):
        agents = [agent_base(client, "", agent_port, agent_url, local)]
    running_ids = {t.id for t in running}
    out: list[TaskLog] = []
    prefix = naming.safe_path(app.id or "") + "."
    directories: dict[str, str] = {}
    for agent in agents:
        for task_id, directory in sandboxes(_agent_state(session, agent, cache), prefix):
            if task_id in running_ids:
                directories[task_id] = directory
            elif all(o.task_id != task_id for o in out):
                out.append(TaskLog(name, task_id, agent, directory, running=False))
    for t in running:
        out.append(TaskLog(name, str(t.id), agent_base(client, t.host or "", agent_port, agent_url, local),
                           directories.get(str(t.id))))
    return out


def find_task_logs(client: Client, job: str, task: str | None, *, agent_port: int = 5051,
                   agent_url: str | None = None, previous: bool = False, since: float | None = None,
                   session: requests.Session | None = None) -> tuple[list[TaskLog], str | None]:
    """The job's tasks (or one, ``worker-1``) with where their logs are, and the job's recorded end
    (``Succeeded``/``Failed``, None while it runs). ``since`` (seconds since the epoch): every
    instance, running or ended, that wrote output since then (Mesos keeps no time per line, so
    this selects task instances, not lines)."""
    if task is not None and naming.parse_task_name(task) is None:
        raise UsageError(f"{task!r}: name a task like worker-1, ps-0 or chief-0")
    try:
        group = client.get_group(naming.group_id(job), embed=("group.groups", "group.apps", "group.apps.tasks",
                                                              "group.apps.lastTaskFailure"))
    except MarathonNotFound:
        raise UsageError(f"job {job!r} does not exist on {client.url}",
                         hint="see the jobs with: marathon-tf list") from None
    session = session or AgentSession(client)
    apps = job_apps(group)
    if task and task not in apps:
        raise UsageError(f"{job} has no task {task} (it has {', '.join(apps) or 'none'})",
                         hint=f"see the job with: marathon-tf status {job}")
    state = job_state(apps.values())
    ended = state.value if state in (L.JobState.SUCCEEDED, L.JobState.FAILED) else None
    out: list[TaskLog] = []
    cache: dict[str, dict] = {}
    local = client.is_local() if agent_url is None else False
    for name, app in apps.items():
        if task and name != task:
            continue
        instances = _instances(client, session, name, app, agent_port=agent_port, agent_url=agent_url, cache=cache,
                               local=local)
        live = [i for i in instances if i.running]
        if since is not None:
            out.extend(i for i in instances if (last_written(session, i) or 0) >= since)
            continue
        if previous:
            latest = live[-1] if live else instances[-1] if instances else None
            before = [i for i in instances if i is not latest]
            out.extend(before[-1:])
        elif live:
            out.extend(live)
        else:
            out.extend(instances[-1:])
    if task and not out and since is None:
        what = "no earlier instance" if previous else "no sandbox left on its agent"
        raise LogError(f"{job}: task {task} has {what} to read logs from",
                         hint=f"see the job with: marathon-tf status {job}")
    return out, ended


def _directory(session: requests.Session, log: TaskLog, cache: dict[str, dict] | None = None) -> str | None:
    if log.directory:
        return log.directory
    for task_id, directory in sandboxes(_agent_state(session, log.agent, {} if cache is None else cache),
                                         log.task_id):
        if task_id == log.task_id:
            log.directory = directory
            return directory
    return None


def last_written(session: requests.Session, log: TaskLog) -> float | None:
    """When the instance last wrote its stdout/stderr (the newest ``mtime`` the agent's
    ``/files/browse`` gives for them, seconds since the epoch); None if it cannot tell."""
    directory = _directory(session, log)
    if directory is None:
        return None
    r = _get(session, f"{log.agent}/files/browse", path=directory)
    if r.status_code != 200:
        raise LogError(f"{log.task}: the agent {log.agent} cannot list {directory} (HTTP {r.status_code})")
    try:
        times = [e.get("mtime") for e in r.json() if str(e.get("path", "")).rsplit("/", 1)[-1] in ("stdout", "stderr")]
    except (ValueError, AttributeError):
        raise LogError(f"{log.task}: the agent {log.agent} did not answer /files/browse with a listing") from None
    times = [t for t in times if isinstance(t, (int, float))]
    return max(times) if times else None


def _read(session: requests.Session, log: TaskLog, path: str, offset: int, length: int) -> str:
    r = _get(session, f"{log.agent}/files/read", path=path, offset=offset, length=length)
    if r.status_code == 404:
        raise LogError(f"{log.task}: {path} is gone from the agent {log.agent} (its sandbox was removed)")
    if r.status_code != 200:
        raise LogError(f"{log.task}: the agent {log.agent} answered HTTP {r.status_code} for {path}")
    return _file_answer(r, log, {"data": shapes.Required(str)})["data"]


def _file_answer(r: requests.Response, log: TaskLog, shape: dict[str, Any]) -> dict[str, Any]:
    """The agent's ``/files/read`` answer with ``shape`` (Mesos's ``{"data", "offset"}``), else one
    :class:`LogError` line."""
    try:
        return shapes.check(r.json(), shape)
    except ValueError as e:  # not JSON, or a wrong shape (shapes.ShapeError)
        what = f": {e}" if isinstance(e, shapes.ShapeError) else " with JSON"
        raise LogError(f"{log.task}: the agent {log.agent} did not answer /files/read{what}") from None


def _size(session: requests.Session, log: TaskLog, path: str) -> int:
    r = _get(session, f"{log.agent}/files/read", path=path, offset=-1)
    if r.status_code != 200:
        raise LogError(f"{log.task}: the agent {log.agent} cannot read {path} (HTTP {r.status_code})")
    return int(_file_answer(r, log, {"offset": shapes.Required(int)})["offset"])


def _tail_offset(session: requests.Session, log: TaskLog, path: str, end: int, lines: int) -> int:
    """The byte offset where the last ``lines`` lines of the file (``end`` bytes long) begin."""
    if lines <= 0:
        return end
    start, data = end, b""
    while start > 0:
        start = max(0, start - _TAIL_BLOCK)
        data = _read(session, log, path, start, end - start).encode("utf-8")
        body = data[:-1] if data.endswith(b"\n") else data
        if body.count(b"\n") >= lines:
            cut = len(body)
            for _ in range(lines):
                cut = body.rfind(b"\n", 0, cut)
            return start + cut + 1
    return 0


def read_new(session: requests.Session, log: TaskLog, stream: str, *, tail: int | None = None) -> str:
    """What ``stream`` gained since the last call (its last ``tail`` lines on the first call)."""
    directory = _directory(session, log)
    if directory is None:
        return ""
    path = f"{directory}/{stream}"
    if stream not in log.offsets:
        end = _size(session, log, path)
        log.offsets[stream] = _tail_offset(session, log, path, end, tail) if tail is not None else 0
    chunks = []
    while True:
        data = _read(session, log, path, log.offsets[stream], _CHUNK)
        if not data:
            break
        chunks.append(data)
        log.offsets[stream] += len(data.encode("utf-8"))
        if len(data) < _CHUNK:
            break
    return "".join(chunks)


def follow(client: Client, job: str, task: str | None, streams: tuple[str, ...], *, tail: int | None,
           follow_: bool, agent_port: int, agent_url: str | None, previous: bool = False,
           since: float | None = None, session: requests.Session | None = None, interval: float = 1.0,
           sleep: Callable[[float], None] = time.sleep) -> Iterator[tuple[str, str, str]]:
    """Yields ``(task, stream, text)``; with ``follow_`` keeps going (relaunched tasks are picked up)
    until the job's record says it ended, then reads what is left and returns. While following, an
    agent that cannot be reached is looked at again next time, for up to ``AGENT_OUTAGE`` seconds."""
    session = session or AgentSession(client)
    known: dict[str, TaskLog] = {}
    unreachable_since: float | None = None
    ended: str | None = None
    while True:
        try:  # finding the sandboxes reads the agents' /state too: an agent gone since Marathon named it is
            # the same outage as one gone while reading (a killed Marathon leader, whose port served the
            # local runner's agent API, between the look at the group and the look at /state)
            found, ended = find_task_logs(client, job, task, agent_port=agent_port, agent_url=agent_url,
                                          previous=previous, since=since, session=session)
            if since is not None and not found and not known and (not follow_ or ended):
                raise LogError(f"{job}: no task{' ' + task if task else ''} wrote output in that time",
                               hint="a longer --since, or leave it out")
            if not found and not known and (not follow_ or ended):
                raise LogError(f"{job}: no task has output to read yet (none has run, or their agents removed "
                               f"the sandboxes)", hint=f"see the job with: marathon-tf status {job}")
            for log in found:
                known.setdefault(log.task_id, log).agent = log.agent  # (the local runner's agent moves with Marathon)
            for log in list(known.values()):
                for stream in streams:
                    text = read_new(session, log, stream, tail=tail)
                    if text:
                        yield log.task, stream, text
            unreachable_since = None
        except LogError as e:
            if not (follow_ and e.transient and not ended):
                raise
            unreachable_since = time.monotonic() if unreachable_since is None else unreachable_since
            if time.monotonic() - unreachable_since > AGENT_OUTAGE:
                raise
        if not follow_ or ended or previous:
            return
        sleep(interval)
