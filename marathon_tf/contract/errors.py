"""The error vocabulary of marathon-tf.

Every error carries the process exit code the CLI uses for it (``exit_code``, on the class, as
click's exceptions do) and, where we know one, a hint the user can act on. Commands only raise; the
CLI's one handler prints ``lines()`` and the hint and exits with ``exit_code`` (nothing printed for
an error whose ``shown`` is set: the CLI said it already, e.g. a job's outcome line).

    MarathonTFError                  exit 1   base class
    ├── UsageError                   exit 2   bad arguments (e.g. ``scale workers=-1``)
    │   └── SpecError                exit 2   job.json is invalid; one line per field
    ├── MarathonError                exit 1   Marathon answered with an error
    │   ├── MarathonUnavailable      exit 1   connection errors / 5xx past the retry budget
    │   ├── MarathonAuthError        exit 1   401 / 403
    │   ├── MarathonNotFound         exit 1   404
    │   ├── MarathonConflict         exit 1   409 (locked by a deployment, already exists)
    │   └── MarathonInvalid          exit 1   400 / 422, with Marathon's ``details``
    ├── DiscoveryError               exit 1   peers not found before the startup deadline
    ├── JobFailed                    exit 1   the training job failed
    ├── NotPlaced                    exit 4   no room for every task (now, or by the admission deadline)
    └── Timeout                      exit 3   gave up waiting while work is still in progress

    Interrupted (exit 130; 129 for SIGHUP, 143 for SIGTERM) is raised on Ctrl-C or a stop signal.
"""

from __future__ import annotations

__all__ = [
    "MarathonTFError",
    "UsageError",
    "SpecError",
    "MarathonError",
    "MarathonUnavailable",
    "MarathonAuthError",
    "MarathonNotFound",
    "MarathonConflict",
    "MarathonInvalid",
    "DiscoveryError",
    "JobFailed",
    "NotPlaced",
    "Timeout",
    "Interrupted",
]


class MarathonTFError(Exception):
    """Every error of marathon-tf: a ``message``, a ``hint`` the user can act on (or None), the
    process ``exit_code`` (1); ``lines()`` is what the CLI prints."""

    exit_code = 1
    #: Whether the CLI has said it already (it then only exits with :attr:`exit_code`).
    shown = False

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def lines(self) -> list[str]:
        """The lines the CLI prints for this error (without the hint)."""
        return [self.message]


class UsageError(MarathonTFError):
    """Bad arguments or a request that cannot be done as asked (exit 2); nothing was changed."""

    exit_code = 2


class SpecError(UsageError):
    """job.json is invalid. ``problems`` holds (field path, message) pairs."""

    def __init__(self, source: str, problems: list[tuple[str, str]]):
        self.source = source
        self.problems = sorted(problems)
        first = self.problems[0] if self.problems else ("", "invalid")
        super().__init__(self._line(*first))

    def _line(self, path: str, msg: str) -> str:
        return f"{self.source}: {path}: {msg}" if path else f"{self.source}: {msg}"

    def lines(self) -> list[str]:
        return [self._line(p, m) for p, m in self.problems]


class MarathonError(MarathonTFError):
    """Marathon answered with an error (exit 1): its HTTP ``status`` and ``body`` when it answered."""

    def __init__(self, message: str, *, status: int | None = None, body=None,
                 hint: str | None = None):
        super().__init__(message, hint=hint)
        self.status = status
        self.body = body


class MarathonUnavailable(MarathonError):
    """Marathon could not be reached, or answered 5xx, past the retry budget."""


class MarathonAuthError(MarathonError):
    """Marathon refused the credentials (401 / 403); the message names those sent, never their value."""


class MarathonNotFound(MarathonError):
    """404: no such group, app or deployment."""


class MarathonConflict(MarathonError):
    """409: the apps are locked by a deployment (``deployment_ids``), or the object exists already."""

    @property
    def deployment_ids(self) -> list[str]:
        deployments = self.body.get("deployments") if isinstance(self.body, dict) else None
        return [d["id"] for d in deployments if isinstance(d, dict) and isinstance(d.get("id"), str)] \
            if isinstance(deployments, list) else []


def _oneline(text: str) -> str:
    """A server's text on one line, without control characters (a terminal's escapes)."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())[:500]


class MarathonInvalid(MarathonError):
    """400 / 422: Marathon refused the definition; ``details()`` says where, one line each."""

    def details(self) -> list[str]:
        """Marathon's 422/400 ``details`` as ``path: error`` lines."""
        body = self.body if isinstance(self.body, dict) else {}
        details = body.get("details")
        if isinstance(details, str):
            return [_oneline(details)]
        out = []
        for d in details if isinstance(details, list) else []:
            errors = d.get("errors") if isinstance(d, dict) else None
            for err in errors if isinstance(errors, list) else []:
                out.append(_oneline(f"{d.get('path', '')}: {err}"))
        return out[:50]

    def lines(self) -> list[str]:
        return [self.message] + ["  " + line for line in self.details()]


class DiscoveryError(MarathonTFError):
    """A task did not find its peers before its startup deadline (the message names the missing ones)."""


class JobFailed(MarathonTFError):
    """The job failed (its record says ``Failed``), or its deployment did. ``status``: the job's last
    status when it is the job's outcome (the API's ``JobStatus``), else None."""

    def __init__(self, message: str, *, hint: str | None = None, status=None):
        super().__init__(message, hint=hint)
        self.status = status


class NotPlaced(MarathonTFError):
    """Not every task of the job could be placed: refused before anything was sent
    (``--no-wait-for-resources``), or released at its admission deadline with no attempt left
    (``status``: the job's last status, as for :class:`JobFailed`)."""

    exit_code = 4

    def __init__(self, message: str, *, hint: str | None = None, status=None):
        super().__init__(message, hint=hint)
        self.status = status


class Timeout(MarathonTFError):
    """Gave up waiting while the work is still in progress (exit 3): the job keeps running."""

    exit_code = 3


class Interrupted(MarathonTFError):
    """Stopped by a signal: exit 128 + its number (SIGINT 130, SIGHUP 129, SIGTERM 143)."""

    exit_code = 130

    def __init__(self, message: str, *, hint: str | None = None, signum: int | None = None):
        super().__init__(message, hint=hint)
        if signum is not None:
            self.exit_code = 128 + int(signum)
