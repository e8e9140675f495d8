"""/v2/events: Jetty's SSE framing, heartbeat, Accept rule, event_type filter, event contents.

Event contents: the case classes' fields of mesosphere/marathon releases/1.11
``src/main/scala/mesosphere/marathon/core/event/Events.scala``."""

from __future__ import annotations

import json
import socket
import time

import requests
import sseclient


def _raw_stream(base: str, path: str, seconds: float) -> bytes:
    host, port = base.split("://")[1].split(":")
    sock = socket.create_connection((host, int(port)))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\n\r\n".encode())
    sock.settimeout(0.2)
    data = b""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            break
        data += chunk
    sock.close()
    return data


def test_accept_must_be_exact(api):
    assert api.get("/v2/events", headers={"Accept": "text/event-stream, */*"}).status_code == 405
    assert api.get("/v2/events").status_code == 405


def test_framing_attached_first_and_heartbeat(api):
    data = _raw_stream(api.base, "/v2/events", 1.3)
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"200 OK" in head.split(b"\r\n")[0]
    headers = head.decode().lower()
    assert "content-type: text/event-stream;charset=utf-8" in headers
    assert "transfer-encoding" not in headers and "connection: close" in headers
    assert body.startswith(b"event: event_stream_attached\r\ndata: {")
    first, _, rest = body.partition(b"\r\n\r\n")
    attached = json.loads(first.split(b"data: ", 1)[1])
    assert attached["eventType"] == "event_stream_attached" and "remoteAddress" in attached
    assert rest.startswith(b"\r\n") and rest.strip(b"\r\n") == b""  # only heartbeats (0.5 s)


def test_event_type_filter_and_deployment_events(api, make_app):
    resp = requests.get(api.base + "/v2/events", params=[("event_type", "deployment_success"),
                                                         ("event_type", "status_update_event")],
                        headers={"Accept": "text/event-stream"}, stream=True, timeout=10)
    client = sseclient.SSEClient(resp.iter_content(chunk_size=1))
    r = api.put("/v2/groups/job", json={"apps": [make_app("w")]})
    dep_id = r.json()["deploymentId"]
    seen = []
    for event in client.events():
        seen.append((event.event, json.loads(event.data)))
        if event.event == "deployment_success":
            break
    resp.close()
    types = {t for t, _ in seen}
    assert types == {"status_update_event", "deployment_success"}
    statuses = [d["taskStatus"] for t, d in seen if t == "status_update_event"]
    assert statuses == ["TASK_STAGING", "TASK_RUNNING"]
    success = seen[-1][1]
    assert success["id"] == dep_id and set(success["plan"]) == {"id", "steps", "version"}
    update = seen[0][1]
    assert {"slaveId", "taskId", "taskStatus", "message", "appId", "host", "ports", "version",
            "ipAddresses", "timestamp"} <= set(update)


def test_event_sequence_of_a_deployment(api, make_app, cluster):
    api.put("/v2/groups/job", json={"apps": [make_app("w")]})
    api.wait_deployed()
    kinds = [e["eventType"] for e in cluster.events() if e["eventType"] in (
        "group_change_success", "deployment_info", "deployment_step_success", "deployment_success")]
    assert kinds == ["group_change_success", "deployment_info", "deployment_step_success", "deployment_info",
                     "deployment_step_success", "deployment_success"]
    info = cluster.events("deployment_info")[0]
    assert info["currentStep"] == {"actions": [{"action": "StartApplication", "app": "/job/w"}]}
    assert cluster.events("api_post_event") == []
    api.put("/v2/apps/job/w", json={"instances": 2})
    post = cluster.events("api_post_event")[-1]
    assert post["appDefinition"]["instances"] == 2 and post["uri"] == "/v2/apps/job/w"


def test_a_subscriber_that_falls_behind_is_dropped():
    """Marathon drops an event stream connection with ``--event_stream_max_outstanding_messages`` (1024)
    events waiting for it (``M@1.8:src/main/scala/mesosphere/marathon/core/event/EventConf.scala``,
    ``.../core/event/impl/stream/HttpEventStreamHandleActor.scala``: ``outstanding.size >= maxOutStanding =>
    dropConnection()``): a stalled client costs bounded memory, and others go on receiving."""
    from marathon_tf.local.events import DROPPED, EventBus

    seen: list[str] = []
    bus = EventBus(max_outstanding=3)
    bus.listeners.append(lambda event: seen.append(event["eventType"]))
    stalled, reader = bus.subscribe(), bus.subscribe(["b"])
    for _ in range(5):
        bus.publish("a")
    bus.publish("b")
    got = [stalled.get_nowait() for _ in range(stalled.qsize())]
    assert [e["eventType"] for e in got[:3]] == ["a"] * 3 and got[3] is DROPPED and len(got) == 4
    assert bus.subscribers == 1 and reader.get_nowait()["eventType"] == "b"
    assert seen == ["a"] * 5 + ["b"]


def test_cached_answers_follow_every_change(api, make_app, wait):
    """GET answers are cached per state generation (api.py): a change shows at once, never a stale list."""
    api.put("/v2/groups/c", json={"apps": [make_app("/c/a")]})
    first = api.get("/v2/apps?embed=apps.tasks").json()["apps"]
    assert [a["id"] for a in first] == ["/c/a"]
    wait(lambda: api.get("/v2/apps?embed=apps.tasks").json()["apps"][0]["tasksRunning"] == 1, what="a task")
    api.put("/v2/apps/c/b", json=make_app("/c/b"))
    assert [a["id"] for a in api.get("/v2/apps?embed=apps.tasks").json()["apps"]] == ["/c/a", "/c/b"]
    assert api.get("/v2/apps/c/a").json()["app"]["instances"] == 1
    api.put("/v2/apps/c/a?force=true", json={"instances": 0})
    assert api.get("/v2/apps/c/a").json()["app"]["instances"] == 0
