#!/usr/bin/env python3
"""Keras model.fit with MultiWorkerMirroredStrategy (synchronous all-reduce across workers).

What it shows: the common TF2 Keras multi-worker program, driven only by ``TF_CONFIG`` (workers
only, no ps, no chief task: worker 0 is the chief).  Every worker runs the same ``model.fit``;
gradients are all-reduced each step.  ``BackupAndRestore`` backs the training state up under
``--checkpoint_dir`` every ``--backup_every`` steps (default: each epoch), so a job whose workers
are all restarted after a failure resumes from the last backup, at that step.

Preemption: a worker that gets SIGTERM (its task is stopped) tells the others through TensorFlow's
coordination service; ``tf.distribute.experimental.PreemptionCheckpointHandler`` has every worker
save the backup at the same step (the next one), and every worker exits with 42, the code
marathon-tf takes for "preempted, restart me" (``restart.preemption_exit_codes``), once every worker
has saved (worker 0 hosts the coordination service the others use until then): the group restarts
and resumes from that step.  (Keras' own ``save_before_preemption`` is for Google Cloud
only; :class:`BackupAndRestoreOnPreemption` does the same anywhere.)  At the end the trained weights are saved: worker 0
writes them to ``<checkpoint_dir>/final``, the other workers (every worker must take part in the
save) to a worker-specific temporary directory that they delete afterwards.  All workers exit 0.

Saving on request (marathon-tf's save hook, docs/restarts.md): worker 0 says
``marathon-tf save-hook: ready hold=wait``; on SIGUSR1 every worker backs up at the same step, a step or two
later (:class:`SaveOnRequest`: they agree on it through TensorFlow's coordination service, as
``PreemptionCheckpointHandler`` does), without stopping; worker 0 says ``marathon-tf save-hook: saved
step=<n> path=<backup>`` and waits until its bootstrap lets it go on (SIGUSR2) or stops it (the others wait
for it at their next step): what
``marathon-tf checkpoint`` and every planned stop (a kill, ``scale``, ``delete --save``) ask for first.

Elastic (``job-elastic.json``: ``"worker": {"count": {"min": 2, "max": 3}}``, docs/elastic.md): every change of
the job's size restarts every worker from the last backup with the new ``TF_CONFIG`` (TensorFlow's
collectives are fixed at start); ``MARATHON_TF_WORKERS`` says the size. ``--global_batch_size N`` keeps the
*global* batch at N whatever the size (each of the W workers takes N / W), so the learning rate and what a
step means do not change with it; without it the per-worker ``--batch_size`` is kept and the global batch
grows with the workers (then scale the learning rate with it: ``--lr_scaling linear``, the usual
linear-scaling rule, ``lr x W / --lr_reference_workers``).

Keras: TF 2.21's Keras 3 does not work with this strategy, so the program uses ``tf_keras``
(Keras 2) and sets ``TF_USE_LEGACY_KERAS=1`` before TensorFlow is imported.

Data: synthetic 4-class tabular data (class-dependent means plus noise, fixed seed); nothing is
downloaded.

Output (stdout of every worker): ``step=<global step> loss=<loss>`` every ``--log_every`` steps,
``first_step_time=<unix time>`` after the first step, ``done final_step=<n> loss=<x>`` at the end.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # must precede the TensorFlow import

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402
from tensorflow.python.eager import context  # noqa: E402 (the coordination service's key-value store)

NUM_FEATURES, NUM_CLASSES = 32, 4


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps_per_epoch", type=int, default=40)
    p.add_argument("--batch_size", type=int, default=64, help="per worker; the global batch is this x workers")
    p.add_argument("--global_batch_size", type=int, default=0,
                   help="keep the global batch at this whatever the number of workers (elastic jobs; 0: off)")
    p.add_argument("--lr_scaling", choices=["none", "linear"], default="none",
                   help="linear: learning rate x workers / --lr_reference_workers (a global batch that grows)")
    p.add_argument("--lr_reference_workers", type=int, default=1)
    p.add_argument("--checkpoint_dir", default="ckpt", help="shared directory for backups and the final weights")
    p.add_argument("--learning_rate", type=float, default=0.05)
    p.add_argument("--log_every", type=int, default=10, help="steps between step= lines")
    p.add_argument("--backup_every", type=int, default=0, help="steps between backups (0: each epoch)")
    p.add_argument("--num_examples", type=int, default=4096)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def log(line):
    print(line, flush=True)


def task_of_tf_config():
    """(task type, index) from TF_CONFIG, or (None, None) when running alone."""
    task = json.loads(os.environ["TF_CONFIG"]).get("task", {}) if os.environ.get("TF_CONFIG") else {}
    return task.get("type"), task.get("index")


def is_chief(task_type, task_id):
    return task_type in (None, "chief") or (task_type == "worker" and task_id == 0)


def write_dir(dirpath, task_type, task_id):
    """The standard multi-worker save pattern: the chief writes to ``dirpath``, every other
    worker to its own ``dirpath/workertemp_<i>`` (deleted after the save)."""
    if not is_chief(task_type, task_id):
        dirpath = os.path.join(dirpath, f"workertemp_{task_id}")
    os.makedirs(dirpath, exist_ok=True)
    return dirpath


def make_dataset(args, global_batch_size):
    """Synthetic 4-class data, the same on every worker; the strategy shards it by element."""
    rng = np.random.default_rng(args.seed)
    means = rng.normal(0.0, 1.0, (NUM_CLASSES, NUM_FEATURES)).astype(np.float32)
    labels = rng.integers(0, NUM_CLASSES, args.num_examples).astype(np.int32)
    features = means[labels] + rng.normal(0.0, 1.0, (args.num_examples, NUM_FEATURES)).astype(np.float32)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return (tf.data.Dataset.from_tensor_slices((features, labels))
            .shuffle(args.num_examples, seed=args.seed).repeat()
            .batch(global_batch_size).prefetch(2).with_options(options))


def build_model(learning_rate):
    model = keras.Sequential([
        keras.layers.Input(shape=(NUM_FEATURES,)),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(NUM_CLASSES),
    ])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=learning_rate, momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


class StepLogger(keras.callbacks.Callback):
    """Prints ``first_step_time=`` once and ``step=<global step> loss=<loss>`` every N steps."""

    def __init__(self, log_every):
        super().__init__()
        self.log_every, self.first_done, self.loss, self.logged = log_every, False, float("nan"), None

    def on_train_begin(self, logs=None):
        # After BackupAndRestore (listed before this callback) has restored a backup, if any.
        log(f"training from global step {int(self.model.optimizer.iterations.numpy())}")

    def on_train_batch_end(self, batch, logs=None):
        self.loss = float((logs or {}).get("loss", float("nan")))
        if not self.first_done:
            self.first_done = True
            log(f"first_step_time={time.time():.3f}")
        step = int(self.model.optimizer.iterations.numpy())
        if step % self.log_every == 0:
            log(f"step={step} loss={self.loss:.6f}")
            self.logged = step


PREEMPTED_CODE = 42  # marathon-tf's default restart.preemption_exit_codes: 42 and 143
EXIT_BARRIER_MS = 20_000  # how long a preempted worker waits for the others to finish their save
DEPARTURE_S = 1.0  # how long worker 0 stays after the last barrier: the others' answers reach them first


class BackupAndRestoreOnPreemption(keras.callbacks.BackupAndRestore):
    """``BackupAndRestore`` that also backs up when a worker is preempted (SIGTERM): its
    ``PreemptionCheckpointHandler`` (on the same checkpoint, read from the chief's backup directory
    by every worker, so their step counts agree) saves at the step every worker agreed on, then
    exits with :data:`PREEMPTED_CODE`."""

    def __init__(self, backup_dir, save_freq, cluster_resolver):
        super().__init__(backup_dir=backup_dir, save_freq=save_freq)
        self.cluster_resolver = cluster_resolver

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)  # restores the last backup (this class's attribute _training_state)
        backups = self._training_state.read_checkpoint_manager
        self.handler = tf.distribute.experimental.PreemptionCheckpointHandler(
            self.cluster_resolver, backups.checkpoint, checkpoint_dir=backups.directory,
            termination_config=tf.distribute.experimental.TerminationConfig(exit_fn=self._exit))
        self.on_request = SaveOnRequest(self.cluster_resolver, backups.directory)

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        self.handler.save_checkpoint_if_preempted()  # saves and exits when a worker was preempted
        self.on_request.after_step(int(self.model.optimizer.iterations.numpy()), lambda: self._backup(
            epoch=self._current_epoch, batch=batch))

    def on_train_end(self, logs=None):
        self.on_request.close()
        super().on_train_end(logs)

    def _exit(self):
        log(f"preempted at step {int(self.model.optimizer.iterations.numpy())}; backup saved; "
            f"exiting {PREEMPTED_CODE}")
        sys.stderr.flush()
        # Worker 0's process hosts the coordination service the others still call while they finish the
        # same save (the handler's key-value writes): nobody leaves before everyone has saved.
        try:
            context.context().wait_at_barrier("marathon_tf_preempted_exit", EXIT_BARRIER_MS)
        except Exception as e:  # noqa: BLE001 - a peer that died meanwhile: its backup is its restart's concern
            log(f"not every worker reached the exit within {EXIT_BARRIER_MS // 1000} s ({type(e).__name__}); "
                "exiting anyway")
        os._exit(PREEMPTED_CODE)  # the backup is written: skip TensorFlow's slow shutdown


class SaveOnRequest:
    """marathon-tf's save hook for a synchronous group: SIGUSR1 (to any worker; marathon-tf asks worker 0)
    asks for a backup. Every worker must take part in it at the same step, so the asked worker proposes
    a step two ahead in the coordination service (``marathon_tf_save_<n>``) and waits until every worker's
    watcher thread has acknowledged it (their main threads cannot pass the next step meanwhile: it needs
    this worker); at that step every worker backs up, and the asked one says ``saved`` and waits until its
    bootstrap lets it go on (SIGUSR2): a wait, unlike a SIGSTOP, outlasts a Mesos agent's kill's SIGCONT."""

    def __init__(self, resolver, backup_dir):
        self.backup_dir, self.asked, self.proposed, self.go = backup_dir, False, False, False
        self.workers = len(resolver.cluster_spec().as_dict().get("worker", []))
        self.me = resolver.task_id or 0
        self.targets, self.round = {}, 0  # round -> step; the next round to save
        self.lock = threading.Lock()
        signal.signal(signal.SIGUSR1, self._ask)
        signal.signal(signal.SIGUSR2, self._go_on)
        self.watcher = threading.Thread(target=self._watch, daemon=True, name="save-requests")
        self.watcher.start()
        if self.me == 0:
            log("marathon-tf save-hook: ready hold=wait")

    def _ask(self, signum, frame):
        self.asked = True

    def _go_on(self, signum, frame):
        self.go = True

    def _watch(self):
        n = 0
        while True:
            value = context.context().get_config_key_value(f"marathon_tf_save_{n}")  # blocks until it is set
            if value == "stop":
                return
            with self.lock:
                self.targets[n] = int(value)
            context.context().set_config_key_value(f"marathon_tf_save_{n}_ack_{self.me}", "1")
            n += 1

    def after_step(self, step, backup):
        if self.asked and not self.proposed:
            self.asked, self.proposed = False, True
            try:
                context.context().set_config_key_value(f"marathon_tf_save_{self.round}", str(step + 2))
            except tf.errors.AlreadyExistsError:
                pass  # another worker proposed this round's step first
            for i in range(self.workers):
                context.context().get_config_key_value(f"marathon_tf_save_{self.round}_ack_{i}")
        with self.lock:
            target = self.targets.get(self.round)
        if target is not None and step >= target:
            self.round += 1
            backup()
            if self.proposed:
                self.proposed = self.go = False
                log(f"marathon-tf save-hook: saved step={step} path={self.backup_dir}")
                while not self.go:  # until the bootstrap lets it go on (or stops it)
                    time.sleep(0.01)

    def close(self):
        if self.me == 0:
            try:
                context.context().set_config_key_value(f"marathon_tf_save_{self.round}", "stop")
            except Exception:  # noqa: BLE001 - a round proposed at the very end: its watchers already moved on
                pass


def main(argv=None):
    args = parse_args(argv)
    # Create the strategy first: it starts this task's server from TF_CONFIG.
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    task_type, task_id = task_of_tf_config()
    workers = strategy.num_replicas_in_sync
    log(f"{task_type}:{task_id} in a group of {workers} replicas")

    global_batch = args.global_batch_size or args.batch_size * workers
    if args.global_batch_size and args.global_batch_size % workers:
        global_batch = (args.global_batch_size // workers) * workers  # an even share for every replica
    learning_rate = args.learning_rate * (workers / args.lr_reference_workers if args.lr_scaling == "linear" else 1)
    log(f"global batch {global_batch} ({global_batch // workers} per worker), learning rate {learning_rate:g}; "
        f"MARATHON_TF_WORKERS={os.environ.get('MARATHON_TF_WORKERS', '?')}")
    with strategy.scope():
        model = build_model(learning_rate)

    logger = StepLogger(args.log_every)
    callbacks = [
        # Writes the chief's backup in backup/ and the others' in worker-specific temp dirs itself.
        BackupAndRestoreOnPreemption(os.path.join(args.checkpoint_dir, "backup"),
                                     args.backup_every or args.steps_per_epoch, strategy.cluster_resolver),
        logger,
    ]
    history = model.fit(make_dataset(args, global_batch), epochs=args.epochs,
                        steps_per_epoch=args.steps_per_epoch, callbacks=callbacks, verbose=0)

    # Every worker takes part in the save; only the chief's copy is kept.
    final_dir = os.path.join(args.checkpoint_dir, "final")
    target = write_dir(final_dir, task_type, task_id)
    model.save_weights(os.path.join(target, "weights"))
    if not is_chief(task_type, task_id):
        shutil.rmtree(target, ignore_errors=True)

    step = int(model.optimizer.iterations.numpy())
    accuracy = history.history.get("accuracy", [float("nan")])[-1] if history.history else float("nan")
    if logger.logged != step:
        log(f"step={step} loss={logger.loss:.6f}")
    log(f"done final_step={step} loss={logger.loss:.6f} accuracy={accuracy:.4f}")
    leave(0, is_chief(task_type, task_id))


def leave(code, hosts_coordination):
    """Exit once every worker is done, without TensorFlow's teardown. Worker 0's process hosts the coordination
    service the others shut down through: left to the interpreter's exit, a worker still shutting down when
    worker 0 has gone retries its RPCs ("UNAVAILABLE: Failed to send RPC to coordination service") for
    seconds. So every worker meets the others at a barrier, then leaves at once; worker 0 last, a moment after
    the barrier, so that the others have their answer from it first."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        context.context().wait_at_barrier("marathon_tf_done", EXIT_BARRIER_MS)
    except Exception as e:  # noqa: BLE001 - a peer that died meanwhile: nothing left to wait for
        log(f"not every worker reached the end within {EXIT_BARRIER_MS // 1000} s ({type(e).__name__}); "
            "exiting anyway")
    if hosts_coordination:
        time.sleep(DEPARTURE_S)
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
