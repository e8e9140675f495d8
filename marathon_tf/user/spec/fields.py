"""The job spec's own marshmallow fields: strict numbers and integers, clean strings, commands,
string maps with checked keys, Marathon constraints, the ``prewarm`` value. Each raises a
``ValidationError`` whose message reads well after the field's path.
"""

from __future__ import annotations

import math
import re
from types import MappingProxyType

from marshmallow import ValidationError, fields

from marathon_tf.user.spec.model import CONSTRAINT_OPERATORS, DEFAULT_PREWARM, MAX_COUNT

_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: The most bytes one environment variable (``KEY=value`` and its NUL) or one argument may have: Linux's
#: ``MAX_ARG_STRLEN`` (``PAGE_SIZE * 32``), past which ``execve`` fails with
#: E2BIG and the task never starts (Marathon sends the app's ``env`` and ``cmd`` to the Mesos executor,
#: which execs ``sh -c cmd`` with them).
MAX_ARG_BYTES = 32 * 4096
#: The most bytes of environment and command one task may have: Marathon keeps each app's definition in
#: a ZooKeeper node, which holds less than 1 MiB unless ZooKeeper's ``jute.maxbuffer`` was raised
#: (its default is 0xfffff bytes; ZooKeeper Administrator's Guide), and ``execve`` takes at most a
#: quarter of the stack limit (2 MiB of 8 MiB) of arguments and environment together.
MAX_TASK_BYTES = 2 ** 20
#: The most bytes of environment and command all of a job's tasks may have together: the job's group
#: that Marathon answers (each app's definition, plus its tasks) is read back within marathon-tf's answer
#: limit (32 MiB, ``marathon/transport.py`` ``DEFAULT_MAX_BYTES``); half of it is left for the rest.
MAX_JOB_BYTES = 16 * 2 ** 20
_RESERVED_LABEL_PREFIX = "marathon-tf/"
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _check_text(value: str, prefix: str = "") -> None:
    if not _is_text(value):
        raise ValidationError(f"{prefix}must be valid Unicode text (no lone surrogates)")


class _StrictNumber(fields.Float):
    """A JSON number: rejects strings, booleans, NaN and infinities."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValidationError("must be a number")
        if not math.isfinite(value):
            raise ValidationError("must be a finite number")
        return float(value)


class _StrictInt(fields.Integer):
    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ValidationError("must be an integer")
        return value


class ElasticCount(int):
    """An elastic count as the schema's rules read it: the int is the maximum (one app each), ``min``
    the minimum the job starts with."""

    min: int

    def __new__(cls, minimum: int, maximum: int) -> ElasticCount:
        value = super().__new__(cls, maximum)
        value.min = minimum
        return value


class _Count(fields.Field):
    """A role's count: an integer, or ``{"min": m, "max": n}`` (an elastic count: 1 <= m <= n)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, dict):
            unknown = sorted(set(value) - {"min", "max"})
            if unknown:
                raise ValidationError(f"unknown key {unknown[0]!r}: an elastic count is {{\"min\": m, \"max\": n}}")
            if "min" not in value or "max" not in value:
                raise ValidationError('an elastic count needs both "min" and "max"')
            lo, hi = value["min"], value["max"]
            for name, x in (("min", lo), ("max", hi)):
                if isinstance(x, bool) or not isinstance(x, int):
                    raise ValidationError(f"{name} must be an integer")
            if lo < 1:
                raise ValidationError("min must be >= 1 (a job trains with at least one worker)")
            if lo > hi:
                raise ValidationError(f"min ({lo}) must be <= max ({hi})")
            if hi > MAX_COUNT:
                raise ValidationError(f"max must be <= {MAX_COUNT}")
            return ElasticCount(lo, hi)
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise ValidationError('must be an integer, or {"min": m, "max": n} (an elastic count)')
        if not 0 <= value <= MAX_COUNT:
            raise ValidationError(f"must be between 0 and {MAX_COUNT}")
        return value


class _Str(fields.String):
    """A non-empty string without NUL or other control characters (newline/tab allowed
    only where ``multiline``)."""

    def __init__(self, *a, multiline: bool = False, allow_empty: bool = False, **kw):
        super().__init__(*a, **kw)
        self.multiline = multiline
        self.allow_empty = allow_empty

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, str):
            raise ValidationError("must be a string")
        _check_text(value)
        if not value and not self.allow_empty:
            raise ValidationError("must not be empty")
        bad = [c for c in value if ord(c) < 32 and not (self.multiline and c in "\n\t\r")]
        if bad or "\x7f" in value:
            raise ValidationError(f"must not contain control characters (found {bad[0] if bad else chr(127)!r})")
        return value


class _Command(fields.Field):
    """An argv list of strings, or one shell string."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, str):
            if not value.strip():
                raise ValidationError("must not be empty")
            if "\x00" in value:
                raise ValidationError("must not contain NUL bytes")
            _check_text(value)
            _check_argsize_text(value)
            return value
        if isinstance(value, list):
            if not value:
                raise ValidationError("must not be an empty list")
            for i, arg in enumerate(value):
                if not isinstance(arg, str):
                    raise ValidationError(f"item {i} must be a string")
                if "\x00" in arg:
                    raise ValidationError(f"item {i} must not contain NUL bytes")
                _check_text(arg, f"item {i} ")
                _check_argsize_text(arg, f"item {i} ")
            return tuple(value)
        raise ValidationError("must be a list of strings or a shell command string")


class _Prewarm(fields.Field):
    """``false``, ``true`` (the default modules) or a non-empty list of module names."""

    def _deserialize(self, value, attr, data, **kwargs):
        if value is False:
            return ()
        if value is True:
            return DEFAULT_PREWARM
        if not isinstance(value, list) or not value:
            raise ValidationError("must be false, true or a non-empty list of module names")
        for i, name in enumerate(value):
            if not isinstance(name, str) or not _MODULE.match(name):
                raise ValidationError(f"item {i} must be a module name like \"tensorflow\" or \"numpy.linalg\"")
        return tuple(dict.fromkeys(value))


def size_text(n: int) -> str:
    """``1.5 MiB``, ``128 KiB``, ``12 bytes``."""
    if n >= 2 ** 20:
        return f"{n / 2 ** 20:.2f}".rstrip("0").rstrip(".") + " MiB"
    return f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n} bytes"


def _check_argsize_text(value: str, prefix: str = "") -> None:
    n = len(value.encode("utf-8", "surrogatepass")) + 1
    if n > MAX_ARG_BYTES:
        raise ValidationError(f"{prefix}is {size_text(n)}: one argument of a task's command is at most "
                              f"{size_text(MAX_ARG_BYTES)} (Linux's MAX_ARG_STRLEN: the task would not start)")


class _StrMap(fields.Field):
    """A JSON object of string → string, keys checked by ``key_check``; with ``environment``, each
    ``KEY=value`` within :data:`MAX_ARG_BYTES`."""

    def __init__(self, *a, key_check=None, environment: bool = False, **kw):
        super().__init__(*a, **kw)
        self.key_check = key_check
        self.environment = environment

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, dict):
            raise ValidationError("must be an object of strings")
        errors: dict[str, list[str]] = {}
        for k, v in value.items():
            problem = self.key_check(k) if self.key_check else None
            if problem:
                errors.setdefault(k, []).append(problem)
            elif not isinstance(v, str):
                errors.setdefault(k, []).append("must be a string (quote numbers and booleans)")
            elif "\x00" in v:
                errors.setdefault(k, []).append("must not contain NUL bytes")
            elif not _is_text(k) or not _is_text(v):
                errors.setdefault(k, []).append("must be valid Unicode text (no lone surrogates)")
            elif self.environment and len(k.encode()) + len(v.encode()) + 2 > MAX_ARG_BYTES:
                n = len(k.encode()) + len(v.encode()) + 2
                errors.setdefault(k, []).append(
                    f"is {size_text(n)}: one environment variable of a task is at most {size_text(MAX_ARG_BYTES)} "
                    f"(Linux's MAX_ARG_STRLEN: the task would not start)")
        if errors:
            raise ValidationError(errors)
        return MappingProxyType(dict(value))


def _env_key_problem(key: str) -> str | None:
    if not _ENV_KEY.match(key):
        return "is not a valid environment variable name"
    if key.startswith("MTF_"):
        return "MTF_* variables are reserved for marathon-tf"
    return None


def _label_key_problem(key: str) -> str | None:
    if not key or any(ord(c) < 32 for c in key):
        return "is not a valid label key"
    if key.startswith(_RESERVED_LABEL_PREFIX):
        return f"labels starting with {_RESERVED_LABEL_PREFIX!r} are reserved for marathon-tf"
    return None


class _Constraint(fields.Field):
    """Marathon's ``[field, OPERATOR]`` or ``[field, OPERATOR, value]``."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, list) or len(value) not in (2, 3) or not all(isinstance(x, str) for x in value):
            raise ValidationError('must be ["field", "OPERATOR"] or ["field", "OPERATOR", "value"]')
        fld, op = value[0], value[1]
        if not fld:
            raise ValidationError("the field must not be empty")
        if op not in CONSTRAINT_OPERATORS:
            raise ValidationError(f"unknown operator {op!r} (one of {', '.join(CONSTRAINT_OPERATORS)})")
        val = value[2] if len(value) == 3 else None
        if op == "UNIQUE" and val is not None:
            raise ValidationError("UNIQUE takes no value")
        if op in ("LIKE", "UNLIKE", "IS", "MAX_PER") and val is None:
            raise ValidationError(f"{op} needs a value")
        if op in ("LIKE", "UNLIKE"):
            try:
                re.compile(str(val))
            except re.error as e:
                raise ValidationError(f"{op} value is not a valid regular expression: {e}") from e
        if op in ("MAX_PER", "GROUP_BY") and val is not None and not re.fullmatch(r"[0-9]+", val):
            raise ValidationError(f"{op} value must be an integer")
        return tuple(value)
