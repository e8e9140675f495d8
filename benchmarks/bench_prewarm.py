"""Pre-warmed trainers and render speed, as ratios measured in one run.

* in-place restart to the next step: SIGKILL worker-1's *training program* (not its task)
  mid-training; its bootstrap restarts it in place (after its 1 s restart backoff), forked by the
  pre-warmed interpreter (no import) -> seconds until worker-1 printed its next ``step=`` line.
  The same with ``prewarm: false`` (the restart imports TensorFlow again) for the ratio.
* render of 1 ps + 1,000 / 10,000 workers as a whole process (``marathon-tf render job.json >
  file``) against tensorflow/ecosystem's Marathon template rendered the way its README says
  (the header's ``worker_replicas`` / ``ps_replicas`` edited, ``python render_template.py
  file > file``). Their template and script are not part of this repository: they are read
  from a checkout named by ``MTF_ECOSYSTEM_DIR`` or cloned at run time into
  ``~/.cache/marathon-tf/ecosystem`` (``git clone --depth 1
  https://github.com/tensorflow/ecosystem``); without either the rows say why they are missing.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from .common import BIN, PYTHON, Row, median, trainer_pid

ECOSYSTEM_URL = "https://github.com/tensorflow/ecosystem"
ECOSYSTEM_TEMPLATE = Path("marathon") / "template.json.jinja"
ECOSYSTEM_SCRIPT = Path("render_template.py")
_SET = r"(\{%-?\s*set\s+{name}\s*=\s*)\d+"


# ------------------------------------------------------------------------------ in-place restart


def _kill_program(task: str):
    def disrupt(cluster, client, job) -> None:
        _, pid = trainer_pid(cluster, task)
        os.kill(pid, signal.SIGKILL)
    return disrupt


def bench_inplace_restart(quick: bool) -> list[Row]:
    """SIGKILL of worker-1's training program: seconds until *its* next step (only its program restarts,
    in place; its peers train on), pre-warmed and not, alternating."""
    from .bench_lifecycle import _one_run

    n = 1 if quick else 3
    runs: dict[bool, list[float]] = {True: [], False: []}
    failures: list[str] = []
    for i in range(n):
        for prewarm in ((True, False) if i % 2 == 0 else (False, True)):  # alternate: drift hits both alike
            try:
                runs[prewarm].append(_one_run(_kill_program("worker-1"), 2, alone="worker-1",
                                              trainers={"worker-1"}, **({} if prewarm else {"prewarm": False}))[0])
            except Exception as e:  # noqa: BLE001 - the row says what went wrong; the other runs go on
                failures.append(f"{'pre-warmed' if prewarm else 'prewarm: false'} run {i + 1}: "
                                f"{type(e).__name__}: {e}")
    failed = f"; {len(failures)} run(s) failed: {' | '.join(failures)}" if failures else ""

    def each(xs):
        return ", ".join(f"{x:.2f}" for x in xs)
    rows = []
    if runs[True]:
        on = median(runs[True])
        rows.append(Row("in-place restart to next step, pre-warmed (goal ≤ 1 s)", round(on, 2), "s",
                        f"{'met' if on <= 1 else 'NOT met'}; SIGKILL of worker-1's program -> its next step= line "
                        f"(linear-regression-tf1, local); a first failure restarts at once (no backoff); median of "
                        f"{len(runs[True])}: {each(runs[True])}{failed}"))
    else:
        rows.append(Row("in-place restart to next step, pre-warmed (goal ≤ 1 s)", "did not complete", "",
                        failed.lstrip("; ")))
    if runs[False]:
        off = median(runs[False])
        rows.append(Row("in-place restart to next step, prewarm: false", round(off, 2), "s",
                        f"the restart imports TensorFlow again; median of {len(runs[False])}: {each(runs[False])}"))
        if runs[True]:
            rows.append(Row("in-place restart ratio pre-warmed / not", round(median(runs[True]) / off, 2), "×", ""))
    return rows


# ------------------------------------------------------------------------------ render vs ecosystem


def ecosystem_checkout() -> tuple[Path | None, str]:
    """(a tensorflow/ecosystem checkout, how it was found) or (None, why not)."""
    given = os.environ.get("MTF_ECOSYSTEM_DIR")
    if given:
        path = Path(given)
        missing = [str(p) for p in (ECOSYSTEM_TEMPLATE, ECOSYSTEM_SCRIPT) if not (path / p).is_file()]
        return (None, f"MTF_ECOSYSTEM_DIR={given} lacks {', '.join(missing)}") if missing else \
            (path, f"MTF_ECOSYSTEM_DIR={given}")
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "marathon-tf" / "ecosystem"
    if not (cache / ECOSYSTEM_TEMPLATE).is_file():
        cache.parent.mkdir(parents=True, exist_ok=True)
        try:
            subprocess.run(["git", "clone", "--quiet", "--depth", "1", ECOSYSTEM_URL, str(cache)], check=True,
                           timeout=120, capture_output=True, env=dict(os.environ, GIT_TERMINAL_PROMPT="0"))
        except (OSError, subprocess.SubprocessError) as e:
            detail = getattr(e, "stderr", b"") or b""
            return None, (f"could not clone {ECOSYSTEM_URL} ({type(e).__name__}: "
                          f"{detail.decode(errors='replace').strip()[:120] or e}); set MTF_ECOSYSTEM_DIR to a "
                          f"checkout of it")
    return cache, f"cloned into {cache}"


def _ecosystem_input(checkout: Path, workers: int, work: Path) -> Path:
    """Their template with its header set to 1 ps + ``workers`` workers (their README's way)."""
    text = (checkout / ECOSYSTEM_TEMPLATE).read_text()
    for name, value in (("worker_replicas", workers), ("ps_replicas", 1)):
        text, n = re.subn(_SET.replace("{name}", name), rf"\g<1>{value}", text, count=1)
        if n != 1:
            raise ValueError(f"{ECOSYSTEM_TEMPLATE}: no '{{% set {name} = N %}}' line to edit")
    out = work / f"ecosystem-{workers}.json.jinja"
    out.write_text(text)
    return out


def _our_input(workers: int, work: Path) -> Path:
    import json

    from .bench_core import _job

    out = work / f"job-{workers}.json"
    out.write_text(json.dumps(_job(workers)))
    return out


def _whole_process(argv: list[str], stdin: Path | None, out: Path) -> tuple[float, int]:
    """Seconds of one run of ``argv`` with stdout to a file (not a terminal); the output's size."""
    with open(out, "wb") as f, open(stdin or os.devnull, "rb") as inp:
        t = time.perf_counter()
        subprocess.run(argv, stdin=inp, stdout=f, stderr=subprocess.DEVNULL, check=True, timeout=1800)
        return time.perf_counter() - t, out.stat().st_size


def _alternating(commands: dict[str, tuple[list[str], Path | None]], work: Path, repeat: int
                 ) -> dict[str, tuple[float, int]]:
    """Median seconds and output size per command, the commands' runs interleaved (drift on a
    shared machine hits all alike)."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    sizes: dict[str, int] = {}
    for i in range(repeat):
        for name in (list(commands) if i % 2 == 0 else list(reversed(commands))):
            argv, stdin = commands[name]
            secs, sizes[name] = _whole_process(argv, stdin, work / f"{name}.out")
            times[name].append(secs)
    return {name: (median(times[name]), sizes[name]) for name in commands}


def bench_render_vs_ecosystem(quick: bool) -> list[Row]:
    rows: list[Row] = []
    checkout, how = ecosystem_checkout()
    with tempfile.TemporaryDirectory(prefix="bench-render-") as tmp:
        work = Path(tmp)
        def ours(workers):
            return ([str(BIN / "marathon-tf"), "render", str(_our_input(workers, work))], None)
        sizes = [1000, 2000, 10000] if os.environ.get("MTF_BENCH_ECOSYSTEM_10K") == "1" else [1000, 2000]
        results: dict[int, dict[str, tuple[float, int]]] = {}
        problem = how if checkout is None else None
        for workers in (1000, 2000, 10000):
            commands = {"ours": ours(workers)}
            if problem is None and workers in sizes:
                try:
                    template = _ecosystem_input(checkout, workers, work)
                    commands["theirs"] = ([PYTHON, str(checkout / ECOSYSTEM_SCRIPT), str(template)], template)
                except ValueError as e:
                    problem = str(e)
            repeat = 1 if workers > 2000 and "theirs" in commands else (3 if quick or workers > 1000 else 7)
            results[workers] = _alternating(commands, work, repeat)
            if workers != 2000:
                secs, size = results[workers]["ours"]
                rows.append(Row(f"`marathon-tf render` 1 ps + {workers:,} workers, whole process", round(secs, 3),
                                "s", f"stdout to a file (compact JSON), {size / 2**20:.1f} MiB; median of {repeat}"))
            if "theirs" in results[workers]:
                secs, size = results[workers]["theirs"]
                rows.append(Row(f"tensorflow/ecosystem template 1 ps + {workers:,} workers, whole process",
                                round(secs, 3), "s",
                                f"`python render_template.py` ({how}); {size / 2**20:.1f} MiB (every app lists "
                                f"every host: quadratic); median of {repeat}, runs alternating with ours"))
        per_task = (results[10000]["ours"][0] / 10001) / (results[1000]["ours"][0] / 1001)
        rows.append(Row("whole-process render cost per task, 10k vs 1k (1.0 = linear)", round(per_task, 2), "×",
                        "includes the fixed start-up cost, which favours 10k"))
        if problem is not None:
            rows.append(Row("render vs tensorflow/ecosystem's template", "skipped", "", problem))
            return rows
        for workers in (1000, 10000):
            name = f"render ratio marathon-tf / ecosystem at {workers:,} workers"
            if "theirs" in results[workers]:
                ratio = results[workers]["ours"][0] / results[workers]["theirs"][0]
                goal = " (goal ≤ 0.25)" if workers == 1000 else ""
                rows.append(Row(name + goal, round(ratio, 3 if workers == 1000 else 4), "×",
                                ("met; " if ratio <= 0.25 else "NOT met; ") * (workers == 1000)
                                + "both as whole processes, same Python, same machine, interleaved"))
            else:
                small, big = results[1000]["theirs"][1], results[2000]["theirs"][1]
                rows.append(Row(name, "not run", "",
                                f"their output grows {big / small:.1f}× from 1,000 to 2,000 workers (≈ "
                                f"{small * 100 / 2**30:.1f} GiB at 10,000, built in memory); "
                                f"MTF_BENCH_ECOSYSTEM_10K=1 runs it"))
    return rows


BENCHMARKS = {
    "inplace_restart": bench_inplace_restart,
    "render_vs_ecosystem": bench_render_vs_ecosystem,
}
