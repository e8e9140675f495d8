"""A task given GPUs checks that it sees them (fake /dev directories and a fake nvidia-smi on PATH; no GPU
here) and fails the job at once, with one line naming the likely cause, when it cannot."""

from __future__ import annotations

import io
import os
import signal
import stat
import sys
import threading

import pytest
from polling import wait_for

from marathon_tf.contract import labels as L
from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.task.bootstrap import Bootstrap, job_lifecycle
from marathon_tf.task.gpucheck import gpu_problem
from marathon_tf.task.jobcontrol import JobControl


def devices(tmp_path, *names):
    dev = tmp_path / "dev"
    dev.mkdir(exist_ok=True)
    for name in names:
        (dev / name).write_text("")
    return str(dev)


def fake_smi(tmp_path, output: str, code: int = 0) -> dict:
    """A fake ``nvidia-smi`` printing ``output`` and exiting ``code``; returns the environment with it on PATH."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    smi = bindir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\n[ \"$1\" = -L ] || exit 64\ncat <<'EOF'\n{output}\nEOF\nexit {code}\n")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    return {"PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}


NO_LIB = {"find_library": lambda name: None}
TWO = "GPU 0: Tesla V100-SXM2-16GB (UUID: GPU-1)\nGPU 1: Tesla V100-SXM2-16GB (UUID: GPU-2)"


def test_no_gpus_asked_nothing_checked(tmp_path):
    assert gpu_problem(0, {}, dev_dir=str(tmp_path / "nothing")) is None


def test_devices_and_nvidia_smi_listing_them_is_fine(tmp_path):
    env = fake_smi(tmp_path, TWO)
    dev = devices(tmp_path, "nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm")
    assert gpu_problem(2, env, dev_dir=dev, **NO_LIB) is None
    assert gpu_problem(1, env, dev_dir=dev, **NO_LIB) is None


def test_no_device_file_names_the_containerizer_and_isolator(tmp_path):
    problem = gpu_problem(1, fake_smi(tmp_path, TWO), dev_dir=devices(tmp_path, "nvidiactl", "null"), **NO_LIB)
    assert problem.startswith("given 1 GPU but no GPU device")
    assert "Mesos containerizer" in problem and "gpu/nvidia" in problem and "\n" not in problem


def test_on_the_local_runner_the_reason_speaks_of_this_machine_not_of_the_mesos_containerizer(tmp_path):
    """Issue 32: a GPU job on `local serve` failed with "is it run by the Mesos containerizer with the GPU
    isolator …?": the local runner has no containerizer; it gives a task this machine's GPUs."""
    env = {**fake_smi(tmp_path, TWO), "MTF_RUNNER_MARATHON_URL": "http://127.0.0.1:8080"}
    problem = gpu_problem(4, env, dev_dir=devices(tmp_path, "nvidiactl"), **NO_LIB)
    assert problem.startswith("given 4 GPUs but no GPU device") and "containerizer" not in problem
    assert "the local runner (--local, local serve) runs each task as a process of this machine" in problem
    problem = gpu_problem(4, env, dev_dir=devices(tmp_path, "nvidia0"), **NO_LIB)
    assert "only 1 GPU device(s) are visible (nvidia0): the local runner" in problem


def test_fewer_devices_than_asked(tmp_path):
    problem = gpu_problem(2, fake_smi(tmp_path, TWO), dev_dir=devices(tmp_path, "nvidia0"), **NO_LIB)
    assert "given 2 GPUs but only 1 GPU device(s) are visible (nvidia0)" in problem


def test_devices_without_the_driver_volume_names_the_image_label(tmp_path):
    # apache/mesos src/slave/containerizer/mesos/isolators/gpu/volume.cpp NvidiaVolume::shouldInject: the
    # driver volume (nvidia-smi, libcuda) is mounted only into images labelled com.nvidia.volumes.needed
    # (before Mesos 1.8; since then also for images setting NVIDIA_VISIBLE_DEVICES), at /usr/local/nvidia
    # (CONTAINER_VOLUME_PATH in the same file).
    env = {"PATH": str(tmp_path / "empty-bin")}
    problem = gpu_problem(1, env, dev_dir=devices(tmp_path, "nvidia0"), **NO_LIB)
    assert "neither nvidia-smi nor libcuda.so" in problem and "com.nvidia.volumes.needed" in problem
    assert gpu_problem(1, env, dev_dir=devices(tmp_path, "nvidia0"),
                       find_library=lambda name: "libcuda.so.1" if name == "cuda" else None) is None


def test_nvidia_smi_failing_or_listing_fewer(tmp_path):
    dev = devices(tmp_path, "nvidia0", "nvidia1")
    failing = fake_smi(tmp_path, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", 9)
    problem = gpu_problem(1, failing, dev_dir=dev, **NO_LIB)
    assert "`nvidia-smi -L` failed (exit 9: NVIDIA-SMI has failed because it couldn't communicate" in problem
    assert "driver volume" in problem
    problem = gpu_problem(2, fake_smi(tmp_path, TWO.splitlines()[0]), dev_dir=dev, **NO_LIB)
    assert "`nvidia-smi -L` lists 1" in problem


def test_the_gpu_count_travels_in_the_task_environment():
    ctx = TaskContext(job="j", role="worker", index=0, cluster={"worker": 1}, gpus=2)
    assert ctx.to_env()["MTF_GPUS"] == "2"
    assert TaskContext.from_env(ctx.to_env()).gpus == 2
    plain = TaskContext(job="j", role="worker", index=0, cluster={"worker": 1})
    assert "MTF_GPUS" not in plain.to_env() and TaskContext.from_env(plain.to_env()).gpus == 0
    with pytest.raises(ValueError, match="MTF_GPUS"):
        TaskContext.from_env({**ctx.to_env(), "MTF_GPUS": "two"})


def test_a_task_that_cannot_see_its_gpus_fails_the_job_at_once(tmp_path, fake_marathon, make_ctx, task_environ):
    """Permanent: the job is Failed with the one line (no program started, nothing restarted)."""
    fake_marathon.add_app("ps", 0)
    for i in range(2):
        fake_marathon.add_app("worker", i)
    ctx = make_ctx("worker", 0, marathon_url=fake_marathon.url, style="tf1", completion="worker0", gpus=1)
    env = {**task_environ(ctx), "PATH": str(tmp_path / "empty-bin")}
    parts = job_lifecycle(ctx, env)
    parts["control"] = JobControl(ctx, fake_marathon.client(), retry_interval=0.05, poll_interval=0.05)
    err = io.BytesIO()
    boot = Bootstrap(ctx, env, [sys.executable, "-c", "open('started', 'w')"], stdout=io.BytesIO(), stderr=err,
                     tick=0.02, **parts)
    boot.gpu_check_options = {"dev_dir": devices(tmp_path), **NO_LIB}
    result = []
    thread = threading.Thread(target=lambda: result.append(boot.run()), daemon=True)
    thread.start()
    try:
        assert wait_for(lambda: fake_marathon.puts(), 10, what="the job's record")
        labels = fake_marathon.apps["/ml/mnist/ps-0"]["labels"]
        assert labels[L.STATE] == "Failed"
        assert labels[L.REASON].startswith("worker-0: given 1 GPU but no GPU device") and "\n" not in labels[L.REASON]
        assert all(a["instances"] == 0 for a in fake_marathon.apps.values())
        assert not (tmp_path / "started").exists() and boot.status.snapshot()["phase"] == "failed"
    finally:
        boot.request_stop(signal.SIGTERM)
        thread.join(10)
    assert result == [1]


def test_a_start_failure_of_a_task_that_does_not_decide_is_in_the_records_events(tmp_path, fake_marathon, make_ctx,
                                                                                 task_environ):
    """Issue 32: `events big` said `no events` for a job whose worker-1 could not see its GPUs: the record
    written by a task that is not the deciding one carried no events. Now its own events, with the start
    failure (whole) and the end, are in the record on its app."""
    from marathon_tf.contract import timeline as T

    fake_marathon.add_app("ps", 0)
    for i in range(2):
        fake_marathon.add_app("worker", i)
    ctx = make_ctx("worker", 1, marathon_url=fake_marathon.url, style="tf1", completion="all_workers", gpus=4)
    env = {**task_environ(ctx), "PATH": str(tmp_path / "empty-bin")}
    parts = job_lifecycle(ctx, env)
    parts["control"] = JobControl(ctx, fake_marathon.client(), retry_interval=0.05, poll_interval=0.05)
    boot = Bootstrap(ctx, env, [sys.executable, "-c", "pass"], stdout=io.BytesIO(), stderr=io.BytesIO(),
                     tick=0.02, **parts)
    boot.gpu_check_options = {"dev_dir": devices(tmp_path), **NO_LIB}
    thread = threading.Thread(target=boot.run, daemon=True)
    thread.start()
    try:
        assert wait_for(lambda: fake_marathon.puts(), 10, what="the job's record")
        labels = fake_marathon.apps["/ml/mnist/worker-1"]["labels"]
        events, _ = T.expand(labels.get(L.EVENTS))
        kinds = [e["kind"] for e in events]
        assert T.START_FAILED in kinds and T.JOB_ENDED in kinds, events
        failed = next(e for e in events if e["kind"] == T.START_FAILED)
        assert failed["task"] == "worker-1" and failed["message"] == labels[L.REASON]  # whole
        assert failed["message"].startswith("worker-1: given 4 GPUs but no GPU device")
    finally:
        boot.request_stop(signal.SIGTERM)
        thread.join(10)
