"""Admission (issue 20) on a local cluster of 3 finite agents (cpus 2, mem 2048, gpus 2 each):

* seconds from `marathon-tf deploy job.json` of a job whose worker needs 4 GPUs to its refusal (exit 2),
  the command's whole life; baseline: `marathon-tf validate` of the same file (the CLI's start and the
  job file's check, no request), in the same run. Goal: ≤ 2 s.
* seconds from the admission deadline of a job placed 3 of 4 (each worker 2 GPUs; ``sleep`` tasks)
  to the last GPU free, its release driven by a follower that looks every 0.25 s (``status``);
  and from the deadline to the record ``NotPlaced`` when nobody follows and the placed tasks'
  bootstraps release it themselves (cpus short; tiny program). Goal: ≤ 5 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from .common import BIN, Row, median

GPU_AGENT = "cpus:2;mem:2048;disk:1000;gpus:2;ports:[33100-33199]"
TIMEOUT = 5


def _cli(url: str, work: Path, *args: str) -> tuple[float, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MARATHON", "MESOS_URL"))}
    env.update(MARATHON_URL=url, MARATHON_TF_CONFIG="/nonexistent")
    t = time.perf_counter()
    r = subprocess.run([str(BIN / "marathon-tf"), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=env, cwd=work, timeout=60)
    return time.perf_counter() - t, r.returncode


def _refused_in_process(url: str, job: Path) -> float:
    from marathon_tf.contract.errors import UsageError
    from marathon_tf.marathon.client import Client
    from marathon_tf.user.api import Job, Marathon

    t = time.perf_counter()
    try:
        Marathon(client=Client(url)).deploy(Job.from_file(str(job)))
    except UsageError:
        return time.perf_counter() - t
    raise RuntimeError("the impossible job was not refused")


def _poll(predicate, timeout: float, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise RuntimeError("timed out")


def _released_by_follower(cluster, name: str) -> float:
    from marathon_tf.marathon.client import Client
    from marathon_tf.marathon.waiting import wall
    from marathon_tf.user.api import Marathon
    from marathon_tf.user.render import render_group
    from marathon_tf.user.spec import load_dict

    client = Client(cluster.marathon_url)
    group = render_group(load_dict({"name": name, "command": "true", "admission": {"timeout": TIMEOUT},
                                    "roles": {"worker": {"count": 4, "cpus": 0.5, "mem": 128, "gpus": 2}}}))
    for app in group["apps"]:
        app["cmd"] = "sleep 600"
    version = client.request("PUT", f"/v2/groups/{name}", json_body=group).body["version"]
    deadline = wall(version) + TIMEOUT
    marathon = Marathon(client=client)
    _poll(lambda: marathon.status(name).state == "NotPlaced", TIMEOUT + 30, 0.25)

    def free() -> bool:
        slaves = client.request("GET", "/mesos/master/slaves").body["slaves"]
        return sum(float(s["used_resources"].get("gpus") or 0) for s in slaves) == 0

    _poll(free, 30)
    return time.time() - deadline


def _released_by_tasks(cluster, name: str) -> float:
    from marathon_tf.marathon.client import Client
    from marathon_tf.marathon.waiting import wall
    from marathon_tf.user.render import render_group
    from marathon_tf.user.spec import load_dict
    from marathon_tf.user.status import job_status

    client = Client(cluster.marathon_url)
    spec = load_dict({"name": name, "command": ["python3", "-c", "pass"], "prewarm": False,
                      "admission": {"timeout": TIMEOUT},
                      "discovery": {"nameserver": cluster.mesos_dns, "http_api": cluster.mesos_dns_http,
                                    "marathon_url": cluster.marathon_url},
                      "roles": {"worker": {"count": 4, "cpus": 2, "mem": 128}}})
    # (PUT as rendered: `deploy` refuses it before sending anything, since the admission check counts the cluster's
    # 6 cpus against its 8; Marathon takes it and places 3 of 4, the case this measures)
    version = client.request("PUT", f"/v2/groups/{name}", json_body=render_group(spec)).body["version"]
    deadline = wall(version) + TIMEOUT
    st = _poll(lambda: (lambda s: s if s.get("state") == "NotPlaced" else None)(
        job_status(client, name, probe=False).to_dict()), TIMEOUT + 30)
    return wall(st.get("finishedAt")) - deadline if st.get("finishedAt") else time.time() - deadline


def bench_admission(quick: bool) -> list[Row]:
    from marathon_tf.local import LocalCluster

    repeat = 1 if quick else 3
    rows = []
    with tempfile.TemporaryDirectory(prefix="mtf-admission-") as d:
        work = Path(d)
        job = work / "imp.json"
        job.write_text(json.dumps({"name": "imp", "command": "true",
                                   "roles": {"worker": {"count": 2, "cpus": 0.5, "mem": 128, "gpus": 4}}}))
        with LocalCluster(state_dir=work / "state", agents=3, agent_resources=[GPU_AGENT], dns_refresh=0.25,
                          kill_grace=1.0, shutdown_grace=1.0) as cluster:
            refused = [_cli(cluster.marathon_url, work, "deploy", str(job)) for _ in range(repeat)]
            validated = [_cli(cluster.marathon_url, work, "validate", str(job)) for _ in range(repeat)]
            in_process = [_refused_in_process(cluster.marathon_url, job) for _ in range(repeat)]
            codes = sorted({c for _, c in refused})
            rows.append(Row("deploy of an impossible job (gpus 4; agents have 2) until its refusal", round(
                median([s for s, _ in refused]), 2), "s", f"median of {repeat}; exit code(s) {codes}; goal ≤ 2 s"))
            rows.append(Row("the same refusal in-process (Marathon(...).deploy raises UsageError)",
                            round(median(in_process), 3), "s", f"median of {repeat}; no interpreter start or imports"))
            rows.append(Row("baseline: validate of the same job file", round(median([s for s, _ in validated]), 2),
                            "s", f"median of {repeat}; the CLI's start and the file's check"))
            follower = [_released_by_follower(cluster, f"part{i}") for i in range(repeat)]
            rows.append(Row("admission deadline to the last GPU free (follower, 0.25 s polls)",
                            round(median(follower), 2), "s",
                            "3 of 4 workers placed, 2 GPUs each; " + ", ".join(f"{x:.2f}" for x in follower)))
        with LocalCluster(state_dir=work / "state2", agents=3, agent_resources=[GPU_AGENT.replace(";gpus:2", "")],
                          dns_refresh=0.25, kill_grace=1.0, shutdown_grace=1.0) as cluster:
            tasks = [_released_by_tasks(cluster, f"solo{i}") for i in range(repeat)]
            rows.append(Row("admission deadline to the record NotPlaced (nobody follows: the placed tasks)",
                            round(median(tasks), 2), "s",
                            "3 of 4 placed; the bootstrap's look is spread over ≥ 1 s; "
                            + ", ".join(f"{x:.2f}" for x in tasks)))
    return rows


BENCHMARKS = {"admission": bench_admission}
