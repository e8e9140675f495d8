"""The task's /metrics (task/metrics): Prometheus' text format, read back with prometheus_client's own
parser, the values /status has; prometheus_client imported only when scraped."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from marathon_tf.task.status_server import StatusServer, TaskStatus


def _scrape(port: int) -> tuple[str, dict]:
    """(Content-Type, {(name, labels other than job/role/index): (value, all labels)}) of one task."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        kind, text = r.headers["Content-Type"], r.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("job", "role", "index"))))
            assert key not in samples or family.name.startswith("marathon_tf_job_") or family.name == \
                "marathon_tf_straggler", key
            samples[key + ((s.labels.get("role"), s.labels.get("index")),)] = (s.value, s.labels)
    return kind, samples


def test_metrics_parse_and_carry_the_tasks_numbers():
    status = TaskStatus(job="ml/mnist", task="worker-1", role="worker", index=1)
    status.update(phase="running", step=1500, steps_per_second=25.0, target_step=3000, restarts=2, failures=3,
                  first_step_at=time.time(), stall_seconds=0.4,
                  checkpoint={"step": 1400, "written_at": time.time() - 30},
                  waiting_for={"peer": "ps-0", "why": "its TF server does not answer", "seconds": 12.0})
    server = StatusServer(status, "127.0.0.1", 0).start()
    try:
        kind, samples = _scrape(server.port)
    finally:
        server.close()
    assert kind == "text/plain; version=0.0.4; charset=utf-8"
    value = lambda name, **labels: samples[(name, tuple(sorted(labels.items())), ("worker", "1"))][0]  # noqa: E731
    assert value("marathon_tf_step") == 1500 and value("marathon_tf_target_step") == 3000
    assert value("marathon_tf_steps_per_second") == 25.0 and value("marathon_tf_progress_ratio") == 0.5
    assert value("marathon_tf_eta_seconds") == 60.0
    assert value("marathon_tf_restarts_total") == 2 and value("marathon_tf_failures_total") == 3
    assert value("marathon_tf_preemptions_total") == 0  # counted once preemptions exist (issue 21)
    assert value("marathon_tf_checkpoint_step") == 1400 and 29 <= value("marathon_tf_checkpoint_age_seconds") < 60
    assert value("marathon_tf_phase", phase="training") == 1
    assert sum(value("marathon_tf_phase", phase=p) for p in ("waiting_for_peers", "starting", "done", "failed")) == 0
    assert value("marathon_tf_waiting_for_peer", peer="ps-0") == 12.0
    labels = samples[("marathon_tf_step", (), ("worker", "1"))][1]
    assert labels == {"job": "ml/mnist", "role": "worker", "index": "1"}


def test_the_deciding_tasks_metrics_hold_the_jobs_view_and_its_stragglers():
    status = TaskStatus(job="j", task="worker-0", role="worker", index=0)
    status.update(phase="discovering", job_view={"roles": {"ps": {"total": 1, "running": 0},
                                                           "worker": {"total": 3, "running": 3}},
                                                 "watched": ["worker-0", "worker-1", "worker-2"],
                                                 "stragglers": ["worker-2"]})
    server = StatusServer(status, "127.0.0.1", 0).start()
    try:
        _, samples = _scrape(server.port)
    finally:
        server.close()
    assert samples[("marathon_tf_phase", (("phase", "waiting_for_peers"),), ("worker", "0"))][0] == 1
    assert not any(k[0] == "marathon_tf_step" for k in samples)  # no step yet: no sample rather than a made-up 0
    running = {s[1]["role"]: s[0] for k, s in samples.items() if k[0] == "marathon_tf_job_tasks_running"}
    assert running == {"ps": 0, "worker": 3}
    flagged = {s[1]["index"]: s[0] for k, s in samples.items() if k[0] == "marathon_tf_straggler"}
    assert flagged == {"0": 0, "1": 0, "2": 1}


def test_prometheus_client_is_imported_only_when_metrics_are_asked_for():
    code = ("import sys, urllib.request\n"
            "import marathon_tf.task.bootstrap\n"
            "from marathon_tf.task.status_server import StatusServer, TaskStatus\n"
            "s = StatusServer(TaskStatus(job='j', task='ps-0', role='ps', index=0), '127.0.0.1', 0).start()\n"
            "urllib.request.urlopen(f'http://127.0.0.1:{s.port}/status').read()\n"
            "before = 'prometheus_client' in sys.modules\n"
            "urllib.request.urlopen(f'http://127.0.0.1:{s.port}/metrics').read()\n"
            "print(before, 'prometheus_client' in sys.modules)\n"
            "s.close()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "True"], out.stderr
