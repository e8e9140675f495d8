"""Task processes: environment, sandbox, fetch, volumes, relaunch with backoff, kills, no orphans."""

from __future__ import annotations

import json
import os
import sys
import tarfile
import time
from pathlib import Path

from polling import alive as _alive

from marathon_tf.local import LocalCluster


def _sandbox(cluster, task_id: str) -> Path:
    return cluster.state_dir / "sandboxes" / task_id


def test_a_task_without_gpus_gets_no_cuda_device_unless_its_app_says_otherwise():
    from marathon_tf.local.launcher import task_env

    def env(**app):
        return task_env({"id": "/j/a", **app}, "t", "v", [], "/box", "127.0.0.1", base={})

    assert env()["CUDA_VISIBLE_DEVICES"] == "" and env(gpus=0)["CUDA_VISIBLE_DEVICES"] == ""
    assert env(gpus=0, env={"CUDA_VISIBLE_DEVICES": "1"})["CUDA_VISIBLE_DEVICES"] == "1"
    assert "CUDA_VISIBLE_DEVICES" not in env(gpus=1)  # the scheduler gives it its agent's indices


def test_task_environment(api, make_app, cluster, wait, monkeypatch):
    """Marathon's task environment (mesosphere/marathon releases/1.11
    ``src/main/scala/mesosphere/mesos/TaskBuilder.scala`` ``taskContextEnv``) and what a Mesos agent adds
    (apache/mesos@1.11.x): ``--executor_environment_variables`` ("passed to the executor, and thus subsequently
    task(s). By default this flag is none.": ``src/slave/flags.cpp``); the executor's environment from that
    flag's, ``LIBPROCESS_*`` and ``MESOS_*`` (``src/slave/slave.cpp`` ``executorEnvironment``); ``MESOS_SANDBOX``
    and the task's own ("1) User specified environment in CommandInfo. 2) Environment returned by isolators ...
    3) Environment passed from agent": ``src/slave/containerizer/mesos/containerizer.cpp``); the default
    ``PATH`` (``src/slave/containerizer/mesos/launch.cpp``, stout ``3rdparty/stout/include/stout/posix/os.hpp``
    ``os::host_default_path``); the command executor's own environment plus the task's
    (``src/launcher/executor.cpp``)."""
    # the runner's own variables (issue 24: credentials and cloud keys seen in a task's /proc/<pid>/environ)
    runner_own = {"MARATHON_TOKEN": "secret-token", "MARATHON_USER": "ml", "MARATHON_PASSWORD": "pw",
                  "AWS_SECRET_ACCESS_KEY": "aws-secret", "MTF_RUNNER_OWN": "x", "SOME_SHELL_VAR": "y"}
    for key, value in runner_own.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("TZ", "Europe/Paris")
    dump = f"{sys.executable} -c 'import json,os; json.dump(dict(os.environ), open(\"env.json\",\"w\"))'; sleep 600"
    spec = make_app("w-1", cmd=dump, cpus=0.5, mem=64, gpus=0, labels={"marathon-tf/role": "worker", "a": "b"},
                    portDefinitions=[{"port": 0, "name": "tf"}, {"port": 0, "name": "status"}],
                    env={"HOST": "overridden", "MY": "v"})
    api.put("/v2/groups/job", json={"apps": [spec]})
    api.wait_deployed()
    task = api.running("/job/w-1")[0]
    box = _sandbox(cluster, task["id"])
    env = wait(lambda: (box / "env.json").exists() and (box / "env.json").stat().st_size and
               json.loads((box / "env.json").read_text()), what="env.json")
    p0, p1 = task["ports"]
    assert env["PORT0"] == str(p0) and env["PORT1"] == str(p1) and env["PORT"] == str(p0)
    assert env["PORTS"] == f"{p0},{p1}"
    assert env["PORT_TF"] == str(p0) and env["PORT_STATUS"] == str(p1)
    assert env["HOST"] == "overridden" and env["MY"] == "v"
    assert env["MESOS_TASK_ID"] == task["id"] and env["MESOS_SANDBOX"] == str(box)
    assert env["MARATHON_APP_ID"] == "/job/w-1"
    assert env["MARATHON_APP_VERSION"] == task["version"]
    assert (env["MARATHON_APP_RESOURCE_CPUS"], env["MARATHON_APP_RESOURCE_MEM"],
            env["MARATHON_APP_RESOURCE_DISK"], env["MARATHON_APP_RESOURCE_GPUS"]) == ("0.5", "64.0", "0.0", "0")
    assert env["MARATHON_APP_LABELS"].split() == ["marathon-tf/role", "a"]
    assert env["MARATHON_APP_LABEL_MARATHON_TF_ROLE"] == "worker" and env["MARATHON_APP_LABEL_A"] == "b"
    assert env["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)
    # like a Mesos agent's task: the allowlist of the runner's environment, never the rest
    assert not set(runner_own) & set(env) and not {"aws-secret", "secret-token", "pw"} & set(env.values())
    assert env["LANG"] == "C.UTF-8" and env["TZ"] == "Europe/Paris"
    assert env["MESOS_EXECUTOR_ID"] == task["id"] and env["MESOS_SLAVE_ID"] == task["slaveId"]
    assert env["MESOS_FRAMEWORK_ID"] and env["MESOS_CHECKPOINT"] == "1"
    assert env["MTF_STATUS_BIND"] == "127.0.0.1"
    assert env["CUDA_VISIBLE_DEVICES"] == ""  # gpus 0: CUDA sees no device (as behind Mesos's GPU isolator)
    assert Path(os.readlink(f"/proc/{wait(lambda: cluster.task_pids())[0]}/cwd")) == box
    assert task["ports"][0] != task["ports"][1]


def test_default_port_and_args(api, make_app, cluster, wait):
    spec = {"id": "/argv", "args": [sys.executable, "-c", "import os; print(os.environ['PORT_DEFAULT'], flush=True); "
                                                           "import time; time.sleep(600)"],
            "cpus": 0.1, "mem": 16}
    api.put("/v2/apps/argv", json=spec)
    api.wait_deployed()
    task = api.running("/argv")[0]
    out = _sandbox(cluster, task["id"]) / "stdout"
    wait(lambda: out.read_text().strip() == str(task["ports"][0]), what="PORT_DEFAULT in stdout")
    assert api.get("/v2/apps/argv").json()["app"]["portDefinitions"][0]["name"] == "default"


def test_fetch_and_volumes(api, make_app, cluster, tmp_path, wait):
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    payload = tmp_path / "data"
    payload.mkdir()
    (payload / "x.txt").write_text("x")
    archive = tmp_path / "bundle.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(payload / "x.txt", arcname="inner/x.txt")
    host_dir = tmp_path / "ckpt"
    spec = make_app("f", fetch=[{"uri": f"file://{script}", "executable": True}, {"uri": str(archive)}],
                    container={"type": "MESOS", "docker": {"image": "ignored"},
                               "volumes": [{"containerPath": "ckpt", "hostPath": str(host_dir), "mode": "RW"},
                                           {"containerPath": "/abs", "hostPath": str(tmp_path), "mode": "RO"}]},
                    cmd="./train.sh > fetched.out; echo data > ckpt/file; sleep 600")
    api.put("/v2/apps/f", json=spec)
    api.wait_deployed()
    box = _sandbox(cluster, api.running("/f")[0]["id"])
    wait(lambda: (box / "fetched.out").exists() and (box / "fetched.out").read_text() == "hi\n", what="script ran")
    assert os.access(box / "train.sh", os.X_OK)
    assert (box / "inner" / "x.txt").read_text() == "x"
    wait(lambda: (host_dir / "file").exists(), what="volume write")
    assert (box / "ckpt").is_symlink()
    assert "/abs" in (box / "stderr").read_text()


def test_unsupported_fetch_fails_task(api, make_app, cluster, wait):
    api.put("/v2/apps/bad", json=make_app("bad", fetch=[{"uri": "https://example.com/x.py"}], backoffSeconds=30))
    failure = wait(lambda: api.get("/v2/apps/bad").json()["app"].get("lastTaskFailure"), what="lastTaskFailure")
    assert failure["state"] == "TASK_FAILED" and "https://example.com/x.py" in failure["message"]
    assert any(e["taskStatus"] == "TASK_FAILED" for e in cluster.events("status_update_event"))


def test_relaunch_with_backoff_and_queue(api, make_app, cluster, wait):
    """TASK_FAILED and TASK_FINISHED grow the delay, TASK_KILLED does not (mesosphere/marathon releases/1.11
    ``src/main/scala/mesosphere/marathon/core/task/update/impl/steps/NotifyRateLimiterStepImpl.scala``,
    ``core/launchqueue/impl/RateLimiter.scala``)."""
    api.put("/v2/apps/crash", json=make_app("crash", cmd="exit 3", backoffSeconds=0.3, backoffFactor=2,
                                            maxLaunchDelaySeconds=5))
    wait(lambda: len([e for e in cluster.events("status_update_event") if e["taskStatus"] == "TASK_FAILED"]) >= 4,
         timeout=15, what="four failures")
    starts = [time.mktime(time.strptime(e["timestamp"][:19], "%Y-%m-%dT%H:%M:%S")) + int(e["timestamp"][20:23]) / 1000
              for e in cluster.events("status_update_event") if e["taskStatus"] == "TASK_STAGING"]
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert gaps[0] >= 0.25 and gaps[1] >= 0.55 and gaps[2] >= 1.1, gaps
    app = api.get("/v2/apps/crash").json()["app"]
    failure = app["lastTaskFailure"]
    assert failure["message"] == "Command exited with status 3" and failure["state"] == "TASK_FAILED"
    assert set(failure) >= {"appId", "host", "message", "state", "taskId", "timestamp", "version"}
    queue = wait(lambda: api.get("/v2/queue").json()["queue"], what="queue entry")
    item = queue[0]
    assert item["app"]["id"] == "/crash" and item["count"] == 1
    assert set(item["delay"]) == {"timeLeftSeconds", "overdue"}
    assert item["app"]["lastTaskFailure"]["message"] == "Command exited with status 3"
    assert len(api.deployments()) == 1  # crash loop keeps the deployment open
    assert cluster.events("deployment_failed") == []


def test_exit_zero_is_relaunched(api, make_app, cluster, wait):
    api.put("/v2/apps/done", json=make_app("done", cmd="exit 0", backoffSeconds=0.1))
    wait(lambda: len([e for e in cluster.events("status_update_event") if e["taskStatus"] == "TASK_FINISHED"]) >= 2,
         what="two finished runs")


def _dns_ips(cluster, name: str) -> list[str]:
    import requests

    records = requests.get(f"{cluster.mesos_dns_http}/v1/hosts/{name}", timeout=10).json()
    return [r["ip"] for r in records if r["ip"]]


def test_scale_down_kill_sigterm_then_sigkill(api, make_app, cluster, wait):
    # Stock Marathon 1.11 (no --enable_features task_killing): its framework lacks the TASK_KILLING_STATE
    # capability (mesosphere/marathon@releases/1.11:src/main/scala/mesosphere/marathon/MarathonSchedulerDriver.scala),
    # so Mesos's executor sends no TASK_KILLING (apache/mesos@1.11.x:src/launcher/executor.cpp kill():
    # "Send TASK_KILLING if the framework can handle it"): the task stays TASK_RUNNING in /v2/apps and in
    # Mesos-DNS (records for TASK_RUNNING tasks: mesosphere/mesos-dns@e888ef4:records/generator.go) through
    # its kill grace, then TASK_KILLED. The scale-down changes the instance's goal, published as an
    # instance_changed_event of the unchanged condition (M@1.11 = mesosphere/marathon@releases/1.11:
    # M@1.11:src/main/scala/mesosphere/marathon/core/instance/update/InstanceChangedEventsGenerator.scala, a goal
    # change is a state change; M@1.11:.../core/deployment/impl/DeploymentActor.scala decommissionInstances).
    stubborn = "trap 'echo TERM >> got_term' TERM; while true; do sleep 0.1; done"
    api.put("/v2/apps/s", json=make_app("s", cmd=stubborn, taskKillGracePeriodSeconds=1))
    api.wait_deployed()
    task = api.running("/s")[0]
    pid = cluster.task_pids()[0]
    t0 = time.monotonic()
    api.put("/v2/apps/s", json={"instances": 0})
    wait(lambda: (_sandbox(cluster, task["id"]) / "got_term").exists(), what="the SIGTERM")
    assert [t["state"] for t in api.tasks("/s")] == ["TASK_RUNNING"]  # within its grace: still running
    assert _dns_ips(cluster, "s.marathon.mesos") == ["127.0.0.1"]
    api.wait_deployed()
    elapsed = time.monotonic() - t0
    assert 0.9 <= elapsed < 5, elapsed
    wait(lambda: not _alive(pid), what="process gone")
    states = [e["taskStatus"] for e in cluster.events("status_update_event") if e["taskId"] == task["id"]]
    assert states == ["TASK_STAGING", "TASK_RUNNING", "TASK_KILLED"]
    assert _dns_ips(cluster, "s.marathon.mesos") == []


def test_with_the_task_killing_feature_a_kill_is_task_killing_first(cluster_with, make_app, wait):
    # --enable_features task_killing: the framework has TASK_KILLING_STATE, the executor sends TASK_KILLING
    # when it starts the kill (same sources as above); Mesos-DNS drops the task then.
    cluster, api = cluster_with(features=("gpu_resources", "task_killing"))
    stubborn = "trap 'echo TERM >> got_term' TERM; while true; do sleep 0.1; done"
    api.put("/v2/apps/s", json=make_app("s", cmd=stubborn, taskKillGracePeriodSeconds=1))
    api.wait_deployed()
    task = api.running("/s")[0]
    api.put("/v2/apps/s", json={"instances": 0})
    wait(lambda: (cluster.state_dir / "sandboxes" / task["id"] / "got_term").exists(), what="the SIGTERM")
    assert [t["state"] for t in api.tasks("/s")] in (["TASK_KILLING"], [])
    assert _dns_ips(cluster, "s.marathon.mesos") == []
    api.wait_deployed()
    states = [e["taskStatus"] for e in cluster.events("status_update_event") if e["taskId"] == task["id"]]
    assert states == ["TASK_STAGING", "TASK_RUNNING", "TASK_KILLING", "TASK_KILLED"]


def test_crash_via_kill_task(api, make_app, cluster, wait):
    api.put("/v2/apps/k", json=make_app("k", backoffSeconds=0.1))
    api.wait_deployed()
    first = api.running("/k")[0]["id"]
    assert cluster.kill_task("/k", "KILL") == [first]
    failure = wait(lambda: api.get("/v2/apps/k").json()["app"].get("lastTaskFailure"), what="failure")
    assert failure["taskId"] == first and failure["message"] == "Command terminated with signal Killed"
    wait(lambda: [t for t in api.running("/k") if t["id"] != first], what="relaunch")


def test_stop_leaves_no_process(tmp_path):
    cluster = LocalCluster(state_dir=tmp_path / "s", shutdown_grace=0.5)
    cluster.start()
    try:
        import requests
        spawn_child = "sleep 600 & echo $! > child.pid; trap '' TERM; wait"
        r = requests.put(cluster.marathon_url + "/v2/groups/j", json={"apps": [
            {"id": "a", "cmd": spawn_child, "instances": 2, "cpus": 0.1}]})
        assert r.status_code == 200
        pids = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(pids) < 4:
            boxes = list((tmp_path / "s" / "sandboxes").glob("*/child.pid"))
            pids = [int(p.read_text()) for p in boxes if p.read_text().strip()] + cluster.task_pids()
            time.sleep(0.05)
        assert len(pids) == 4
        assert all(_alive(p) for p in pids)
    finally:
        cluster.stop()
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    assert not [p for p in pids if _alive(p)]
