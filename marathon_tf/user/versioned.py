"""What a job's constraints become, or why they are refused, for one Marathon version (pure).

Rendering (:mod:`marathon_tf.user.render`) asks here: :func:`constraint_problems` lists what the version cannot
hold the job to (it is refused before anything is sent), :func:`for_marathon` writes a constraint as that
version must be given it to mean what the job file says. The versions' facts are
:class:`marathon_tf.marathon.versions.Capabilities`'.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from marathon_tf.contract import naming
from marathon_tf.marathon import versions
from marathon_tf.mesos.resources import attribute_text
from marathon_tf.user.spec import JobSpec

__all__ = ["constraint_problems", "for_marathon"]


def constraint_problems(spec: JobSpec, caps: versions.Capabilities) -> list[str]:
    """Each of the job's constraints this Marathon would not hold it to, one line each (``IS`` and ``@`` fields
    before 1.6, a per-task ``GROUP_BY`` without a count where the matcher divides by it)."""
    rules = [("constraints", i, c) for i, c in enumerate(spec.constraints)]
    rules += [(f"roles.{r}.constraints", i, c) for r in naming.ROLES if spec.role(r).count
              for i, c in enumerate(spec.role(r).constraints or ())]
    rules += [("constraints_per_task", i, c) for i, c in enumerate(spec.constraints_per_task)]
    rules += [(f"roles.{r}.constraints_per_task", i, c) for r in naming.ROLES if spec.role(r).count
              for i, c in enumerate(spec.role(r).constraints_per_task or ())]
    out = []
    for key, i, c in rules:
        if c[1] == "IS" and not caps.has_constraint_is:
            out.append(f"{key}[{i}] uses the IS operator, which Marathon has from 1.6 (its marathon.proto)")
        if (c[1] == "GROUP_BY" and len(c) < 3 and "per_task" in key and caps.group_by_needs_a_count):
            out.append(f"{key}[{i}] is GROUP_BY without a count, which this Marathon divides by (a count of 0): "
                       f"the app's task is never placed")
        if c[0].startswith("@") and not caps.has_pseudo_fields:
            out.append(f"{key}[{i}] names {c[0]}, a field Marathon has from 1.6 (its mesos/Constraints.scala); "
                       f"before, it is taken for an agent attribute no agent has and the task is never placed")
    return out


#: A constraint value that is a number of 1,000 or more (a scalar attribute's, when the field is one)
_GROUPED_NUMBER = re.compile(r"[1-9][0-9]{3,}(\.[0-9]+)?")


def for_marathon(constraint: Sequence[str], caps: versions.Capabilities) -> list[str]:
    """A constraint as this Marathon must be given it to mean what the job file says. Up to 1.6.0 a scalar agent
    attribute reads ``1,024`` (:attr:`~marathon_tf.marathon.versions.Capabilities.scalars_grouped`), so a value
    of 1,000 or more never equals it: LIKE, UNLIKE, CLUSTER and IS with such a value become LIKE / UNLIKE of
    either form (``1024|1,024``: a text attribute that reads ``1024`` still matches)."""
    c = [str(x) for x in constraint]
    if not caps.scalars_grouped or len(c) < 3 or c[1] not in ("LIKE", "UNLIKE", "CLUSTER", "IS") \
            or not _GROUPED_NUMBER.fullmatch(c[2]):
        return c
    grouped = attribute_text(float(c[2]), grouped=True)
    written = c[2] if c[1] in ("LIKE", "UNLIKE") else re.escape(c[2])  # (CLUSTER, IS: the value itself, not a regex)
    return [c[0], "UNLIKE" if c[1] == "UNLIKE" else "LIKE", f"{written}|{re.escape(grouped)}"]
