"""Helpers for the reliability tests: running the real CLI, job files, the local server's log."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import requests
from click.testing import CliRunner, Result
from leaks import processes_under  # noqa: F401 (used by the tests through this module)
from polling import wait_for  # noqa: F401 (used through this module)

from marathon_tf.user.cli import cli

MARATHON_TF = str(Path(sys.executable).parent / "marathon-tf")

#: A valid job whose task does nothing interesting (deploys are --detach and deleted afterwards).
BASE_JOB: dict[str, Any] = {
    "name": "rel",
    "command": "sleep 30",
    "roles": {"worker": {"count": 1, "cpus": 0.1, "mem": 32}},
}


def job(**changes: Any) -> dict[str, Any]:
    """A copy of BASE_JOB with top-level keys replaced."""
    return {**json.loads(json.dumps(BASE_JOB)), **changes}


def write_job(path: Path, content: Any) -> Path:
    """Write a dict/list as JSON, bytes as they are, str as UTF-8 text."""
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_text(json.dumps(content), encoding="utf-8")
    return path


def run_cli(args: list[str], env: dict[str, str] | None = None) -> Result:
    """The real click CLI in-process; stdout and stderr apart. Unexpected exceptions fail the test."""
    base_env = {"MARATHON_URL": None, "MARATHON_USER": None, "MARATHON_PASSWORD": None, "MARATHON_TOKEN": None,
                "MARATHON_CA_BUNDLE": None, "MARATHON_TF_CONFIG": "/nonexistent/marathon-tf-config.json"}
    result = CliRunner().invoke(cli, args, env={**base_env, **(env or {})}, catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        tb = "".join(traceback.format_exception(*result.exc_info))
        raise AssertionError(f"marathon-tf {args} raised instead of exiting cleanly:\n{tb}\nstderr: {result.stderr}")
    return result


def run_subprocess(args: list[str], env: dict[str, str] | None = None, timeout: float = 60,
                   cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``marathon-tf ARGS`` as a real process (its own session; killed on timeout)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("MARATHON")}
    full_env["MARATHON_TF_CONFIG"] = "/nonexistent/marathon-tf-config.json"
    full_env.update(env or {})
    proc = subprocess.Popen([MARATHON_TF, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env,
                            cwd=cwd, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as e:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"marathon-tf {args} did not end in {timeout} s: {err.decode(errors='replace')}") from e
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def api_requests(log: Iterable[dict]) -> list[dict]:
    """Entries of the local server's request log (it already leaves out /_local/)."""
    return [e for e in log if not e["path"].startswith("/_local/")]


def puts(log: Iterable[dict], group_path: str) -> list[dict]:
    return [e for e in log if e["method"] == "PUT" and e["path"] == group_path]


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n: int) -> list[int]:
    """n distinct ports free for both TCP and UDP (best effort)."""
    ports: list[int] = []
    while len(ports) < n:
        p = free_port()
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                u.bind(("127.0.0.1", p))
        except OSError:
            continue
        if p not in ports:
            ports.append(p)
    return ports


def get_json(url: str, **kw: Any) -> tuple[int, Any]:
    r = requests.get(url, timeout=10, **kw)
    try:
        return r.status_code, r.json()
    except ValueError:
        return r.status_code, r.text


def listening_addresses(port: int) -> set[str]:
    """Local addresses (hex IPv4/IPv6 as in /proc/net/*) of TCP listeners and UDP sockets bound to ``port``."""
    found = set()
    for table, listen_state in (("tcp", "0A"), ("tcp6", "0A"), ("udp", None), ("udp6", None)):
        try:
            rows = Path(f"/proc/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            addr, hexport = cols[1].rsplit(":", 1)
            if int(hexport, 16) == port and (listen_state is None or cols[3] == listen_state):
                found.add(f"{table}:{addr}")
    return found


LOOPBACK_V4 = "0100007F"  # 127.0.0.1 as /proc/net/tcp writes it (little-endian hex)


def non_loopback_address() -> str | None:
    """An address of this machine that is not loopback (None if there is none)."""
    candidates = set()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # no packet is sent
            candidates.add(s.getsockname()[0])
    except OSError:
        pass
    try:
        candidates.update(socket.gethostbyname_ex(socket.gethostname())[2])
    except OSError:
        pass
    for a in sorted(candidates):
        if not a.startswith("127.") and a != "0.0.0.0":
            return a
    return None
