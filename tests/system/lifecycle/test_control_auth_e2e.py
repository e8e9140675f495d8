"""Nobody but a job's tasks and its owner steers it (issue 44 item 1), on the local runner with real
processes: every control route of a task's status port (``POST /hold``, ``/save`` with hold, ``/ledger``,
``GET /rendezvous``, ``GET /leader``) refuses a request without the job's key (401) and with a wrong one
(403) — from this user and from another uid, which cannot read the key's file either — while the job's
steps keep growing; the read-only routes answer anyone; the owner's ``marathon-tf checkpoint`` still
saves; the key shows up in no output, no Marathon app, no event."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner
from jobfiles import example_job

from marathon_tf.marathon.tasks import newest_running, task_url
from marathon_tf.user.cli import cli

BOOTSTRAP = f"{sys.executable} -m marathon_tf.bootstrap --watch-interval 2 --grace 2"
#: a trainer with the save hook (contract/savehook.py) that writes a checkpoint file when asked
HOOKED = r"""
import os, signal, sys, time
logdir, asked, step = sys.argv[1], {"save": False}, 0
signal.signal(signal.SIGUSR1, lambda *_: asked.update(save=True))
print("marathon-tf save-hook: ready", flush=True)
print("key file given:", "MTF_JOB_KEY_FILE" in os.environ or "MTF_JOB_KEY" in os.environ, flush=True)
while True:
    step += 1
    print(f"step={step} loss=1.0", flush=True)
    time.sleep(0.05)
    if asked["save"]:
        asked["save"] = False
        with open(os.path.join(logdir, "checkpoint"), "w") as f:
            f.write(f'model_checkpoint_path: "model.ckpt-{step}"\n')
        print(f"marathon-tf save-hook: saved step={step} path={logdir}/model.ckpt-{step}", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
"""
NOBODY = 65534


def _job_file(tmp_path) -> str:
    trainer = tmp_path / "trainer.py"
    trainer.write_text(HOOKED)
    roles = {"ps": {"count": 1, "cpus": 0.1, "mem": 128, "command": ["python3", "-c", "import time; time.sleep(900)"]},
             "worker": {"count": 2, "cpus": 0.1, "mem": 128}, "tensorboard": {"count": 0}}
    return str(example_job("linear-regression-tf1", tmp_path, command=["python3", str(trainer), "ckpt"],
                           bootstrap=BOOTSTRAP, roles=roles, cluster_spec="tf_config", fetch=[],
                           progress={"target_step": 10_000_000},
                           discovery={"mode": "marathon", "startup_timeout": 120}))


def _url(job, task: str, path: str) -> str:
    app = requests.get(f"{job.cluster.marathon_url}/v2/apps/{job.name}/{task}", params={"embed": "app.tasks"},
                       timeout=10).json()["app"]
    url = task_url(app, newest_running(app), "status", path)
    assert url is not None, app
    return url


def _control_requests(job) -> list[tuple[str, str, dict | None]]:
    """(method, url, JSON body) of one request per control route: what a stranger would send."""
    entry = {"id": "forged-1", "task": "worker-1", "kind": "failure", "time": time.time(), "code": 1,
             "reason": "forged"}
    return [
        ("POST", _url(job, "worker-1", "/hold"), {"job": job.name, "reason": "a stranger", "seconds": 60}),
        ("POST", _url(job, "worker-0", "/save"), {"job": job.name, "reason": "a stranger", "hold": True,
                                                  "timeout": 5}),
        ("POST", _url(job, "worker-0", "/ledger"), {"job": job.name, "entry": entry}),
        ("GET", _url(job, "worker-0", "/rendezvous") + f"?job={job.name}", None),
        ("GET", _url(job, "worker-1", "/leader") + f"?job={job.name}&task=worker-0&at=127.0.0.1:9", None),
    ]


def _as_nobody(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(["/usr/bin/python3", "-c", code], user=NOBODY, group=NOBODY, extra_groups=[],
                          capture_output=True, text=True, timeout=30, cwd="/")


@pytest.mark.timeout(240)
def test_only_the_jobs_tasks_and_owner_steer_it(tmp_path, local_job):
    job = local_job(_job_file(tmp_path))
    job.wait(lambda: len(job.steps(task="worker-1")) >= 20 and job.steps(task="worker-0"), 90,
             "both workers stepping")
    requests_ = _control_requests(job)
    before = job.steps(task="worker-1")[-1][2]
    for method, url, body in requests_:
        for headers, code in (({}, 401), ({"Authorization": "Bearer " + "0" * 64}, 403)):
            r = requests.request(method, url, json=body, headers=headers, timeout=15)
            assert r.status_code == code, (method, url, headers, r.status_code, r.text)
            assert "message" in r.json()
    for path in ("/health", "/status", "/metrics", "/ledger"):  # read-only: open to anyone
        assert requests.get(_url(job, "worker-0", path), timeout=10).status_code == 200, path

    # the job's key: 0600 in a 0700 folder of each task's sandbox, named by MTF_JOB_KEY_FILE
    keys = sorted(p for p in Path(job.cluster.state_dir).rglob(".secrets/job-key"))
    assert len(keys) >= 3, keys  # ps-0, worker-0, worker-1
    assert all(stat.S_IMODE(k.stat().st_mode) == 0o600 and stat.S_IMODE(k.parent.stat().st_mode) == 0o700
               for k in keys)
    key = keys[0].read_text().strip()
    assert len({k.read_text().strip() for k in keys}) == 1 and len(key) == 64

    for task in ("worker-0", "worker-1"):  # the training program is not given the key's file
        assert "key file given: False" in job.text(task) and "key file given: True" not in job.text(task)

    if os.geteuid() == 0 and os.path.exists("/usr/bin/python3"):  # another uid: no key, no steering
        read = _as_nobody(f"print(open({str(keys[0])!r}).read())")
        assert read.returncode != 0 and "Permission" in read.stderr and key not in read.stdout, read
        method, url, body = requests_[0]
        post = _as_nobody("import json, urllib.request, urllib.error\n"
                          f"req = urllib.request.Request({url!r}, data=json.dumps({body!r}).encode(), "
                          "headers={'Content-Type': 'application/json'}, method='POST')\n"
                          "try:\n    print(urllib.request.urlopen(req, timeout=10).status)\n"
                          "except urllib.error.HTTPError as e:\n    print(e.code)\n")
        assert post.stdout.strip() == "401", post

    # nothing was held, saved or counted: worker-1 kept training, the ledger holds no forged failure
    job.wait(lambda: job.steps(task="worker-1")[-1][2] >= before + 40, 30, "worker-1's steps growing")
    status = requests.get(_url(job, "worker-1", "/status"), timeout=10).json()
    assert status["phase"] == "running" and status["failures"] == 0, status
    ledger = requests.get(_url(job, "worker-0", "/ledger"), timeout=10).json()
    assert ledger["summary"]["failures"] == 0, ledger

    # the owner steers it: `marathon-tf checkpoint` (its key derived from the owner key)
    r = CliRunner().invoke(cli, ["checkpoint", job.name, "--marathon", job.cluster.marathon_url])
    assert r.exit_code == 0 and f"checkpoint of {job.name} at step" in r.stdout, (r.stdout, r.stderr)
    r_json = CliRunner().invoke(cli, ["status", job.name, "--marathon", job.cluster.marathon_url, "-o", "json"])
    apps = requests.get(f"{job.cluster.marathon_url}/v2/apps", timeout=10).json()["apps"]
    # the owner's PUT gave every app the key in its env (how a cluster's tasks get it: contract/taskauth.py),
    # and nothing else of an app holds it
    assert {a["env"].get("MTF_JOB_KEY") for a in apps} == {key}
    group = json.dumps([{**a, "env": {k: v for k, v in a["env"].items() if k != "MTF_JOB_KEY"}} for a in apps])
    events = json.dumps(job.cluster.events())
    assert '"status_update_event"' in events
    for where, text in (("checkpoint", r.stdout + r.stderr), ("status -o json", r_json.stdout + r_json.stderr),
                        ("the apps", group), ("events", events), ("task output", job.text())):
        assert key not in text, where


    # the tasks steer each other with it: a round that holds the job (as a planned stop asks it) reaches
    # worker-1's /hold from worker-0, key and all
    method, url, body = requests_[1]
    r = requests.post(url, json={**body, "timeout": 30}, headers={"Authorization": "Bearer " + key}, timeout=60)
    assert r.status_code == 200 and r.json()["ok"], r.text
    held = requests.get(_url(job, "worker-1", "/status"), timeout=10).json()
    assert held["phase"] == "saving", held
