"""``marathon-tf local serve`` with --auth, --allow-origin and --ui, as a user runs it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests

UI_BUILD = Path(__file__).resolve().parents[2].parent / "shared" / "marathon-ui" / "build"
CLI = [sys.executable, "-m", "marathon_tf.user.cli"]


def _cli(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("args, message", [
    (["--host", "0.0.0.0"], "needs --auth"),
    (["--auth", "just-a-user"], "--auth takes USER:PASSWORD, token=TOKEN or env"),
    (["--auth", "env"], "--auth env: set MARATHON_TOKEN"),
    (["--allow-origin", "localhost:3000"], "give scheme://host[:port]"),
])
def test_unsafe_or_bad_options_are_refused_before_anything_listens(args, message, tmp_path):
    env = {k: "" for k in ("MARATHON_TOKEN", "MARATHON_USER", "MARATHON_PASSWORD")}
    r = _cli("local", "serve", "--port", "0", "--dns-port", "0", "--dns-http-port", "0",
             "--state-dir", str(tmp_path), *args, env=env)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert not (tmp_path / "sandboxes").exists()


def test_serve_with_token_auth_and_the_ui(tmp_path):
    if not (UI_BUILD / "index.html").is_file():
        pytest.skip(f"no Marathon UI build at {UI_BUILD} (see docs/local-mode.md, 'the web UI')")
    token = "tok-" + os.urandom(8).hex()
    proc = subprocess.Popen([*CLI, "local", "serve", "--port", "0", "--dns-port", "0", "--dns-http-port", "0",
                             "--state-dir", str(tmp_path), "--auth", "env", "--ui", str(UI_BUILD)],
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "MARATHON_TOKEN": token})
    try:
        url = None
        for line in proc.stderr:
            found = re.search(r"Marathon API\s+(http://\S+)", line)
            url = url or (found and found.group(1))
            if "web UI" in line:
                break
        assert url, "local serve printed no URL"
        assert token not in " ".join(proc.args)  # --auth env keeps the secret out of the process list
        auth = {"Authorization": f"token={token}"}
        assert requests.get(url + "/v2/info", timeout=10).status_code == 401
        home = requests.get(url + "/", headers=auth, allow_redirects=False, timeout=10)
        assert home.status_code == 302 and home.headers["Location"] == "/ui/"
        page = requests.get(url + "/ui/", headers=auth, timeout=10)
        assert page.status_code == 200 and "main.js" in page.text
        assert requests.get(url + "/ui/main.js", headers=auth, timeout=10).status_code == 200
        assert requests.get(url + "/ui/../../etc/passwd", headers=auth, timeout=10).status_code in (403, 404)
        # the CLI speaks it with MARATHON_TOKEN, as against a DC/OS Marathon
        listed = _cli("list", "--marathon", url, env={"MARATHON_TOKEN": token})
        assert listed.returncode == 0, listed.stderr
        refused = _cli("list", "--marathon", url, env={"MARATHON_TOKEN": "wrong"})
        assert refused.returncode != 0 and "MARATHON_TOKEN" in refused.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
