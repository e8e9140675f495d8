"""Run the benchmarks, print a table, write benchmarks/results.md.

``--only NAME …`` runs some; ``--goals`` runs what the project's speed and load goals need and says of each
whether it is met (:mod:`benchmarks.goals`); ``--compare REF`` runs the chosen benchmarks for this checkout and
another version side by side, interleaved, with their ratios (:mod:`benchmarks.compare`); ``--json PATH``
writes the rows as JSON. A run ends with no process of its own left behind (it says so, and fails, if one is).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from . import bench_core
from .common import Row, descendants, machine, slowdown

BENCHMARKS = {
    "cli": bench_core.bench_cli,
    "render": bench_core.bench_render,
    "busy_ports": bench_core.bench_busy_ports,
}


def _optional():
    """Benchmarks that need TensorFlow or the local runner are added when importable."""
    out = {}
    try:
        from . import bench_runtime

        out.update(bench_runtime.BENCHMARKS)
    except ImportError:
        pass
    try:
        from . import bench_admission, bench_hopeless, bench_output, bench_rendezvous, bench_rounds

        out.update(bench_output.BENCHMARKS)
        out.update(bench_rounds.BENCHMARKS)
        out.update(bench_hopeless.BENCHMARKS)
        out.update(bench_rendezvous.BENCHMARKS)
        out.update(bench_admission.BENCHMARKS)
    except ImportError:
        pass
    try:
        from . import bench_elastic, bench_failover, bench_lifecycle, bench_paths

        out.update(bench_lifecycle.BENCHMARKS)
        out.update(bench_paths.BENCHMARKS)
        out.update(bench_failover.BENCHMARKS)
        out.update(bench_elastic.BENCHMARKS)
    except ImportError:
        pass
    try:
        from . import bench_prewarm

        out.update(bench_prewarm.BENCHMARKS)
    except ImportError:
        pass
    try:
        from . import bench_serve

        out.update(bench_serve.BENCHMARKS)
    except ImportError:
        pass
    try:
        from . import bench_observe

        out.update(bench_observe.BENCHMARKS)
    except ImportError:
        pass
    return out


def _run(benches: dict, names: list[str], quick: bool) -> list[tuple[str, Row]]:
    """Each benchmark in turn; one that raises gets a row saying so (the others still run)."""
    rows: list[tuple[str, Row]] = []
    for name in names:
        print(f"running {name} …", file=sys.stderr, flush=True)
        started = time.time()
        try:
            produced = benches[name](quick)
        except Exception as e:  # noqa: BLE001 - the row says what went wrong; the other benchmarks go on
            produced = [Row(name, "failed", "", f"{type(e).__name__}: {e}")]
        for row in produced:
            rows.append((name, row))
            print(f"  {row.name}: {row.value} {row.unit}  {row.note}", file=sys.stderr, flush=True)
        print(f"  ({time.time() - started:.0f} s)", file=sys.stderr)
    return rows


def _left_behind() -> int:
    """1 (after ending them, and saying so) when this run left processes of its own; else 0."""
    left = descendants()
    if not left:
        return 0
    print(f"benchmarks: left {len(left)} process(es) behind, now killed: "
          + "; ".join(f"{pid} {cmd}" for pid, cmd in left[:5]), file=sys.stderr)
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--only", nargs="*", help="run only these benchmarks")
    parser.add_argument("--goals", action="store_true", help="run what the goals need; say which are met")
    parser.add_argument("--compare", metavar="REF", help="also run a git ref or another checkout's path, "
                        "interleaved, and print both with their ratio (with --only)")
    parser.add_argument("--repetitions", type=int, default=3, help="with --compare: repetitions of each side")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    parser.add_argument("--out", default=str(Path(__file__).with_name("results.md")))
    args = parser.parse_args(argv)
    benches = {**BENCHMARKS, **_optional()}
    unknown = [n for n in (args.only or []) if n not in benches]
    if unknown:
        parser.error(f"no such benchmark: {', '.join(unknown)} (there are: {', '.join(benches)})")
    if args.compare:
        if not args.only:
            parser.error("--compare needs --only: which benchmarks to run on both sides")
        from .compare import CompareError, compare

        try:
            print(compare(args.compare, args.only, args.repetitions))
        except CompareError as e:
            print(f"benchmarks: {e}", file=sys.stderr)
            return 2
        return _left_behind()
    if args.goals:
        from .goals import GOALS, needed, table, verdicts

        names = [n for n in needed() if n in benches]
        rows = _run(benches, names, args.quick)
        results = verdicts(rows, set(names), GOALS,
                           missing=lambda n: f"benchmark {n} cannot run here (its imports failed)")
        print(f"# marathon-tf goals\n\nMachine: {machine()}; machine factor {slowdown():.2f}\n\n" + table(results))
        _write_json(args.json, rows)
        return _left_behind()
    names = args.only or list(benches)
    rows = _run(benches, names, args.quick)
    lines = ["# marathon-tf benchmark results", "",
             f"Machine: {machine()}  ",
             f"Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             f"`python -m benchmarks{' --quick' if args.quick else ''}`", "",
             "| benchmark | result | unit | notes |", "|---|---|---|---|"]
    for _, r in rows:
        lines.append(f"| {r.name} | {r.value} | {r.unit} | {r.note} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.only:
        Path(args.out).write_text(text)
    _write_json(args.json, rows)
    return _left_behind()


def _write_json(path: str | None, rows: list[tuple[str, Row]]) -> None:
    if path:
        Path(path).write_text(json.dumps([{"benchmark": name, "name": r.name, "value": r.value, "unit": r.unit,
                                           "note": r.note} for name, r in rows]))


if __name__ == "__main__":
    sys.exit(main())
