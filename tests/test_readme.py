"""Every command block of README.md runs (or is skipped saying why), and every job file in it is
valid: see tests/readme_blocks.py for how a block is run, what is changed and what is skipped.
A block that deploys trains real TensorFlow (marked ``tf``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import communicate_or_stop
from leaks import wait_no_processes
from readme_blocks import PORTS, SHELLS, blocks, job_file, plan

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BIN = Path(sys.executable).parent

#: Defined in every block's shell: wait until the `local serve` just started answers (60 s at most).
PRELUDE = f"""
mtf_wait_serve() {{
  {sys.executable} - "$MTF_PORT_8080" <<'EOF'
import sys, time, urllib.request
deadline = time.monotonic() + 60
while True:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{{sys.argv[1]}}/ping", timeout=2)
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("readme test: local serve did not answer within 60 s")
        time.sleep(0.2)
EOF
}}
mtf_stop_background() {{
  for pid in $(jobs -p); do kill -INT "$pid" 2>/dev/null || true; done
  wait || true
}}
trap mtf_stop_background EXIT
set -eo pipefail
"""

ALL = blocks(README.read_text(encoding="utf-8"))
SHELL = [(b, plan(b, ALL[:i])) for i, b in enumerate(ALL) if b.lang in ("bash", "sh", "shell")]
JOBS = [b for b in ALL if job_file(b) is not None]
PYTHON = [b for b in ALL if b.lang == "python"]


def _free_ports(n: int) -> list[int]:
    import socket

    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _scratch(tmp_path: Path) -> Path:
    """A folder that links the repository's top-level entries: commands find examples/…, and
    what they write stays out of the checkout."""
    work = tmp_path / "work"
    work.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in (".git", ".venv"):
            (work / entry.name).symlink_to(entry)
    return work


def _ids(items):
    return [f"line{b.line}:{b.name}" for b, *_ in items]


def test_the_readme_has_command_blocks_and_every_skip_says_why():
    assert SHELL, "README.md has no shell block: nothing documents a command"
    for block, how in SHELL:
        assert how.script or how.skip, block.name


@pytest.mark.parametrize("block,how", SHELL, ids=_ids(SHELL))
def test_readme_block_runs(block, how, tmp_path):
    if how.skip:
        pytest.skip(f"README line {block.line} ({block.name}): {how.skip}")
    if "marathon-tf deploy" in how.script or "--local" in how.script:
        pytest.importorskip("tensorflow")  # a deployed example trains for real
    work = _scratch(tmp_path)
    ports = dict(zip(PORTS, _free_ports(len(PORTS))))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARATHON_")}
    env.update({"PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "MARATHON_TF_STATE_DIR": str(tmp_path / "state"),
                "XDG_STATE_HOME": str(tmp_path / "xdg"), **{f"MTF_PORT_{p}": str(v) for p, v in ports.items()}})
    proc = subprocess.Popen(["bash", "-c", PRELUDE + how.script], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    output, _, ended = communicate_or_stop(proc, how.timeout, grace=60)
    if not ended:
        pytest.fail(f"README line {block.line} ({block.name}) ran past {how.timeout:g} s:\n{output[-4000:]}")
    notes = "".join(f"\n  ({note})" for note in how.notes)
    assert proc.returncode == 0, f"README line {block.line} ({block.name}) exited {proc.returncode}{notes}:\n" \
                                 f"{output[-4000:]}"
    for text in how.expect:
        assert text in output, f"README line {block.line}: {text!r} is not in its output:\n{output[-4000:]}"
    assert wait_no_processes(tmp_path, 30) == []


@pytest.mark.parametrize("block", JOBS, ids=[f"line{b.line}" for b in JOBS])
def test_readme_job_files_are_valid(block, tmp_path):
    from marathon_tf import Job

    data = job_file(block)
    for item in data.get("fetch") or []:  # a file next to the job file: made, empty, for the check
        uri = item if isinstance(item, str) else item.get("uri", "")
        if "://" not in uri:
            (tmp_path / uri).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / uri).write_text("")
    Job.from_dict(data, base_dir=tmp_path, source=f"README.md line {block.line}")


@pytest.mark.parametrize("block", PYTHON, ids=[f"line{b.line}" for b in PYTHON])
def test_readme_python_blocks_run(block, tmp_path):
    """A Python block runs as written, in the scratch folder (a block that uses the local cluster
    trains real TensorFlow), and leaves nothing behind."""
    if "LocalCluster" in block.text or "deploy" in block.text:
        pytest.importorskip("tensorflow")
    work = _scratch(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARATHON_")}
    env.update({"MARATHON_TF_STATE_DIR": str(tmp_path / "state"), "XDG_STATE_HOME": str(tmp_path / "xdg")})
    proc = subprocess.Popen([sys.executable, "-c", block.text], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    output, _, ended = communicate_or_stop(proc, 600, grace=60)
    assert ended, f"README line {block.line} (python) ran past 600 s:\n{output[-4000:]}"
    assert proc.returncode == 0, f"README line {block.line} (python) exited {proc.returncode}:\n{output[-4000:]}"
    if ".wait(" in block.text:  # a block that follows a job to its end says how it ended
        assert "Succeeded" in output, f"README line {block.line} (python):\n{output[-4000:]}"
    assert wait_no_processes(tmp_path, 30) == []


@pytest.mark.parametrize("block", PYTHON, ids=[f"line{b.line}" for b in PYTHON])
def test_readme_python_blocks_compile_and_import_what_exists(block):
    import ast
    import importlib

    tree = ast.parse(block.text, filename=f"README.md line {block.line}")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"README line {block.line}: {node.module} has no {alias.name}"


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    out, fenced = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            out.add(_slug(line.lstrip("#")))
    return out


def test_every_link_of_the_readme_and_the_docs_resolves():
    """A relative link names a file of the repository, and its #anchor a heading of that file."""
    broken = []
    for page in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        for m in re.finditer(r"\]\(([^)\s]*)\)", page.read_text(encoding="utf-8")):
            link = m.group(1)
            if "://" in link or link.startswith("mailto:"):
                continue
            target, _, anchor = link.partition("#")
            path = (page.parent / target) if target else page
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {link} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{page.relative_to(ROOT)}: {link} (no such heading)")
    assert broken == [], "\n".join(broken)


def test_the_readmes_install_and_the_test_command_put_one_tensorflow_in_the_venv():
    """Issue 32: the README installed `.[tf]` (the full `tensorflow`: `failed call to cuInit … (303)` in every
    task of a machine without GPUs), then `.ci/run` added `tensorflow-cpu` to the same venv: two TensorFlow
    distributions. Each extra names one; the README's install is the CPU one .ci/run installs, tf_keras
    without its dependencies (it would pull the full `tensorflow`); .ci/run keeps a full `tensorflow` a venv
    already holds instead of adding the other."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    tensorflows = {name: [d for d in deps if re.match(r"tensorflow(-cpu)?\b(?!-)", d.split("==")[0].split("[")[0])]
                   for name, deps in extras.items() if name in ("tf", "tf-cpu")}
    assert tensorflows == {"tf": ["tensorflow==2.21.0"], "tf-cpu": ["tensorflow-cpu==2.21.0"]}, tensorflows
    install = ALL[0].text
    assert ".venv/bin/pip install -e '.[tf-cpu]'" in install and "'.[tf]'" not in install, install
    assert ".venv/bin/pip install --no-deps tf_keras==2.21.0" in install
    ci = (ROOT / ".ci" / "run").read_text()
    assert "if .venv/bin/python -m pip show -q tensorflow >/dev/null 2>&1; then tf=tf; else tf=tf-cpu; fi" in ci
    assert 'pip install -q -e ".[$tf,test]"' in ci and "'.[tf-cpu,test]'" not in ci
    assert '[ "$tf" = tf ] || .venv/bin/python -m pip install -q --no-deps tf_keras==2.21.0' in ci


def test_the_venv_is_put_on_path_before_the_first_bare_marathon_tf_command():
    """Issue 43, item 6: the two commands install into ``.venv`` and call ``.venv/bin/marathon-tf``; the tour
    then used bare ``marathon-tf``, which a new shell does not find. The README says how, once, before the
    first block that calls it by name."""
    text = README.read_text()
    found = blocks(text)
    first_bare = next(b for b in found if b.lang in SHELLS and re.search(r"(^|\n)\s*marathon-tf\s", b.text))
    before = text[:text.index(first_bare.text)]
    assert "source .venv/bin/activate" in before[before.index("```bash"):], \
        "say `source .venv/bin/activate` (or the .venv/bin/ prefix) before the first bare marathon-tf command"


def test_the_unchanged_program_claim_says_what_is_not_free():
    """Issue 43, item 9: "Your program runs unchanged" is true for discovery and restarts, not for save rounds
    (a hook) nor for the image (every task image needs marathon-tf): the claim says both where it stands."""
    text = README.read_text()
    claim = text[text.index("**Your program runs unchanged.**"):]
    claim = " ".join(claim[:claim.index("\n- **")].split())
    assert "image must hold marathon-tf" in claim and "`docker/`" in claim
    assert "save hook" in claim and "docs/restarts.md#save-rounds-nothing-trained-twice" in claim
