"""marathon_tf.task.checkpoints: the step of the newest checkpoint and of TensorBoard event files, without TF."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from marathon_tf.task.checkpoints import (
    event_file_step,
    keras_backup,
    latest_checkpoint_step,
    newest_checkpoint,
    training_step,
)

KERAS_BACKUPS = Path(__file__).parent.parent / "data" / "keras-backup"  # real ones: see its SOURCE.md


def _varint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def _event(step: int) -> bytes:
    """An Event proto: wall_time (field 1, double), step (field 2, varint), a summary (field 5, bytes)."""
    return (b"\x09" + struct.pack("<d", 1.5) + b"\x10" + _varint(step) + b"\x2a" + _varint(3) + b"abc")


def _record(data: bytes) -> bytes:
    return struct.pack("<Q", len(data)) + b"\0" * 4 + data + b"\0" * 4


def _block(items: list[tuple[bytes, bytes]]) -> bytes:
    """A table block: every key whole (no shared prefix), one restart point."""
    body = b"".join(_varint(0) + _varint(len(k)) + _varint(len(v)) + k + v for k, v in items)
    return body + struct.pack("<II", 0, 1)


def write_checkpoint(directory: Path, number: int, ints: dict[str, int]) -> None:
    """A TensorFlow checkpoint ``ckpt-<number>`` as TensorFlow writes one: the index text, the
    ``.index`` table (LevelDB format, uncompressed blocks: a BundleHeaderProto under "", a
    BundleEntryProto per variable) and the ``.data`` shard holding int64 scalars ``ints``."""
    directory.mkdir(parents=True, exist_ok=True)
    prefix = directory / f"ckpt-{number}"
    data, entries = b"", [(b"", b"\x08\x01")]  # num_shards 1, little-endian
    for name in sorted(ints):
        entries.append((f"{name}/.ATTRIBUTES/VARIABLE_VALUE".encode(),
                        b"\x08\x09" + b"\x12\x00" + b"\x20" + _varint(len(data)) + b"\x28\x08"))  # int64, shape ()
        data += struct.pack("<q", ints[name])
    table = _block(entries)
    meta = _block([])
    index = _block([(entries[-1][0], _varint(0) + _varint(len(table)))])
    out = table + b"\0" * 5 + meta + b"\0" * 5 + index + b"\0" * 5
    handles = _varint(len(table) + 5) + _varint(len(meta)) + _varint(len(table) + 5 + len(meta) + 5) + \
        _varint(len(index))
    out += handles + b"\0" * (40 - len(handles)) + struct.pack("<Q", 0xDB4775248B80FB57)
    Path(f"{prefix}.index").write_bytes(out)
    Path(f"{prefix}.data-00000-of-00001").write_bytes(data)
    (directory / "checkpoint").write_text(f'model_checkpoint_path: "ckpt-{number}"\n')


def test_a_keras_backup_gives_its_step_and_epoch_not_its_save_counter(tmp_path):
    """Issue 21: BackupAndRestore numbers its backups by their save counter (ckpt-4 after the 4th
    backup); the step is in the backup's variables (the optimizer's iterations)."""
    write_checkpoint(tmp_path / "backup" / "chief", 4, {"ckpt_saved_epoch": 2, "ckpt_saved_batch": 1,
                                                       "model/optimizer/_iterations": 87, "train_counter": 80,
                                                       "save_counter": 4})
    found = newest_checkpoint(tmp_path)
    assert (found.step, found.epoch, found.batch) == (87, 2, 1)
    assert latest_checkpoint_step(tmp_path) == training_step(tmp_path) == 87
    # no optimizer step: the model's train_counter; a batch never set (-1) is none
    write_checkpoint(tmp_path / "b2" / "chief", 5, {"ckpt_saved_epoch": 3, "ckpt_saved_batch": -1,
                                                   "train_counter": 90})
    assert keras_backup(tmp_path / "b2" / "chief" / "ckpt-5") == {"step": 90, "epoch": 3, "batch": None}


def test_a_keras_backup_without_a_step_gives_its_epoch_only(tmp_path):
    write_checkpoint(tmp_path / "backup" / "chief", 7, {"ckpt_saved_epoch": 6, "ckpt_saved_batch": 39})
    found = newest_checkpoint(tmp_path)
    assert (found.step, found.epoch, found.batch) == (None, 6, 39)
    assert latest_checkpoint_step(tmp_path) is None


def test_other_checkpoints_and_unreadable_backups_keep_the_number_in_their_name(tmp_path):
    write_checkpoint(tmp_path / "tf2" / "chief", 300, {"global_step": 300, "save_counter": 3})  # not a Keras backup
    found = newest_checkpoint(tmp_path / "tf2")
    assert (found.step, found.epoch) == (300, None) and found.path == str(tmp_path / "tf2" / "chief" / "ckpt-300")
    cut = tmp_path / "cut" / "chief"
    write_checkpoint(cut, 4, {"ckpt_saved_epoch": 2, "model/optimizer/_iterations": 87})
    assert latest_checkpoint_step(cut) == 87
    (cut / "ckpt-4.index").write_bytes((cut / "ckpt-4.index").read_bytes()[:-9])  # cut short: not a table
    assert keras_backup(cut / "ckpt-4") is None and latest_checkpoint_step(cut) == 4
    (cut / "ckpt-4.index").unlink()
    assert latest_checkpoint_step(cut) == 4
    # a Keras backup's variables elsewhere than BackupAndRestore's chief/ directory: not opened
    write_checkpoint(tmp_path / "flat", 5, {"ckpt_saved_epoch": 2, "model/optimizer/_iterations": 87})
    assert latest_checkpoint_step(tmp_path / "flat") == 5


@pytest.mark.parametrize("name, number, expected", [("epoch", 2, (10, 1, 4)), ("batch3", 4, (12, 2, 1))])
def test_real_keras_backups_are_read_without_tensorflow(tmp_path, name, number, expected):
    """Backups tf_keras 2.21's BackupAndRestore wrote (tests/data/keras-backup/SOURCE.md)."""
    logdir = tmp_path / "ckpt"
    shutil.copytree(KERAS_BACKUPS / name, logdir / "backup")
    found = newest_checkpoint(logdir)
    assert (found.step, found.epoch, found.batch) == expected
    assert f'"ckpt-{number}"' in (logdir / "backup" / "chief" / "checkpoint").read_text()


def test_no_logdir_or_no_checkpoint_is_none(tmp_path):
    assert latest_checkpoint_step(tmp_path / "missing") is None
    assert latest_checkpoint_step(tmp_path) is None
    assert training_step(tmp_path) is None


def test_the_checkpoint_index_names_the_step_also_below_the_logdir(tmp_path):
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-300"\n'
                                         'all_model_checkpoint_paths: "model.ckpt-200"\n')
    assert latest_checkpoint_step(tmp_path) == 300
    deeper = tmp_path / "backup" / "chief"
    deeper.mkdir(parents=True)
    (deeper / "checkpoint").write_text('model_checkpoint_path: "/abs/ckpt-1200"\n')
    assert latest_checkpoint_step(tmp_path) == 1200
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "weights"\n')  # no step: ignored
    assert latest_checkpoint_step(tmp_path) == 1200


def test_event_files_give_the_largest_step_and_tolerate_a_partial_record(tmp_path):
    path = tmp_path / "events.out.tfevents.1.host"
    path.write_bytes(_record(_event(0)) + _record(_event(70000)) + _record(_event(250)) + _record(_event(9))[:10])
    assert event_file_step(path) == 70000
    assert training_step(tmp_path) == 70000


@pytest.mark.tf
def test_reads_what_tensorflow_writes(tmp_path):
    code = (f"import tensorflow as tf\n"
            f"w = tf.summary.create_file_writer({str(tmp_path / 'logs')!r})\n"
            f"with w.as_default():\n"
            f"    for s in (1, 42, 17): tf.summary.write('loss', tf.constant(0.5), step=s)\n"
            f"w.flush()\n"
            f"ckpt = tf.train.Checkpoint(v=tf.Variable(1.0))\n"
            f"tf.train.CheckpointManager(ckpt, {str(tmp_path / 'ckpt')!r}, 3).save(checkpoint_number=123)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert training_step(tmp_path / "logs") == 42
    assert latest_checkpoint_step(tmp_path / "ckpt") == 123
