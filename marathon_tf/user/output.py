"""Everything marathon-tf shows a person: data on stdout, progress and errors on stderr."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from typing import Any

import click

__all__ = ["emit_json", "error", "warn", "info", "status_table", "status_text", "table", "jobs_table",
           "scale_plan_text", "progress_line", "ProgressPrinter", "plan_text", "scale_no_change", "clean_report",
           "timeline_text", "events_text", "stopping_line", "TWO_FILES"]


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def error(lines: list[str], hint: str | None = None) -> None:
    for i, line in enumerate(lines):
        click.echo(("error: " if i == 0 else "") + line, err=True)
    if hint:
        click.echo(f"hint: {hint}", err=True)


class _EchoHandler(logging.Handler):
    """Log records on stderr through click (which tests and pipes capture)."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(self.format(record), err=True)


#: -q: -1 (errors and data only), default 0, -v: 1 and more (requests to Marathon, retries).
VERBOSITY = 0


def set_verbosity(level: int) -> None:
    """``-q`` / ``-v``: at 1 and above the ``marathon_tf`` loggers (each request, each retry) go to stderr."""
    global VERBOSITY
    VERBOSITY = level
    logger = logging.getLogger("marathon_tf")
    for h in [h for h in logger.handlers if getattr(h, "_marathon_tf", False)]:
        logger.removeHandler(h)
    if level > 0:
        handler = _EchoHandler()
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        handler._marathon_tf = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    else:
        logger.setLevel(logging.NOTSET)


def warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


def info(message: str) -> None:
    """Progress and notes on stderr (not with -q)."""
    if VERBOSITY >= 0:
        click.echo(message, err=True)


def restarts_text(budget: dict[str, Any]) -> str:
    """``restarts 4/5 in 10m, preemptions 1/100`` (``status``' restartBudget). A restart is a failure the
    budget allowed, so the count never goes past the limit: the failures past it (the one that failed the
    job, and any that came at the same time) are said apart."""
    from marathon_tf.contract.progress import window_text

    window = budget.get("windowSeconds")
    failures, limit = budget.get("failures", 0), budget.get("maxFailures")
    over = isinstance(limit, int) and isinstance(failures, int) and failures > limit
    text = f"restarts {min(failures, limit) if over else failures}/{'?' if limit is None else limit}" + \
        (f" in {window_text(float(window))}" if window else "") + \
        (f" ({failures} failures: the budget is spent)" if over else "")
    if budget.get("preemptions"):
        text += f", preemptions {budget['preemptions']}/{budget.get('maxPreemptions', '?')}"
    if budget.get("infrastructure"):
        text += f", {budget['infrastructure']} not counted (infrastructure: the runner's machinery, a full logdir)"
    return text


def _admission(status: dict[str, Any]) -> tuple[str, list[tuple[str, str]]]:
    """(what follows the state, the header rows: placement per role, the deadline) of a starting or
    released job."""
    from marathon_tf.contract.progress import duration
    from marathon_tf.user.gang import queued_text

    view = status.get("admission") or {}
    if status.get("state") == "Queued":
        return f" ({queued_text(view)})" + (f": {status['reason']}" if status.get("reason") else ""), []
    rows = [("placement", line) for line in view.get("waiting") or []]
    left = view.get("secondsLeft")
    if rows and left is not None:
        when = f"in {duration(left)}" if left > 0 else f"passed {duration(-left)} ago"
        rows.append(("deadline", f"{when} (admission.timeout {duration(view.get('timeoutSeconds') or 0)}, attempt "
                                 f"{view.get('attempt', 1)} of {view.get('attempts', 1)})"))
    return "", rows


#: A progress line that differs from the last one shown only in the durations that count up (``1 waiting
#: 13s``, ``deadline in 9m47s``) is shown again after this many seconds, not every time (every second).
PROGRESS_REPEAT = 60.0


def _shape(line: str) -> str:
    """The line without its durations (``13s``, ``9m47s``, ``2h10m``, ``3d4h``)."""
    import re

    return re.sub(r"\b\d+(?:\.\d+)?(?:d\d+h|h\d{2}m|m\d{2}s|s)\b", "…", line)


class ProgressPrinter:
    """Prints a job's progress line on stderr when it changed: a new state, count, step, reason; a line
    whose only change is a duration counting up is repeated at most every :data:`PROGRESS_REPEAT` s."""

    def __init__(self, clock=None):
        import time

        self.clock = clock or time.monotonic
        self.last, self.shown_at = "", float("-inf")

    def __call__(self, status: Any) -> None:  # a JobStatus, or its dict
        line = progress_line(status.to_dict() if hasattr(status, "to_dict") else status)
        now = self.clock()
        if line == self.last or (_shape(line) == _shape(self.last) and now - self.shown_at < PROGRESS_REPEAT):
            return
        info(line)
        self.last, self.shown_at = line, now


def _state_text(status: dict[str, Any]) -> str:
    """The job's state as ``status`` says it: ``Running``, or a planned restart's ``Restarting for scale
    (2 → 3 workers)`` (its JSON ``state`` stays Marathon's view: Deploying, Running)."""
    return str((status.get("restarting") or {}).get("text") or status.get("state"))


def progress_line(status: dict[str, Any]) -> str:
    """One line: per-role counts, the deployment step and the training step."""
    after, placement = _admission(status)
    if after:
        return f"{status.get('job')}: {status.get('state')}{after}"
    parts = [text if label == "placement" else f"deadline {text}" for label, text in placement]
    for role, c in status.get("counts", {}).items():
        parts.append(f"{role} {c['running']}/{c['total']} running, {c['healthy']} healthy"
                     + (f", {c['staged']} staged" if c.get("staged") else ""))
    dep = status.get("deployment")
    if dep:
        actions = ", ".join(sorted({a.get("action", "") for a in dep.get("currentActions") or []}))
        parts.append(f"deployment step {dep.get('currentStep')}/{dep.get('totalSteps')}"
                     + (f" ({actions})" if actions else ""))
    progress = status.get("progress") or {}
    if progress:
        from marathon_tf.contract.progress import describe

        parts.append(describe(progress.get("step"), progress.get("targetStep"), progress.get("stepsPerSecond")))
    elif status.get("finalStep") is not None:
        parts.append(f"final step {status['finalStep']}")
    if status.get("resumedFrom") is not None:
        parts.append(f"resumed from checkpoint at step {status['resumedFrom']}")
    budget = status.get("restartBudget") or {}
    if budget.get("failures") or budget.get("preemptions"):
        parts.append(restarts_text(budget))
    failures = [f"{t['task']}: {t['lastFailure']}" for t in status.get("tasks", []) if t.get("lastFailure")
                and t.get("state") != "TASK_RUNNING"]
    if failures:
        parts.append("last failure " + failures[0])
    stalled = [f"{t['task']} waits: {t['waitingFor']}" for t in status.get("tasks", []) if t.get("waitingFor")]
    if stalled:
        parts.append(stalled[0] + (f" (+{len(stalled) - 1} more)" if len(stalled) > 1 else ""))
    waits = status.get("waits") or []  # a task waiting for a peer (user/observe.py)
    if waits:
        parts.append(waits[0] + (f" (+{len(waits) - 1} more)" if len(waits) > 1 else ""))
    if status.get("stragglers"):
        parts.append("straggler " + ", ".join(status["stragglers"]))
    if status.get("tensorboard"):
        parts.append(f"TensorBoard {status['tensorboard']}")
    return f"{status.get('job')}: {_state_text(status)} — " + "; ".join(parts)


_NARROW = ("TASK", "STATE", "ADDRESS", "STEP", "RESTARTS", "AGE", "LAST FAILURE")
_WIDE = ("TASK", "STATE", "ADDRESS", "HEALTH", "PHASE", "STEP", "STEPS/S", "RESTARTS", "AGE", "TASK ID",
         "LAST FAILURE")


def _state(value: Any) -> str:
    text = str(value or "")
    return text[5:].lower() if text.startswith("TASK_") else text


def _short_host(address: str) -> str:
    """``ip-10-0-0-5.eu-west-1.compute.internal:31001`` → ``ip-10-0-0-5:31001`` (IPs stay whole)."""
    host, sep, port = address.rpartition(":") if ":" in address else (address, "", "")
    if not host or host.replace(".", "").isdigit() or host.startswith("["):
        return address
    return host.split(".", 1)[0] + sep + port


def _cells(t: dict[str, Any], wide: bool = False) -> dict[str, str]:
    from marathon_tf.contract.progress import duration

    age = t.get("ageSeconds")
    address = str(t.get("address") or "")
    return {
        "TASK": t["task"], "STATE": "restarting" if t.get("restarting") else _state(t.get("state")),
        "ADDRESS": address if wide else _short_host(address),
        "HEALTH": str(t.get("health") or ""), "PHASE": str(t.get("phase") or ""),
        "STEP": "" if t.get("step") is None else str(t["step"]),
        "STEPS/S": "" if t.get("stepsPerSecond") is None else f"{t['stepsPerSecond']:.3g}",
        "RESTARTS": "" if t.get("restarts") is None else str(t["restarts"]),
        "AGE": "" if age is None else duration(age), "TASK ID": str(t.get("taskId") or ""),
        "LAST FAILURE": str(t.get("lastFailure") or (f"waits: {t['waitingFor']}" if t.get("waitingFor") else "")),
    }


def table(columns: tuple[str, ...], rows: list[dict[str, str]], width: int | None) -> list[str]:
    """Plain left-aligned columns two spaces apart; the last column is cut (…) to fit ``width``."""
    sizes = [max([len(c)] + [len(r[c]) for r in rows]) for c in columns]
    lines = []
    for r in [dict(zip(columns, columns))] + rows:
        line = "  ".join(r[c].ljust(n) for c, n in zip(columns[:-1], sizes[:-1]))
        line = (line + "  " + r[columns[-1]]).rstrip()
        if width is not None and len(line) > width:
            line = line[:width - 1] + "…"
        lines.append(line)
    return lines


# Over ruff's complexity limit (C901), as one piece: status's header: a row per fact a job may have.
def _header(status: dict[str, Any]) -> list[tuple[str, str]]:  # noqa: C901
    from marathon_tf.contract.progress import describe

    rows = []
    progress = status.get("progress") or {}
    if progress:
        rows.append(("progress", describe(progress.get("step"), progress.get("targetStep"),
                                          progress.get("stepsPerSecond"))))
    if status.get("finalStep") is not None:
        target, final = status.get("targetStep"), status["finalStep"]
        reached = isinstance(final, int) and target and final > target
        rows.append(("final step", f"{final}" + ((f" (target {target} reached)" if reached else f"/{target}")
                                                  if target else "")))
    if status.get("resumedFrom") is not None:
        rows.append(("resumed", f"from checkpoint at step {status['resumedFrom']}"))
    if status.get("elastic"):
        rows.append(("workers", elastic_text(status["elastic"])))
    if status.get("restartBudget"):
        rows.append(("restarts", restarts_text(status["restartBudget"])[len("restarts "):]))
    if status.get("goodput"):
        rows.append(("goodput", goodput_text(status["goodput"])[len("goodput "):]))
    hook = status.get("saveHook") or {}
    if hook.get("declared") is False:  # said once: planned stops keep today's behaviour
        rows.append(("save hook", f"none: {hook.get('task')}'s program declares no save hook, so planned stops "
                                  f"cannot have it save first (they resume from its last checkpoint; "
                                  f"docs/restarts.md)"))
    elif status.get("lastSave"):
        last = status["lastSave"]
        rows.append(("saved", f"checkpoint at step {last.get('step')} ({last.get('path')}; {last.get('reason')})"))
    for key, label in (("startedAt", "started"), ("finishedAt", "finished"), ("reason", "reason"),
                       ("tensorboard", "TensorBoard")):
        if status.get(key) is not None:
            rows.append((label, str(status[key])))
    restart = status.get("restarting") or {}
    if restart.get("tasks"):
        rows.append(("restarting", ", ".join(restart["tasks"]) + ": stopped (the kill grace), then started again "
                                   "with the new cluster spec, from the last checkpoint; not a failure"))
    for wait in status.get("waits") or []:
        rows.append(("waiting", wait))
    for straggler in status.get("stragglers") or []:
        rows.append(("straggler", straggler))
    if status.get("logdir"):
        volume, path = status.get("logdirVolume"), status.get("logdirPath")
        if path and status.get("logdirOnThisMachine"):
            rows.append(("logdir", f"{path} (the tasks' {status['logdir']})" if path != status["logdir"] else path))
        else:
            rows.append(("logdir", status["logdir"] + (f" (volume {volume})" if volume and volume != status["logdir"]
                                                       else "")))
    return rows


def status_text(status: dict[str, Any], *, wide: bool = False, width: int | None = 80) -> str:
    """The status as plain text: a header, then one aligned row per task (fits ``width`` unless wide)."""
    import textwrap

    limit = None if wide else width
    after, placement = _admission(status)
    lines = [f"job {status['job']} ({status['groupId']}): {_state_text(status)}" + after]
    header = placement + [(k, v) for k, v in _header(status) if not (after and k == "reason")]
    for label, value in header:
        first = f"  {label:<10} "
        if limit is None:
            lines.append(first + value)
        else:
            lines.extend(textwrap.wrap(value, width=limit, initial_indent=first, subsequent_indent=" " * len(first),
                                       break_on_hyphens=False, break_long_words=False) or [first])
    rows = [_cells(t, wide) for t in status["tasks"]]
    lines.append("")
    lines.extend(table(_WIDE if wide else _NARROW, rows, limit))
    return "\n".join(lines)


def status_table(status: dict[str, Any], *, wide: bool = False) -> None:
    import shutil

    width = shutil.get_terminal_size((80, 24)).columns if sys.stdout.isatty() else 80
    click.echo(status_text(status, wide=wide, width=width))


def jobs_table(rows: list[dict[str, Any]]) -> None:
    if not rows:
        info("no marathon-tf jobs")
        return
    width = max(len(r["job"]) for r in rows)
    click.echo(f"{'JOB'.ljust(width)}  TASKS  RUNNING  STATE")
    for r in rows:
        click.echo(f"{r['job'].ljust(width)}  {r['tasks']:>5}  {r['running']:>7}  {r['state']}")


def scale_plan_text(plan: dict[str, list[str]]) -> str:
    lines = []
    for key, verb in (("start", "start"), ("stop", "stop"), ("restart", "restart with the new cluster spec")):
        if plan.get(key):
            lines.append(f"{verb}: {', '.join(plan[key])}")
    if not lines:
        lines.append("no change")
    return "\n".join(lines)


def plan_text(plan: dict[str, Any]) -> str:
    """Marathon's dry-run plan ``{"steps": [{"actions": [...]}]}`` as lines."""
    lines = []
    for i, step in enumerate(plan.get("steps") or [], 1):
        actions = [f"{a.get('action')} {a.get('app') or a.get('pod')}" for a in step.get("actions") or []]
        lines.append(f"step {i}: " + ", ".join(actions))
    return "\n".join(lines) or "Marathon plans no change"


def scale_no_change(result, parsed) -> str:
    """``no change: mnist already has 3 worker`` (a scale that changes nothing)."""
    from marathon_tf.contract.naming import parse_task_name

    counts: dict[str, int] = {}
    for task in result.unchanged:
        role = (parse_task_name(task) or ("?", 0))[0]
        counts[role] = counts.get(role, 0) + 1
    return f"no change: {result.job} already has " + ", ".join(f"{counts.get(role, 0)} {role}" for role in parsed)


def stopping_line(tasks: int, grace: float) -> str:
    """What ``deploy --local`` and ``local serve`` say at once on their first stop signal."""
    return f"stopping {tasks} task{'s' if tasks != 1 else ''} (grace up to {grace:g} s; Ctrl-C again to kill now)"


#: What ``logs`` says when it prints a task's two streams.
TWO_FILES = ("note: a task's stdout is printed before its stderr, not interleaved by time: the agent keeps them "
              "as two files with no time per line (as Mesos does); --stream chooses one, and -f prints new lines "
              "in the order they are read, about every second")


def clean_report(home, removed: list, kept: list, *, dry_run: bool) -> None:
    """What ``local clean`` removed (stdout, one run a line) and kept (stderr)."""
    import time

    from marathon_tf.contract.progress import duration

    for run in removed:
        idle = duration(time.time() - run.last_active)
        what = "a stopped local serve's state, " if run.serve else ""
        click.echo(f"{'would remove' if dry_run else 'removed'} {run.path} ({what}idle {idle})")
    for run in kept:
        if run.running:
            why = f"running, {run.running}"
        elif run.serve:
            jobs = (f"remembers {', '.join(run.jobs)} (their volumes and checkpoints)" if run.jobs
                    else "remembers no job")
            why = (f"a stopped local serve's state: {jobs}; removed only when named: "
                   f"local clean --serve-state {run.path.name if run.path.parent == home else run.path}")
        else:
            why = f"idle only {duration(time.time() - run.last_active)}"
        info(f"kept {run.path}: {why}")
    if not removed:
        info(f"no ended run to remove in {home}")


def ui_clean_report(where, built, *, dry_run: bool) -> None:
    """What ``local clean --ui`` removed of the web UI build (stdout), or that there was none (stderr)."""
    if built is None:
        info(f"no web UI build in {where}")
        return
    click.echo(f"{'would remove' if dry_run else 'removed'} {built[0]} (the web UI build, {built[1] / 2**20:.0f} MiB; "
               f"npm's download cache, ~/.npm, is npm's: npm cache clean --force)")


def elastic_text(view: Mapping[str, Any]) -> str:
    """``3 of 2..4, 1 standby: InsufficientGpus on 3 agents (need 2 each, 0 free); grew 2, shrank 1`` (an
    elastic job's size, docs/elastic.md)."""
    if view.get("final"):
        return str(view["final"])
    size, lo, hi = view.get("size"), view.get("min"), view.get("max")
    text = f"{size} of {lo}..{hi}" + (f" (target {view['target']})" if view.get("target") not in (None, hi) else "")
    if view.get("paused"):
        text += " (below its minimum: the job waits for placement)"
    standbys = view.get("standbys") or []
    if standbys:
        placed = view.get("placedStandbys") or []
        text += f", {len(standbys)} standby"
        why = view.get("waiting") or ""
        reasons = why.split(": ", 1)[1] if ": " in why else ""
        if placed:
            text += f" ({', '.join(placed)} placed, joining)"
        if reasons:
            text += f": {reasons}"
    changes = {k: v for k, v in (view.get("changes") or {}).items() if v}
    if changes:
        text += "; " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in changes.items())
    return text


def goodput_text(good: Mapping[str, Any]) -> str:
    """``goodput 93.1% (lost: placement 40s, start 41s, recovery 12s, retrained 0s)`` (stalled when any)."""
    from marathon_tf.contract.goodput import CAUSES

    lost = good.get("lostSeconds") or {}
    parts = [f"{cause} {_whole(lost.get(cause) or 0.0)}" for cause in CAUSES
             if cause != "stalled" or lost.get(cause)]
    ratio = good.get("ratio")
    return f"goodput {'?' if ratio is None else f'{100 * ratio:.1f}%'} (lost: {', '.join(parts)})"


def _whole(seconds: float) -> str:
    from marathon_tf.contract.progress import duration

    return f"{seconds:.0f}s" if seconds < 60 else duration(seconds)


def saved_first(saved: Mapping[str, Any] | None, note: str | None) -> str:
    """What a scale or a delete --save says of the checkpoint it had the job save first."""
    if saved:
        return (f"saved a checkpoint first: step {saved.get('step')}, {saved.get('path')} (by {saved.get('task')} in "
                f"{float(saved.get('seconds') or 0):.1f}s)" + ("; training held there until the tasks stop"
                                                              if saved.get("held") else ""))
    return f"no checkpoint saved first ({note}): the job resumes from its last one"


def checkpoint_text(saved: Any) -> str:
    """``checkpoint of mnist at step 3012: ckpt/model.ckpt-3012 (saved by chief-0 in 0.4s)`` (+ where it is)."""
    where = f"\n  the logdir: {saved.logdir_path}" if saved.logdir_path else ""
    return (f"checkpoint of {saved.job} at step {saved.step}: {saved.path} (saved by {saved.task} in "
            f"{saved.seconds:.1f}s){where}")


def _seconds(x: float | None) -> str:
    from marathon_tf.contract.progress import duration

    return "" if x is None else (f"{x:.1f}s" if x < 60 else duration(x))


def timeline_text(tl: Mapping[str, Any]) -> str:
    """The start's phases and each recovery, as lines."""
    lines = ["timeline"]
    if not tl.get("start"):
        lines.append("  (no events yet)")
    for i, phase in enumerate(tl.get("start") or []):
        after = f"  ({_seconds(phase['seconds'])} after {tl['start'][i - 1]['phase']})" if i else ""
        lines.append((f"  {phase['phase']:<22}  {phase['at']}  +{_seconds(phase['sinceStart']):<7}" + after).rstrip())
    recoveries = tl.get("recoveries") or []
    if recoveries:
        lines.append("recoveries")
    for r in recoveries:
        steps = [f"{r['at']}  {r['task']}: {r['cause']}"]
        if r.get("restarted"):
            steps.append(f"    → restarted ({r.get('how')}) after {_seconds(r.get('secondsToRestart'))}")
        if r.get("savedStep") is not None:
            steps.insert(1, f"    (a save round before it saved step {r['savedStep']})")
        if r.get("trainingAgain"):
            by = f"; {r['trainedBy']}'s step: {r['task']} prints none" if r.get("trainedBy") else ""
            steps.append(f"    → training again after {_seconds(r.get('secondsToTraining'))} "
                         f"({_seconds(r.get('seconds'))} in all{by})")
        elif r.get("jobEnded"):
            steps.append("    → the job ended before it trained again")
        elif r.get("restarted"):
            steps.append("    → not training yet")
        lines.extend("  " + s for s in steps)
    saves = tl.get("saves") or []
    if saves:
        lines.append("save rounds")
    for r in saves:
        done = (f"saved step {r.get('step')} ({r.get('path')}) after {_seconds(r.get('seconds'))}"
                + (", training held" if r.get("hold") else "") if r.get("outcome") == "saved"
                else f"failed after {_seconds(r.get('seconds'))}: {r.get('message')}" if r.get("outcome")
                else "under way")
        lines.append(f"  {r['at']}  {r['task']}: {r.get('reason')} → {done}")
    if tl.get("omittedEvents"):
        lines.append(f"  ({tl['omittedEvents']} events were left out of the job's record)")
    return "\n".join(lines)


def events_text(rows: list[Mapping[str, Any]], omitted: int = 0) -> str:
    """``TIME  TASK  EVENT  MESSAGE``, one line per event (``events -o json``'s rows), the whole message
    (like kubectl describe)."""
    if not rows:
        return "no events"
    wt, wr = max(len(r["task"]) for r in rows), max(len(r["reason"]) for r in rows)
    lines = [f"{'TIME':<24}  {'TASK':<{wt}}  {'EVENT':<{wr}}  MESSAGE"]
    for r in rows:
        lines.append(f"{r['time']:<24}  {r['task']:<{wt}}  {r['reason']:<{wr}}  {r['message']}")
    if omitted:
        lines.append(f"({omitted} events were left out of the job's record)")
    return "\n".join(lines)
