"""Run the benchmarks, print a table, write benchmarks/results.md."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import bench_core
from .common import Row, machine

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
        from . import bench_admission, bench_hopeless, bench_output, bench_rendezvous

        out.update(bench_output.BENCHMARKS)
        out.update(bench_hopeless.BENCHMARKS)
        out.update(bench_rendezvous.BENCHMARKS)
        out.update(bench_admission.BENCHMARKS)
    except ImportError:
        pass
    try:
        from . import bench_elastic, bench_failover, bench_lifecycle

        out.update(bench_lifecycle.BENCHMARKS)
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--only", nargs="*", help="run only these benchmarks")
    parser.add_argument("--out", default=str(Path(__file__).with_name("results.md")))
    args = parser.parse_args(argv)
    benches = {**BENCHMARKS, **_optional()}
    names = args.only or list(benches)
    rows: list[tuple[str, Row]] = []
    for name in names:
        print(f"running {name} …", file=sys.stderr, flush=True)
        started = time.time()
        for row in benches[name](args.quick):
            rows.append((name, row))
            print(f"  {row.name}: {row.value} {row.unit}  {row.note}", file=sys.stderr, flush=True)
        print(f"  ({time.time() - started:.0f} s)", file=sys.stderr)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
