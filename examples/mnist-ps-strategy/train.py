#!/usr/bin/env python3
"""MNIST-shaped classifier with TF2 ParameterServerStrategy and a ClusterCoordinator.

What it shows: the TF2 way of asynchronous parameter-server training, driven by ``TF_CONFIG``
(chief + ps + workers).  The ps and worker tasks only run a ``tf.distribute.Server`` and
``join()`` — they never exit by themselves.  The chief is the coordinator: it creates the
variables (which live on the ps tasks), schedules training steps onto the workers with
``coordinator.schedule`` in a custom loop, saves checkpoints with ``tf.train.CheckpointManager``
in ``--checkpoint_dir`` (restored on start, so a restarted job resumes), and exits 0 once the
global step has reached ``--train_steps`` and the last checkpoint is written (at once: TensorFlow's
teardown of the coordinator can take up to a minute, while every other task waits).  A scheduled
step may run twice when a worker fails; the loop only looks at the global step, so a repeat is
harmless.

Data: synthetic 28x28 "digits" — ten fixed random prototype images (seeded) plus noise — so it
is learnable and needs no download.  The model is a small MLP written with tf.Module (no Keras:
Keras 3 does not work with this strategy on TF 2.21).

Preemption: the coordinator saves. A chief that gets SIGTERM (its task is stopped) finishes the
round of steps it scheduled, saves a checkpoint at that step and exits with 42, the code
marathon-tf takes for "preempted, restart me" (``restart.preemption_exit_codes``); ps and worker
tasks hold nothing to save (a worker's SIGTERM ends it, 143: the coordinator goes on without it and
takes it back once it is restarted). ``PreemptionCheckpointHandler`` does not support this strategy
(TF 2.21: ``NotImplementedError``), hence the handler here.

Saving on request (marathon-tf's save hook, docs/restarts.md): the coordinator says
``marathon-tf save-hook: ready hold=wait``; on SIGUSR1 it saves a checkpoint after the round of steps it
scheduled, without stopping, says ``marathon-tf save-hook: saved step=<n> path=<checkpoint>`` and
waits until its bootstrap lets it go on (SIGUSR2) or stops it — a wait, unlike a SIGSTOP, outlasts the
SIGCONT a Mesos agent's kill sends every process of a task: what ``marathon-tf checkpoint``
and every planned stop (a kill, ``scale``, ``delete --save``) ask for first. Where marathon-tf's bootstrap
runs those rounds (``MTF_SAVE_ROUNDS=1``) the coordinator leaves SIGTERM to it: on a real Mesos agent the
task's SIGTERM reaches the program with its bootstrap, which has it save first.

Output (chief's stdout): ``step=<global step> loss=<loss>`` every ``--log_every`` steps,
``first_step_time=<unix time>`` after the first step, ``done final_step=<n> loss=<x>`` at the end
(``preempted at step <n> ...`` instead when stopped).
"""

import argparse
import os
import signal
import sys
import time

# Let the coordinator see a failed worker at once instead of gRPC retrying underneath it.
os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")

import tensorflow as tf  # noqa: E402

PREEMPTED_CODE = 42  # marathon-tf's default restart.preemption_exit_codes: 42 and 143
_stop = {"signal": None, "save": False, "go": False}


def _on_stop(signum, frame):
    _stop["signal"] = signum  # the coordinator saves after the round of steps it scheduled


def _on_save(signum, frame):
    _stop["save"] = True  # marathon-tf's save hook: saved after the round of steps scheduled


def _on_go(signum, frame):
    _stop["go"] = True  # marathon-tf's save hook: its bootstrap lets it go on after a save


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train_steps", type=int, default=200, help="stop when the global step reaches this")
    p.add_argument("--checkpoint_dir", default="ckpt", help="checkpoint directory (restored on start)")
    p.add_argument("--learning_rate", type=float, default=0.05)
    p.add_argument("--batch_size", type=int, default=64, help="per worker and step")
    p.add_argument("--hidden_units", type=int, default=64)
    p.add_argument("--log_every", type=int, default=20, help="steps scheduled between step= lines")
    p.add_argument("--save_every", type=int, default=100, help="steps between checkpoints")
    p.add_argument("--noise", type=float, default=1.0, help="stddev of the pixel noise around the prototypes")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def log(line):
    print(line, flush=True)


def make_dataset_fn(args):
    """A per-worker input pipeline: an endless stream of noisy copies of 10 class prototypes."""
    prototypes = tf.random.stateless_uniform([10, 28, 28], seed=[args.seed, 10])  # fixed per seed

    def dataset_fn(_=None):
        def example(i):
            label = tf.cast(i % 10, tf.int32)
            noise = tf.random.stateless_normal([28, 28], seed=tf.stack([tf.cast(args.seed, tf.int64), i]))
            return tf.gather(prototypes, label) + args.noise * noise, label

        return (tf.data.Dataset.random(seed=args.seed).map(lambda i: i % 1_000_000)
                .map(example, num_parallel_calls=2)
                .batch(args.batch_size, drop_remainder=True)
                .prefetch(2))

    return dataset_fn


class MLP(tf.Module):
    """784 -> hidden (relu) -> 10 logits."""

    def __init__(self, hidden_units, seed):
        super().__init__()
        init = tf.random.stateless_normal
        self.w1 = tf.Variable(init([784, hidden_units], seed=[seed, 1]) * 0.05, name="w1")
        self.b1 = tf.Variable(tf.zeros([hidden_units]), name="b1")
        self.w2 = tf.Variable(init([hidden_units, 10], seed=[seed, 2]) * 0.05, name="w2")
        self.b2 = tf.Variable(tf.zeros([10]), name="b2")

    def __call__(self, images):
        x = tf.reshape(images, [-1, 784])
        return tf.nn.relu(x @ self.w1 + self.b1) @ self.w2 + self.b2


def run_server(resolver):
    """ps and worker tasks: serve the cluster until killed."""
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                  task_index=resolver.task_id, protocol=resolver.rpc_layer or "grpc",
                                  start=True)
    log(f"{resolver.task_type}:{resolver.task_id} serving")
    server.join()


def run_coordinator(args, resolver):
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)

    with strategy.scope():  # variables are created on the ps tasks
        model = MLP(args.hidden_units, args.seed)
        global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")

    signal.signal(signal.SIGUSR1, _on_save)  # marathon-tf's save hook: answered between two rounds of steps
    signal.signal(signal.SIGUSR2, _on_go)  # ... and let go on by this after it
    log("marathon-tf save-hook: ready hold=wait")
    checkpoint = tf.train.Checkpoint(model=model, global_step=global_step)
    manager = tf.train.CheckpointManager(checkpoint, args.checkpoint_dir, max_to_keep=3)
    restored = manager.restore_or_initialize()
    step = int(global_step.numpy())
    log(f"chief: {'restored ' + restored if restored else 'fresh start'}, "
        f"global step {step}/{args.train_steps}, {len(resolver.cluster_spec().as_dict().get('worker', []))} workers")

    @tf.function
    def train_step(iterator):
        def step_fn(images, labels):
            with tf.GradientTape() as tape:
                logits = model(images)
                loss = tf.reduce_mean(
                    tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
            grads = tape.gradient(loss, model.trainable_variables)
            for var, grad in zip(model.trainable_variables, grads):
                var.assign_sub(args.learning_rate * grad)  # plain SGD, applied on the ps
            global_step.assign_add(1)
            return loss

        images, labels = next(iterator)
        return strategy.run(step_fn, args=(images, labels))

    per_worker_iterator = iter(coordinator.create_per_worker_dataset(make_dataset_fn(args)))

    loss, first, last_saved = float("nan"), True, step
    if os.environ.get("MTF_SAVE_ROUNDS") != "1":
        # (marathon-tf's save rounds, when its bootstrap runs them, save before every planned stop and end the
        # coordinator itself: its own save here would race the round's)
        signal.signal(signal.SIGTERM, _on_stop)
    while step < args.train_steps and _stop["signal"] is None:
        # The first round is a single step, so first_step_time marks the first finished step.
        n = 1 if first else min(args.log_every, args.train_steps - step)
        results = [coordinator.schedule(train_step, args=(per_worker_iterator,)) for _ in range(n)]
        coordinator.join()
        if first:
            log(f"first_step_time={time.time():.3f}")
            first = False
        loss = float(results[-1].fetch())
        step = int(global_step.numpy())  # counts every executed step, repeats included
        log(f"step={step} loss={loss:.6f}")
        if step - last_saved >= args.save_every:
            manager.save(checkpoint_number=step)
            last_saved = step
        if _stop["save"]:  # asked to save now: save, say so, wait until the bootstrap lets it go on (or stops it)
            _stop["save"] = _stop["go"] = False
            path = manager.save(checkpoint_number=step)
            last_saved = step
            log(f"marathon-tf save-hook: saved step={step} path={path}")
            while not _stop["go"]:
                time.sleep(0.01)
    if step != last_saved or restored is None:
        manager.save(checkpoint_number=step)
    if _stop["signal"] is not None:
        log(f"preempted at step {step} (signal {_stop['signal']}); checkpoint saved; exiting {PREEMPTED_CODE}")
        sys.stderr.flush()
        os._exit(PREEMPTED_CODE)  # the checkpoint is written: skip TensorFlow's slow shutdown
    log(f"done final_step={step} loss={loss:.6f}")
    sys.stderr.flush()
    # The checkpoint is written: skip TensorFlow's shutdown here too. The interpreter's exit (tearing down
    # the coordinator and its connections to every ps and worker) took from under a second to 60 s after
    # this line (CI, a job scaled to 3 workers), while every other task waited for the job to end.
    os._exit(0)


def main(argv=None):
    args = parse_args(argv)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if resolver.task_type in ("ps", "worker"):
        run_server(resolver)
    elif resolver.task_type == "chief":
        run_coordinator(args, resolver)
    else:
        sys.exit(f"TF_CONFIG task type must be chief, ps or worker, not {resolver.task_type!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
