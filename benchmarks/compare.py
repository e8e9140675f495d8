"""``python -m benchmarks --compare REF``: the same benchmarks for this checkout and another version, in one run.

An issue's "no slower than main" is a ratio measured side by side: both versions on the same machine at the
same time, so that whatever else the machine does weighs on both alike. REF is a git ref of this repository
(exported with ``git archive`` into a temporary folder) or the path of another checkout. Its package runs in a
temporary virtual environment layered over this one (its source tree first on ``sys.path``, then this
environment's installed libraries: the same TensorFlow), with its own ``marathon-tf`` command; nothing is
installed and nothing is downloaded.

Both versions run *this* checkout's benchmark code (copied into the temporary folder, so that neither version's
source shadows the other's package) against their own package and examples (``MTF_BENCH_ROOT``). Repetitions
are interleaved — this, REF; then REF, this; … — each one a ``python -m benchmarks --only … --quick --json``
process in a session of its own, ended with whatever it left behind. Both sides wait with the same machine
factor (:func:`benchmarks.common.slowdown`, measured once here). Each figure is printed for both, with the
ratio this / REF of their medians.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .common import HARNESS, ROOT, descendants, median, slowdown


class CompareError(Exception):
    """REF cannot be prepared (no such ref, not a checkout): one line."""


@dataclass(frozen=True)
class Side:
    label: str
    python: str
    tree: Path


def _prepare_ref(ref: str, work: Path) -> Side:
    """The other version: a checkout's path, or a git ref exported from this repository."""
    path = Path(ref).expanduser()
    if path.is_dir():
        if not (path / "marathon_tf" / "__init__.py").is_file():
            raise CompareError(f"{ref} is a folder but not a marathon-tf checkout (no marathon_tf/__init__.py)")
        tree, label = path.resolve(), str(path)
    else:
        found = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                               capture_output=True, text=True)
        if found.returncode != 0:
            raise CompareError(f"{ref} is neither a folder nor a commit of {ROOT}")
        sha = found.stdout.strip()
        tree = work / "ref"
        tree.mkdir()
        archive = subprocess.Popen(["git", "-C", str(ROOT), "archive", sha], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", str(tree)], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            raise CompareError(f"git archive {sha[:10]} failed")
        label = f"{ref} ({sha[:10]})"
    venv = work / "ref-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # Its tree first, then this environment's libraries (the folders of installed packages on this process's
    # path; .pth files in them are not read again, so this checkout's own editable install stays out).
    libraries = [p for p in sys.path if p and ("site-packages" in p or "dist-packages" in p)
                 and Path(p).resolve() != HARNESS]
    (site / "_marathon_tf_compare.pth").write_text("\n".join([str(tree), *dict.fromkeys(libraries)]) + "\n")
    entry = re.search(r'^marathon-tf\s*=\s*"([\w.]+):(\w+)"', (tree / "pyproject.toml").read_text(), re.M)
    module, func = entry.groups() if entry else ("marathon_tf.user.cli", "main")
    cli = venv / "bin" / "marathon-tf"
    cli.write_text(f"#!{python}\nimport sys\nfrom {module} import {func}\nsys.exit({func}())\n")
    cli.chmod(0o755)
    return Side(label, str(python), tree)


def _run_once(side: Side, names: list[str], harness: Path, out: Path, factor: float) -> tuple[list[dict], str]:
    """One repetition of ``names`` for ``side``: its rows, and what went wrong (empty when nothing did)."""
    env = {**os.environ, "MTF_BENCH_ROOT": str(side.tree), "MTF_BENCH_SLOWDOWN": f"{factor:.3f}"}
    proc = subprocess.Popen([side.python, "-m", "benchmarks", "--only", *names, "--quick", "--json", str(out)],
                            cwd=harness, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate()
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever the run left in its session
        except ProcessLookupError:
            pass
    rows = json.loads(out.read_text()) if out.is_file() else []
    last = (err or "").strip().splitlines()[-1:] or ["(no output)"]
    problem = "" if proc.returncode == 0 else f"exit {proc.returncode}: {last[0]}"
    return rows, problem


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def compare(ref: str, names: list[str], repetitions: int) -> str:
    """Run ``names`` for this checkout and ``ref``, interleaved; the table as markdown."""
    work = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    try:
        other = _prepare_ref(ref, work)
        this = Side("this checkout", sys.executable, ROOT)
        harness = work / "harness"
        shutil.copytree(HARNESS / "benchmarks", harness / "benchmarks",
                        ignore=shutil.ignore_patterns("__pycache__", ".runs"))
        factor = slowdown()
        print(f"compare: {this.label} vs {other.label}; machine factor {factor:.2f}", file=sys.stderr, flush=True)
        figures: dict[tuple[str, str], dict[str, list]] = {}
        units: dict[tuple[str, str], str] = {}
        problems: dict[str, list[str]] = {this.label: [], other.label: []}
        for rep in range(repetitions):
            for side in ((this, other) if rep % 2 == 0 else (other, this)):
                print(f"  repetition {rep + 1}/{repetitions}: {side.label} …", file=sys.stderr, flush=True)
                rows, problem = _run_once(side, names, harness, work / f"rows-{rep}-{id(side)}.json", factor)
                if problem:
                    problems[side.label].append(f"repetition {rep + 1}: {problem}")
                for row in rows:
                    key = (row["benchmark"], row["name"])
                    units.setdefault(key, row["unit"])
                    figures.setdefault(key, {this.label: [], other.label: []})[side.label].append(row["value"])
        lines = [f"# `python -m benchmarks --compare {ref} --only {' '.join(names)}`", "",
                 f"{repetitions} interleaved repetitions; machine factor {factor:.2f} (both sides wait alike)", "",
                 f"| figure | this checkout | {other.label} | this / {ref} |", "|---|---|---|---|"]
        for key, per in figures.items():
            cells, medians = [], []
            for label in (this.label, other.label):
                values = per[label]
                numbers = [n for v in values if (n := _number(v)) is not None]
                m = median(numbers) if numbers else None
                medians.append(m)
                shown = f"{m:g} {units[key]}".strip() if m is not None else "—"
                if len(values) > 1 or len(numbers) != len(values):
                    shown += f" ({', '.join(str(v) for v in values)})"
                cells.append(shown if values else "not run")
            ratio = (f"{medians[0] / medians[1]:.2f}" if None not in medians and medians[1] else "—")
            lines.append(f"| {key[1]} | {cells[0]} | {cells[1]} | {ratio} |")
        for label, said in problems.items():
            for problem in said:
                lines.append(f"\n{label}: {problem}")
        left = descendants()
        if left:
            lines.append(f"\nleft behind: {len(left)} process(es): {left[:3]}")
        return "\n".join(lines) + "\n"
    finally:
        shutil.rmtree(work, ignore_errors=True)
