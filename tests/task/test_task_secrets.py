"""A task writes no credential it holds or was shown (issue 44 item 5): a real bootstrap, whose Marathon
answers every request with 401 and echoes the credentials (the one it got, and another user's), writes
none of them — nor the job's key — whatever it says about the refusal."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from task_helpers import task_env

TOKEN = "task-tok-MARKER-" + uuid.uuid4().hex
PASSWORD = "pw-MARKER-" + uuid.uuid4().hex
OTHERS = "alice-MARKER-" + uuid.uuid4().hex  # a credential the task never held: Marathon shows it anyway
KEY = "key-MARKER-" + uuid.uuid4().hex


class _EchoingMarathon(BaseHTTPRequestHandler):
    """401 to everything, with the Authorization it got and someone else's password in the message."""

    def _answer(self) -> None:
        got = self.headers.get("Authorization", "")
        decoded = base64.b64decode(got[6:]).decode(errors="replace") if got.startswith("Basic ") else got
        body = json.dumps({"message": f"invalid credentials: got {got!r} ({decoded}) from alice:{OTHERS}"}).encode()
        self.server.asked += 1  # type: ignore[attr-defined]
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_POST = _answer

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def echoing_marathon():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoingMarathon)
    server.asked = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("auth", ["token", "basic"])
def test_a_bootstrap_refused_by_marathon_writes_no_credential(tmp_path, procs, echoing_marathon, auth):
    sandbox = tmp_path / "box"
    sandbox.mkdir()
    (sandbox / "token").write_text(TOKEN)
    (sandbox / ".secrets").mkdir(mode=0o700)
    (sandbox / ".secrets" / "job-key").write_text(KEY)  # as the local runner hands it (contract/taskauth.py)
    url = f"http://127.0.0.1:{echoing_marathon.server_address[1]}"
    env = task_env("worker", 0, {"worker": 2}, sandbox=str(sandbox), discovery="marathon", marathon_url=url,
                   startup_timeout=8.0)
    env["MTF_JOB_KEY_FILE"] = ".secrets/job-key"
    if auth == "token":
        env["MARATHON_TOKEN_FILE"] = "token"
    else:
        env.update({"MARATHON_USER": "bob", "MARATHON_PASSWORD": PASSWORD})
    proc = procs.start(env, ["python3", "-c", "import time; time.sleep(60)"], name=f"w0-{auth}")
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and "401" not in procs.output(proc):
        time.sleep(0.2)
    time.sleep(1.0)
    out = procs.output(proc)
    assert echoing_marathon.asked > 0 and "401" in out, out  # it did ask, and says it was refused
    for secret in (TOKEN, PASSWORD, OTHERS, KEY, base64.b64encode(f"bob:{PASSWORD}".encode()).decode()):
        assert secret not in out, f"{secret[:12]}… in the task's output:\n{out[-3000:]}"
    assert "Traceback" not in out


def test_the_task_log_scrubs_every_credential_it_holds(tmp_path, capsys):
    from marathon_tf.contract import taskauth
    from marathon_tf.marathon import transport
    from marathon_tf.task import stderr

    (tmp_path / "token").write_text(TOKEN)
    env = {"MARATHON_TOKEN_FILE": str(tmp_path / "token"), "MARATHON_USER": "bob", "MARATHON_PASSWORD": PASSWORD,
           taskauth.KEY_FILE_VAR: taskauth.write_task_key(KEY, tmp_path)}
    stderr.hold(env)
    basic = base64.b64encode(f"bob:{PASSWORD}".encode()).decode()
    stderr.log(f"Marathon said: {TOKEN} / {PASSWORD} / {transport.secret_forms(PASSWORD)[0]} / {basic} / {KEY}")
    err = capsys.readouterr().err
    assert err.startswith("marathon-tf bootstrap: Marathon said: ***") and err.count("***") == 5
    for secret in (TOKEN, PASSWORD, KEY, basic):
        assert secret not in err
