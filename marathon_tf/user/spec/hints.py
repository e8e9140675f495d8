"""Which key the user meant: the closest allowed key to a misspelt one (``wokrer`` → ``worker``),
and which parts of a job failed to load, so that the rules across keys do not report what follows
from an error already reported (a misspelt ``comand`` is not also "no command"). Pure.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from marshmallow import Schema, fields

__all__ = ["closest", "failed_paths", "blocked"]


def closest(key: Any, allowed: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The allowed key ``key`` most likely misspells (difflib, ratio ≥ ``cutoff``; case is ignored), or None."""
    if not isinstance(key, str):
        return None
    choices = {a.lower(): a for a in allowed}
    if key.lower() in choices:
        return choices[key.lower()]
    match = difflib.get_close_matches(key.lower(), list(choices), n=1, cutoff=cutoff)
    return choices[match[0]] if match else None


def failed_paths(schema: Schema, original: Any, data: Any, prefix: str = "") -> set[str]:
    """Dotted paths of the keys in ``original`` that did not make it into ``data`` (marshmallow's
    partially loaded result): keys that failed, unknown keys, and the keys unknown ones misspell."""
    out: set[str] = set()
    if not isinstance(original, dict):
        return out
    for key, value in original.items():
        path = f"{prefix}{key}"
        field = schema.fields.get(key)
        if field is None:
            out.add(path)
            guess = closest(key, schema.fields)
            if guess:
                out.add(prefix + guess)
        elif not isinstance(data, dict) or key not in data:
            out.add(path)
        elif isinstance(field, fields.Nested) and not field.many:
            out |= failed_paths(field.schema, value, data[key], path + ".")
    return out


def blocked(failed: set[str], paths: Iterable[str]) -> bool:
    """Whether a rule reading ``paths`` must stay silent: one of them, a key holding it, or a key
    inside it failed."""
    return any(f == p or p.startswith(f + ".") or f.startswith(p + ".") for p in paths for f in failed)
