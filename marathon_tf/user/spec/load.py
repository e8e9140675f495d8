"""Loading a job: bytes → JSON (one-line errors, duplicate keys refused) → the schema →
:class:`~marathon_tf.user.spec.model.JobSpec`, with every problem as ``(field path, message)`` in
one :class:`~marathon_tf.contract.errors.SpecError`; relative ``fetch`` paths resolved next to the
job file.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from marshmallow import Schema, ValidationError, fields

from marathon_tf.contract.errors import SpecError
from marathon_tf.user.spec.model import JobSpec
from marathon_tf.user.spec.schema import _FetchField, _FetchSchema, _JobSchema

__all__ = ["load_job", "load_dict", "parse_json"]


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


def _allowed_keys(path: str) -> list[str] | None:
    """The keys allowed at the object holding ``path`` (for 'unknown key' hints)."""
    schema: Schema = _JobSchema()
    parts = [p for p in re.split(r"\.|\[\d+\]", path) if p][:-1]
    for part in parts:
        f = schema.fields.get(part)
        if isinstance(f, fields.List):
            f = f.inner
        if isinstance(f, fields.Nested):
            schema = f.schema
        elif isinstance(f, _FetchField):
            schema = _FetchSchema()
        else:
            return None
    return sorted(schema.fields)


def _resolve_fetch(spec: JobSpec, base_dir: Path | None) -> tuple[JobSpec, list[tuple[str, str]]]:
    """Relative fetch paths become ``file://`` URIs of files next to the job file."""
    problems = []
    out = []
    for i, f in enumerate(spec.fetch):
        parsed = urlparse(f.uri)
        if parsed.scheme:
            if parsed.scheme not in ("http", "https", "ftp", "ftps", "hdfs", "s3", "s3a", "s3n", "file", "docker"):
                problems.append((f"fetch[{i}].uri", f"unsupported URI scheme {parsed.scheme!r}"))
            out.append(f)
            continue
        path = Path(f.uri)
        if not path.is_absolute():
            if base_dir is None:
                problems.append((f"fetch[{i}].uri", "a relative path needs a job file to be relative to"))
                out.append(f)
                continue
            path = (base_dir / path).resolve()
        if not path.exists():
            problems.append((f"fetch[{i}].uri", f"no such file: {path}"))
        out.append(replace(f, uri=path.as_uri(), client_path=True))
    return replace(spec, fetch=tuple(out)), problems


def load_dict(data: Any, *, source: str = "job.json", base_dir: Path | None = None) -> JobSpec:
    """Validate an already-parsed job; raises :class:`SpecError` listing every problem."""
    try:
        spec: JobSpec = _JobSchema().load(data)
    except ValidationError as e:
        problems = []
        for path, msg in _flatten(e.messages):
            if msg == "unknown key":
                allowed = _allowed_keys(path)
                if allowed:
                    msg = f"unknown key (allowed: {', '.join(allowed)})"
            problems.append((path, msg))
        raise SpecError(source, problems) from None
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
        raw = p.read_bytes()
    except FileNotFoundError:
        raise SpecError(source, [("", "no such file")]) from None
    except IsADirectoryError:
        raise SpecError(source, [("", "is a directory, not a job file")]) from None
    except PermissionError:
        raise SpecError(source, [("", "permission denied")]) from None
    except OSError as e:
        raise SpecError(source, [("", f"cannot read: {e.strerror}")]) from None
    return load_dict(parse_json(raw, source), source=source, base_dir=p.resolve().parent)
