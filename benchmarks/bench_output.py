"""Memory on huge output: peak RSS of `deploy --local` and of the task's bootstrap while the training
program writes one 200 MB line, against the same job writing one short line (the baseline, same run).

Peak RSS of `deploy --local` and of the bootstrap: the highest VmHWM read from /proc while they run
(the bootstrap stays up after its program finished, until the job is stopped). Not wait4's
ru_maxrss: a child started by vfork+exec inherits its parent's high-water mark, so it would report
this benchmark process's own size (hundreds of MiB once another benchmark has imported TensorFlow).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from .common import BIN, Row

LINE_MB = 200
# writes LINE_MB MB without a newline in 1 MB pieces (the program itself stays small), then "\n"
_PROGRAM = ("import sys\nfor _ in range({n}): sys.stdout.write('x' * 1000000)\nsys.stdout.write('\\n')\n"
            "sys.stdout.flush()\n")


def _vm_hwm_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _bootstraps_under(state: Path) -> list[int]:
    root = str(state.resolve())
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if b"bootstrap" in cmd and cwd.startswith(root):
            out.append(int(pid))
    return out


def _run(megabytes: int, work: Path) -> tuple[float, float, int]:
    """(peak RSS MiB of deploy --local, peak RSS MiB of the bootstrap, bytes in the sandbox's stdout)."""
    job = work / f"job-{megabytes}.json"
    job.write_text(json.dumps({
        "name": f"bigline{megabytes}", "command": ["python3", "-c", _PROGRAM.format(n=megabytes)],
        "roles": {"worker": {"count": 1, "cpus": 0.1, "mem": 64}}}))
    state = work / f"state-{megabytes}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARATHON")}
    env.update(MARATHON_TF_STATE_DIR=str(state), MARATHON_TF_CONFIG="/nonexistent")
    proc = subprocess.Popen([str(BIN / "marathon-tf"), "deploy", str(job), "--local", "--timeout", "600"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=work)
    boot_peak, runner_peak = [0], [0]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            runner_peak[0] = max(runner_peak[0], _vm_hwm_kib(proc.pid))
            for pid in _bootstraps_under(state):
                boot_peak[0] = max(boot_peak[0], _vm_hwm_kib(pid))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    _, status, _usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    watcher.join()
    if proc.returncode != 0:
        raise RuntimeError(f"deploy --local exited {proc.returncode} on the {megabytes} MB line job")
    out_bytes = sum(p.stat().st_size for p in state.glob("*/sandboxes/*/stdout"))
    return runner_peak[0] / 1024, boot_peak[0] / 1024, out_bytes


def bench_big_line(quick: bool) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="mtf-bigline-") as d:
        work = Path(d)
        base_runner, base_boot, _ = _run(0, work)
        runner, boot, out_bytes = _run(LINE_MB, work)
    note = (f"one {LINE_MB} MB line (sandbox stdout {out_bytes / 1e6:.0f} MB, passed through whole); "
            f"baseline: same job printing one empty line")
    return [
        Row(f"deploy --local peak RSS, {LINE_MB} MB single line", round(runner, 1), "MiB",
            f"{runner / base_runner:.2f}x the baseline's {base_runner:.1f} MiB; {note}"),
        Row(f"bootstrap peak RSS, {LINE_MB} MB single line", round(boot, 1), "MiB",
            f"{boot / base_boot:.2f}x the baseline's {base_boot:.1f} MiB" if base_boot else "baseline not seen"),
    ]


BENCHMARKS = {"big_line": bench_big_line}
