"""Running example jobs through the real CLI with `--local`, and checking nothing is left behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import jobfiles
from leaks import processes_under, wait_no_processes  # noqa: F401 (re-exported for the e2e tests)

ROOT = Path(__file__).resolve().parents[1]
MARATHON_TF = str(Path(sys.executable).parent / "marathon-tf")
STEP = re.compile(r"^\[(?P<task>[a-z]+-\d+)\] .*\bstep=(?P<step>\d+) loss=(?P<loss>[0-9.eE+-]+)")


def local_job(example: str, tmp_path: Path, job_file: str = "job.json", **changes) -> Path:
    """A copy of an example's job file with its checkpoint volume in tmp_path and absolute fetch paths."""
    return jobfiles.example_job(example, tmp_path, job_file, **changes)


def deploy_local(job_path: Path, tmp_path: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, MARATHON_TF_STATE_DIR=str(tmp_path / "state"))
    env.pop("MARATHON_URL", None)
    proc = subprocess.Popen([MARATHON_TF, "deploy", str(job_path), "--local", "--timeout", str(timeout - 20), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                            start_new_session=True)
    out, err, ended = communicate_or_stop(proc, timeout)
    if not ended:
        raise AssertionError(f"deploy --local did not end in {timeout} s\n{err[-4000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def communicate_or_stop(proc: subprocess.Popen, timeout: float, grace: float = 20) -> tuple[str, str, bool]:
    """``(stdout, stderr, ended in time)`` of a process started in its own session: past ``timeout``
    its group gets SIGINT (Ctrl-C), then SIGKILL after ``grace`` seconds."""
    try:
        out, err = proc.communicate(timeout=timeout)
        return out, err, True
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        return out, err, False


def losses(output: str) -> dict[str, list[tuple[int, float]]]:
    by_task: dict[str, list[tuple[int, float]]] = {}
    for line in output.splitlines():
        m = STEP.match(line)
        if m:
            by_task.setdefault(m["task"], []).append((int(m["step"]), float(m["loss"])))
    return by_task


class Serve:
    """`marathon-tf local serve` on free ports (plus ``extra`` options), its state in tmp_path; stopped
    with SIGINT. ``url``: what its banner says to export as MARATHON_URL (every instance's URL)."""

    def __init__(self, tmp_path: Path, *extra: str):
        self.tmp_path = tmp_path
        # the default state dir (no --state-dir): $XDG_STATE_HOME/marathon-tf/serve
        self.env = {k: v for k, v in os.environ.items() if k not in ("MARATHON_URL", "MARATHON_TF_STATE_DIR")}
        self.env["XDG_STATE_HOME"] = str(tmp_path / "xdg")
        self.proc = subprocess.Popen([MARATHON_TF, "local", "serve", "--port", "0", "--dns-port", "0",
                                      "--dns-http-port", "0", *extra], stderr=subprocess.PIPE, text=True, env=self.env,
                                     cwd="/", start_new_session=True)
        first = self.proc.stderr.readline()
        assert first.startswith("Marathon API  http://127.0.0.1:"), first + self.proc.stderr.read()
        self.url = first.split()[2]
        self.env["MARATHON_URL"] = self.url
        self.state = tmp_path / "xdg" / "marathon-tf" / "serve"

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([MARATHON_TF, *args], capture_output=True, text=True, env=self.env, cwd=self.tmp_path,
                              timeout=timeout)

    def wait_state(self, job: str, timeout: float = 300) -> dict:
        deadline = time.monotonic() + timeout
        st: dict = {}
        while time.monotonic() < deadline:
            r = self.cli("status", job, "-o", "json")
            if r.returncode == 0:
                st = json.loads(r.stdout)
                if st.get("state") in ("Succeeded", "Failed"):
                    return st
            time.sleep(2)
        raise AssertionError(f"{job} did not end in {timeout} s: {st}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if not self.proc.stderr.closed:
            self.log = self.proc.stderr.read()  # what it printed after its first line
            self.proc.stderr.close()


def trainer_pid(state: Path, task: str) -> int | None:
    """``task``'s current training program, as its bootstrap logged it (newest sandbox under ``state``)."""
    boxes = sorted(state.glob(f"**/sandboxes/*_{task}.*/stderr"), key=lambda p: p.stat().st_mtime)
    for stderr in reversed(boxes):
        found = re.findall(r"started training program \(pid (\d+)\)", stderr.read_text(errors="replace"))
        if found:
            return int(found[-1])
    return None
