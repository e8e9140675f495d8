"""What the bootstrap reads from the logdir: `resumed from checkpoint at step N`, the step of a program
that prints none, a relaunched task's earlier restarts; and the step rate of `step=N` lines."""

from __future__ import annotations

import json
import struct

from test_checkpoints import write_checkpoint

from marathon_tf.contract.taskenv import TaskContext
from marathon_tf.task.bootstrap import Bootstrap
from marathon_tf.task.budget import RestartBudget
from marathon_tf.task.jobpolicy import JobPolicy
from marathon_tf.task.logdir import announce_resume


def _boot(tmp_path, role="worker", clock=None, policy=None):
    ctx = TaskContext(job="j", role=role, index=1, cluster={"worker": 2}, logdir="ckpt")
    kw = {"clock": clock} if clock else {}
    return Bootstrap(ctx, {"MESOS_SANDBOX": str(tmp_path)}, ["true"], policy=policy, **kw)


def announce(boot):
    """What the bootstrap says before it starts the program (marathon_tf.task.logdir.announce_resume)."""
    import sys

    announce_resume(boot.ctx, boot.environ, boot.status, lambda m: sys.stderr.write(f"marathon-tf bootstrap: {m}\n"))


def test_a_checkpoint_in_the_logdir_is_announced(tmp_path, capsys):
    (tmp_path / "ckpt").mkdir()
    boot = _boot(tmp_path)
    announce(boot)
    assert boot.status.snapshot()["resumed_from"] is None
    (tmp_path / "ckpt" / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-301"\n')
    announce(boot)
    assert boot.status.snapshot()["resumed_from"] == 301
    assert "resumed from checkpoint at step 301 (in ckpt)" in capsys.readouterr().err
    ps = _boot(tmp_path, role="ps")  # a ps restores nothing itself
    announce(ps)
    assert ps.status.snapshot()["resumed_from"] is None


def test_a_keras_backup_is_announced_with_its_step_or_else_its_epoch(tmp_path, capsys):
    """Issue 21: a Keras BackupAndRestore backup is numbered by its save counter (ckpt-4): the line
    says its real step, or only its epoch when the backup holds no step (never the counter)."""
    write_checkpoint(tmp_path / "ckpt" / "backup" / "chief", 4, {"ckpt_saved_epoch": 2, "ckpt_saved_batch": 1,
                                                                 "model/optimizer/_iterations": 87})
    boot = _boot(tmp_path)
    announce(boot)
    assert boot.status.snapshot()["resumed_from"] == 87
    assert "resumed from checkpoint at step 87 (in ckpt: the Keras backup of epoch 3, batch 2)" in \
        capsys.readouterr().err
    write_checkpoint(tmp_path / "other" / "ckpt" / "chief", 4, {"ckpt_saved_epoch": 6})
    boot = _boot(tmp_path / "other")
    announce(boot)
    assert boot.status.snapshot()["resumed_from"] is None
    err = capsys.readouterr().err
    assert "resumed from the Keras backup (epoch 7; in ckpt)" in err and "step 4" not in err


def test_step_lines_give_a_rate_and_the_logdir_gives_a_step_without_them(tmp_path):
    now = [100.0]
    boot = _boot(tmp_path, clock=lambda: now[0])
    (tmp_path / "ckpt").mkdir()
    event = b"\x10" + bytes([42])  # Event.step = 42
    (tmp_path / "ckpt" / "events.out.tfevents.1.h").write_bytes(
        struct.pack("<Q", len(event)) + b"\0" * 4 + event + b"\0" * 4)
    boot._logdir_step()
    assert boot.status.snapshot()["step"] == 42
    other = _boot(tmp_path, clock=lambda: now[0])
    other._on_step(10)
    now[0] += 5
    other._on_step(60)
    assert other.status.snapshot()["step"] == 60 and other.status.snapshot()["steps_per_second"] == 10.0
    other._logdir_step()  # a program that prints steps: its own lines win
    assert other.status.snapshot()["step"] == 60


def test_a_relaunched_task_counts_its_earlier_restarts(tmp_path):
    path = tmp_path / "failures.jsonl"
    path.write_text("".join(json.dumps({"task": t, "time": 1.0, "code": 1, "stderr": ""}) + "\n"
                            for t in ("worker-1", "worker-0", "worker-1")))
    ctx = TaskContext(job="j", role="worker", index=1, cluster={"worker": 2}, logdir="ckpt")
    policy = JobPolicy(ctx, RestartBudget(5, 600, task="worker-1", path=str(path)))
    assert _boot(tmp_path, policy=policy).status.snapshot()["restarts"] == 2
