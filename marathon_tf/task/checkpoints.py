"""What a job's logdir says about training, read without TensorFlow.

Two structured sources, both written by TensorFlow itself:

* the checkpoint index ``<dir>/checkpoint`` (a text ``CheckpointState``:
  ``model_checkpoint_path: "model.ckpt-300"``), written by ``tf.train.Saver``,
  ``CheckpointManager``, ``CheckpointSaverHook`` and Keras' ``BackupAndRestore``;
  the number after the last ``-`` is the global step (or the save counter when the
  program saves without a step);
* TensorBoard event files ``events.out.tfevents.*`` (TFRecord framing around ``Event``
  protos); the largest ``step`` of any event is how far training got.

The bootstrap uses :func:`latest_checkpoint_step` to say ``resumed from checkpoint at step N``
before it starts the training program, and :func:`training_step` as the step of a program that
prints no ``step=N`` lines (the convention read by :data:`marathon_tf.task.supervisor.STEP_RE`).
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path
from typing import Iterator

__all__ = ["newest_checkpoint", "latest_checkpoint_step", "event_file_step", "training_step"]

_MODEL_PATH = re.compile(r'^model_checkpoint_path:\s*"(?P<path>[^"]*)"', re.M)
_TRAILING_NUMBER = re.compile(r"-(\d+)$")
#: How deep below the logdir to look for an index or event files (``ckpt/backup/chief/…``).
MAX_DEPTH = 3


def _walk(root: Path, depth: int = MAX_DEPTH) -> Iterator[Path]:
    """Directories under ``root`` (itself first), at most ``depth`` levels down, no symlink loops."""
    stack = [(root, 0)]
    seen: set[str] = set()
    while stack:
        path, level = stack.pop()
        try:
            real = os.path.realpath(path)
            if real in seen:
                continue
            seen.add(real)
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError:
            continue
        yield path
        if level < depth:
            stack.extend((Path(e.path), level + 1) for e in reversed(entries) if e.is_dir())


def newest_checkpoint(logdir: str | os.PathLike) -> tuple[int, float] | None:
    """(step, when its index was written: unix time) of the newest checkpoint any index under
    ``logdir`` names; None: no checkpoint."""
    best: tuple[int, float] | None = None
    for directory in _walk(Path(logdir)):
        index = directory / "checkpoint"
        try:
            text = index.read_text(encoding="utf-8", errors="replace")
            written = index.stat().st_mtime
        except OSError:
            continue
        m = _MODEL_PATH.search(text)
        n = _TRAILING_NUMBER.search(m.group("path")) if m else None
        if n and (best is None or (int(n.group(1)), written) > best):
            best = (int(n.group(1)), written)
    return best


def latest_checkpoint_step(logdir: str | os.PathLike) -> int | None:
    """The step of the newest checkpoint any index under ``logdir`` names (None: no checkpoint)."""
    found = newest_checkpoint(logdir)
    return found[0] if found else None


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _event_step(record: bytes) -> int | None:
    """``Event.step`` (field 2, varint) of one serialized ``Event`` proto."""
    pos = 0
    while pos < len(record):
        key, pos = _varint(record, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(record, pos)
            if field == 2:
                return value
        elif wire == 1:
            pos += 8
        elif wire == 2:
            length, pos = _varint(record, pos)
            pos += length
        elif wire == 5:
            pos += 4
        else:
            return None
    return None


def event_file_step(path: str | os.PathLike) -> int | None:
    """The largest event ``step`` in one TensorBoard event file (a partly written file is fine)."""
    best: int | None = None
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    pos = 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        start, end = pos + 12, pos + 12 + length
        if end + 4 > len(data):
            break  # the writer is still on this record
        try:
            step = _event_step(data[start:end])
        except ValueError:
            step = None
        if step is not None:
            best = max(best or 0, step)
        pos = end + 4
    return best


def training_step(logdir: str | os.PathLike) -> int | None:
    """How far training got by the logdir: the largest event step, else the newest checkpoint's."""
    steps = [event_file_step(d / name) for d in _walk(Path(logdir))
             for name in _names(d) if name.startswith("events.out.tfevents.")]
    steps = [s for s in steps if s is not None]
    return max(steps) if steps else latest_checkpoint_step(logdir)


def _names(directory: Path) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []
