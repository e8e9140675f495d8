"""The README's command blocks, as tests run them (tests/test_readme.py).

Every fenced block is found wherever it is (blocks may be added, moved or rewritten): a ``bash``/``sh``/
``shell`` block is run, a ``json`` block holding a job file (it has ``"roles"``) is validated, a
``python`` block is compiled and what it imports from marathon_tf must exist; other blocks
(diagrams, output) are left alone. A block is known by its first command, not its place.

How a shell block runs: in a fresh ``bash -eo pipefail`` with this checkout's ``marathon-tf`` first on
PATH, in a scratch folder that links every top-level entry of the repository (so ``examples/…``
works and what a command writes stays out of the checkout), with its own state directory
(``MARATHON_TF_STATE_DIR``); ``marathon-tf local serve`` gets free ports (``8080``, ``8053``,
``8123`` in the block become them) and the next command waits until it answers; whatever the block
left in the background is stopped at its end (SIGINT, as Ctrl-C). Changed, each with its reason
(shown in the test's output):

* a part of a line that installs (``python3 -m venv``, ``pip install``) is dropped: the test runs in
  the project's environment, already installed;
* ``bash .ci/run`` is dropped: it is the whole test suite, of which this test is a part;
* ``.venv/bin/`` before a command means this environment's.

A block is skipped, saying why, when it needs what a test here cannot have: a real Mesos cluster
(a Marathon URL that is not this machine's), Docker and a registry, or the internet (``git clone``,
``curl``, ``npm``, ``local ui-install`` without ``--from-tarball``).

An HTML comment right before a block (``<!-- readme-test: … -->``, several ``;``-separated) says more:

* ``skip: REASON``: do not run it (say why);
* ``expect: TEXT``: its output (stdout and stderr) must contain TEXT (repeatable);
* ``continues``: run the block before it first, in the same shell (a tour told over several blocks);
* ``timeout: SECONDS`` (default 600).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

__all__ = ["Block", "Plan", "blocks", "plan", "SHELLS", "PORTS"]

SHELLS = ("bash", "sh", "shell")
#: The default ports a README block may name, and which local serve option sets each.
PORTS = {8080: "--port", 8053: "--dns-port", 8123: "--dns-http-port"}

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)[^\n]*$")
_MARKER = re.compile(r"<!--\s*readme-test:\s*(?P<body>.*?)\s*-->", re.S)

#: Parts of a line that are dropped, and why.
DROPPED = [
    (re.compile(r"^\s*python3?\s+-m\s+venv\b"), "the test runs in the project's environment (already made)"),
    (re.compile(r"(^|/)pip3?\s+install\b|-m\s+pip\s+install\b"),
     "the test runs in the project's environment (already installed)"),
    (re.compile(r"^\s*(bash\s+)?\.ci/run\b"), "the whole test suite, of which this test is a part"),
]
#: What makes a block impossible to run here, and why.
SKIPPED = [
    (re.compile(r"(^|\s)docker\s"), "needs Docker and an image registry"),
    (re.compile(r"(^|\s)(git\s+clone|curl|wget)\s"), "needs the internet"),
    (re.compile(r"(^|\s)(npm|npx)\s"), "needs the internet (the npm registry)"),
    (re.compile(r"local\s+ui-install(?![^\n]*--from-tarball)"), "needs the internet (GitHub, the npm registry)"),
    (re.compile(r"(MARATHON_URL=|--marathon[ =])(?!\$|https?://(127\.0\.0\.1|localhost|\[::1\])[:/\s])\S"),
     "needs a real Marathon (a Mesos cluster)"),
]


@dataclass
class Block:
    line: int                 # where its fence is (1-based)
    lang: str
    text: str
    options: dict = field(default_factory=dict)  # from the readme-test marker before it

    @property
    def name(self) -> str:
        """The block's first command (or first line): how the test names it."""
        for raw in self.text.splitlines():
            stripped = raw.strip()
            if stripped and not stripped.startswith("#"):
                return re.sub(r"\s+#.*$", "", stripped)[:70]
        return f"block at line {self.line}"


@dataclass
class Plan:
    script: str | None = None      # the bash script to run (None: nothing to run)
    skip: str | None = None        # why it is not run
    notes: list = field(default_factory=list)  # what was changed, and why
    expect: list = field(default_factory=list)
    timeout: float = 600.0
    serves: bool = False              # it starts `local serve`


def _options(comment: str) -> dict:
    out: dict = {"expect": []}
    for part in comment.split(";"):
        key, _, value = part.strip().partition(":")
        key, value = key.strip(), value.strip()
        if key == "expect":
            out["expect"].append(value.strip('"'))
        elif key in ("skip", "timeout"):
            out[key] = value
        elif key == "continues":
            out["continues"] = True
        elif key:
            raise ValueError(f"unknown readme-test option {key!r} (skip, expect, continues, timeout)")
    return out


def blocks(markdown: str) -> list[Block]:
    """Every fenced block, with the options of a ``readme-test`` comment right before it."""
    out, lines, i = [], markdown.splitlines(), 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, start = m.group("fence"), i
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        before = "\n".join(lines[max(0, start - 6):start]).rstrip()
        marker = _MARKER.search(before)
        options = _options(marker.group("body")) if marker and before.endswith("-->") else {"expect": []}
        out.append(Block(start + 1, m.group("lang").lower(), "\n".join(lines[start + 1:j]), options))
        i = j + 1
    return out


def job_file(block: Block) -> dict | None:
    """A json block's job file, or None when it is none."""
    if block.lang != "json":
        return None
    try:
        data = json.loads(block.text)
    except ValueError:
        return None
    return data if isinstance(data, dict) and "roles" in data else None


def _line_changes(line: str, notes: list) -> str:
    parts = [p for p in re.split(r"\s*&&\s*", line)]
    kept = []
    for part in parts:
        why = next((why for pattern, why in DROPPED if pattern.search(part)), None)
        if why:
            notes.append(f"dropped `{part.strip()}`: {why}")
        else:
            kept.append(re.sub(r"(^|\s)\.venv/bin/", r"\1", part))
    return " && ".join(kept)


def plan(block: Block, earlier: list[Block] = ()) -> Plan:
    """How the test runs a shell block (``earlier``: the blocks before it, for ``continues``)."""
    out = Plan(expect=list(block.options.get("expect", [])),
               timeout=float(block.options.get("timeout", 600)))
    if block.lang not in SHELLS:
        out.skip = f"a {block.lang or 'plain'} block: not commands"
        return out
    if block.options.get("skip"):
        out.skip = block.options["skip"]
        return out
    text, before = block.text, ""
    if block.options.get("continues"):
        shells = [b for b in earlier if b.lang in SHELLS]
        if not shells:
            raise ValueError(f"the block at line {block.line} continues no earlier shell block")
        prior = plan(shells[-1], [b for b in earlier if b is not shells[-1]])
        if prior.skip:
            out.skip = f"continues a block that is skipped ({prior.skip})"
            return out
        before, out.serves = prior.script + "\n", prior.serves
        out.notes += prior.notes
    code = "\n".join(re.sub(r"(^|\s)#.*$", "", line) for line in text.splitlines())  # comments say nothing
    for pattern, why in SKIPPED:
        if pattern.search(code):
            out.skip = why
            return out
    lines = []
    for line in text.splitlines():
        if line.strip().startswith("#") or not line.strip():
            lines.append(line)
            continue
        changed = _line_changes(line, out.notes)
        if not changed.strip():
            continue
        if re.search(r"marathon-tf\s+local\s+serve\b", changed):
            out.serves = True
            if "--port" not in changed:
                changed = re.sub(r"(marathon-tf\s+local\s+serve)\b",
                                 r"\1 --port $MTF_PORT_8080 --dns-port $MTF_PORT_8053 --dns-http-port $MTF_PORT_8123",
                                 changed)
            lines.append(changed)
            if re.sub(r"\s+#.*$", "", changed).rstrip().endswith("&"):
                lines.append("mtf_wait_serve")
            continue
        lines.append(changed)
    script = before + "\n".join(lines)
    for port in PORTS:
        script = re.sub(rf"(127\.0\.0\.1|localhost):{port}\b", rf"\1:$MTF_PORT_{port}", script)
    out.script = script
    return out
