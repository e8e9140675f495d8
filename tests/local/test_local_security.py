"""What ``local serve`` refuses (local/security.py): cross-origin and non-JSON writes, foreign Host
headers (DNS rebinding), unauthenticated callers when --auth is on; and that every client still works."""

from __future__ import annotations

import base64
import http.client
import json
from urllib.parse import urlsplit

import pytest
import requests
from marathon import MarathonClient
from polling import wait_for

from marathon_tf.contract import labels as L
from marathon_tf.local import LocalCluster
from marathon_tf.local.security import AuthError, Credentials, Security, parse_auth
from marathon_tf.marathon.client import Client

EVIL_CMD = "touch pwned; exec sleep 600"


def _raw(url: str, method: str, path: str, body: bytes = b"", headers: dict | None = None) -> tuple[int, bytes, dict]:
    """A request with exactly the headers given (requests would add its own Host)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for key, value in (headers or {}).items():
            conn.putheader(key, value)
        if body or method in ("POST", "PUT", "PATCH"):
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        r = conn.getresponse()
        return r.status, r.read(), dict(r.getheaders())
    finally:
        conn.close()


def _no_app_ran(cluster) -> None:
    assert requests.get(cluster.marathon_url + "/v2/apps", timeout=10).json()["apps"] == []
    assert not list(cluster.state_dir.glob("sandboxes/*/pwned"))


def test_the_cross_origin_simple_request_from_the_issue_is_refused(cluster):
    host = urlsplit(cluster.marathon_url).netloc
    status, body, _ = _raw(cluster.marathon_url, "POST", "/v2/apps",
                           json.dumps({"id": "/evil", "cmd": EVIL_CMD}).encode(),
                           {"Host": host, "Origin": "http://evil.example", "Content-Type": "text/plain"})
    assert status == 403 and b"evil.example" in body
    _no_app_ran(cluster)


def test_non_json_writes_get_415_as_marathon_answers(cluster):
    host = urlsplit(cluster.marathon_url).netloc
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        status, body, _ = _raw(cluster.marathon_url, "POST", "/v2/apps",
                               json.dumps({"id": "/evil", "cmd": EVIL_CMD}).encode(),
                               {"Host": host, "Content-Type": ctype})
        assert (status, json.loads(body)) == (415, {"message": "Unsupported Media Type"}), ctype
    status, _, _ = _raw(cluster.marathon_url, "PUT", "/v2/apps/evil", b'{"cmd": "true"}', {"Host": host})
    assert status == 415  # a body without any Content-Type is not JSON either
    _no_app_ran(cluster)
    # the same request as JSON (what every client sends) is accepted, with the charset parameter too
    r = requests.post(cluster.marathon_url + "/v2/apps", data=json.dumps({"id": "/ok", "cmd": "sleep 600"}),
                      headers={"Content-Type": "application/json; charset=utf-8"}, timeout=10)
    assert r.status_code == 201


def test_foreign_host_header_is_refused(cluster):
    port = urlsplit(cluster.marathon_url).port
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}", f"10.1.2.3:{port}"):
        status, body, _ = _raw(cluster.marathon_url, "GET", "/v2/apps", headers={"Host": host})
        assert status == 403 and b"DNS rebinding" in body, host
        status, _, _ = _raw(cluster.marathon_url, "PUT", "/v2/apps/evil", json.dumps({"cmd": EVIL_CMD}).encode(),
                            {"Host": host, "Content-Type": "application/json"})
        assert status == 403
    _no_app_ran(cluster)
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"LOCALHOST:{port}"):
        assert _raw(cluster.marathon_url, "GET", "/v2/apps", headers={"Host": host})[0] == 200, host


def test_mesos_dns_http_api_gets_the_same_host_check(cluster):
    """Issue 24: the Mesos-DNS HTTP port answered ``Host: evil.example`` (a web page rebinding its name to
    127.0.0.1 could read every task's address and port)."""
    port = urlsplit(cluster.mesos_dns_http).port
    for host in (f"evil.example:{port}", "evil.example"):
        status, body, _ = _raw(cluster.mesos_dns_http, "GET", "/v1/version", headers={"Host": host})
        assert status == 403 and b"DNS rebinding" in body, host
    assert _raw(cluster.mesos_dns_http, "GET", "/v1/version", headers={"Host": f"127.0.0.1:{port}"})[0] == 200


def test_same_origin_browser_writes_pass_and_cross_site_reads_do_not(cluster):
    own = cluster.marathon_url
    r = requests.put(own + "/v2/apps/ok", json={"cmd": "sleep 600"}, headers={"Origin": own}, timeout=10)
    assert r.status_code == 201
    # a <script src> JSONP read of a sandbox from another site (no Origin header on such loads)
    r = requests.get(own + "/state", params={"jsonp": "cb"}, timeout=10,
                     headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors",
                              "Referer": "http://evil.example/page"})
    assert r.status_code == 403
    # ... while the same load from the server's own page works, and so does following a link to it
    r = requests.get(own + "/state", params={"jsonp": "cb"}, timeout=10,
                     headers={"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "no-cors"})
    assert r.status_code == 200 and r.text.startswith("cb(")
    r = requests.get(own + "/v2/info", headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"},
                     timeout=10)
    assert r.status_code == 200
    assert requests.get(own + "/v2/apps", headers={"Origin": "null"}, timeout=10).status_code == 403


def test_no_cross_site_page_reads_a_task_output_through_jsonp(cluster):
    """Issue 46.2: ``GET /state?jsonp=leak`` and ``/files/read?path=<sandbox>/stdout&jsonp=leak`` answered
    ``200 text/javascript`` to what a ``<script src>`` on another site sends (a cross-site Referer, no
    Origin, no Fetch Metadata: an older browser), so any page could read every task's output.

    A real Mesos answers JSONP for its own web UI: apache/mesos 1.9.0
    ``3rdparty/libprocess/src/http.cpp`` lines 690-708 (``OK(value, jsonp)`` writes
    ``callback(<json>)`` as ``text/javascript``), used by ``src/slave/http.cpp`` line 1503 (``/state``)
    and ``src/files/files.cpp`` lines 564 and 595 (``/files/read``); the UI loads them with
    ``$http.jsonp(... '?jsonp=JSON_CALLBACK')`` (``src/webui/app/controllers.js`` line 528), from the
    same origin: that stays."""
    own = cluster.marathon_url
    host = urlsplit(own).netloc
    requests.put(own + "/v2/apps/talk", json={"cmd": "echo secret-output-46; exec sleep 600"},
                 timeout=10).raise_for_status()
    stdout = wait_for(lambda: next((p for p in cluster.state_dir.glob("sandboxes/*/stdout")
                                    if b"secret-output-46" in p.read_bytes()), None), 30, what="the task's stdout")
    read = f"/files/read?path={stdout}&offset=0&jsonp=leak"
    script_from_evil = {"Host": host, "Referer": "http://evil.example/page.html"}
    for path in ("/state?jsonp=leak", read, "/files/browse?path=" + str(stdout.parent) + "&jsonp=leak",
                 "/mesos/master/state?jsonp=leak"):
        for headers in (script_from_evil, {"Host": host},  # no Referer either: referrerpolicy="no-referrer"
                        {**script_from_evil, "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}):
            status, body, answer = _raw(own, "GET", path, headers=headers)
            assert status == 403 and b"secret-output-46" not in body and b"leak(" not in body, (path, headers)
            assert not answer.get("Content-Type", "").startswith("text/javascript")
    # the server's own pages (the Mesos UI) still get JSONP, as from a real Mesos; plain JSON is unchanged
    for headers in ({"Host": host, "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "no-cors",
                     "Referer": own + "/mesos"},
                    {"Host": host, "Referer": own + "/ui/"}):  # an older browser: no Fetch Metadata
        status, body, answer = _raw(own, "GET", read, headers=headers)
        assert status == 200 and answer["Content-Type"].startswith("text/javascript"), (status, body)
        assert body.startswith(b"leak(") and b"secret-output-46" in body
    r = requests.get(own + "/files/read", params={"path": str(stdout), "offset": 0}, timeout=10)
    assert r.status_code == 200 and "secret-output-46" in r.json()["data"]


def test_allowed_origin_gets_cors(tmp_path):
    dev = "http://localhost:3000"
    with LocalCluster(state_dir=tmp_path, allow_origins=(dev,), shutdown_grace=0.5) as c:
        pre = requests.options(c.marathon_url + "/v2/apps", timeout=10, headers={
            "Origin": dev, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type"})
        assert pre.status_code == 204 and pre.headers["Access-Control-Allow-Origin"] == dev
        assert "POST" in pre.headers["Access-Control-Allow-Methods"]
        r = requests.put(c.marathon_url + "/v2/apps/ok", json={"cmd": "sleep 600"}, headers={"Origin": dev},
                         timeout=10)
        assert r.status_code == 201 and r.headers["Access-Control-Allow-Origin"] == dev
        other = requests.options(c.marathon_url + "/v2/apps", timeout=10, headers={
            "Origin": "http://localhost:4000", "Access-Control-Request-Method": "POST"})
        assert other.status_code == 403 and "Access-Control-Allow-Origin" not in other.headers
        with requests.get(c.marathon_url + "/v2/events", stream=True, timeout=10,
                          headers={"Origin": dev, "Accept": "text/event-stream"}) as sse:
            assert sse.status_code == 200 and sse.headers["Access-Control-Allow-Origin"] == dev


def test_basic_auth_and_the_clients_that_speak_it(tmp_path):
    with LocalCluster(state_dir=tmp_path, auth=Credentials(user="ml", password="s3cret"),
                      shutdown_grace=0.5) as c:
        url = c.marathon_url
        r = requests.get(url + "/v2/apps", timeout=10)
        assert r.status_code == 401 and r.headers["WWW-Authenticate"].lower().startswith("basic")
        assert requests.get(url + "/v2/apps", auth=("ml", "wrong"), timeout=10).status_code == 401
        assert requests.get(url + "/state", timeout=10).status_code == 401  # the sandboxes too
        dns = c.mesos_dns_http + "/v1/version"  # and Mesos-DNS's HTTP API
        assert requests.get(dns, timeout=10).status_code == 401
        assert requests.get(dns, auth=("ml", "s3cret"), timeout=10).status_code == 200
        assert requests.put(url + "/v2/apps/x", json={"cmd": EVIL_CMD}, timeout=10).status_code == 401
        _no_app_ran_auth = requests.get(url + "/v2/apps", auth=("ml", "s3cret"), timeout=10).json()
        assert _no_app_ran_auth == {"apps": []}
        # marathon-tf's own client (MARATHON_USER / MARATHON_PASSWORD)
        client = Client(url, user="ml", password="s3cret")
        client.put_group({"id": "/job", "apps": [{"id": "/job/a", "cmd": "sleep 600", "cpus": 0.1, "mem": 32}]})
        assert [a["id"] for a in client.list_apps()] == ["/job/a"]
        # marathon-python
        mp = MarathonClient(url, username="ml", password="s3cret")
        assert [a.id for a in mp.list_apps()] == ["/job/a"]
        # the event stream
        with client.events(read_timeout=10) as sse:
            assert sse.status_code == 200
            assert next(sse.iter_lines(decode_unicode=True)).startswith("event: event_stream_attached")


def test_token_auth_and_tasks_calling_back(tmp_path):
    with LocalCluster(state_dir=tmp_path, auth=Credentials(token="tok-123"), shutdown_grace=0.5) as c:
        url = c.marathon_url
        assert requests.get(url + "/v2/apps", timeout=10).status_code == 401
        assert requests.get(url + "/v2/apps", headers={"Authorization": "token=nope"}, timeout=10).status_code == 401
        client = Client(url, token="tok-123")  # MARATHON_TOKEN
        # a task reads its own token from the file MARATHON_TOKEN_FILE names (the bootstrap's Marathon
        # discovery and the lifecycle record do exactly this: contract.taskenv.marathon_token) and calls
        # the runner back: its own job is readable, the rest is not (local/taskscope.py)
        probe = ("import os, sys, urllib.request\n"
                 "def call(method, url, headers, body=None):\n"
                 "    req = urllib.request.Request(url, method=method, headers={**headers, 'Content-Type':\n"
                 "                                 'application/json'}, data=body and body.encode())\n"
                 "    try:\n"
                 "        return urllib.request.urlopen(req, timeout=10).status\n"
                 "    except urllib.error.HTTPError as e:\n"
                 "        return e.code\n"
                 "t = open(os.environ['MARATHON_TOKEN_FILE']).read()\n"
                 "mine = {'Authorization': 'token=' + t}\n"
                 "m, dns = os.environ['URL'], os.environ['MTF_RUNNER_MESOS_DNS_HTTP']\n"
                 "codes = [call('GET', m + '/v2/groups/job', mine),\n"
                 "         call('GET', m + '/v2/apps/job/probe/tasks', mine),\n"
                 "         call('GET', m + '/v2/apps', mine), call('GET', m + '/v2/groups/other', mine),\n"
                 "         call('POST', m + '/v2/apps', mine, '{\"id\": \"/evil\", \"cmd\": \"sleep 1\"}'),\n"
                 "         call('POST', m + '/v2/apps', mine, '{\"id\": \"/job/evil\", \"cmd\": \"sleep 1\"}'),\n"
                 "         call('DELETE', m + '/v2/groups/job', mine), call('DELETE', m + '/v2/groups/other', mine),\n"
                 "         call('PUT', m + '/v2/apps', mine, '[{\"id\": \"/job/probe\", \"cmd\": \"sleep 2\"}]'),\n"
                 "         call('GET', dns + '/v1/version', mine), call('GET', dns + '/v1/version', {}),\n"
                 "         call('GET', m + '/v2/groups/job', {})]\n"
                 "secret_in_env = t in ''.join(os.environ.values()) or 'MARATHON_TOKEN' in os.environ\n"
                 "open('codes', 'w').write(' '.join(map(str, codes)) + f' {t != \"tok-123\"} {secret_in_env}')\n")
        (tmp_path / "probe.py").write_text(probe)
        client.put_group({"id": "/other", "apps": [{"id": "/other/a", "cmd": "sleep 600", "cpus": 0.1, "mem": 16}]})
        client.put_group({"id": "/job", "apps": [{
            "id": "/job/probe", "cmd": f"python3 {tmp_path / 'probe.py'}; exec sleep 600", "cpus": 0.1,
            "mem": 32, "env": {"URL": url}}]})
        codes = wait_for(lambda: next((p.read_text() for p in tmp_path.glob("sandboxes/*/codes")), None), 30,
                         what="the task's call back")
        # the task's own token reads its job (200); anything else is 403: another job, creating an app
        # (inside its job or not), deleting a group, changing its app beyond the record (issue 24: "its token
        # is refused on POST /v2/apps and DELETE /v2/groups/..."); the Mesos-DNS HTTP API takes it and refuses
        # no token (401); the user's token is not handed out, and the token is nowhere in the environment
        assert codes == "200 200 403 403 403 403 403 403 403 200 401 401 True False"
        apps = {a["id"]: a for a in client.list_apps()}
        assert sorted(apps) == ["/job/probe", "/other/a"] and apps["/job/probe"]["cmd"].startswith("python3")
        # the token is a file in the sandbox the agent's file API never serves or lists
        token_file = next(tmp_path.glob("sandboxes/job_probe.*/.secrets/marathon-token"))
        box = token_file.parent.parent
        admin = {"Authorization": "token=tok-123"}
        listing = requests.get(url + "/files/browse", params={"path": str(box)}, headers=admin, timeout=10)
        assert listing.status_code == 200 and ".secrets" not in listing.text and "codes" in listing.text
        for route in ("/files/download", "/files/read"):
            r = requests.get(url + route, params={"path": str(token_file), "offset": 0}, headers=admin, timeout=10)
            assert r.status_code == 404
        # it is revoked (and its file removed) when the task ends
        token = {"Authorization": "token=" + token_file.read_text()}
        assert requests.get(url + "/v2/groups/job", headers=token, timeout=10).status_code == 200
        client.delete_group("/job", force=True)
        wait_for(lambda: not token_file.exists(), 30, what="the token's file to go with its task")
        assert requests.get(url + "/v2/groups/job", headers=token, timeout=10).status_code == 401


def test_non_loopback_needs_auth_and_auth_values_parse():
    with pytest.raises(AuthError, match="needs --auth"):
        Security("0.0.0.0")
    with pytest.raises(AuthError, match="needs --auth"):
        LocalCluster(host="0.0.0.0")
    wide = Security("0.0.0.0", credentials=Credentials(token="t"))
    assert wide.host_allowed("192.168.7.7:8080") and wide.host_allowed("localhost:8080")
    assert not wide.host_allowed("evil.example:8080")
    assert Security("::1").host_allowed("[::1]:8080") and not Security("::1").host_allowed("[::2]:8080")
    assert parse_auth("ml:pa:ss") == Credentials(user="ml", password="pa:ss")
    assert parse_auth("token=abc") == Credentials(token="abc")
    assert parse_auth("env", {"MARATHON_TOKEN": "t"}) == Credentials(token="t")
    assert parse_auth("env", {"MARATHON_USER": "u", "MARATHON_PASSWORD": "p"}) == Credentials("u", "p")
    for bad in ("nopassword", "token=", ":x", "env"):
        with pytest.raises(AuthError):
            parse_auth(bad, {})
    with pytest.raises(AuthError, match="allow-origin"):
        Security(allow_origins=("localhost",))
    with pytest.raises(AuthError, match="any web page"):
        Security(allow_origins=("*",), credentials=Credentials(token="t"))
    header = "Basic " + base64.b64encode(b"u:p").decode()
    assert Security(credentials=Credentials("u", "p")).authenticated(header)
    assert not Security(credentials=Credentials("u", "p")).authenticated("token=whatever")


@pytest.mark.parametrize("auth", [Credentials(token="tok-9"), Credentials(user="ml", password="pw")])
def test_bootstrap_discovery_and_lifecycle_record_from_a_task_with_auth_on(tmp_path, auth):
    """The bootstrap's Marathon discovery backend and the lifecycle record (bulk PUT) run inside a task,
    as in a job, and reach the runner with the credentials the runner gave the task."""
    script = tmp_path / "in_task.py"
    script.write_text(
        "import json, os\n"
        "from marathon_tf.task.discovery import make_backend\n"
        "from marathon_tf.contract import labels as L\n"
        "from marathon_tf.task.jobcontrol import client_from_env\n"
        "from marathon_tf.marathon.record import finish_job\n"
        "from marathon_tf.contract.taskenv import TaskContext\n"
        "ctx = TaskContext(job='aj', role='worker', index=0, cluster={'worker': 1}, discovery='marathon',\n"
        "                  marathon_url=os.environ['URL'])\n"
        "found = make_backend(ctx, os.environ).lookup([('worker', 0)])[('worker', 0)]\n"
        "import dataclasses, time\n"
        "dctx = dataclasses.replace(ctx, discovery='mesos-dns-http',\n"
        "                           mesos_dns_http=os.environ['MTF_RUNNER_MESOS_DNS_HTTP'])\n"
        "deadline = time.monotonic() + 30\n"
        "while True:  # the runner's Mesos-DNS, behind its auth, with the task's credentials\n"
        "    seen = make_backend(dctx, os.environ).lookup([('worker', 0)])[('worker', 0)]\n"
        "    if seen.address or time.monotonic() > deadline:\n"
        "        break\n"
        "    time.sleep(0.2)\n"
        "open('result', 'w').write(json.dumps([found.address, seen.address, seen.detail]))\n"
        "finish_job(client_from_env(ctx, os.environ), 'aj', L.SUCCEEDED, reason='done', final_step=3)\n"
        "import time; time.sleep(600)\n")
    with LocalCluster(state_dir=tmp_path / "state", auth=auth, shutdown_grace=0.5) as c:
        client = Client(c.marathon_url, token=auth.token, user=auth.user, password=auth.password)
        client.put_group({"id": "/aj", "apps": [{
            "id": "/aj/worker-0", "cmd": f"exec python3 {script}", "cpus": 0.1, "mem": 64,
            "env": {"URL": c.marathon_url}, "portDefinitions": [{"port": 0, "name": "tf"}]}]})
        result = wait_for(lambda: next((p.read_text() for p in (tmp_path / "state").glob("sandboxes/*/result")),
                                       None), 60, what="the task's discovery and record")
        marathon_seen, dns_seen, dns_detail = json.loads(result)
        assert marathon_seen.startswith("127.0.0.1:")  # the task found itself through Marathon
        assert dns_seen == marathon_seen, dns_detail  # and through Mesos-DNS's HTTP API (auth on there too)
        app = wait_for(lambda: (lambda a: a if a["labels"].get(L.STATE) else None)(client.get_app("/aj/worker-0")),
                       60, what="the lifecycle record")
        assert app["labels"][L.STATE] == L.SUCCEEDED and app["instances"] == 0
