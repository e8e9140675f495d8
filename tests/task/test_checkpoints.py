"""marathon_tf.task.checkpoints: the step of the newest checkpoint and of TensorBoard event files, without TF."""

from __future__ import annotations

import struct
import subprocess
import sys

import pytest

from marathon_tf.task.checkpoints import event_file_step, latest_checkpoint_step, training_step


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
