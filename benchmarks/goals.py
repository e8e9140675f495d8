"""``python -m benchmarks --goals``: every speed and load goal the project has set, measured now, met or not.

Each goal names the issue that set it and the benchmark row that measures it; the benchmarks a goal needs are
run once, and every goal gets a row: met, NOT met, or not measured (with the reason: the benchmark failed, or
needs something this machine lacks). A goal is a figure on this machine, in this run — the same figures as
``python -m benchmarks`` prints, held against their bound.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .common import Row


@dataclass(frozen=True)
class Goal:
    what: str
    benchmark: str
    row: str  # a regular expression for the row's name
    op: str  # "<=" or ">="
    bound: float
    source: str

    def holds(self, value: float) -> bool:
        return value <= self.bound if self.op == "<=" else value >= self.bound


GOALS = [
    Goal("first step: `deploy --local` / hand-launched", "local_vs_hand", r"^first-step ratio marathon-tf / hand \(",
         "<=", 1.0, "issue 13"),
    Goal("steady-state steps/s: marathon-tf / hand-launched", "local_vs_hand",
         r"^throughput ratio marathon-tf / hand \(", ">=", 0.97, "issue 13"),
    Goal("in-place restart of a killed program to its next step (s)", "inplace_restart",
         r"^in-place restart to next step, pre-warmed", "<=", 1.0, "issue 21"),
    Goal("a killed worker task back to training (s)", "recovery", r"^recovery after a killed worker \(local\)$",
         "<=", 2.5, "issue 21"),
    Goal("a killed ps task back to training (s)", "recovery", r"^recovery after a killed ps \(local\)$",
         "<=", 2.5, "issue 21"),
    Goal("`scale` 2 → 3 workers back to training (s)", "recovery", r"^scale 2 -> 3 workers to resumed training",
         "<=", 3.0, "issue 29"),
    Goal("PSS chief + ps killed back to training, backoff 0 (s)", "recovery",
         r"^recovery after chief \+ ps killed together \(local; mnist-ps-strategy, restart.backoff_seconds 0\)",
         "<=", 3.0, "issue 29"),
    Goal("elastic PSS: standby placed → first step at 3 workers (s)", "elastic",
         r"^elastic PSS: standby placed -> first step at 3", "<=", 10.0, "issue 30"),
    Goal("elastic PSS: worker's agent lost → training at 2 (s)", "elastic",
         r"^elastic PSS: worker's agent lost", "<=", 10.0, "issue 30"),
    Goal("render 1 ps + 1,000 workers / tensorflow/ecosystem's template, whole processes", "render_vs_ecosystem",
         r"^render ratio marathon-tf / ecosystem at 1,000 workers", "<=", 0.25, "issue 13"),
    Goal("Marathon requests/s while a 1,000-task job forms", "leader_load",
         r"^Marathon requests/s while a 1,000-task job forms", "<=", 5.0, "issue 13"),
    Goal("Marathon MB/s while a 1,000-task job forms", "leader_load",
         r"^Marathon bytes/s while a 1,000-task job forms", "<=", 1.0, "issue 13"),
    Goal("1,000-task job formed after its last task runs (s)", "leader_load",
         r"^1,000-task job formed after its last task runs", "<=", 10.0, "issue 13"),
    Goal("10,000-task job: every follower has the plan after the last task runs (s)", "leader_load",
         r"^10,000-task job formed after its last task runs", "<=", 2.0, "issue 40"),
    Goal("10,000-task job: MB the leader sends to form it", "leader_load",
         r"^what the leader sends its 9,999 followers while a 10,000-task job forms", "<=", 50.0, "issue 40"),
    Goal("10,000-task job's change (a worker relaunched) -> every follower's view (s)", "leader_load",
         r"^a 10,000-task job's change \(a worker relaunched elsewhere\) -> every follower's view", "<=", 2.0,
         "issue 40"),
    Goal("10,000-task job: MB the leader sends for that change", "leader_load",
         r"^what the leader sends its 9,999 followers for that change", "<=", 50.0, "issue 40"),
    Goal("10,000-task job's plan change (a group restart round) -> every follower has it (s)", "leader_load",
         r"^a 10,000-task job's plan change \(a group restart round\) -> every follower has it", "<=", 2.0,
         "issue 40"),
    Goal("10,000-task job: MB the leader sends for that plan change", "leader_load",
         r"^what the leader sends its 9,999 followers for that plan change", "<=", 50.0, "issue 40"),
    Goal("10,000-task job: a save round's hold reaches every other worker (s; the round's budget is 20 s)",
         "hold_round", r"^a save round's hold over a 10,000-task job", "<=", 20.0, "issue 40"),
    Goal("`deploy` of an impossible job until its refusal (s)", "admission",
         r"^deploy of an impossible job", "<=", 2.0, "issue 20"),
    Goal("`local serve` GET /v2/apps with 100 apps, 50 clients (req/s)", "serve_load",
         r"^local serve GET /v2/apps, ", ">=", 300.0, "issue 24"),
    Goal("steps/s with every task's /metrics scraped / unscraped", "metrics_overhead",
         r"^throughput ratio scraped / unscraped", ">=", 0.99, "issue 22"),
]


def needed(goals: Iterable[Goal] = GOALS) -> list[str]:
    """The benchmarks the goals need, in order, once each."""
    return list(dict.fromkeys(g.benchmark for g in goals))


def verdicts(rows: list[tuple[str, Row]], ran: set[str], goals: Iterable[Goal] = GOALS,
             missing: Callable[[str], str] = lambda name: "not run") -> list[tuple[Goal, str, str]]:
    """``(goal, figure, verdict)`` for each goal from the rows of one run (``(benchmark, row)`` pairs)."""
    goals = list(goals)
    out = []
    for goal in goals:
        found = [r for name, r in rows if name == goal.benchmark and re.search(goal.row, r.name)]
        if goal.benchmark not in ran:
            out.append((goal, "—", f"not measured: {missing(goal.benchmark)}"))
        elif not found:
            # a benchmark that could not measure says so in a row of its own (skipped, failed): its reason
            said = [r for name, r in rows if name == goal.benchmark and not isinstance(r.value, (int, float))
                    and not any(re.search(g.row, r.name) for g in goals)]
            out.append((goal, "—", f"not measured: {said[0].value}: {said[0].note[:300]}" if said
                        else "not measured: the benchmark gave no such row"))
        elif not isinstance(found[0].value, (int, float)):
            out.append((goal, str(found[0].value), f"not measured: {found[0].note[:300]}"))
        else:
            value = float(found[0].value)
            out.append((goal, f"{value:g} {found[0].unit}".strip(), "met" if goal.holds(value) else "NOT met"))
    return out


def table(results: list[tuple[Goal, str, str]]) -> str:
    lines = ["| goal | bound | figure | verdict | set by |", "|---|---|---|---|---|"]
    for goal, figure, verdict in results:
        lines.append(f"| {goal.what} | {goal.op.replace('<=', '≤').replace('>=', '≥')} {goal.bound:g} | {figure} "
                     f"| {verdict} | {goal.source} |")
    met = sum(v == "met" for _, _, v in results)
    return "\n".join(lines) + f"\n\n{met} of {len(results)} goals met.\n"
