"""The task's Prometheus metrics: ``GET /metrics`` on its status port (text exposition format).

Built on scrape from the task's :class:`~marathon_tf.task.status_server.TaskStatus` by a custom
collector (``prometheus_client``), so a step costs nothing extra: the numbers exist already for
``/status``. Every metric carries the labels ``job``, ``role``, ``index`` (so scrape it with
``honor_labels: true``, or the scrape job's name replaces ``job``):

=========================================  =====  ====================================================
``marathon_tf_step``                       gauge  the training step (the program's ``step=N``, or the logdir's)
``marathon_tf_steps_per_second``           gauge  its rate over the last minute
``marathon_tf_target_step``                gauge  the job's ``progress.target_step``
``marathon_tf_progress_ratio``             gauge  step / target step
``marathon_tf_eta_seconds``                gauge  (target − step) / rate
``marathon_tf_seconds_since_step``         gauge  since the last new step (or the program's start)
``marathon_tf_restarts_total``             count  restarts of the program (in place, by Marathon)
``marathon_tf_failures_total``             count  failures of the program
``marathon_tf_preemptions_total``          count  preemptions of the task's program (never counted
                                                  as failures: docs/restarts.md)
``marathon_tf_checkpoint_step``            gauge  the newest checkpoint's step in the logdir
``marathon_tf_checkpoint_age_seconds``     gauge  since it was written
``marathon_tf_phase{phase}``               gauge  1 for the current phase: ``waiting_for_peers``,
                                                  ``starting``, ``training``, ``saving``, ``standby``,
                                                  ``resizing``, ``done``, ``failed``
                                                  (:meth:`marathon_tf.contract.phases.Phase.metric`)
``marathon_tf_waiting_for_peer{peer}``     gauge  seconds this task has waited for ``peer`` (named
                                                  by TensorFlow or by a look at its TF server)
=========================================  =====  ====================================================

The deciding task adds the job's view (labels ``job``, ``role`` and, per task, ``index``):
``marathon_tf_job_tasks{role}``, ``marathon_tf_job_tasks_running{role}`` and
``marathon_tf_straggler{role,index}`` (1: the task's step reports came at less than half the median
of the others of its role for three looks in a row, :mod:`marathon_tf.task.jobview`), and the job's
goodput (:mod:`marathon_tf.contract.goodput`): ``marathon_tf_goodput_ratio`` (training less steps
trained again, over the wall time since the job was submitted) and
``marathon_tf_lost_seconds_total{cause}`` (``placement``, ``start``, ``recovery``, ``retrained``,
``stalled``). An elastic job's deciding task (docs/elastic.md) adds its size (labels ``job``, ``role``):
``marathon_tf_job_workers`` (the workers that train now), ``marathon_tf_job_workers_min``,
``marathon_tf_job_workers_max``, ``marathon_tf_job_standby_workers`` (its apps outside the job: waiting
in Marathon's queue, or placed and about to be taken in), ``marathon_tf_job_below_min`` (1 while it waits
below its minimum) and ``marathon_tf_job_resizes_total{change}`` (``grew``, ``shrank``, ``below_min``).

Imported only when ``/metrics`` is first asked for: a task that is never scraped never imports
``prometheus_client``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

from marathon_tf.contract.goodput import CAUSES
from marathon_tf.contract.phases import METRIC_PHASES, Phase

__all__ = ["metrics_route", "phase_of", "CONTENT_TYPE"]

#: The classic text format every Prometheus reads (the names are all plain ``[a-z_]``).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LABELS = ["job", "role", "index"]


def phase_of(status: dict[str, Any]) -> str:
    """The bootstrap's phase in the metrics' words (:meth:`~marathon_tf.contract.phases.Phase.metric`)."""
    phase = status.get("phase")
    current = Phase(phase) if phase in Phase._value2member_map_ else Phase.RUNNING
    return current.metric(stepped=bool(status.get("first_step_at")))


class _Collector:
    def __init__(self, read: Callable[[], dict[str, Any]]):
        self.read = read

    def collect(self) -> Iterator[Any]:
        s = self.read()
        own = [str(s.get("job", "")), str(s.get("role", "")), str(s.get("index", ""))]

        def gauge(name: str, doc: str, value: float | None) -> Iterator[Any]:
            if value is not None:
                g = GaugeMetricFamily(name, doc, labels=_LABELS)
                g.add_metric(own, float(value))
                yield g

        def counter(name: str, doc: str, value: float | None) -> Any:
            c = CounterMetricFamily(name, doc, labels=_LABELS)
            c.add_metric(own, float(value or 0))
            return c

        step, target, rate = s.get("step"), s.get("target_step"), s.get("steps_per_second")
        yield from gauge("marathon_tf_step", "Training step (the program's step=N, or the logdir's).", step)
        yield from gauge("marathon_tf_steps_per_second", "Steps per second over the last minute.", rate)
        yield from gauge("marathon_tf_target_step", "The job's progress.target_step.", target)
        if step is not None and target:
            yield from gauge("marathon_tf_progress_ratio", "Step / target step.", min(1.0, step / target))
            if rate and rate > 0:
                yield from gauge("marathon_tf_eta_seconds", "Seconds to the target step at the current rate.",
                                 max(0.0, (target - step) / rate))
        yield from gauge("marathon_tf_seconds_since_step", "Seconds since the last new step (or the program's "
                         "start).", s.get("stall_seconds"))
        yield counter("marathon_tf_restarts", "Restarts of the training program.", s.get("restarts"))
        yield counter("marathon_tf_failures", "Failures of the training program.", s.get("failures"))
        yield counter("marathon_tf_preemptions", "Preemptions of the task (not counted as failures).",
                      s.get("preemptions"))
        checkpoint = s.get("checkpoint") or {}
        yield from gauge("marathon_tf_checkpoint_step", "The newest checkpoint's step.", checkpoint.get("step"))
        if checkpoint.get("written_at"):
            yield from gauge("marathon_tf_checkpoint_age_seconds", "Seconds since the newest checkpoint was "
                             "written.", max(0.0, time.time() - checkpoint["written_at"]))
        current = phase_of(s)
        phase = GaugeMetricFamily("marathon_tf_phase", "1 for the task's current phase.", labels=_LABELS + ["phase"])
        for name in METRIC_PHASES:
            phase.add_metric(own + [name], 1.0 if name == current else 0.0)
        yield phase
        waiting = s.get("waiting_for")
        if waiting and waiting.get("peer"):
            w = GaugeMetricFamily("marathon_tf_waiting_for_peer", "Seconds this task has waited for the peer.",
                                  labels=_LABELS + ["peer"])
            w.add_metric(own + [waiting["peer"]], float(waiting.get("seconds") or 0))
            yield w
        yield from _job_view(s.get("job_view"), own[0])
        yield from _goodput(s.get("goodput"), own)
        yield from _elastic(s.get("elastic"), own[0])


def _elastic(view: dict[str, Any] | None, job: str) -> Iterator[Any]:
    """An elastic job's size, on its deciding task."""
    if not view or not view.get("decider"):
        return
    labels, values = ["job", "role"], [job, str(view.get("role") or "worker")]
    for name, doc, value in (
            ("marathon_tf_job_workers", "The elastic job's workers that train now.", view.get("size")),
            ("marathon_tf_job_workers_min", "The elastic job's minimum of workers.", view.get("min")),
            ("marathon_tf_job_workers_max", "The elastic job's maximum of workers.", view.get("max")),
            ("marathon_tf_job_standby_workers", "The elastic job's worker apps outside it (waiting in Marathon's "
             "queue, or placed and about to join).", len(view.get("standbys") or [])),
            ("marathon_tf_job_below_min", "1 while the elastic job waits below its minimum.",
             1.0 if view.get("paused") else 0.0)):
        g = GaugeMetricFamily(name, doc, labels=labels)
        g.add_metric(values, float(value or 0))
        yield g
    c = CounterMetricFamily("marathon_tf_job_resizes", "The elastic job's size changes.", labels=labels + ["change"])
    for change, n in sorted((view.get("changes") or {}).items()):
        c.add_metric(values + [change], float(n))
    yield c


def _goodput(good: dict[str, Any] | None, own: list[str]) -> Iterator[Any]:
    if not good:
        return
    if good.get("ratio") is not None:
        ratio = GaugeMetricFamily("marathon_tf_goodput_ratio", "The job's training time (less steps trained "
                                  "again) over its wall time.", labels=_LABELS)
        ratio.add_metric(own, float(good["ratio"]))
        yield ratio
    lost = CounterMetricFamily("marathon_tf_lost_seconds", "The job's wall time not spent training, by cause.",
                               labels=_LABELS + ["cause"])
    for cause in CAUSES:
        lost.add_metric(own + [cause], float((good.get("lostSeconds") or {}).get(cause) or 0.0))
    yield lost


def _job_view(view: dict[str, Any] | None, job: str) -> Iterator[Any]:
    if not view:
        return
    total = GaugeMetricFamily("marathon_tf_job_tasks", "The job's tasks per role.", labels=["job", "role"])
    running = GaugeMetricFamily("marathon_tf_job_tasks_running", "The job's running tasks per role.",
                                labels=["job", "role"])
    for role, counts in sorted((view.get("roles") or {}).items()):
        total.add_metric([job, role], float(counts.get("total", 0)))
        running.add_metric([job, role], float(counts.get("running", 0)))
    yield total
    yield running
    flagged = set(view.get("stragglers") or [])
    watched = view.get("watched") or []
    if watched:
        g = GaugeMetricFamily("marathon_tf_straggler", "1: the task is a straggler of its role.", labels=_LABELS)
        for task in watched:
            role, _, index = task.rpartition("-")
            g.add_metric([job, role, index], 1.0 if task in flagged else 0.0)
        yield g


def metrics_route(read: Callable[[], dict[str, Any]]) -> Callable[[dict[str, str]], tuple[int, bytes, dict]]:
    """The ``/metrics`` handler for the status server: ``read()`` → the task's status."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(read))

    def handle(query: dict[str, str]) -> tuple[int, bytes, dict]:
        return 200, generate_latest(registry), {"Content-Type": CONTENT_TYPE}

    return handle
