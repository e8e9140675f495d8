"""Job-wide and role-wide placement rules: what ``["hostname", "UNIQUE"]`` means across a job's apps (pure).

Marathon checks an app's constraints among that app's own instances only (its constraint check is
given the instances of one run spec). marathon-tf renders one app per task, so a
``UNIQUE`` copied into every app constrains nothing. The operators that compare a task with its
siblings — ``UNIQUE``, ``MAX_PER n``, ``GROUP_BY [n]``, ``CLUSTER`` without a value (:func:`relational`)
— are therefore kept as *rules* of a *scope*: the job's ``constraints`` hold for the tasks of every
role without constraints of its own, a role's ``constraints`` for that role's tasks. The other
operators (``LIKE``, ``UNLIKE``, ``IS``, ``CLUSTER v``) mean the same for one task or many and stay in
every app; ``constraints_per_task`` is copied into every app as it is (Marathon's own meaning).

A rule is enforced with what Marathon 1.4–1.11 offers an app: per-app ``LIKE`` / ``UNLIKE`` constraints
naming the values (hostnames, attribute texts) the siblings hold, written to apps that wait
(:func:`translate`); tasks placed one at a time, the others of the scope held by :data:`HOLD`
(``["hostname", "UNLIKE", ".*"]``: no host qualifies), so two of them can never take one offer
together; and a task a race put beside a sibling re-placed (:func:`breaches`: a constraint change is a
new app version, which Marathon rolls out by killing the task and launching it where the new
constraints allow). :func:`plan` is one round of that, from Marathon's state alone (the job's leader
runs it: :mod:`marathon_tf.task.placer`); :func:`infeasible` says which rule no set of agents can
satisfy (admission refuses the job).

Two labels carry it on every app of a scope: :data:`RULES_LABEL` (rendered: the scope and its rules)
and :data:`LABEL` (what the placement added to the app's constraints, at their end, and why). The
app's *base* constraints are its constraints without the added ones (:func:`split`); the deploy
digest is taken over the base (:func:`strip`), so placement never looks like a change of the job.

Field values follow Marathon's constraints: ``hostname`` / ``@hostname`` is the agent's hostname, any
other field an attribute's text (scalars with up to three decimals); LIKE / UNLIKE
match the whole value (Java's ``String.matches``); an agent without the field meets only UNLIKE.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LABEL", "RULES_LABEL", "HOLD", "RELATIONAL", "Rule", "Scope", "Member", "Plan", "relational",
           "is_hostname", "escape", "value_text", "rules_of", "split", "strip", "translate", "breaches",
           "infeasible", "plan", "scope_of_app", "constraint_text", "held_why", "label_value", "displaced",
           "placement_write"]

#: What the placement added to an app's constraints (JSON ``{"added": [...], "why": "..."}``).
LABEL = "marathon-tf/placement"
#: The app's scope and its rules (JSON ``{"scope": "job" | <role>, "rules": [[field, OP(, value)], ...]}``).
RULES_LABEL = "marathon-tf/placement-rules"
#: No host qualifies: the task waits for its turn.
HOLD = ("hostname", "UNLIKE", ".*")
RELATIONAL = ("UNIQUE", "MAX_PER", "GROUP_BY", "CLUSTER")

Constraint = tuple[str, ...]


def relational(constraint: Sequence[str]) -> bool:
    """Whether a constraint compares a task with its siblings (``CLUSTER`` only without a value)."""
    op = constraint[1] if len(constraint) > 1 else ""
    value = constraint[2] if len(constraint) > 2 else ""
    return op in ("UNIQUE", "MAX_PER", "GROUP_BY") or (op == "CLUSTER" and not value)


def is_hostname(name: str) -> bool:
    return name in ("hostname", "@hostname")


def escape(text: str) -> str:
    """``text`` as a regular expression that matches only it, in Java's syntax and Python's alike
    (every character but letters, digits and ``_`` behind a backslash)."""
    return "".join(c if c.isalnum() or c == "_" else "\\" + c for c in text)


def _alternation(values: Iterable[str]) -> str:
    return "|".join(escape(v) for v in sorted(set(values)))


def value_text(raw: Any) -> str | None:
    """An attribute value of the Mesos master's JSON as Marathon compares it: numbers with up to three
    decimals (``DecimalFormat("0.###")``), anything else as its text; None stays None."""
    if raw is None:
        return None
    if isinstance(raw, bool):
        return str(raw).lower()
    if isinstance(raw, (int, float)):
        text = f"{round(float(raw), 3):.3f}".rstrip("0").rstrip(".")
        return text or "0"
    return str(raw)


def constraint_text(c: Sequence[str]) -> str:
    return json.dumps(list(c))


@dataclass(frozen=True)
class Rule:
    """One relational constraint of a scope."""

    field: str
    operator: str
    value: str = ""

    @classmethod
    def of(cls, c: Sequence[str]) -> Rule:
        return cls(c[0], c[1], c[2] if len(c) > 2 else "")

    def constraint(self) -> Constraint:
        return (self.field, self.operator) + ((self.value,) if self.value else ())

    def text(self, scope: str) -> str:
        """``job rule ["hostname", "UNIQUE"]`` / ``worker rule ["rack", "MAX_PER", "2"]``."""
        return f"{scope} rule {constraint_text(self.constraint())}"

    @property
    def number(self) -> int:
        try:
            return int(self.value)
        except ValueError:
            return 0

    def presence(self) -> Constraint | None:
        """An attribute rule needs the attribute (in Marathon an offer without the field meets only
        UNLIKE, so its own UNIQUE/MAX_PER/GROUP_BY/CLUSTER never place there)."""
        return None if is_hostname(self.field) else (self.field, "LIKE", ".*")


@dataclass(frozen=True)
class Scope:
    """The tasks one set of rules spans: ``name`` ``job`` (the roles without constraints of their own)
    or a role; ``key`` where the rules are in the job file; the tasks in the job's order; the one placed
    first (the job's leader when it is in the scope, else the scope's first task)."""

    name: str
    key: str
    rules: tuple[Rule, ...]
    tasks: tuple[str, ...]
    first: str

    def label(self) -> str:
        return json.dumps({"scope": self.name, "rules": [list(r.constraint()) for r in self.rules]},
                          separators=(",", ":"))


def rules_of(constraints: Iterable[Sequence[str]]) -> tuple[tuple[Constraint, ...], tuple[Rule, ...]]:
    """A ``constraints`` list → (the constraints that stay in every app, the relational rules)."""
    kept: list[Constraint] = []
    rules: list[Rule] = []
    for c in constraints:
        (rules.append(Rule.of(c)) if relational(c) else kept.append(tuple(c)))
    return tuple(kept), tuple(rules)


def scope_of_app(app: Mapping[str, Any]) -> tuple[str, tuple[Rule, ...]] | None:
    """An app's scope and rules from its :data:`RULES_LABEL`; None when it has none (or it is unreadable)."""
    raw = (app.get("labels") or {}).get(RULES_LABEL)
    if not raw:
        return None
    try:
        data = json.loads(raw)
        rules = tuple(Rule.of([str(x) for x in c]) for c in data["rules"] if len(c) >= 2)
        return str(data["scope"]), rules
    except (ValueError, KeyError, TypeError, IndexError):
        return None


def split(app: Mapping[str, Any]) -> tuple[tuple[Constraint, ...], tuple[Constraint, ...], str]:
    """An app's (base constraints, those the placement added at their end, why) from its :data:`LABEL`."""
    constraints = tuple(tuple(str(x) for x in c) for c in app.get("constraints") or [])
    raw = (app.get("labels") or {}).get(LABEL)
    if not raw:
        return constraints, (), ""
    try:
        data = json.loads(raw)
        added = tuple(tuple(str(x) for x in c) for c in data.get("added") or [])
        why = str(data.get("why") or "")
    except (ValueError, TypeError, AttributeError):
        return constraints, (), ""
    if added and constraints[-len(added):] == added:
        return constraints[:-len(added)], added, why
    return constraints, (), why


def strip(app: Mapping[str, Any]) -> dict[str, Any]:
    """The app without what the placement added (its base constraints, no :data:`LABEL`): what the
    deploy digest is taken over, so that placement never reads as a change of the job."""
    if LABEL not in (app.get("labels") or {}):
        return dict(app)
    base, _, _ = split(app)
    out = dict(app)
    out["constraints"] = [list(c) for c in base]
    out["labels"] = {k: v for k, v in (app.get("labels") or {}).items() if k != LABEL}
    return out


def label_value(added: Sequence[Constraint], why: str, off: str | None = None, *, written: bool = False) -> str:
    """The :data:`LABEL` text: the constraints the placement added, why, and ``off``: the id of the task
    this write stops (a change of an app's constraints restarts its task: the placement's doing, not a
    new configuration of the job, :func:`displaced`). ``written``: by the job's leader (its placer), not
    by the render: :func:`placement_write`."""
    data: dict[str, Any] = {"added": [list(c) for c in added], "why": why}
    if off:
        data["off"] = off
    if written:
        data["by"] = "leader"
    return json.dumps(data, separators=(",", ":"))


def placement_write(app: Mapping[str, Any]) -> bool:
    """Whether the app's last configuration change was the placement's own write (its leader's placer:
    :func:`label_value` ``written``), not a deploy, a scale or a re-submission of the job."""
    raw = (app.get("labels") or {}).get(LABEL)
    if not isinstance(raw, str) or not raw:
        return False
    try:
        return json.loads(raw).get("by") == "leader"
    except (ValueError, TypeError, AttributeError):
        return False


def displaced(app: Mapping[str, Any]) -> str | None:
    """The id of the task the placement's last write to ``app`` stopped (moved or held), or None."""
    raw = (app.get("labels") or {}).get(LABEL)
    if not raw:
        return None
    try:
        off = json.loads(raw).get("off")
    except (ValueError, TypeError, AttributeError):
        return None
    return str(off) if off else None


# -- one rule against the values siblings hold --------------------------------------------------


def _counts(values: Iterable[str | None]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        if v is not None:
            out[v] = out.get(v, 0) + 1
    return out


def _cap(rule: Rule, total: int) -> int | None:
    """How many tasks of the scope one value may hold (None: no fixed cap)."""
    if rule.operator == "UNIQUE":
        return 1
    if rule.operator == "MAX_PER":
        return max(rule.number, 0)
    if rule.operator == "GROUP_BY" and rule.number > 0:
        return max(1, math.ceil(total / rule.number))
    return None


def translate(rule: Rule, held: Sequence[str | None], total: int) -> tuple[Constraint, ...]:
    """The per-app constraints that let one more task of the scope go only where ``rule`` allows,
    the siblings (placed) holding ``held`` (one value each); ``total``: the scope's tasks."""
    counts = _counts(held)
    cap = _cap(rule, total)
    if rule.operator == "CLUSTER":
        return ((rule.field, "LIKE", escape(min(counts, key=lambda v: (-counts[v], v)))),) if counts else ()
    if rule.operator == "GROUP_BY" and rule.number > 0 and len(counts) >= rule.number:
        room = [v for v, n in counts.items() if n < (cap or 0)]
        return ((rule.field, "LIKE", _alternation(room)),) if room else (HOLD,)
    if cap is not None:
        full = [v for v, n in counts.items() if n >= cap]
    else:  # GROUP_BY without a count (Marathon 1.4-1.8): a new value, or one of those holding the fewest
        least = min(counts.values(), default=0)
        full = [v for v, n in counts.items() if n > least]
    return ((rule.field, "UNLIKE", _alternation(full)),) if full else ()


def breaches(rule: Rule, placed: Sequence[tuple[str, str | None]], total: int) -> list[str]:
    """The tasks that break ``rule`` where they are, ``placed`` (task, its value) in the order they
    keep their place (the job's leader first, then the longest placed): the later ones move."""
    move: list[str] = []
    if rule.operator == "CLUSTER":
        anchor = next((v for _, v in placed if v is not None), None)
        return [t for t, v in placed if v != anchor]
    move += [t for t, v in placed if v is None]  # an attribute rule: only agents that have it
    have = [(t, v) for t, v in placed if v is not None]
    cap = _cap(rule, total)
    kept: dict[str, int] = {}
    if rule.operator == "GROUP_BY" and rule.number > 0:
        allowed: list[str] = []
        for _, v in have:
            if v not in allowed and len(allowed) < rule.number:
                allowed.append(v)
        for t, v in have:
            if v not in allowed or kept.get(v, 0) >= (cap or 0):
                move.append(t)
            else:
                kept[v] = kept.get(v, 0) + 1
        return move
    if cap is not None:
        for t, v in have:
            if kept.get(v, 0) >= cap:
                move.append(t)
            else:
                kept[v] = kept.get(v, 0) + 1
        return move
    counts = _counts(v for _, v in have)  # GROUP_BY without a count: no value more than one above another
    order = list(have)
    while counts and max(counts.values()) - min(counts.values()) > 1:
        top = max(counts, key=lambda v: counts[v])
        t = next(t for t, v in reversed(order) if v == top)
        order.remove((t, top))
        counts[top] -= 1
        move.append(t)
    return move


def infeasible(rule: Rule, scope: str, tasks: int, agents: Sequence[str | None]) -> str | None:
    """Why no placement of ``tasks`` tasks can satisfy ``rule`` on agents with these values of its field
    (one per registered agent; None: the agent lacks it), in one line; None when some can."""
    distinct = sorted({v for v in agents if v is not None})
    n = len(agents)
    what = "hosts" if is_hostname(rule.field) else f"values of {rule.field}"
    where = (f"the Mesos master lists {n} agent{'s' if n != 1 else ''}" if is_hostname(rule.field) else
             f"the {n} agent{'s' if n != 1 else ''} the Mesos master lists have "
             + (f"{len(distinct)} ({', '.join(distinct[:5])}{' …' if len(distinct) > 5 else ''})"
                if distinct else f"no attribute {rule.field}"))
    head = rule.text(scope)
    if not distinct:
        return f"{head} cannot place its {tasks} task{'s' if tasks != 1 else ''}: {where}"
    if rule.operator == "UNIQUE" and tasks > len(distinct):
        return f"{head} needs {tasks} distinct {what} for its {tasks} tasks; {where}"
    if rule.operator == "MAX_PER" and tasks > rule.number * len(distinct):
        return (f"{head} fits at most {rule.number} × {len(distinct)} = {rule.number * len(distinct)} of its "
                f"{tasks} tasks; {where}")
    if rule.operator == "GROUP_BY" and rule.number > 0 and min(rule.number, tasks) > len(distinct):
        return f"{head} needs {min(rule.number, tasks)} distinct {what} for its {tasks} tasks; {where}"
    return None


# -- one round of placement ---------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    """One task of a scope as Marathon shows it: its app's base constraints and what the placement
    added (and why), where its live task is (None: it waits), when that task was staged, and the value of
    each rule's field there (None: unknown or absent)."""

    task: str
    base: tuple[Constraint, ...] = ()
    added: tuple[Constraint, ...] = ()
    why: str = ""
    host: str | None = None
    staged: str = ""
    values: Mapping[str, str | None] = field(default_factory=dict)

    @property
    def held(self) -> bool:
        return HOLD in self.added


@dataclass
class Plan:
    """What one round decides for a scope: the constraints to write (task → (added, why)), the tasks
    that must move (they break a rule where they are), and why each task that is not settled is not."""

    writes: dict[str, tuple[tuple[Constraint, ...], str]] = field(default_factory=dict)
    moves: list[str] = field(default_factory=list)
    blocking: dict[str, str] = field(default_factory=dict)
    released: str | None = None

    @property
    def settled(self) -> bool:
        return not self.blocking


def held_why(scope: Scope) -> str:
    """Why a task of ``scope`` is held (the same text from the render and from every round, so that a
    held app is not written to again for nothing)."""
    return (f"held by {'/'.join(r.text(scope.name) for r in scope.rules)}: its tasks are placed one at a time "
            f"by the job's leader")


def _order(members: Mapping[str, Member], tasks: Sequence[str], leader: str | None) -> list[str]:
    """Who keeps its place first: the leader, then the earliest staged, then the job's order."""
    index = {t: i for i, t in enumerate(tasks)}
    return sorted((t for t in tasks if members[t].host is not None),
                  key=lambda t: (t != leader, members[t].staged or "~", index[t]))


def _where(members: Mapping[str, Member], tasks: Iterable[str]) -> str:
    return ", ".join(f"{members[t].host} ({t})" for t in tasks)


def plan(scope: Scope, members: Mapping[str, Member], leader: str | None = None) -> Plan:
    """One round for ``scope`` (see the module): tasks breaking a rule move, one waiting task at a
    time is released with the constraints its siblings' values give, the other waiting ones are held.
    A placed task that keeps its place is never written to (a constraint change restarts it)."""
    out = Plan()
    tasks = [t for t in scope.tasks if t in members]
    total = len(scope.tasks)
    order = _order(members, tasks, leader)
    moving: list[str] = []
    for rule in scope.rules:  # a value not known (an attribute of an agent not read yet) is not judged
        placed = [(t, members[t].values.get(rule.field)) for t in order
                  if t not in moving and rule.field in members[t].values]
        moving += [t for t in breaches(rule, placed, total) if t != leader and t not in moving]
    ok = [t for t in order if t not in moving]
    waiting = [t for t in tasks if members[t].host is None]
    # a task released to move (its kill under way) keeps its turn: releasing a held one instead would
    # write to both again and flip the two each time Marathon ends the kills in the other order
    leaving = [t for t in moving if members[t].added and not members[t].held]
    queue = ([t for t in waiting if not members[t].held] + leaving + [t for t in waiting if members[t].held]
             + [t for t in moving if t not in leaving])
    released = queue[0] if queue else None
    out.moves, out.released = moving, released
    for t in queue:
        m = members[t]
        if t == released:
            added: tuple[Constraint, ...] = ()
            for rule in scope.rules:
                added += translate(rule, [members[o].values.get(rule.field) for o in ok], total)
            avoid = [o for o in ok if any(c[1] == "UNLIKE" and members[o].values.get(c[0]) is not None
                                            for c in added)]
            why = (f"{'/'.join(r.text(scope.name) for r in scope.rules)}: "
                   + (f"away from {_where(members, avoid)}" if avoid and HOLD not in added else
                      "no value left where it may go" if HOLD in added else
                      f"with {_where(members, ok)}" if ok and any(c[1] == "LIKE" for c in added) else
                      "placed where its siblings allow"))
        else:
            added, why = (HOLD,), held_why(scope)
        if t in moving:
            sibling = [o for o in ok if any(members[o].values.get(r.field) == m.values.get(r.field)
                                             for r in scope.rules)]
            out.blocking[t] = (f"placement: {'/'.join(r.text(scope.name) for r in scope.rules)}: on "
                               f"{m.host}" + (f" beside {', '.join(sibling)}" if sibling else "") + "; being moved")
        else:
            out.blocking[t] = f"placement: {why}"
        if added != m.added or (why != m.why and m.host is None):
            out.writes[t] = (added, why)
    return out
