"""Loading a job: bytes → JSON (one-line errors, duplicate keys refused) → the schema →
:class:`~marathon_tf.user.spec.model.JobSpec`, with every problem as ``(field path, message)`` in
one :class:`~marathon_tf.contract.errors.SpecError`; relative ``fetch`` paths resolved next to the
job file.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from marshmallow import Schema, ValidationError, fields

from marathon_tf.contract.errors import SpecError
from marathon_tf.user.spec.hints import closest
from marathon_tf.user.spec.model import JobSpec
from marathon_tf.user.spec.schema import _FetchField, fetch_schema, job_schema

__all__ = ["load_job", "load_dict", "parse_json", "with_counts", "MAX_JOB_FILE"]

#: The most bytes a job file may have (docs/job-file.md): a job is a few KiB; the cap keeps ``validate
#: /dev/zero`` or a mistaken multi-GB file from being read into memory.
MAX_JOB_FILE = 2 ** 20


def _flatten(messages: Any, path: str = "") -> list[tuple[str, str]]:
    """marshmallow's nested messages → ``(field.path[0].sub, message)`` pairs."""
    out: list[tuple[str, str]] = []
    if isinstance(messages, dict):
        for key, value in messages.items():
            if key == "_schema":
                sub = path
            elif isinstance(key, int):
                sub = f"{path}[{key}]"
            elif "." in str(key) and not path:
                sub = str(key)  # already a dotted path from a schema validator
            else:
                sub = f"{path}.{key}" if path else str(key)
            out.extend(_flatten(value, sub))
    elif isinstance(messages, list):
        for m in messages:
            out.extend(_flatten(m, path))
    else:
        out.append((path, _lower_first(str(messages))))
    return out


def _lower_first(msg: str) -> str:
    if msg == "Unknown field.":
        return "unknown key"
    if msg == "Missing data for required field.":
        return "is required"
    if msg == "Field may not be null.":
        return "must not be null"
    if msg.startswith("Not a valid") or msg.startswith("Invalid"):
        msg = msg.rstrip(".")
        return msg[0].lower() + msg[1:]
    return msg


def _schema_at(path: str) -> Schema | None:
    """The schema of the object holding ``path`` (``roles.wokrer`` → the roles schema)."""
    schema: Schema = job_schema()
    parts = [p for p in re.split(r"\.|\[\d+\]", path) if p][:-1]
    for part in parts:
        f = schema.fields.get(part)
        if isinstance(f, fields.List):
            f = f.inner
        if isinstance(f, fields.Nested):
            schema = f.schema
        elif isinstance(f, _FetchField):
            schema = fetch_schema()
        else:
            return None
    return schema


_TOKENS = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _value_at(data: Any, path: str) -> Any:
    """The value at a field path of the raw document (None when it is not there)."""
    for key, index in _TOKENS.findall(path):
        if index:
            data = data[int(index)] if isinstance(data, list) and int(index) < len(data) else None
        else:
            data = data.get(key) if isinstance(data, dict) else None
    return data


def _unknown_key(data: Any, path: str) -> tuple[str, list[tuple[str, str]], str | None]:
    """An unknown key's message (the key it most likely misspells, else the allowed keys), the
    problems inside its value checked as that key's, and the key it misspells."""
    schema = _schema_at(path)
    key = path.rsplit(".", 1)[-1]
    parent = path.rpartition(".")[0]
    what = "role" if parent == "roles" else "key"
    if schema is None:
        return f"unknown {what}", [], None
    guess = closest(key, schema.fields)
    if guess is None:
        allowed = list(schema.fields) if what == "role" else sorted(schema.fields)
        return f"unknown {what} ({'roles' if what == 'role' else 'allowed'}: {', '.join(allowed)})", [], None
    inner: list[tuple[str, str]] = []
    field = schema.fields[guess]
    try:
        field.deserialize(_value_at(data, path))
    except ValidationError as e:  # an object of another shape than the key's: likely not that key
        nested = isinstance(field, (fields.Nested, fields.List))
        inner = [(f"{path}.{sub}" if sub else path, msg) for sub, msg in _flatten(e.messages)
                 if sub or not (nested or msg == "is required")]
    return f"unknown {what}; did you mean {guess}?", inner, f"{parent}.{guess}" if parent else guess


_ONE_OF = "must be one of "


def _problems(data: Any, messages: Any) -> list[tuple[str, str]]:
    """marshmallow's messages → every problem, with "did you mean" for unknown keys and the problems
    inside their values; a required key that is missing because it was misspelt is not reported twice."""
    problems, meant = [], set()
    for path, msg in _flatten(messages):
        if msg == "unknown key":
            msg, inner, guess = _unknown_key(data, path)
            problems.extend(inner)
            if guess:
                meant.add(guess)
        elif msg.startswith(_ONE_OF):  # an enumerated value: the one a misspelt value most likely means
            value = _value_at(data, path)
            # (a stricter match than for keys: ``tf2`` is not a misspelt ``tf1``)
            guess = closest(value, msg[len(_ONE_OF):].split(", "), 0.75) if isinstance(value, str) else None
            if guess is not None and guess != value:
                msg += f"; did you mean {guess}?"
        problems.append((path, msg))
    return [(p, m) for p, m in problems if not (m == "is required" and p in meant)]


_SCHEMES = ("http", "https", "ftp", "ftps", "hdfs", "s3", "s3a", "s3n", "file", "docker")


def _fetch_uri(uri: str, base_dir: Path | None) -> tuple[str | None, str | None]:
    """A fetch URI → (the ``file://`` URI of a path of this machine, or None for a URI; its problem)."""
    parsed = urlparse(uri)
    if parsed.scheme:
        return None, (f"unsupported URI scheme {parsed.scheme!r}" if parsed.scheme not in _SCHEMES else None)
    path = Path(uri)
    if not path.is_absolute():
        if base_dir is None:
            return None, "a relative path needs a job file to be relative to"
        path = (base_dir / path).resolve()
    return path.as_uri(), (None if path.exists() else f"no such file: {path}")


def _resolve_fetch(spec: JobSpec, base_dir: Path | None) -> tuple[JobSpec, list[tuple[str, str]]]:
    """Relative fetch paths become ``file://`` URIs of files next to the job file."""
    problems = []
    out = []
    for i, f in enumerate(spec.fetch):
        local, problem = _fetch_uri(f.uri, base_dir)
        if problem:
            problems.append((f"fetch[{i}].uri", problem))
        out.append(replace(f, uri=local, client_path=True) if local else f)
    return replace(spec, fetch=tuple(out)), problems


def _fetch_problems(data: Any, base_dir: Path | None) -> list[tuple[str, str]]:
    """The fetch paths' problems, read from a document that failed elsewhere (one pass for all)."""
    items = data.get("fetch") if isinstance(data, dict) else None
    out = []
    for i, item in enumerate(items if isinstance(items, list) else []):
        uri = item.get("uri") if isinstance(item, dict) else item
        if isinstance(uri, str) and uri:
            problem = _fetch_uri(uri, base_dir)[1]
            if problem:
                out.append((f"fetch[{i}].uri", problem))
    return out


def load_dict(data: Any, *, source: str = "job.json", base_dir: Path | None = None) -> JobSpec:
    """Validate an already-parsed job; raises :class:`SpecError` listing every problem."""
    try:
        spec: JobSpec = job_schema().load(data)
    except ValidationError as e:
        raise SpecError(source, _problems(data, e.messages) + _fetch_problems(data, base_dir)) from None
    spec = replace(spec, source=source)
    spec, problems = _resolve_fetch(spec, base_dir)
    if problems:
        raise SpecError(source, problems)
    return spec


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    seen: dict[str, Any] = {}
    for k, v in pairs:
        if k in seen:
            raise ValueError(f"duplicate key {k!r}")
        seen[k] = v
    return seen


def parse_json(raw: bytes, source: str) -> Any:
    """Bytes of a job file → JSON value, with one-line errors."""
    if not raw.strip():
        raise SpecError(source, [("", "the file is empty")])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(source, [("", f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})")]) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates,
                          parse_constant=lambda c: (_ for _ in ()).throw(ValueError(f"{c} is not valid JSON")))
    except json.JSONDecodeError as e:
        raise SpecError(source, [("", f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}")]) from None
    except RecursionError:
        raise SpecError(source, [("", "invalid JSON: nested too deeply")]) from None
    except ValueError as e:
        raise SpecError(source, [("", f"invalid JSON: {e}")]) from None


def load_job(path: str | os.PathLike) -> JobSpec:
    """Read and validate a job file. Errors are :class:`SpecError` (exit 2)."""
    source = os.fspath(path)
    p = Path(source)
    try:
        # O_NONBLOCK: a named pipe is refused below, not waited on for a writer
        with os.fdopen(os.open(p, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                what = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (a device, a pipe, a socket)"
                raise SpecError(source, [("", f"is {what}, not a job file")])
            raw = f.read(MAX_JOB_FILE + 1)
        if len(raw) > MAX_JOB_FILE:
            raise SpecError(source, [("", f"is larger than {MAX_JOB_FILE // 2 ** 20} MiB, the most a job file may "
                                          f"be (docs/job-file.md); put large data in a file the job fetches")])
    except FileNotFoundError:
        raise SpecError(source, [("", "no such file")]) from None
    except IsADirectoryError:
        raise SpecError(source, [("", "is a directory, not a job file")]) from None
    except PermissionError:
        raise SpecError(source, [("", "permission denied")]) from None
    except OSError as e:
        raise SpecError(source, [("", f"cannot read: {e.strerror}")]) from None
    return load_dict(parse_json(raw, source), source=source, base_dir=p.resolve().parent)


def with_counts(spec: JobSpec, counts: Mapping[str, int | tuple[int, int]]) -> JobSpec:
    """A copy of ``spec`` with new role counts (an int, or ``(min, max)``: an elastic count), validated like a
    fresh job.json (:class:`SpecError`)."""
    data = spec.to_dict()
    for role, n in counts.items():
        data["roles"].setdefault(role, {})["count"] = {"min": n[0], "max": n[1]} if isinstance(n, tuple) else n
    return load_dict(data, source=spec.source)
