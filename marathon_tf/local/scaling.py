"""Which of an app's tasks Marathon kills when it has more than it should: Marathon 1.11's order.

Marathon's ``ScalingProposition.propose`` (called by the deployment's scale step and by the scheduler's
scale check; tests/local/test_local_stock.py cites the code): of the instances whose goal is Running and
that are not UnreachableInactive, it decommissions

1. those already sentenced (none here: an API kill with ``scale=true`` kills its own tasks);
2. those ``Constraints.selectInstancesToKill`` picks to keep the app's ``GROUP_BY`` constraints even
   (only ``GROUP_BY`` selects: a task of the fullest group, as long as each kill leaves every
   distribution off by at most one or more even than before; else any task that does);
3. then the rest in ``sortByConditionAndDate`` order: Unreachable, Staging, Starting, Running, then any
   other condition; two staging tasks by their staging time, two running ones by when they started
   (``activeSince``; none first), per the app's ``killSelection`` (``YOUNGEST_FIRST``, the default,
   kills the younger first, ``OLDEST_FIRST`` the older).

Pure: tasks are :class:`~marathon_tf.local.state.Task`; ``agent_of(task)`` gives a task's agent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from marathon_tf.mesos.agents import AgentInfo
from marathon_tf.mesos.resources import attribute_text

from .state import Task

__all__ = ["surplus", "select_to_keep_constraints", "condition_weight"]

#: ``ScalingProposition.weight``: tasks with a lower weight are killed first.
_WEIGHT = {"Unreachable": 1, "Staging": 2, "Starting": 3, "Running": 4}


def condition_weight(task: Task) -> int:
    if task.unreachable_since is not None:
        condition = "Unreachable"
    else:
        condition = {"TASK_STAGING": "Staging", "TASK_STARTING": "Starting", "TASK_RUNNING": "Running"}.get(
            task.state, "")
    return _WEIGHT.get(condition, 5)


def _field(agent: AgentInfo | None, name: str) -> str | None:
    """``Constraints.readerForField``: the task's agent's hostname or attribute (as text)."""
    if agent is None:
        return None
    if name in ("hostname", "@hostname"):
        return agent.hostname
    value = agent.attributes.get(name)
    return None if value is None else attribute_text(value)


class _GroupBy:
    """``Constraints.GroupByDistribution``: the tasks grouped by one ``GROUP_BY`` field."""

    def __init__(self, groups: list[dict[str, Task]]) -> None:
        self.groups = groups

    def difference(self, without: dict[str, Task]) -> int:
        sizes = {len([k for k in g if k not in without]) for g in self.groups}
        return max(sizes) - min(sizes)

    def more_even_without(self, selected: dict[str, Task]) -> bool:
        after = self.difference(selected)
        return after <= 1 or self.difference({}) > after

    def to_kill(self, without: dict[str, Task]) -> list[Task]:
        by_size: dict[int, list[dict[str, Task]]] = {}
        for g in self.groups:
            left = {k: t for k, t in g.items() if k not in without}
            by_size.setdefault(len(left), []).append(left)
        if len(by_size) == 1:
            return []
        return [t for g in by_size[max(by_size)] for t in g.values()]


def select_to_keep_constraints(run_def: dict, tasks: Sequence[Task], count: int,
                               agent_of: Callable[[Task], AgentInfo | None]) -> list[Task]:
    """``Constraints.selectInstancesToKill``: at most ``count`` of ``tasks`` whose kill keeps the app's
    ``GROUP_BY`` constraints even (none without such a constraint)."""
    if count >= len(tasks):
        return list(tasks)
    distributions = []
    for constraint in run_def.get("constraints") or []:
        if len(constraint) >= 2 and constraint[1] == "GROUP_BY":
            groups: dict[str | None, dict[str, Task]] = {}
            for task in tasks:
                groups.setdefault(_field(agent_of(task), constraint[0]), {})[task.id] = task
            distributions.append(_GroupBy(list(groups.values())))
    if not distributions:
        return []
    chosen: dict[str, Task] = {}
    while len(chosen) < count:
        ordered = sorted(distributions, key=lambda d: d.difference(chosen), reverse=True)
        tried = [t for d in ordered for t in d.to_kill(chosen)] + [t for t in tasks if t.id not in chosen]
        pick = next((t for t in tried
                     if all(d.more_even_without({**chosen, t.id: t}) for d in distributions)), None)
        if pick is None:
            break
        chosen[pick.id] = pick
    return list(chosen.values())


def surplus(run_def: dict, tasks: Sequence[Task], target: int,
            agent_of: Callable[[Task], AgentInfo | None]) -> list[Task]:
    """The tasks to kill so that ``target`` of ``tasks`` (goal Running, not UnreachableInactive) are left,
    in the order Marathon kills them."""
    count = len(tasks) - target
    if count <= 0:
        return []
    for_constraints = select_to_keep_constraints(run_def, tasks, count, agent_of)
    chosen = {t.id for t in for_constraints}
    youngest = run_def.get("killSelection", "YOUNGEST_FIRST") != "OLDEST_FIRST"
    order = {t.id: i for i, t in enumerate(tasks)}  # creation order: the later the younger

    def key(task: Task) -> tuple:
        weight = condition_weight(task)
        since = task.staged_at if weight in (2, 3) else task.started_at
        if since is None:  # no activeSince: killed first, whatever the selection
            return (weight, 0, "", 0)
        stamp = (since, order[task.id])
        return (weight, 1) + (tuple(_descending(x) for x in stamp) if youngest else stamp)

    rest = sorted((t for t in tasks if t.id not in chosen), key=key)
    return (for_constraints + rest)[:count]


class _descending:
    """Sorts its value in reverse (for the younger-first order of timestamps and creation)."""

    __slots__ = ("v",)

    def __init__(self, v) -> None:
        self.v = v

    def __lt__(self, other: _descending) -> bool:
        return other.v < self.v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _descending) and other.v == self.v
