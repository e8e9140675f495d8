"""The event stream against events of the wrong shape (marathon_tf.marathon.events, shapes.EVENT): an event
that is not an object, or whose field read by anyone has another shape, is left out; the stream stays
attached and the events after it arrive. Before, ``data: "a string"`` raised in the reader thread, which
dropped the connection and reconnected to the same fate: nothing after it ever arrived; and ``"id": [..]``
reached the readers (a deployment watch compares it, the rendezvous keys on ``taskId``).

Event shapes: Marathon 1.11 ``docs/docs/event-bus.md`` and the case classes' fields in
``src/main/scala/mesosphere/marathon/core/event/Events.scala`` (mesosphere/marathon, releases/1.11), FACTS §4."""

from __future__ import annotations

import json
import threading
import time

from hostile_server import Answer, Hostile

from marathon_tf.marathon.client import Client
from marathon_tf.marathon.events import EventStream

GOOD = {"eventType": "deployment_success", "id": "5ed4c0c5-9ff8-4a6f-a0cd-f57f59a34b43",
        "plan": {"id": "5ed4c0c5-9ff8-4a6f-a0cd-f57f59a34b43"}, "timestamp": "2026-11-25T10:00:00.000Z"}
STATUS = {"eventType": "status_update_event", "appId": "/mnist/worker-0", "taskId": "mnist_worker-0.instance-1",
          "taskStatus": "TASK_RUNNING", "host": "10.0.0.1", "ports": [31000], "version": "2026-11-25T10:00:00.000Z",
          "timestamp": "2026-11-25T10:00:00.000Z"}
WRONG = ['"a string"', "7", "null", '["a", "list"]',
         json.dumps({**GOOD, "id": ["a", "list"]}), json.dumps({**GOOD, "id": {"an": "object"}}),
         json.dumps({**GOOD, "plan": "a string"}), json.dumps({**STATUS, "taskId": 7}),
         json.dumps({**STATUS, "ports": "31000"}), json.dumps({**STATUS, "ports": [None]}),
         json.dumps({**STATUS, "host": ["a"]}), json.dumps({**STATUS, "appId": None, "taskStatus": {"a": 1}}),
         json.dumps({**GOOD, "reason": ["a"], "eventType": "deployment_failed"}), json.dumps({**GOOD, "eventType": 7})]


def _frames(released: threading.Event):
    for i, data in enumerate(WRONG):
        yield f"event: deployment_success\r\ndata: {data}\r\n\r\n".encode()
        if i == len(WRONG) // 2:
            yield f"event: status_update_event\r\ndata: {json.dumps(STATUS)}\r\n\r\n".encode()
    yield f"event: deployment_success\r\ndata: {json.dumps(GOOD)}\r\n\r\n".encode()
    released.wait(5)  # then silence (the stream stays attached) until the test has read what came


def test_events_of_the_wrong_shape_are_left_out_and_the_stream_goes_on():
    answer = Answer(200, b"", headers={"Content-Type": "text/event-stream"}, length=False)
    released = threading.Event()
    with Hostile(lambda r: Answer(answer.status, _frames(released), answer.headers, length=False)) as server:
        try:
            with EventStream(Client(server.url)) as stream:
                got = []
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and GOOD not in got:
                    got += stream.wait(0.2)
                reconnects = stream.reconnects
        finally:
            released.set()  # the server's stop need not wait out the silence
    assert got == [STATUS, GOOD], got
    assert reconnects == 0


def test_the_leader_answer_in_a_wrong_shape_is_none_or_one_line():
    """``/v2/leader`` (read by the event stream when a standby's redirect cannot be followed): every wrong
    shape is no leader (None) or one :class:`MarathonError` line, never an exception of another kind."""
    from marathon_tf.contract.errors import MarathonError

    for body in ('"a string"', "7", "null", '["a"]', '{"leader": ["a"]}', '{"leader": {"a": 1}}', '{"leader": 7}',
                 '{"leader": null}', '{"leader": ""}', "{}"):
        with Hostile(lambda r: Answer(200, body.encode())) as server:
            try:
                got = Client(server.url).leader(retry=False)
            except MarathonError as e:
                assert len(e.lines()) <= 2 and "\n" not in e.message, (body, e.lines())
            else:
                assert got is None, (body, got)
