"""What ``status`` adds from the tasks' own view: waits named by the peer, stragglers, where to scrape.

* :func:`take_probe` copies what a task's ``/status`` says beyond its step: the peer it waits for
  (``waiting_for``, found by its bootstrap: :mod:`marathon_tf.task.peers`) and, for the deciding
  task, the job's view (:mod:`marathon_tf.task.jobview`);
* :func:`annotate` turns them into ``waits`` (``worker-1 waiting 45s for ps-0 (ps-0: Staging on
  agent-2)``, the peer's state from Marathon: its task's state and host, or why it is not placed,
  from ``/v2/queue``, or what its own bootstrap says) and ``stragglers``;
* :class:`Announcer`: the lines ``deploy --local`` and ``local serve`` print once — where to scrape
  a job's metrics, and its TensorBoard once it answers.

Returns data and text; never prints.
"""

from __future__ import annotations

import json

from typing import Any, Callable, Mapping

from marathon_tf.contract.progress import duration, median
from marathon_tf.marathon.queue import placement

__all__ = ["take_probe", "annotate", "Announcer", "announcing", "scrape_hint", "answers", "follow_jobs",
           "follow_in_background"]


def take_probe(row: dict[str, Any], result: Mapping[str, Any]) -> None:
    """Copy a task's ``/status`` fields ``status`` shows beyond its step into its row."""
    if result.get("waiting_for"):
        row["waitingForPeer"] = result["waiting_for"]
    if result.get("job_view"):
        row["jobView"] = result["job_view"]
    if result.get("failures"):
        row["failures"] = result["failures"]
    if result.get("preemptions"):
        row["preemptions"] = result["preemptions"]
    if isinstance(result.get("ledger"), dict):  # the deciding task keeps the job's restart ledger
        row["_ledger"] = result["ledger"]


_BUDGET_KEYS = {"failures": "failures", "max_failures": "maxFailures", "window_seconds": "windowSeconds",
                "preemptions": "preemptions", "max_preemptions": "maxPreemptions",
                "infrastructure": "infrastructure", "evaluator_failures": "evaluatorFailures"}


def restarts(status: dict[str, Any], recorded: str | None) -> None:
    """The job's restart counts (the record's ``marathon-tf/restarts`` once it ended, else the deciding
    task's ledger): ``failures``, ``preemptions`` and ``restartBudget`` in a ``job_status`` result."""
    ledger = None
    if recorded:
        try:
            ledger = json.loads(recorded)
        except ValueError:
            ledger = None
    for row in status.get("tasks") or []:
        ledger = ledger or row.get("_ledger")
        row.pop("_ledger", None)
    if not isinstance(ledger, dict) or "failures" not in ledger:
        return
    status["restartBudget"] = {_BUDGET_KEYS[k]: v for k, v in ledger.items() if k in _BUDGET_KEYS}
    status["failures"], status["preemptions"] = ledger.get("failures", 0), ledger.get("preemptions", 0)


def _state_word(state: str | None) -> str:
    text = str(state or "")
    return text[5:].capitalize() if text.startswith("TASK_") else text


def peer_state(peer: Mapping[str, Any] | None, queue_entry: Mapping[str, Any] | None) -> str:
    """``Staging on agent-2``, ``not placed: InsufficientMemory (…)``, ``running on h1``, …"""
    if peer is None:
        return "no such task"
    state = peer.get("state")
    if state == "TASK_RUNNING":
        words = f"running on {peer.get('host')}"
        if peer.get("phase") and peer.get("phase") != "running":
            words += f", {peer['phase']}"
        return words
    if isinstance(state, str) and state.startswith("TASK_"):
        return f"{_state_word(state)} on {peer.get('host')}" if peer.get("host") else _state_word(state)
    return placement(queue_entry) or peer.get("waitingFor") or str(state or "unknown")


def annotate(status: dict[str, Any], queue: Mapping[str, Mapping[str, Any]]) -> None:
    """Add ``waits`` (one line per waiting task, the peer's state in brackets) and ``stragglers``
    (from the deciding task's view) to a ``job_status`` result."""
    rows = {r["task"]: r for r in status.get("tasks") or []}
    waits = []
    for row in rows.values():
        waiting = row.get("waitingForPeer") or {}
        peer = waiting.get("peer")
        if not peer:
            continue
        other = rows.get(peer)
        why = peer_state(other, queue.get((other or {}).get("appId")))
        if other and other.get("state") == "TASK_RUNNING" and waiting.get("why"):
            why += f"; {waiting['why']}"
        row["waiting"] = f"waiting {duration(waiting.get('seconds') or 0)} for {peer} ({peer}: {why})"
        waits.append(f"{row['task']} {row['waiting']}")
    if waits:
        status["waits"] = waits
    view = next((r["jobView"] for r in rows.values() if r.get("jobView")), None)
    if view:
        status["jobView"] = {k: view.get(k) for k in ("roles", "stragglers", "rates")}
        for task in view.get("stragglers") or []:
            if task in rows:
                rows[task]["straggler"] = True
        if view.get("stragglers"):
            rates = view.get("rates") or {}
            status["stragglers"] = [f"{t} ({rates.get(t) or 0:.2g} step reports/s; its role's median "
                                    f"{_median_of_others(rates, t):.2g})" for t in view["stragglers"]]


def _median_of_others(rates: Mapping[str, Any], task: str) -> float:
    role = task.rsplit("-", 1)[0]
    others = [r for t, r in rates.items() if t != task and t.rsplit("-", 1)[0] == role and r is not None]
    return median(others) if others else 0.0


def scrape_hint(marathon_url: str) -> str:
    """Where Prometheus finds every task's metrics on this Marathon (docs/observability.md: the whole config)."""
    return (f"metrics: every task's status port serves /metrics (Prometheus: marathon_sd_configs servers "
            f"[{marathon_url}], keep __meta_marathon_port_definition_label_metrics, honor_labels: true)")


class Announcer:
    """Lines to print once per job: its tasks' metrics URLs once every task runs, its TensorBoard
    once it answers (``answers(url)``: an HTTP GET that succeeds)."""

    def __init__(self, answers: Callable[[str], bool]):
        self.answers = answers
        self._said: set[tuple[str, str]] = set()

    def done(self, job: str, tensorboard: bool) -> bool:
        """Whether everything about ``job`` was said (its TensorBoard too, when it has one)."""
        return (job, "metrics") in self._said and (not tensorboard or (job, "tensorboard") in self._said)

    def forget(self, jobs: set[str]) -> None:
        """Forget the jobs not in ``jobs`` (deleted: a new deployment is announced again)."""
        self._said = {(job, what) for job, what in self._said if job in jobs}

    def lines(self, status: Mapping[str, Any]) -> list[str]:
        job, out = status.get("job", ""), []
        tasks = status.get("tasks") or []
        urls = [(t["task"], t["metricsUrl"]) for t in tasks if t.get("metricsUrl")]
        members = [t for t in tasks if t.get("role") != "tensorboard" and t.get("state") != "stopped"]
        if urls and len(urls) >= len(members) and (job, "metrics") not in self._said:
            self._said.add((job, "metrics"))
            shown = ", ".join(f"{task} {url}" for task, url in urls[:8])
            out.append(f"job {job}: metrics at {shown}" + (f" (and {len(urls) - 8} more)" if len(urls) > 8 else ""))
        tb = status.get("tensorboard")
        if tb and (job, "tensorboard") not in self._said and self.answers(tb):
            self._said.add((job, "tensorboard"))
            out.append(f"job {job}: TensorBoard {tb}")
        return out


def announcing(progress: Callable[[Mapping[str, Any]], None],
               say: Callable[[str], None]) -> Callable[[Mapping[str, Any]], None]:
    """``progress`` (``deploy --local``'s line printer), then the :class:`Announcer`'s lines."""
    announcer = Announcer(answers)

    def show(status: Mapping[str, Any]) -> None:
        progress(status)
        for line in announcer.lines(status):
            say(line)

    return show


def answers(url: str) -> bool:
    """Whether ``GET url`` succeeds (TensorBoard is up)."""
    import requests

    from marathon_tf.marathon import transport

    try:
        with transport.session() as s:
            return s.get(url, timeout=(2.0, 2.0)).status_code < 400
    except requests.RequestException:
        return False


def follow_jobs(client, say: Callable[[str], None], stop, interval: float = 2.0) -> None:
    """``local serve``: every ``interval`` s, the :class:`Announcer`'s lines for every marathon-tf job
    on ``client``'s Marathon that has not said all it has to say, until ``stop`` (an Event) is set.
    A job deleted and deployed again is announced again."""
    from marathon_tf.contract.errors import MarathonTFError
    from marathon_tf.user import jobs

    announcer = Announcer(answers)
    while not stop.wait(interval):
        try:
            found = jobs.find_jobs(client)
            announcer.forget(set(found))
            for name, apps in found.items():
                tb = any((a.get("labels") or {}).get("marathon-tf/role") == "tensorboard" for a in apps)
                if announcer.done(name, tb):
                    continue
                status = jobs.job_status(client, name)
                if status.get("state") not in ("Succeeded", "Failed", "Stopped"):
                    for line in announcer.lines(status):
                        say(line)
        except MarathonTFError:
            continue


def follow_in_background(marathon_url: str, credentials: Any, say: Callable[[str], None], stop) -> None:
    """:func:`follow_jobs` in a daemon thread, with ``local serve``'s own credentials (or none)."""
    import threading

    from marathon_tf.marathon.client import Client, RetryPolicy

    client = Client(marathon_url, user=getattr(credentials, "user", None),
                    password=getattr(credentials, "password", None), token=getattr(credentials, "token", None),
                    retry=RetryPolicy(connection_errors=False))
    threading.Thread(target=follow_jobs, args=(client, say, stop), daemon=True, name="follow-jobs").start()
