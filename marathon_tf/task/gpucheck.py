"""Can a task given GPUs see them? Checked by the bootstrap before anything starts, without TensorFlow.

A task whose app asks for ``gpus`` (``MTF_GPUS``) needs, inside its container:

* the device files ``/dev/nvidia0``, ``/dev/nvidia1``, … — the Mesos containerizer's GPU isolator
  (agent ``--isolation=…,gpu/nvidia``) makes the task's GPUs visible; a task run without it (another
  containerizer, an agent without the isolator) sees none;
* the NVIDIA driver's user-space side (``nvidia-smi``, ``libcuda.so``), which no image carries: the agent
  mounts its driver volume at ``/usr/local/nvidia`` only into images that ask for it — Mesos before 1.8
  only when the image is labelled ``com.nvidia.volumes.needed`` (since 1.8 also when its environment sets
  ``NVIDIA_VISIBLE_DEVICES``).

When ``nvidia-smi`` is there, ``nvidia-smi -L`` must list the GPUs; else ``libcuda.so`` must be found.
What cannot work is one line naming the likely cause (:func:`gpu_problem`; on the local runner, which
has no containerizer, that this machine lacks the GPUs); the bootstrap fails the job
with it at once (a relaunch would meet the same agent setup), instead of TensorFlow silently training
on the CPU or failing in every restart.
"""

from __future__ import annotations

import ctypes.util
import glob
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping

__all__ = ["gpu_problem", "DRIVER_DIR"]

#: Where Mesos's GPU isolator mounts the driver volume in the container.
DRIVER_DIR = "/usr/local/nvidia"
_DEVICE = re.compile(r"^nvidia\d+$")
_CONTAINERIZER = ("is it run by the Mesos containerizer with the GPU isolator (agent --isolation=…,gpu/nvidia) "
                  "on an agent that has GPUs?")
#: The local runner (``--local``, ``local serve``) adds this to every task's environment (contract/taskenv).
_LOCAL_RUNNER = "MTF_RUNNER_MARATHON_URL"
_LOCAL = ("the local runner (--local, local serve) runs each task as a process of this machine, with this "
          "machine's GPUs: run the job on a machine that has them (and --agent-resources gpus:N no more than it has)")
_DRIVER = ("the NVIDIA driver volume is missing: the agent mounts it at /usr/local/nvidia only into images "
           "labelled com.nvidia.volumes.needed=\"nvidia_driver\" (Mesos < 1.8) or setting NVIDIA_VISIBLE_DEVICES")


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def gpu_problem(gpus: int, environ: Mapping[str, str], *, dev_dir: str = "/dev",
                which: Callable[..., str | None] = shutil.which,
                run: Callable[[list[str]], subprocess.CompletedProcess] = _run,
                find_library: Callable[[str], str | None] = ctypes.util.find_library) -> str | None:
    """Why a task given ``gpus`` GPUs cannot use them (one line), or None when it can (or was given none).
    ``dev_dir``, ``which``, ``run`` and ``find_library`` are injectable for tests."""
    if gpus <= 0:
        return None
    devices = sorted(os.path.basename(p) for p in glob.glob(os.path.join(dev_dir, "nvidia*"))
                     if _DEVICE.match(os.path.basename(p)))
    given = f"given {gpus} GPU{'s' if gpus != 1 else ''}"
    cause = _LOCAL if environ.get(_LOCAL_RUNNER) else _CONTAINERIZER  # no Mesos containerizer on the local runner
    if not devices:
        return f"{given} but no GPU device ({dev_dir}/nvidia0, …) is visible: {cause}"
    if len(devices) < gpus:
        return f"{given} but only {len(devices)} GPU device(s) are visible ({', '.join(devices)}): {cause}"
    path = os.pathsep.join(filter(None, [environ.get("PATH", ""), os.path.join(DRIVER_DIR, "bin")]))
    smi = which("nvidia-smi", path=path)
    if smi is None:
        libs = [os.path.join(DRIVER_DIR, d) for d in ("lib64", "lib")]
        if find_library("cuda") or any(glob.glob(os.path.join(d, "libcuda.so*")) for d in libs):
            return None
        return f"{given} and {len(devices)} device(s) are visible, but neither nvidia-smi nor libcuda.so: {_DRIVER}"
    try:
        done = run([smi, "-L"])
    except (OSError, subprocess.SubprocessError) as e:
        return f"{given} but `nvidia-smi -L` could not run ({e}): {_DRIVER}"
    listed = [line for line in (done.stdout or "").splitlines() if line.startswith("GPU ")]
    if done.returncode != 0:
        said = " ".join(((done.stdout or "") + " " + (done.stderr or "")).split())[:200]
        return f"{given} but `nvidia-smi -L` failed (exit {done.returncode}: {said}): {_DRIVER}"
    if len(listed) < gpus:
        return f"{given} but `nvidia-smi -L` lists {len(listed)}: {cause}"
    return None
