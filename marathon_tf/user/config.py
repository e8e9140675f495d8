"""Where Marathon is and how to log in: flags, then environment, then a config file.

The config file is JSON, at ``$MARATHON_TF_CONFIG`` or
``~/.config/marathon-tf/config.json``::

    {"marathon_url": "https://m1:8443,https://m2:8443", "ca_bundle": "/etc/ssl/ours.pem",
     "user": "alice"}

Secrets (password, token) are read from the environment or the file, never
printed, and never written into rendered apps.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from marathon_tf.contract import taskauth
from marathon_tf.contract.errors import UsageError

__all__ = ["Endpoint", "resolve", "config_path", "state_home"]


@dataclass(frozen=True)
class Endpoint:
    urls: tuple[str, ...]
    user: str | None = None
    password: str | None = None
    token: str | None = None
    verify: bool | str = True

    def __repr__(self) -> str:  # never show secrets, even in a traceback
        return f"Endpoint(urls={self.urls!r}, user={self.user!r}, verify={self.verify!r})"


def config_path(environ: Mapping[str, str] = os.environ) -> Path:
    if environ.get("MARATHON_TF_CONFIG"):
        return Path(environ["MARATHON_TF_CONFIG"])
    return Path(environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "marathon-tf" / "config.json"


def state_home(environ: Mapping[str, str] = os.environ) -> Path:
    """Where local runs keep their state (sandboxes, checkpoints, the owner key that derives each job's
    key): ``$MARATHON_TF_STATE_DIR``, else ``$XDG_STATE_HOME/marathon-tf``, else
    ``~/.local/state/marathon-tf``; always absolute (:func:`marathon_tf.contract.taskauth.state_home`)."""
    return taskauth.state_home(environ)


def _file(environ: Mapping[str, str]) -> dict:
    path = config_path(environ)
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: cannot read the config file: {e}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: the config file must hold a JSON object")
    return data


def resolve(*, url: str | None = None, user: str | None = None, password: str | None = None,
            token: str | None = None, ca_bundle: str | None = None, insecure: bool = False,
            environ: Mapping[str, str] = os.environ) -> Endpoint:
    """Flags win over the config file (click has already merged the environment into flags)."""
    cfg = _file(environ)
    url = url or cfg.get("marathon_url")
    if not url:
        raise UsageError("no Marathon URL",
                         hint="pass --marathon URL or set MARATHON_URL; on this machine start "
                              "`marathon-tf local serve` "
                              "(or run a job by itself with `marathon-tf deploy job.json --local`)")
    urls = tuple(u.strip() for u in str(url).split(",") if u.strip())
    for u in urls:
        if not u.startswith(("http://", "https://")):
            raise UsageError(f"Marathon URL {u!r} must start with http:// or https://")
    ca_bundle = ca_bundle or cfg.get("ca_bundle")
    if ca_bundle and not Path(ca_bundle).is_file():
        raise UsageError(f"--ca-bundle {ca_bundle}: no such file")
    verify: bool | str = False if insecure else (ca_bundle or True)
    return Endpoint(
        urls=urls,
        user=user or cfg.get("user"),
        password=password or cfg.get("password"),
        token=token or cfg.get("token"),
        verify=verify,
    )
