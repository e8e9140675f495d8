"""What a job's logdir says about training, read without TensorFlow.

Two structured sources, both written by TensorFlow itself:

* the checkpoint index ``<dir>/checkpoint`` (a text ``CheckpointState``:
  ``model_checkpoint_path: "model.ckpt-300"``), written by ``tf.train.Saver``,
  ``CheckpointManager``, ``CheckpointSaverHook`` and Keras' ``BackupAndRestore``;
  the number after the last ``-`` is the global step (or the save counter when the
  program saves without a step). A Keras ``BackupAndRestore`` backup (its variables
  ``ckpt_saved_epoch``/``ckpt_saved_batch``) is numbered by its save counter: its real step
  (the optimizer's iterations, else the model's ``train_counter``) and epoch are read from
  the checkpoint's own index and data files (:func:`keras_backup`);
* TensorBoard event files ``events.out.tfevents.*`` (TFRecord framing around ``Event``
  protos); the largest ``step`` of any event is how far training got.

The bootstrap uses :func:`newest_checkpoint` to say ``resumed from checkpoint at step N`` (or
``resumed from the Keras backup (epoch N)`` when a backup's step cannot be read) before it starts
the training program, and :func:`training_step` as the step of a program that
prints no ``step=N`` lines (the convention read by :data:`marathon_tf.task.supervisor.STEP_RE`).
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

__all__ = ["Checkpoint", "newest_checkpoint", "latest_checkpoint_step", "keras_backup", "event_file_step",
           "training_step"]

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


class Checkpoint(NamedTuple):
    """The newest checkpoint of a logdir."""

    step: int | None        # the training step (None: a Keras backup whose step could not be read)
    written: float          # when its index was written (unix time)
    epoch: int | None = None  # a Keras backup's epoch (0-based, as Keras keeps it)
    batch: int | None = None  # ... and its batch in that epoch (0-based)
    path: str | None = None   # the checkpoint's prefix, as its index names it, under its directory


def newest_checkpoint(logdir: str | os.PathLike) -> Checkpoint | None:
    """The newest checkpoint any index under ``logdir`` names (None: no checkpoint); a Keras
    backup's step is its real one (:func:`keras_backup`), not its save counter."""
    best: tuple[int, float, Path, str] | None = None
    for directory in _walk(Path(logdir)):
        index = directory / "checkpoint"
        try:
            text = index.read_text(encoding="utf-8", errors="replace")
            written = index.stat().st_mtime
        except OSError:
            continue
        m = _MODEL_PATH.search(text)
        n = _TRAILING_NUMBER.search(m.group("path")) if m else None
        if m and n and (best is None or (int(n.group(1)), written) > best[:2]):
            best = (int(n.group(1)), written, directory, m.group("path"))
    if best is None:
        return None
    number, written, directory, path = best
    prefix = str(directory / path)
    # BackupAndRestore writes <backup_dir>/chief/ckpt-N: only such an index is opened (a big model's is large)
    keras = keras_backup(directory / path) if directory.name == "chief" else None
    if keras is None:
        return Checkpoint(number, written, path=prefix)
    return Checkpoint(keras["step"], written, keras["epoch"], keras["batch"], prefix)


def latest_checkpoint_step(logdir: str | os.PathLike) -> int | None:
    """The step of the newest checkpoint any index under ``logdir`` names (None: no checkpoint, or a
    Keras backup whose step cannot be read)."""
    found = newest_checkpoint(logdir)
    return found.step if found else None


# --- a TensorFlow checkpoint's variables: its index is a LevelDB-format table (uncompressed blocks)
# of BundleEntryProto by variable name, the values are in <prefix>.data-<shard>-of-<shards>.
_TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER = 48
_KERAS_EPOCH = "ckpt_saved_epoch/.ATTRIBUTES/VARIABLE_VALUE"
_KERAS_BATCH = "ckpt_saved_batch/.ATTRIBUTES/VARIABLE_VALUE"
#: Where a Keras backup keeps its step, best first: the optimizer's iterations (tf_keras' optimizer,
#: the legacy one), else the model's train_counter (train_function calls of this ``fit``).
_KERAS_STEPS = ("model/optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE",
                "model/optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE", "train_counter/.ATTRIBUTES/VARIABLE_VALUE")
_INTS = {3: 4, 9: 8}  # DT_INT32, DT_INT64: bytes


def _block(data: bytes, offset: int, size: int) -> Iterator[tuple[bytes, bytes]]:
    """The (key, value) entries of one table block (keys are prefix-compressed)."""
    if offset + size + 5 > len(data) or data[offset + size] != 0:
        raise ValueError("truncated or compressed block")
    block = data[offset:offset + size]
    (restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    end, pos, key = len(block) - 4 - 4 * restarts, 0, b""
    while pos < end:
        shared, pos = _varint(block, pos)
        own, pos = _varint(block, pos)
        length, pos = _varint(block, pos)
        key = key[:shared] + block[pos:pos + own]
        pos += own
        yield key, block[pos:pos + length]
        pos += length


def _table(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    if len(data) < _FOOTER or struct.unpack_from("<Q", data, len(data) - 8)[0] != _TABLE_MAGIC:
        raise ValueError("not a checkpoint index")
    footer, pos = data[-_FOOTER:], 0
    for _ in range(2):  # the metaindex block's handle: not needed
        _, pos = _varint(footer, pos)
    offset, pos = _varint(footer, pos)
    size, pos = _varint(footer, pos)
    for _, handle in _block(data, offset, size):
        block_offset, at = _varint(handle, 0)
        block_size, _ = _varint(handle, at)
        yield from _block(data, block_offset, block_size)


def _fields(message: bytes) -> dict[int, int]:
    """The varint and fixed fields of a small proto (later ones win); length-delimited ones skipped."""
    out, pos = {}, 0
    while pos < len(message):
        key, pos = _varint(message, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            out[field], pos = _varint(message, pos)
        elif wire == 2:
            length, pos = _varint(message, pos)
            pos += length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise ValueError("unknown wire type")
    return out


def _int_variables(prefix: Path, names: set[str]) -> dict[str, int]:
    """The integer scalar variables ``names`` of the checkpoint ``prefix`` (those it holds)."""
    index = _table(Path(f"{prefix}.index").read_bytes())
    header: dict[int, int] = {}
    entries: dict[str, dict[int, int]] = {}
    for key, value in index:
        if key == b"":
            header = _fields(value)  # BundleHeaderProto: num_shards (1), endianness (2: 1 is big)
        elif key.decode("utf-8", "replace") in names:
            entries[key.decode()] = _fields(value)  # BundleEntryProto: dtype 1, shard_id 3, offset 4, size 5
    out, shards = {}, header.get(1, 1)
    order = ">" if header.get(2) == 1 else "<"
    for name, entry in entries.items():
        width = _INTS.get(entry.get(1, 0))
        if width is None or entry.get(5) != width:
            continue
        with open(f"{prefix}.data-{entry.get(3, 0):05d}-of-{shards:05d}", "rb") as f:
            f.seek(entry.get(4, 0))
            raw = f.read(width)
        if len(raw) == width:
            out[name] = struct.unpack(order + ("i" if width == 4 else "q"), raw)[0]
    return out


def keras_backup(prefix: str | os.PathLike) -> dict[str, int | None] | None:
    """``{"step", "epoch", "batch"}`` of the checkpoint ``prefix`` (``…/chief/ckpt-4``) when it is a
    Keras ``BackupAndRestore`` backup (``step`` None when it holds none); None when it is not one
    or cannot be read."""
    try:
        found = _int_variables(Path(prefix), {_KERAS_EPOCH, _KERAS_BATCH, *_KERAS_STEPS})
    except (OSError, ValueError, struct.error):
        return None
    if _KERAS_EPOCH not in found:
        return None
    step = next((found[k] for k in _KERAS_STEPS if k in found), None)
    batch = found.get(_KERAS_BATCH)
    return {"step": step, "epoch": found[_KERAS_EPOCH], "batch": batch if batch is not None and batch >= 0 else None}


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
    read = [event_file_step(d / name) for d in _walk(Path(logdir))
            for name in _names(d) if name.startswith("events.out.tfevents.")]
    steps = [s for s in read if s is not None]
    return max(steps) if steps else latest_checkpoint_step(logdir)


def _names(directory: Path) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []
