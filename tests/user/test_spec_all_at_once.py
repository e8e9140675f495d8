"""`validate` reports every problem of a job file in one pass, on every level, with the key a
misspelt one most likely means, and checks the value of a misspelt key as that key's; the rules
across keys do not repeat what follows from a problem already reported."""

import pytest
from click.testing import CliRunner
from user_helpers import minimal

from marathon_tf.contract.errors import SpecError
from marathon_tf.user.cli import cli
from marathon_tf.user.spec import load_dict

SIX_MISTAKES = {
    "name": "Bad_Name",                                  # 1: the name's characters
    "comand": ["python3", "train.py"],                   # 2: a misspelt top-level key
    "style": "tf1",
    "roles": {
        "ps": {"count": 1, "mem": -5},                   # 3: a value two levels down
        "wokrer": {"count": 2, "cpus": "1"},             # 4: a misspelt role, 5: a bad value inside it
    },
    "discovery": {"mode": "dns"},                        # 6: a value of a nested object
}


def test_six_mistakes_on_several_levels_are_six_lines(write_job):
    path = write_job(SIX_MISTAKES)
    r = CliRunner().invoke(cli, ["validate", str(path)])
    assert r.exit_code == 2 and r.stdout == ""
    lines = [line.removeprefix("error: ").removeprefix(f"{path}: ") for line in r.stderr.splitlines()]
    assert lines == [
        "comand: unknown key; did you mean command?",
        "discovery.mode: must be one of mesos-dns, mesos-dns-http, marathon",
        "name: segment 'Bad_Name' must be lowercase letters, digits and '-' (dots between labels allowed), "
        "not starting or ending with '-'",
        "roles.ps.mem: must be between 1 and 16777216 (MiB)",
        "roles.wokrer: unknown role; did you mean worker?",
        "roles.wokrer.cpus: must be a number",
    ]


@pytest.mark.parametrize("job,path,message", [
    (minimal(logdri="ckpt"), "logdri", "unknown key; did you mean logdir?"),
    (minimal(roles={"ps": {"count": 1}, "workers": {"count": 2}}), "roles.workers", "did you mean worker?"),
    (minimal(roles={"ps": {"count": 1}, "worker": {"count": 2, "gpu": 1}}), "roles.worker.gpu",
     "unknown key; did you mean gpus?"),
    (minimal(restart={"max_failure": 3}), "restart.max_failure", "did you mean max_failures?"),
    (minimal(roles={"ps": {"count": 1}, "master": {"count": 1}}), "roles.master",
     "unknown role (roles: chief, ps, worker, evaluator, tensorboard)"),
    (minimal(zzz=1), "zzz", "unknown key (allowed: "),
])
def test_unknown_keys_name_the_key_they_most_likely_misspell(job, path, message):
    with pytest.raises(SpecError) as e:
        load_dict(job)
    assert any(p == path and message in m for p, m in e.value.problems), e.value.problems


def test_a_misspelt_keys_value_is_checked_as_that_keys_and_nothing_follows_twice():
    job = {"name": "x", "style": "tf1", "command": "python3 t.py",
           "rolse": {"ps": {"count": 1}, "worker": {"count": 0, "gpus": -1}}}
    with pytest.raises(SpecError) as e:
        load_dict(job)
    # not "roles: is required" (said by the misspelling), nor the styles' rules on roles that are not known
    assert e.value.problems == [("rolse", "unknown key; did you mean roles?"),
                                ("rolse.worker.gpus", "must be >= 0")]
    # a command given under a misspelt key is not also "no command"; a role misspelt is not "needs a worker"
    with pytest.raises(SpecError) as e:
        load_dict({"name": "x", "style": "tf1", "comand": "python3 t.py",
                   "roles": {"ps": {"count": 1}, "wroker": {"count": 2}}})
    assert [p for p, _ in e.value.problems] == ["comand", "roles.wroker"]


def test_rules_across_keys_are_reported_beside_field_errors():
    # before: a field error hid every rule across keys until it was fixed (one level at a time)
    with pytest.raises(SpecError) as e:
        load_dict(minimal(completion="chief", roles={"ps": {"count": 1, "cpus": 0}, "worker": {"count": 2}}))
    assert [p for p, _ in e.value.problems] == ["completion", "roles.ps.cpus"]
    assert "'chief' needs roles.chief.count = 1" in e.value.problems[0][1]


def test_a_missing_fetch_file_is_reported_with_the_other_problems(tmp_path):
    with pytest.raises(SpecError) as e:
        load_dict(minimal(fetch=["nope.py"], roles={"ps": {"count": 1}, "worker": {"count": -1}}),
                  base_dir=tmp_path)
    assert [p for p, _ in e.value.problems] == ["fetch[0].uri", "roles.worker.count"]
