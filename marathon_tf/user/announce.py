"""The lines ``deploy --local`` and ``local serve`` print once per job: where to scrape its tasks'
metrics (once every task runs), and its TensorBoard once it answers (:class:`Announcer`, pure);
:func:`announcing` wraps ``deploy --local``'s progress printer with it; :func:`follow_jobs` is
``local serve``'s loop over every job of its Marathon.

Returns text through the callbacks given; never prints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Announcer", "announcing", "scrape_hint", "answers", "follow_jobs", "follow_in_background"]


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
    from marathon_tf.contract import labels as L
    from marathon_tf.contract.errors import MarathonTFError
    from marathon_tf.user import jobs
    from marathon_tf.user import status as job_status

    announcer = Announcer(answers)
    while not stop.wait(interval):
        try:
            found = jobs.find_jobs(client)
            announcer.forget(set(found))
            for name, apps in found.items():
                tb = any(a.labels.get(L.ROLE) == "tensorboard" for a in apps)
                if announcer.done(name, tb):
                    continue
                status = job_status.job_status(client, name)
                if not (isinstance(status.state, L.JobState) and status.state.ended):
                    for line in announcer.lines(status.to_dict()):
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
