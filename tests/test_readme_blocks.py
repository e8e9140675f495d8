"""How tests/test_readme.py reads a README (tests/readme_blocks.py): blocks found wherever they are,
markers, what is changed and what is skipped, each with its reason."""

import pytest
from readme_blocks import blocks, job_file, plan

README = '''# demo

```bash
python3 -m venv .venv && .venv/bin/pip install -e '.[tf]' && .venv/bin/marathon-tf deploy job.json --local
bash .ci/run   # the tests
```

Text.

<!-- readme-test: expect: Succeeded; timeout: 900 -->
```sh
marathon-tf local serve &                 # Marathon on 127.0.0.1:8080
export MARATHON_URL=http://127.0.0.1:8080
marathon-tf deploy examples/x/job.json --detach
```

<!-- readme-test: continues -->
```bash
marathon-tf status x
```

```bash
MARATHON_URL=http://marathon.example:8080 marathon-tf deploy job.json
```

```bash
marathon-tf local ui-install          # downloads the source, npm install, builds
```

<!-- readme-test: skip: shows a failure on purpose -->
```bash
marathon-tf validate broken.json
```

```json
{"name": "x", "command": "true", "roles": {"worker": {"count": 1}}}
```

```
a diagram
```
'''


def test_blocks_are_found_with_their_markers_and_names():
    found = blocks(README)
    assert [(b.lang, b.name) for b in found] == [
        ("bash", "python3 -m venv .venv && .venv/bin/pip install -e '.[tf]' && .venv/bin"),
        ("sh", "marathon-tf local serve &"), ("bash", "marathon-tf status x"),
        ("bash", "MARATHON_URL=http://marathon.example:8080 marathon-tf deploy job.json"),
        ("bash", "marathon-tf local ui-install"), ("bash", "marathon-tf validate broken.json"),
        ("json", '{"name": "x", "command": "true", "roles": {"worker": {"count": 1}}}'), ("", "a diagram")]
    assert found[1].options == {"expect": ["Succeeded"], "timeout": "900"} and found[2].options["continues"]
    assert job_file(found[6]) == {"name": "x", "command": "true", "roles": {"worker": {"count": 1}}}
    assert job_file(found[7]) is None


def test_install_lines_and_the_suite_are_dropped_saying_why():
    first = plan(blocks(README)[0])
    assert first.script.splitlines() == ["marathon-tf deploy job.json --local"]
    assert [n.split(":")[0] for n in first.notes] == ["dropped `python3 -m venv .venv`",
                                                      "dropped `.venv/bin/pip install -e '.[tf]'`",
                                                      "dropped `bash .ci/run   # the tests`"]


def test_local_serve_gets_free_ports_and_is_waited_for_and_continues_runs_the_block_before():
    found = blocks(README)
    serve = plan(found[1], found[:1])
    assert serve.serves and serve.expect == ["Succeeded"] and serve.timeout == 900
    lines = serve.script.splitlines()
    assert lines[0].startswith("marathon-tf local serve --port $MTF_PORT_8080 --dns-port $MTF_PORT_8053 "
                               "--dns-http-port $MTF_PORT_8123 &")
    assert lines[1] == "mtf_wait_serve" and lines[2] == "export MARATHON_URL=http://127.0.0.1:$MTF_PORT_8080"
    status = plan(found[2], found[:2])
    assert status.script.startswith(serve.script) and status.script.endswith("marathon-tf status x")


@pytest.mark.parametrize("index,why", [(3, "needs a real Marathon (a Mesos cluster)"),
                                       (4, "needs the internet (GitHub, the npm registry)"),
                                       (5, "shows a failure on purpose"), (7, "a plain block: not commands")])
def test_what_cannot_run_here_is_skipped_saying_why(index, why):
    found = blocks(README)
    assert plan(found[index], found[:index]).skip == why


def test_a_misspelt_marker_is_an_error_not_silence():
    with pytest.raises(ValueError, match="unknown readme-test option 'skipp'"):
        blocks("<!-- readme-test: skipp: x -->\n```bash\ntrue\n```\n")
