"""What a task writes on its stderr: ``marathon-tf bootstrap: <message>``, with every credential the
task holds scrubbed (its Marathon token or password, the job's key: :mod:`marathon_tf.contract.taskauth`),
by the scrubbing the CLI's Marathon client uses (:func:`marathon_tf.marathon.transport.scrub`).
A task's output is a log that anyone who reads its sandbox sees; a secret it never held but was shown
(a Marathon that echoes the credentials it refused) is kept out where the message is made: a task's
Marathon client does not repeat what Marathon says with a 401 or 403 (``quote_refusals``)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping

from marathon_tf.contract import taskauth
from marathon_tf.contract.taskenv import marathon_token
from marathon_tf.marathon import transport

__all__ = ["PREFIX", "hold", "held", "log"]

PREFIX = "marathon-tf bootstrap: "
_lock = threading.Lock()
_secrets: list[str] = []


def hold(environ: Mapping[str, str] = os.environ) -> None:
    """This process holds the credentials ``environ`` gives a task: none of them is written from now on."""
    user = environ.get("MARATHON_USER") or None
    forms = transport.secret_forms(marathon_token(environ), environ.get("MARATHON_PASSWORD"),
                                   taskauth.task_key(environ), user=user)
    with _lock:
        _secrets[:] = sorted(set(_secrets) | set(forms), key=len, reverse=True)


def held() -> list[str]:
    with _lock:
        return list(_secrets)


def log(message: str) -> None:
    """Write one message of the bootstrap's on stderr, scrubbed."""
    sys.stderr.write(PREFIX + transport.scrub(message, held()) + "\n")
    sys.stderr.flush()
