"""The Marathon client against a local HTTP server that answers as Marathon does (FACTS.md)."""

import base64
import json

import pytest
import requests
from werkzeug import Response

from marathon_tf.contract import labels
from marathon_tf.contract.errors import (
    MarathonAuthError,
    MarathonConflict,
    MarathonInvalid,
    MarathonNotFound,
    MarathonUnavailable,
)
from marathon_tf.marathon import marker
from marathon_tf.marathon.client import Client, RetryPolicy, redact_url

DEPLOYMENT = "5ed4c0c5-9ff8-4a6f-a0cd-f57f59a34b43"
VERSION = "2015-09-29T15:59:51.164Z"
GROUP = {"id": "/mnist", "apps": [{"id": "/mnist/worker-0", "cmd": "x", "instances": 1}]}
NO_LEADER = ("<html><head><title>Error 503 Could not determine the current leader</title></head>"
             "<body><h2>HTTP ERROR 503</h2></body></html>")
LOCKED = {"message": "App is locked by one or more deployments. Override with the option '?force=true'. "
                     f"View details at '/v2/deployments/{DEPLOYMENT}'.", "deployments": [{"id": DEPLOYMENT}]}


def fast(attempts=5):
    return RetryPolicy(attempts=attempts, budget=30, initial=0.001, max_wait=0.01, jitter=0.001)


def client(server, **kw):
    kw.setdefault("retry", fast())
    return Client(server.url_for("").rstrip("/"), **kw)


def deployed():
    return Response(json.dumps({"version": VERSION, "deploymentId": DEPLOYMENT}), status=200,
                    headers={"Marathon-Deployment-Id": DEPLOYMENT}, content_type="application/json")


def count(server, method, path):
    return sum(1 for req, _ in server.log if req.method == method and req.path == path)


def test_put_group_returns_the_deployment(httpserver):
    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_response(deployed())
    body = client(httpserver).put_group(GROUP)
    assert body["deploymentId"] == DEPLOYMENT and body["version"] == VERSION
    sent = json.loads(httpserver.log[0][0].data)
    assert sent == marker.stamp(GROUP)  # every app carries its digest label, nothing else changes
    assert sent["apps"][0]["labels"] == {labels.DIGEST: marker.digest(GROUP["apps"][0])}


def test_deployment_id_from_the_header_when_the_body_has_none(httpserver):
    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_response(
        Response("{}", status=200, headers={"Marathon-Deployment-Id": DEPLOYMENT}, content_type="application/json"))
    assert client(httpserver).put_group(GROUP)["deploymentId"] == DEPLOYMENT


def test_503_no_leader_twice_then_success_puts_exactly_one_group(httpserver):
    answers = iter([Response(NO_LEADER, status=503, content_type="text/html")] * 2 + [deployed()])
    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_handler(lambda r: next(answers))
    assert client(httpserver).put_group(GROUP)["deploymentId"] == DEPLOYMENT
    assert count(httpserver, "PUT", "/v2/groups/mnist") == 3


def test_409_locked_is_retried_and_force_is_passed(httpserver):
    answers = iter([Response(json.dumps(LOCKED), status=409, content_type="application/json"), deployed()])
    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_handler(lambda r: next(answers))
    assert client(httpserver).put_group(GROUP)["deploymentId"] == DEPLOYMENT
    httpserver.clear_log()
    httpserver.clear()
    httpserver.expect_request("/v2/groups/mnist", method="PUT",
                              query_string="force=true").respond_with_response(deployed())
    client(httpserver).put_group(GROUP, force=True)
    assert httpserver.log[0][0].args["force"] == "true"


def test_lock_past_the_budget_names_the_deployment_and_suggests_force(httpserver):
    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_json(LOCKED, status=409)
    with pytest.raises(MarathonConflict) as e:
        client(httpserver, retry=fast(3)).put_group(GROUP)
    assert e.value.deployment_ids == [DEPLOYMENT]
    assert "--force" in e.value.hint and "gave up after 3 tries" in e.value.message
    assert e.value.exit_code == 1


def test_409_already_exists_is_not_retried(httpserver):
    httpserver.expect_request("/v2/groups", method="POST").respond_with_json(
        {"message": "Group /mnist is already created. Use PUT to change this group."}, status=409)
    with pytest.raises(MarathonConflict):
        client(httpserver).request("POST", "/v2/groups", json_body=GROUP)
    assert len(httpserver.log) == 1


@pytest.mark.parametrize("status,exc", [(400, MarathonInvalid), (401, MarathonAuthError), (403, MarathonAuthError),
                                        (404, MarathonNotFound), (422, MarathonInvalid)])
def test_client_errors_are_never_retried(httpserver, status, exc):
    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_json({"message": "no"}, status=status)
    with pytest.raises(exc):
        client(httpserver).put_group(GROUP)
    assert len(httpserver.log) == 1


def test_422_details_become_path_error_lines(httpserver):
    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_json(
        {"message": "Object is not valid", "details": [
            {"path": "/apps(0)/gpus", "errors": ["GPU resources only work with the Mesos containerizer"]},
            {"path": "/apps(0)/id", "errors": ["must fully match regular expression", "second"]}]}, status=422)
    with pytest.raises(MarathonInvalid) as e:
        client(httpserver).put_group(GROUP)
    assert e.value.details() == ["/apps(0)/gpus: GPU resources only work with the Mesos containerizer",
                                 "/apps(0)/id: must fully match regular expression", "/apps(0)/id: second"]
    assert "422 Object is not valid" in e.value.lines()[0]


def test_400_invalid_json_with_string_details(httpserver):
    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_json(
        {"message": "Invalid JSON", "details": "Unexpected end-of-input"}, status=400)
    with pytest.raises(MarathonInvalid) as e:
        client(httpserver).put_group(GROUP)
    assert e.value.details() == ["Unexpected end-of-input"]


def test_404_message_is_marathons(httpserver):
    httpserver.expect_request("/v2/groups/nope").respond_with_json({"message": "Group '/nope' does not exist"},
                                                                   status=404)
    with pytest.raises(MarathonNotFound) as e:
        client(httpserver).get_group("nope")
    assert e.value.message == "Group '/nope' does not exist"


def test_dry_run_returns_marathons_plan(httpserver):
    plan = {"steps": [{"actions": [{"action": "StartApplication", "app": "/mnist/worker-0"}]},
                      {"actions": [{"action": "ScaleApplication", "app": "/mnist/worker-0"}]}]}
    httpserver.expect_request("/v2/groups/mnist", method="PUT", query_string="dryRun=true").respond_with_json(plan)
    assert client(httpserver).put_group(GROUP, dry_run=True) == plan


def test_get_group_sends_every_embed(httpserver):
    httpserver.expect_request("/v2/groups/ml/mnist").respond_with_json({"id": "/ml/mnist", "apps": []})
    client(httpserver).get_group("ml/mnist", embed=("group.groups", "group.apps", "group.apps.tasks"))
    assert httpserver.log[0][0].args.getlist("embed") == ["group.groups", "group.apps", "group.apps.tasks"]


def test_basic_auth_header(httpserver):
    httpserver.expect_request("/v2/info").respond_with_json({"version": "1.8.222"})
    client(httpserver, user="alice", password="s3cret!").info()
    auth = httpserver.log[0][0].headers["Authorization"]
    assert auth == "Basic " + base64.b64encode(b"alice:s3cret!").decode()


def test_dcos_token_header(httpserver):
    httpserver.expect_request("/v2/info").respond_with_json({"version": "1.8.222"})
    client(httpserver, token="eyJhbGciOi.tok").info()
    assert httpserver.log[0][0].headers["Authorization"] == "token=eyJhbGciOi.tok"


def test_secrets_never_appear_in_error_messages(httpserver):
    httpserver.expect_request("/v2/info").respond_with_json({"message": "bad token eyJhbGciOi.tok"}, status=401)
    with pytest.raises(MarathonAuthError) as e:
        client(httpserver, token="eyJhbGciOi.tok").info()
    assert "eyJhbGciOi.tok" not in str(e.value) and "MARATHON_TOKEN" in e.value.hint
    assert redact_url("https://bob:pw@marathon:8443/x") == "https://marathon:8443/x"


def test_failover_to_the_next_url_on_connection_errors(httpserver):
    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_response(deployed())
    c = Client(["http://127.0.0.1:9", httpserver.url_for("").rstrip("/")], retry=fast())
    assert c.put_group(GROUP)["deploymentId"] == DEPLOYMENT
    assert c.url == httpserver.url_for("").rstrip("/")


def test_failover_on_503_no_leader(httpserver):
    from pytest_httpserver import HTTPServer

    other = HTTPServer(host="127.0.0.1")
    other.start()
    try:
        other.expect_request("/v2/info").respond_with_data(NO_LEADER, status=503, content_type="text/html")
        httpserver.expect_request("/v2/info").respond_with_json({"version": "1.8.222"})
        c = Client([other.url_for("").rstrip("/"), httpserver.url_for("").rstrip("/")], retry=fast())
        assert c.info()["version"] == "1.8.222"
        assert len(other.log) == 1
    finally:
        other.clear()
        other.stop()


def test_unreachable_marathon_past_the_budget(httpserver):
    with pytest.raises(MarathonUnavailable) as e:
        Client("http://127.0.0.1:9", retry=fast(3)).info()
    assert "connection failed" in e.value.message and "gave up after 3 tries" in e.value.message
    assert e.value.hint


def test_every_request_has_a_timeout_and_tls_is_verified_by_default():
    seen = {}

    class Recorder(requests.Session):
        def request(self, method, url, **kw):
            seen.update(kw)
            raise requests.exceptions.ConnectionError("nope")

    c = Client("https://marathon.example:8443", session=Recorder(), retry=fast(1))
    assert c.session.verify is True
    with pytest.raises(MarathonUnavailable):
        c.info()
    assert seen["timeout"] == (5.0, 30.0)


def test_lost_answer_adopts_our_own_deployment_without_sending_again(httpserver):
    """The first PUT was applied but its answer was lost (a reset): Marathon's group carries our digests
    (Marathon stores labels as sent), so its deployment is adopted and the PUT is not sent again.

    A group PUT replaces the group's apps at once (mesosphere/marathon v1.4.3
    ``src/main/scala/mesosphere/marathon/api/v2/GroupsResource.scala`` ``updateOrCreate``), and the changed apps
    and the plan get the same version (v1.4.3 ``src/main/scala/mesosphere/marathon/upgrade/DeploymentPlan.scala``
    ``apply``)."""
    calls = {"n": 0}

    def put(request):
        calls["n"] += 1
        raise ConnectionResetError  # werkzeug drops the connection: the client sees a reset

    stored = marker.stamp(GROUP)
    stored["apps"][0]["version"] = VERSION
    httpserver.expect_request("/v2/groups/mnist", method="PUT").respond_with_handler(put)
    httpserver.expect_request("/v2/groups/mnist", method="GET").respond_with_json(stored)
    httpserver.expect_request("/v2/deployments", method="GET").respond_with_json(
        [{"id": DEPLOYMENT, "version": VERSION, "affectedApps": ["/mnist/worker-0"]}])
    body = client(httpserver).put_group(GROUP)
    assert body["deploymentId"] == DEPLOYMENT and body.get("adopted")
    assert calls["n"] == 1


def test_a_single_unreachable_marathon_is_not_retried_when_the_policy_says_so(monkeypatch):
    tries = []
    real = requests.Session.request

    def record(self, method, url, **kw):
        tries.append(url)
        return real(self, method, url, **kw)

    monkeypatch.setattr(requests.Session, "request", record)
    c = Client("http://127.0.0.1:1", retry=RetryPolicy(connection_errors=False))
    with pytest.raises(MarathonUnavailable) as e:
        c.info()
    assert len(tries) == 1
    assert "http://127.0.0.1:1/v2/info" in e.value.message and "Connection refused" in e.value.message
    # a failover list still moves on to the next URL: each of the 2 attempts tries every URL once
    tries.clear()
    c = Client(["http://127.0.0.1:1", "http://127.0.0.1:2"],
               retry=RetryPolicy(connection_errors=False, attempts=2, initial=0.001, max_wait=0.01, jitter=0))
    with pytest.raises(MarathonUnavailable):
        c.info()
    assert tries == ["http://127.0.0.1:1/v2/info", "http://127.0.0.1:2/v2/info"] * 2


def test_the_cli_fails_fast_naming_the_url(monkeypatch):
    from click.testing import CliRunner

    from marathon_tf.user.cli import cli

    sent = []
    real = requests.Session.request

    def record(self, method, url, **kw):
        sent.append(kw.get("timeout"))
        return real(self, method, url, **kw)

    monkeypatch.setattr(requests.Session, "request", record)
    r = CliRunner().invoke(cli, ["status", "--marathon", "http://127.0.0.1:1"])
    assert r.exit_code == 1
    assert "http://127.0.0.1:1" in r.stderr and "gave up" not in r.stderr
    assert len(sent) == 1 and sent[0][0] <= 3  # one try, connect timeout within 3 s


@pytest.mark.parametrize("answer", [
    Response("<html><body>Not Found</body></html>", status=404, content_type="text/html"),
    Response("Error response\nError code: 501", status=501, content_type="text/plain"),
    Response("<html>a web page</html>", status=200, content_type="text/html"),
])
def test_a_server_that_is_not_marathon_is_named_as_such(httpserver, answer):
    from marathon_tf.contract.errors import MarathonError

    httpserver.expect_request("/v2/groups/mnist").respond_with_response(answer)
    httpserver.expect_request("/v2/info").respond_with_response(answer)
    with pytest.raises(MarathonError) as e:
        client(httpserver).get_group("mnist")
    assert not isinstance(e.value, MarathonNotFound)
    assert "does not answer like Marathon" in e.value.message
    assert httpserver.url_for("").rstrip("/") in e.value.message and "/v2/info" in e.value.message


def test_marathons_own_404_is_still_not_found_and_checked_once(httpserver):
    httpserver.expect_request("/v2/groups/nope").respond_with_data("", status=404)
    httpserver.expect_request("/v2/info").respond_with_json({"name": "marathon", "version": "1.8.222"})
    c = client(httpserver)
    for _ in range(2):
        with pytest.raises(MarathonNotFound):
            c.get_group("nope")
    assert count(httpserver, "GET", "/v2/info") == 1


def test_info_is_read_once_while_it_is_fresh_and_again_after(httpserver, monkeypatch):
    """A verb's steps each want ``/v2/info`` (the version, the GPU feature, the Mesos master for the agents'
    capacity): one client asks Marathon once per :data:`INFO_FRESH` seconds, not once per step."""
    from marathon_tf.marathon import client as client_mod

    httpserver.expect_request("/v2/info").respond_with_json({"name": "marathon", "version": "1.8.222"})
    c = client(httpserver)
    assert c.info()["version"] == c.info()["version"] == "1.8.222" and c.capabilities().shown == "Marathon 1.8.222"
    assert count(httpserver, "GET", "/v2/info") == 1
    monkeypatch.setattr(client_mod, "INFO_FRESH", 0.0)  # older than fresh: asked again
    c.info()
    assert count(httpserver, "GET", "/v2/info") == 2
