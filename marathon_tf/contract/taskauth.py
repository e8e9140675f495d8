"""Who may steer a job: the job key that every control route of a task's status port requires.

A task's status port (:mod:`marathon_tf.task.status_server`) serves read-only routes to anyone
(``/health``, ``/status``, ``/progress``, ``/metrics``, ``/events``, ``GET /ledger``) and *control*
routes that change the job: ``POST /save``, ``POST /hold``, ``POST /ledger``, the rendezvous
leader's ``GET /rendezvous`` and a follower's ``GET /leader`` hint (:data:`CONTROL_GETS`; every
POST is one). A control request must carry the job's key, ``Authorization: Bearer <key>``
(:data:`HEADER`); :class:`Guard` is the one check (401 without it, 403 with a wrong one, compared with
:func:`hmac.compare_digest`).

The key is one per job, held by the job's tasks and its owner, nobody else:

* the owner's **owner key** is 32 random bytes in ``<state home>/.keys/owner-key`` (mode 0600 in a
  0700 folder, made on first use; :func:`owner_key`), the state home being the local runner's
  (``$MARATHON_TF_STATE_DIR``, else ``$XDG_STATE_HOME/marathon-tf``, else
  ``~/.local/state/marathon-tf``: :func:`state_home`);
* a job's key is derived from it, ``HMAC-SHA256(owner key, "marathon-tf job key\\0" + group id)``
  (:func:`job_key`): the owner's CLI and Python API compute it for the job they address, never store
  or show it;
* the local runner (``deploy --local``, ``local serve``), which runs as its owner, writes it into
  each task's sandbox, ``.secrets/job-key`` (0600 in a 0700 folder, the folder the agent's file API
  never serves), named by ``MTF_JOB_KEY_FILE`` (:data:`KEY_FILE_VAR`): never in the environment,
  where ``env`` would print it. The bootstrap reads it (:func:`task_key`) and sends it with its own
  control requests to the job's other tasks (:func:`install`: only to the control paths, never to
  Marathon or Mesos-DNS); the training program does not get the variable.

On a cluster, the owner's ``deploy`` and ``scale`` put the key into each app's ``env`` as they send the
group (:data:`KEY_VAR`, :func:`with_key`; never in what ``render`` prints): Marathon hands it to the task,
the bootstrap takes it out of its program's environment. Whoever may read the job's apps in Marathon may
read it there too (Marathon's own ACL, DC/OS's ``read`` on the group); another process on the agent may
not, unless it runs as the task's user (which could end the task anyway). A task with neither (an app
sent by other means) falls back to the job-host check: a control request must come from the host of one
of the job's tasks as the task knows them (anything, while it knows none), and a save that holds nobody
(``marathon-tf checkpoint``) is taken from anywhere. That keeps other machines out, not other processes
on the job's hosts (docs/architecture.md).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import socket
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from marathon_tf.contract import taskapi
from marathon_tf.contract.taskenv import secret

__all__ = ["KEY_VAR", "KEY_FILE_VAR",
           "KEY_FILE", "HEADER", "CONTROL_GETS", "CONTROL_PATHS", "state_home", "owner_key", "job_key",
           "write_task_key", "task_key", "with_key", "Guard", "JobKeyAuth", "install", "installed", "headers"]

#: Names the file in a task's sandbox that holds its job's key (only the runner sets it: ``MTF_*``).
KEY_FILE_VAR = "MTF_JOB_KEY_FILE"
#: The job's key itself, in the environment Marathon gives the task (how the key reaches a cluster's
#: tasks: the owner's ``deploy``/``scale`` put it in each app's ``env`` as they send the group).
KEY_VAR = "MTF_JOB_KEY"
#: Where, in a task's sandbox, the local runner writes the job key.
KEY_FILE = ".secrets/job-key"
#: The request header that carries the key.
HEADER = "Authorization"
_SCHEME = "Bearer "
#: The GET routes that take part in steering a job (the rendezvous and the leader's hint); every POST is a
#: control route too.
CONTROL_GETS = taskapi.control_gets()
#: Every path a task's control requests go to (where :class:`JobKeyAuth` sends the key): the task API's
#: control routes (:data:`marathon_tf.contract.taskapi.ROUTES`).
CONTROL_PATHS = taskapi.control_paths()
_OWNER_FILE = ".keys/owner-key"
_LABEL = b"marathon-tf job key\0"


def state_home(environ: Mapping[str, str] = os.environ) -> Path:
    """Where local runs keep their state (sandboxes, checkpoints, the owner key):
    ``$MARATHON_TF_STATE_DIR``, else ``$XDG_STATE_HOME/marathon-tf``, else
    ``~/.local/state/marathon-tf``; always absolute."""
    if environ.get("MARATHON_TF_STATE_DIR"):
        return Path(environ["MARATHON_TF_STATE_DIR"]).expanduser().absolute()
    base = environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base).expanduser().absolute() / "marathon-tf"


_owner_lock = threading.Lock()


def owner_key(environ: Mapping[str, str] = os.environ, *, create: bool = True) -> bytes | None:
    """This user's owner key (made, 0600 in a 0700 folder, when missing and ``create``); None when there
    is none and it may not or cannot be made."""
    path = state_home(environ) / _OWNER_FILE
    with _owner_lock:
        key = _read_owner_key(path)
        if key is not None or not create:
            return key
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(path.parent, 0o700)
            # Written whole under a name of its own, then linked into place: another process never reads a
            # key half written, and of two made at once, the first linked is everyone's.
            tmp = path.with_name(f".owner-key.{os.getpid()}.{secrets.token_hex(4)}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_bytes(32).hex())
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path)
            except FileExistsError:  # another process made it meanwhile: its key is the one
                pass
            finally:
                os.unlink(tmp)
        except OSError:
            return None
        return _read_owner_key(path)


def _read_owner_key(path: Path) -> bytes | None:
    """The owner key in ``path``: 32 bytes written as hex; None when absent or not that."""
    try:
        key = bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return key if len(key) == 32 else None


def job_key(owner: bytes, group: str) -> str:
    """The key of the job whose Marathon group is ``group`` (``/ml/mnist``)."""
    group = "/" + group.strip("/")
    return hmac.new(owner, _LABEL + group.encode(), hashlib.sha256).hexdigest()


def owners_job_key(group: str, *, create: bool = True) -> str | None:
    """The key of the job whose Marathon group is ``group``, derived from this user's owner key (made when missing
    and ``create``); None when there is none (a home that cannot be written: the tasks then fall back to the
    job-host check)."""
    owner = owner_key(create=create)
    return job_key(owner, group) if owner is not None else None


def write_task_key(key: str, sandbox: Path) -> str:
    """Write ``key`` to ``<sandbox>/``:data:`KEY_FILE` (0600 in a 0700 folder); its path."""
    path = Path(sandbox) / KEY_FILE
    path.parent.mkdir(mode=0o700, exist_ok=True)
    os.chmod(path.parent, 0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key)
    return str(path)


def task_key(environ: Mapping[str, str]) -> str | None:
    """A task's job key: ``MTF_JOB_KEY`` (what its owner's deploy put in the app: the deployer owns the
    job), else the content of the file ``MTF_JOB_KEY_FILE`` names (relative: to ``MESOS_SANDBOX``; the
    local runner's, for an app sent without a key); None without either."""
    return secret(environ, KEY_VAR, KEY_FILE_VAR)


def with_key(group: Mapping[str, Any], key: str | None) -> dict[str, Any]:
    """``group`` with the job's ``key`` in every app's ``env`` (:data:`KEY_VAR`): what the owner's side
    sends Marathon, so that the job's tasks on a cluster hold it. Only the PUT carries it: ``render``,
    ``-o json`` and the event log never show a group with it."""
    if not key:
        return dict(group)
    out = dict(group)
    if isinstance(group.get("apps"), list):
        out["apps"] = [{**app, "env": {**(app.get("env") or {}), KEY_VAR: key}} if isinstance(app, dict) else app
                       for app in group["apps"]]
    if isinstance(group.get("groups"), list):
        out["groups"] = [with_key(g, key) if isinstance(g, dict) else g for g in group["groups"]]
    return out


def headers(key: str | None) -> dict[str, str]:
    """The header a control request carries (none without a key)."""
    return {HEADER: _SCHEME + key} if key else {}


def _is_control(method: str, path: str) -> bool:
    return method not in ("GET", "HEAD") or path in CONTROL_GETS


class Guard:
    """The one check of the task API's control routes. ``key``: the job's (None: the job-host fallback,
    see the module); ``hosts() -> {task: "host:port"}``: where the job's tasks run, as this task knows."""

    def __init__(self, key: str | None, hosts: Callable[[], Mapping[str, str]] = lambda: {}):
        self._key = key.encode() if key else None
        self._hosts = hosts
        self._addresses: dict[str, set[str]] = {}

    @property
    def keyed(self) -> bool:
        return self._key is not None

    def refusal(self, method: str, path: str, authorization: str | None, client: str | None,
                body: Any = None) -> tuple[int, dict[str, Any]] | None:
        """Why this request is refused: (401 or 403, a body with ``message``); None when it may go on."""
        if not _is_control(method, path):
            return None
        if self._key is None:
            return self._host_refusal(path, client, body)
        given = (authorization or "").strip()
        if not given:
            return 401, {"message": f"{method} {path} changes the job: it needs the job's key "
                                    f"({HEADER}: Bearer …), which only its tasks and its owner hold"}
        token = given[len(_SCHEME):].strip() if given[:len(_SCHEME)].lower() == _SCHEME.lower() else ""
        if not hmac.compare_digest(token.encode(), self._key):
            return 403, {"message": f"{method} {path}: not this job's key"}
        return None

    def _host_refusal(self, path: str, client: str | None, body: Any) -> tuple[int, dict[str, Any]] | None:
        if path == "/save" and not (isinstance(body, dict) and body.get("hold")):
            return None  # a checkpoint that holds nobody (the owner's `checkpoint`, wherever it runs)
        hosts = {a.rpartition(":")[0] for a in self._hosts().values() if a}
        if not client or not hosts:
            return None  # nothing known to compare
        for host in hosts:
            if host not in self._addresses:
                try:
                    self._addresses[host] = {str(a[4][0]) for a in socket.getaddrinfo(host, None)} | {host}
                except OSError:
                    self._addresses[host] = {host}
            if client in self._addresses[host]:
                return None
        if client in ("127.0.0.1", "::1") and any(h in ("127.0.0.1", "localhost", socket.gethostname())
                                                  for h in hosts):
            return None
        return 403, {"message": f"{path} is taken from the hosts of the job's tasks only"}


class JobKeyAuth:
    """``requests`` auth that adds the job key to control requests only (never to Marathon's or
    Mesos-DNS's paths, which a shared session also reaches)."""

    def __init__(self, key: str):
        self._key = key

    def __call__(self, request: Any) -> Any:
        if urlsplit(request.url).path in CONTROL_PATHS:
            request.headers[HEADER] = _SCHEME + self._key
        return request

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JobKeyAuth) and hmac.compare_digest(other._key, self._key)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "JobKeyAuth(***)"


_installed: JobKeyAuth | None = None


def install(key: str | None) -> None:
    """This process is a task of a job with ``key``: every session :func:`marathon_tf.marathon.transport.session`
    makes from now on sends it with control requests (the bootstrap's calls to the job's other tasks)."""
    global _installed
    _installed = JobKeyAuth(key) if key else None


def installed() -> JobKeyAuth | None:
    """The auth :func:`install` set for this process (None: none)."""
    return _installed
