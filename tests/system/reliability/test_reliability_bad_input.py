"""Malformed job files and scale arguments through the real CLI against a running local Marathon:
exit 2, one line `<file>: <field.path>: <message>` naming the field, and no request reaches Marathon.
Hostile strings in valid places round-trip exactly through render and a real deploy."""

from __future__ import annotations

import json
import shlex

import pytest
import requests
from reliability_helpers import BASE_JOB, api_requests, job, run_cli, run_subprocess, write_job

W = {"count": 1, "cpus": 0.1, "mem": 32}

# (id, file content, field path ("" = the whole file), a fragment of the message)
BAD_JOBS = [
    # wrong types
    ("count-string", job(roles={"worker": {"count": "2"}}), "roles.worker.count", "must be an integer"),
    ("count-float", job(roles={"worker": {"count": 1.5}}), "roles.worker.count", "must be an integer"),
    ("count-bool", job(roles={"worker": {"count": True}}), "roles.worker.count", "must be an integer"),
    ("count-null", job(roles={"worker": {"count": None}}), "roles.worker.count", ""),
    ("cpus-string", job(roles={"worker": {**W, "cpus": "lots"}}), "roles.worker.cpus", ""),
    ("gpus-float", job(roles={"worker": {**W, "gpus": 0.5}}), "roles.worker.gpus", "must be an integer"),
    ("name-int", job(name=5), "name", "must be a string"),
    ("env-value-int", job(env={"A": 1}), "env.A", "must be a string"),
    ("env-not-object", job(env=["A=1"]), "env", ""),
    ("roles-list", job(roles=[1]), "roles", ""),
    ("command-item-int", job(command=["sleep", 1]), "command", "item 1 must be a string"),
    ("style-unknown", job(style="tf3"), "style", "must be one of"),
    ("network-mode", job(network={"mode": "bridge"}), "network.mode", "must be one of"),
    # unknown keys
    ("unknown-top-key", job(foo=1), "foo", "unknown key"),
    ("unknown-role", job(roles={"worker": W, "master": {"count": 1}}), "roles.master", "unknown role"),
    ("unknown-role-key", job(roles={"worker": {**W, "ram": 5}}), "roles.worker.ram", "unknown key"),
    # negative or huge numbers
    ("count-negative", job(roles={"worker": {"count": -1}}), "roles.worker.count", "between 0 and 10000"),
    ("count-huge", job(roles={"worker": {"count": 10**20}}), "roles.worker.count", "between 0 and 10000"),
    ("count-10001", job(roles={"worker": {"count": 10001}}), "roles.worker.count", "between 0 and 10000"),
    ("cpus-negative", job(roles={"worker": {**W, "cpus": -1}}), "roles.worker.cpus", "between"),
    ("mem-zero", job(roles={"worker": {**W, "mem": 0}}), "roles.worker.mem", "between"),
    ("mem-1e308", job(roles={"worker": {**W, "mem": 1e308}}), "roles.worker.mem", "between"),
    ("restart-negative", job(restart={"max_failures": -1}), "restart.max_failures", ">= 0"),
    # bad / over-long names
    ("name-long", job(name="a" * 100), "name", "limit is 63"),
    ("name-upper", job(name="ABC"), "name", "lowercase"),
    ("name-dotdot", job(name="../etc"), "name", ""),
    ("name-trailing-slash", job(name="a/"), "name", ""),
    ("name-empty", job(name=""), "name", ""),
    ("name-space", job(name="a b"), "name", ""),
    # injection attempts where they are not allowed
    ("name-quote", job(name='a"b'), "name", ""),
    ("name-template", job(name="{{ 7*7 }}"), "name", ""),
    ("name-subshell", job(name="$(id)"), "name", ""),
    ("name-newline", job(name="a\nb"), "name", "control characters"),
    ("name-nul", job(name="a\u0000b"), "name", "control characters"),
    ("env-key-dash", job(env={"A-B": "x"}), "env.A-B", "not a valid environment variable name"),
    ("env-key-subshell", job(env={"$(id)": "x"}), "env.$(id)", "not a valid environment variable name"),
    ("env-value-nul", job(env={"A": "x\u0000y"}), "env.A", "NUL"),
    ("env-reserved", job(env={"MTF_JOB": "x"}), "env.MTF_JOB", "reserved"),
    ("command-nul", job(command="sleep\u0000 1"), "command", "NUL"),
    ("argv-nul", job(command=["sleep", "1\u0000"]), "command", "NUL"),
    ("role-command-nul", job(roles={"worker": {**W, "command": "a\u0000"}}), "roles.worker.command", "NUL"),
    ("label-reserved", job(labels={"marathon-tf/job": "x"}), "labels.marathon-tf/job", "reserved"),
    ("label-value-nul", job(labels={"a": "\u0000"}), "labels.a", "NUL"),
    ("image-newline", job(image="img\n:1"), "image", "control characters"),
    ("volume-dotdot", job(volumes=[{"host_path": "/tmp/x", "container_path": "../../x"}]),
     "volumes[0].container_path", ".."),
    ("volume-host-dotdot", job(volumes=[{"host_path": "rel/../../up", "container_path": "c"}]),
     "volumes[0].host_path", ".."),
    ("constraint-operator", job(constraints=[["hostname", "BOGUS"]]), "constraints[0]", "unknown operator"),
    ("fetch-missing", job(fetch=["no-such-file.py"]), "fetch[0].uri", "no such file"),
    ("nameserver", job(discovery={"nameserver": "a b; rm -rf /"}), "discovery.nameserver", "ip[:port]"),
    ("command-empty", job(command=""), "command", "must not be empty"),
    ("command-empty-list", job(command=[]), "command", "empty list"),
    # not a job object at all
    ("json-array", [BASE_JOB], "", "must be a JSON object"),
    ("json-string", '"job"', "", "must be a JSON object"),
    ("empty-file", "", "", "empty"),
    ("whitespace-file", " \n\t\n", "", "empty"),
    ("non-utf8", b'{"name": "rel\xff", "roles": {}}', "", "not valid UTF-8"),
    ("utf16", json.dumps(BASE_JOB).encode("utf-16"), "", "not valid UTF-8"),
    ("duplicate-key", '{"name": "rel", "name": "other", "command": "x", "roles": {"worker": {"count": 1}}}',
     "", "duplicate key 'name'"),
    ("nan", '{"name": "rel", "command": "x", "roles": {"worker": {"count": 1, "cpus": NaN}}}', "", "NaN"),
    ("infinity", '{"name": "rel", "command": "x", "roles": {"worker": {"count": 1, "mem": -Infinity}}}', "",
     "Infinity"),
    ("trailing-garbage", json.dumps(BASE_JOB) + " x", "", "invalid JSON"),
    ("truncated", json.dumps(BASE_JOB)[:-5], "", "invalid JSON"),
]


def _expect_one_line_field_error(result, path: str, field: str, fragment: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"expected exactly one error line, got: {result.stderr!r}"
    prefix = f"error: {path}: {field}: " if field else f"error: {path}: "
    assert lines[0].startswith(prefix), f"{lines[0]!r} does not start with {prefix!r}"
    assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"
    assert result.stdout == ""
    return lines[0]


@pytest.mark.parametrize("case_id,content,field,fragment", BAD_JOBS, ids=[c[0] for c in BAD_JOBS])
def test_bad_job_file_is_refused_before_any_request(cluster, tmp_path, case_id, content, field, fragment):
    path = write_job(tmp_path / f"{case_id}.json", content)
    result = run_cli(["deploy", str(path), "--marathon", cluster.marathon_url, "--detach"])
    _expect_one_line_field_error(result, str(path), field, fragment)
    assert api_requests(cluster.request_log()) == []


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_missing_file_and_directory(cluster, tmp_path, kind):
    path = tmp_path / "nothing.json"
    if kind == "directory":
        path.mkdir()
    result = run_cli(["deploy", str(path), "--marathon", cluster.marathon_url, "--detach"])
    _expect_one_line_field_error(result, str(path), "", "no such file" if kind == "missing" else "directory")
    assert api_requests(cluster.request_log()) == []


def test_deeply_nested_json_is_a_clean_error(cluster, tmp_path):
    path = write_job(tmp_path / "deep.json", '{"name": ' + "[" * 100_000 + "]" * 100_000 + "}")
    result = run_cli(["deploy", str(path), "--marathon", cluster.marathon_url, "--detach"])
    _expect_one_line_field_error(result, str(path), "", "")
    assert api_requests(cluster.request_log()) == []


@pytest.mark.parametrize("case_id", ["count-negative", "non-utf8", "duplicate-key", "empty-file", "name-subshell"])
def test_real_exit_code_of_bad_job_files(cluster, tmp_path, case_id):
    content, field, fragment = next((c[1], c[2], c[3]) for c in BAD_JOBS if c[0] == case_id)
    path = write_job(tmp_path / f"{case_id}.json", content)
    p = run_subprocess(["deploy", str(path), "--detach"], env={"MARATHON_URL": cluster.marathon_url})
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert err.count("\n") == 1 and err.startswith(f"error: {path}: {field + ': ' if field else ''}"), err
    assert "Traceback" not in err and p.stdout == b""
    assert api_requests(cluster.request_log()) == []


def test_validate_and_render_refuse_the_same_files(cluster, tmp_path):
    """Offline verbs agree with deploy (exit 2, same one line) for a sample of the bad files."""
    for case_id, content, field, fragment in BAD_JOBS[::7]:
        path = write_job(tmp_path / f"{case_id}.json", content)
        for verb in ("validate", "render"):
            result = run_cli([verb, str(path)])
            _expect_one_line_field_error(result, str(path), field, fragment)
    assert api_requests(cluster.request_log()) == []


BAD_SCALE = [
    ["workers=abc"], ["foo=1"], ["workers=99999999"], ["workers=10001"], ["workers=+10001"], ["workers"],
    ["=1"], ["workers=1", "worker=2"], ["workers=1.5"], ["workers=1;rm -rf /"], ["workers=$(id)"],
    ["workers=\u0661"], ["workers=0x10"], ["workers=1\u0000"], ["WORKERS=1"], ["ps=-"],
]


@pytest.mark.parametrize("args", BAD_SCALE, ids=[repr(a) for a in BAD_SCALE])
def test_bad_scale_arguments_send_nothing(cluster, args):
    result = run_cli(["scale", "--job", "rel", "--marathon", cluster.marathon_url, *args])
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: '"), result.stderr
    assert api_requests(cluster.request_log()) == []


def test_scale_below_zero_is_refused_without_a_write(cluster, tmp_path):
    """`workers=-3` is the relative form (current count minus 3): it must read the job, but with one
    worker it is refused (exit 2) and nothing is written to Marathon."""
    path = write_job(tmp_path / "job.json", job())
    assert run_cli(["deploy", str(path), "--marathon", cluster.marathon_url, "--detach"]).exit_code == 0
    cluster.faults.clear_requests()
    result = run_cli(["scale", "--job", "rel", "--marathon", cluster.marathon_url, "workers=-3"])
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert "would be negative" in result.stderr
    writes = [e for e in cluster.request_log() if e["method"] != "GET"]
    assert writes == []


# ----------------------------------------------------------------- hostile strings in valid places

HOSTILE_ENV = {
    "QUOTES": "a\"b'c\"'",
    "NEWLINES": "line1\nline2\r\nline3\n",
    "JINJA": "{{ 7*7 }} {% raw %}{{ x }}{% endraw %} {# c #}",
    "SHELL": "$(id) `id` ${HOME} $HOME; rm -rf / && echo \\ | cat",
    "PATHS": "../../etc/passwd",
    "UNICODE": "ünïcødé ☃ \u2028 \t tab",
    "EMPTY": "",
}
HOSTILE_ARGV = ["sh", "-c", "sleep 30 # \"q\" 'x' $(id) `id` {{ 7*7 }}\nline2", "--", "{% if %}", "'", '"', "\\"]


def _hostile_job(tmp_path):
    return write_job(tmp_path / "hostile.json", job(command=HOSTILE_ARGV, env=HOSTILE_ENV,
                                                    labels={"note": "{{x}}\"\n'$(id)"}))


def test_hostile_strings_round_trip_through_render(tmp_path):
    path = _hostile_job(tmp_path)
    result = run_cli(["render", str(path)])
    assert result.exit_code == 0, result.stderr
    group = json.loads(result.stdout)
    (app,) = group["apps"]
    for k, v in HOSTILE_ENV.items():
        assert app["env"][k] == v
    assert app["labels"]["note"] == "{{x}}\"\n'$(id)"
    prefix = "marathon-tf bootstrap -- "
    assert app["cmd"].startswith(prefix)
    assert shlex.split(app["cmd"][len(prefix):]) == HOSTILE_ARGV


def test_hostile_strings_round_trip_through_a_real_deploy(cluster, tmp_path):
    path = _hostile_job(tmp_path)
    rendered = json.loads(run_cli(["render", str(path)]).stdout)["apps"][0]
    result = run_cli(["deploy", str(path), "--marathon", cluster.marathon_url, "--detach"])
    assert result.exit_code == 0, result.stderr
    try:
        r = requests.get(cluster.marathon_url + "/v2/apps/rel/worker-0", timeout=10)
        assert r.status_code == 200
        app = json.loads(r.content.decode("utf-8"))["app"]
        assert app["cmd"] == rendered["cmd"]
        # what was rendered, and the job's key the owner's deploy adds as it sends the group (contract/taskauth.py)
        assert len(app["env"].pop("MTF_JOB_KEY")) == 64 and "MTF_JOB_KEY" not in rendered["env"]
        assert app["env"] == rendered["env"]
        assert app["labels"]["note"] == rendered["labels"]["note"]
        for k, v in HOSTILE_ENV.items():
            assert app["env"][k] == v
    finally:
        assert run_cli(["delete", "rel", "--marathon", cluster.marathon_url, "--force"]).exit_code == 0
    assert requests.get(cluster.marathon_url + "/v2/groups/rel", timeout=10).status_code == 404
