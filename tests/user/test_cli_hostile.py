"""The CLI against a Marathon that misbehaves (tests/hostile_server.py): a deploy whose PUT went
through behind a proxy's 504 ends with exit 0 after exactly one PUT; a dripping server cannot hold a
verb past its --timeout; a huge answer or a redirect loop is one error line, never a traceback."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner
from hostile_server import DEPLOYMENT, INFO, Answer, Hostile, ProxiedMarathon, json_answer, repeat
from user_helpers import minimal

from marathon_tf.user.cli import cli


def _one_error(r) -> str:
    """The error line (a hint line may follow); no traceback."""
    assert "Traceback" not in r.output and r.exception is None or isinstance(r.exception, SystemExit), r.output
    errors = [line for line in r.stderr.splitlines() if not line.startswith("hint:")]
    assert len(errors) == 1, r.stderr
    return errors[0]


def test_deploy_whose_put_went_through_behind_a_504_is_adopted_with_one_put(write_job):
    """The issue's 504-then-409: the old client sent the PUT 8 times (409 locked by its own first one)
    and exit 1; now Marathon's group shows our digests, so the deployment is ours: exit 0, one PUT."""
    marathon = ProxiedMarathon(json_answer("<html><title>504 Gateway Time-out</title></html>", 504,
                                           headers={"Content-Type": "text/html"}))
    with Hostile(marathon) as server:
        r = CliRunner().invoke(cli, ["deploy", str(write_job(minimal())), "--marathon", server.url, "--detach"])
    assert r.exit_code == 0, r.output
    assert marathon.puts == 1
    assert DEPLOYMENT in r.stderr


@pytest.mark.parametrize("verb", [["status", "mnist"], ["list"], ["events", "mnist"], ["logs", "mnist"],
                                  ["delete", "mnist"], ["scale", "mnist", "worker=2", "--detach"]],
                         ids=lambda v: v[0])
def test_a_dripping_marathon_cannot_hold_a_verb_past_its_timeout(verb):
    drip = Answer(200, b'{"apps": []' + b" " * 1000 + b"}", drip=0.2)
    with Hostile(lambda r: INFO if r.path == "/v2/info" else drip) as server:
        start = time.monotonic()
        r = CliRunner().invoke(cli, [*verb, "--marathon", server.url, "--timeout", "2"])
        took = time.monotonic() - start
    assert r.exit_code == 3, r.output
    assert took < 6, took
    line = _one_error(r)
    assert "time limit" in line and "2s" in line, line


@pytest.mark.parametrize("answer", ["info", "every"])
def test_a_dripping_marathon_cannot_hold_a_detached_deploy_past_its_timeout(write_job, answer):
    """deploy --detach: bounded by --timeout whether Marathon drips from its first answer (/v2/info, the
    capacity read) or only from the ones after it (the group, the PUT)."""
    drip = Answer(200, b'{"apps": []' + b" " * 1000 + b"}", drip=0.2)
    with Hostile(lambda r: INFO if r.path == "/v2/info" and answer == "info" else drip) as server:
        start = time.monotonic()
        r = CliRunner().invoke(cli, ["deploy", str(write_job(minimal())), "--marathon", server.url, "--detach",
                                     "--timeout", "2"])
        took = time.monotonic() - start
    assert r.exit_code == 3, r.output
    assert took < 6, took
    line = _one_error(r)
    assert "time limit" in line and "2s" in line, line


def test_a_huge_answer_is_one_line_naming_the_limit():
    with Hostile(lambda r: Answer(200, repeat(b" " * 65536, 400 << 20))) as server:
        r = CliRunner().invoke(cli, ["list", "--marathon", server.url, "--max-response", "1M"])
    assert r.exit_code == 1, r.output
    assert "larger than the 1 MiB limit" in _one_error(r)


def test_a_redirect_loop_is_one_line_naming_the_target():
    with Hostile(lambda r: Answer(302, b"", headers={"Location": "/v2/apps?again=1"})) as server:
        r = CliRunner().invoke(cli, ["list", "--marathon", server.url])
    assert r.exit_code == 1, r.output
    line = _one_error(r)
    assert "more than 3 redirects" in line and "/v2/apps?again=1" in line
