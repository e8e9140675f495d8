"""Task logs from the Mesos agent's sandbox files API.

Marathon tells which agent runs a task (``host``); the agent's ``/state`` tells
the task's sandbox directory, and ``/files/read`` returns its ``stdout`` and
``stderr`` in pieces (``offset``/``length``). The local runner serves the same two
endpoints on its Marathon port, so one code path reads both.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

import requests

from . import naming
from .errors import MarathonTFError, UsageError
from .marathon import Client
from .render import task_apps

__all__ = ["TaskLog", "find_task_logs", "read_new", "follow", "agent_base"]

_CHUNK = 1 << 20


@dataclass
class TaskLog:
    task: str            # worker-1
    task_id: str
    agent: str           # agent base URL
    directory: str | None = None
    offsets: dict[str, int] = field(default_factory=dict)


def agent_base(client: Client, host: str, agent_port: int, agent_url: str | None) -> str:
    if agent_url:
        return agent_url.rstrip("/")
    try:
        local = client.info().get("buildref") == "local"
    except MarathonTFError:
        local = False
    return client.url if local else f"http://{host}:{agent_port}"


def find_task_logs(client: Client, job: str, task: str | None, *, agent_port: int = 5051,
                   agent_url: str | None = None) -> list[TaskLog]:
    """The job's current tasks (or one, ``worker-1``), with where their logs are."""
    if task is not None and naming.parse_task_name(task) is None:
        raise UsageError(f"{task!r}: name a task like worker-1, ps-0 or chief-0")
    group = client.get_group(naming.group_id(job), embed=("group.groups", "group.apps", "group.apps.tasks"))
    out = []
    for name, app in task_apps(group).items():
        if task and name != task:
            continue
        for t in sorted(app.get("tasks") or [], key=lambda x: x.get("stagedAt") or ""):
            out.append(TaskLog(name, t["id"], agent_base(client, t.get("host", ""), agent_port, agent_url)))
    if task and not out:
        raise UsageError(f"{job}: task {task} has no running task to read logs from",
                         hint=f"see the job with: marathon-tf status {job}")
    return out


def _directory(session: requests.Session, log: TaskLog) -> str | None:
    if log.directory:
        return log.directory
    state = session.get(f"{log.agent}/state", timeout=10).json()
    for fw in state.get("frameworks", []) + state.get("completed_frameworks", []):
        for ex in fw.get("executors", []) + fw.get("completed_executors", []):
            ids = {ex.get("id")} | {t.get("id") for t in ex.get("tasks", []) + ex.get("completed_tasks", [])}
            if log.task_id in ids:
                log.directory = ex.get("directory")
                return log.directory
    return None


def read_new(session: requests.Session, log: TaskLog, stream: str, *, tail: int | None = None) -> str:
    """What ``stream`` gained since the last call (the last ``tail`` bytes on the first call)."""
    directory = _directory(session, log)
    if directory is None:
        return ""
    path = f"{directory}/{stream}"
    if stream not in log.offsets:
        size = session.get(f"{log.agent}/files/read", params={"path": path, "offset": -1}, timeout=10)
        if size.status_code != 200:
            return ""
        end = int(size.json().get("offset", 0))
        log.offsets[stream] = max(0, end - tail) if tail is not None else 0
    chunks = []
    while True:
        r = session.get(f"{log.agent}/files/read",
                        params={"path": path, "offset": log.offsets[stream], "length": _CHUNK}, timeout=10)
        if r.status_code != 200:
            break
        data = r.json().get("data", "")
        if not data:
            break
        chunks.append(data)
        log.offsets[stream] += len(data.encode("utf-8"))
        if len(data) < _CHUNK:
            break
    return "".join(chunks)


def follow(client: Client, job: str, task: str | None, streams: tuple[str, ...], *, tail: int,
           follow_: bool, agent_port: int, agent_url: str | None,
           session: requests.Session | None = None, interval: float = 1.0,
           sleep: Callable[[float], None] = time.sleep) -> Iterator[tuple[str, str, str]]:
    """Yields ``(task, stream, text)``; with ``follow_`` keeps going (new tasks are picked up)."""
    session = session or client.session
    known: dict[str, TaskLog] = {}
    while True:
        for log in find_task_logs(client, job, task, agent_port=agent_port, agent_url=agent_url):
            known.setdefault(log.task_id, log)
        for log in list(known.values()):
            for stream in streams:
                try:
                    text = read_new(session, log, stream, tail=tail)
                except (requests.RequestException, ValueError):
                    text = ""
                if text:
                    yield log.task, stream, text
        if not follow_:
            return
        sleep(interval)
