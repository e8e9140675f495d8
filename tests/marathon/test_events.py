"""The event stream's reader thread (marathon_tf.marathon.events)."""

from __future__ import annotations

import threading
import time

from hostile_server import Answer, Hostile

from marathon_tf.marathon.client import Client
from marathon_tf.marathon.events import Event, EventStream, _event


def test_close_returns_at_once_while_the_reader_waits_on_a_silent_stream():
    """A task's bootstrap closes its event stream as it exits: closing the response alone waited for
    the blocked read (Marathon's next event or heartbeat, up to the 30 s read timeout); a task stopped
    with SIGTERM outlived its program by 6 s, and its relaunch came that much later."""
    released = threading.Event()

    def silent():  # Marathon's first event, then nothing: the reader's next read blocks
        yield b'event: event_stream_attached\r\ndata: {"remoteAddress": "127.0.0.1"}\r\n\r\n'
        released.wait(60)

    def answer(r):
        return Answer(200, silent(), headers={"Content-Type": "text/event-stream"}, length=False)
    with Hostile(answer) as server:
        stream = EventStream(Client(server.url), event_types=("status_update_event",))
        with stream:
            assert stream.events.get(timeout=10)["eventType"] == "event_stream_attached"
            time.sleep(0.3)  # the reader is blocked in its next read
            started = time.monotonic()
            stream.close()
            took = time.monotonic() - started
            stream._thread.join(2)
            released.set()
        assert took < 1.0, took
        assert not stream._thread.is_alive()


def test_an_event_is_its_json_object_with_its_fields_read_once():
    """A ``status_update_event`` as Marathon 1.11 sends it: its readers (the rendezvous leader, the keeper)
    read the attributes; the object stays the JSON it was (``user/watch`` reads it as a dict)."""
    text = ('{"slaveId": "s1", "taskId": "ml_w-0.t1", "taskStatus": "TASK_RUNNING", "message": "", '
            '"appId": "/ml/worker-0", "host": "10.0.0.3", "ipAddresses": [{"ipAddress": "10.0.0.3"}], '
            '"ports": [31000, 31001], "version": "2026-01-01T10:00:00.000Z", '
            '"timestamp": "2026-01-01T10:00:05.000Z"}')
    event = _event("status_update_event", text)
    assert isinstance(event, Event) and event["eventType"] == "status_update_event" and event["ports"] == [31000, 31001]
    assert (event.event_type, event.app_id, event.task_id, event.task_status, event.host, event.ports) == (
        "status_update_event", "/ml/worker-0", "ml_w-0.t1", "TASK_RUNNING", "10.0.0.3", (31000, 31001))
    assert (event.version, event.timestamp, event.message, event.id, event.reason) == (
        "2026-01-01T10:00:00.000Z", "2026-01-01T10:00:05.000Z", "", None, None)
    failed = _event("deployment_failed", '{"id": "d-1", "reason": "cancelled", "plan": {"id": "d-1"}}')
    assert failed is not None and (failed.event_type, failed.id, failed.reason, failed.app_id) == (
        "deployment_failed", "d-1", "cancelled", None)
    assert Event.parse(event) is event and Event.parse({"appId": "/ml/ps-0"}).app_id == "/ml/ps-0"
    assert Event.parse(None) == {} and Event.parse({"ports": None}).ports == ()
