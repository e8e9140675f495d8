"""Everything marathon-tf shows a person: data on stdout, progress and errors on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

__all__ = ["emit_json", "error", "warn", "info", "status_table", "jobs_table", "scale_plan_text",
           "progress_line", "plan_text"]


def _stderr_console():
    from rich.console import Console  # imported on use: keeps `marathon-tf --help` fast

    return Console(stderr=True, highlight=False, soft_wrap=True)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def error(lines: list[str], hint: str | None = None) -> None:
    for i, line in enumerate(lines):
        click.echo(("error: " if i == 0 else "") + line, err=True)
    if hint:
        click.echo(f"hint: {hint}", err=True)


def warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


def info(message: str) -> None:
    click.echo(message, err=True)


def progress_line(status: dict[str, Any]) -> str:
    """One line: per-role counts, the deployment step and the training step."""
    parts = []
    for role, c in status.get("counts", {}).items():
        parts.append(f"{role} {c['running']}/{c['total']} running, {c['healthy']} healthy"
                     + (f", {c['staged']} staged" if c.get("staged") else ""))
    dep = status.get("deployment")
    if dep:
        actions = ", ".join(sorted({a.get("action", "") for a in dep.get("currentActions") or []}))
        parts.append(f"deployment step {dep.get('currentStep')}/{dep.get('totalSteps')}"
                     + (f" ({actions})" if actions else ""))
    step = status.get("step", status.get("finalStep"))
    if step is not None:
        parts.append(f"training step {step}")
    failures = [f"{t['task']}: {t['lastFailure']}" for t in status.get("tasks", []) if t.get("lastFailure")
                and t.get("state") != "TASK_RUNNING"]
    if failures:
        parts.append("last failure " + failures[0])
    stalled = [f"{t['task']} waits: {t['waitingFor']}" for t in status.get("tasks", []) if t.get("waitingFor")]
    if stalled:
        parts.append(stalled[0] + (f" (+{len(stalled) - 1} more)" if len(stalled) > 1 else ""))
    if status.get("tensorboard"):
        parts.append(f"TensorBoard {status['tensorboard']}")
    return f"{status.get('job')}: {status.get('state')} — " + "; ".join(parts)


def status_table(status: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    head = f"job {status['job']} ({status['groupId']}): {status['state']}"
    extra = []
    for key, label in (("startedAt", "started"), ("finishedAt", "finished"), ("finalStep", "final step"),
                       ("step", "step"), ("tensorboard", "TensorBoard"), ("reason", "reason")):
        if status.get(key) is not None:
            extra.append(f"{label} {status[key]}")
    table = Table(title=head + ("  " + ", ".join(extra) if extra else ""), title_justify="left")
    for col in ("TASK", "STATE", "ADDRESS", "HEALTH", "PHASE", "STEP", "LAST FAILURE"):
        table.add_column(col, overflow="fold")
    for t in status["tasks"]:
        table.add_row(t["task"], str(t.get("state", "")), str(t.get("address") or ""), str(t.get("health") or ""),
                      str(t.get("phase") or ""), "" if t.get("step") is None else str(t["step"]),
                      str(t.get("lastFailure") or t.get("waitingFor") or ""))
    # Piped output gets a wide table (rich would fold it at 80 columns).
    Console(highlight=False, width=None if sys.stdout.isatty() else 200).print(table)


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
