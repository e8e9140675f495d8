#!/usr/bin/env python3
"""Linear regression with classic between-graph replication (TF1 style, through tf.compat.v1).

What it shows: the program shape distributed TensorFlow was born with, unchanged.  Every task
runs this file with ``--ps_hosts --worker_hosts --job_name --task_index``; the ps tasks hold the
variables and just ``server.join()``; every worker builds its own copy of the graph under
``replica_device_setter`` and trains asynchronously on synthetic data y = 2x + 1 + noise.
Worker 0 is the chief: it initialises or restores the variables from ``--checkpoint_dir`` and
saves checkpoints there, so a restarted job continues from the saved global step.  Each worker
exits 0 once the shared global step has reached ``--train_steps``.

Preemption: a worker that gets SIGTERM (its task is stopped: an agent's maintenance, an
operator's kill, a scale) finishes the step it is in; the chief then saves a checkpoint at that
step (``CheckpointSaverHook.end``), and it exits with 42, the code marathon-tf takes for "preempted,
restart me" (``restart.preemption_exit_codes``), at once: TensorFlow's own shutdown of its server
takes seconds of the kill's grace period.

Saving on request (marathon-tf's save hook, docs/restarts.md): every worker says
``marathon-tf save-hook: ready hold=wait``; on SIGUSR1 the chief saves a checkpoint after the step it is in,
without stopping, says ``marathon-tf save-hook: saved step=<n> path=<checkpoint>`` and waits until its
bootstrap lets it go on (SIGUSR2) or stops it: what ``marathon-tf checkpoint`` and every planned stop
(a kill, ``scale``, ``delete --save``) ask for first (:class:`SaveOnRequest`, a ``SessionRunHook``). The other
workers, which save nothing, are held for such a round the same way: SIGUSR1 there means "hold after this
step" (``marathon-tf save-hook: held step=<n>``), so that the chief's checkpoint is the job's last trained
state. Waiting, unlike a SIGSTOP, outlasts the SIGCONT a Mesos agent's kill sends every process of a task.
Where marathon-tf's bootstrap runs those rounds (``MTF_SAVE_ROUNDS=1``) the chief leaves SIGTERM to it: on
a real Mesos agent the task's SIGTERM reaches the program with its bootstrap, which has it save first.

Elastic (``--elastic``, the job file ``job-elastic.json``: ``"worker": {"count": {"min": 2, "max": 3}}``,
docs/elastic.md): a worker joins and leaves the running job without stopping the others. A ps knows the
workers of the cluster spec it started with only, and refuses a newcomer's tensors ("No worker known as
/job:worker/replica:0/task:2"); so every worker boots its TF server under a job of its own
(``elastic_boot``) and passes its cluster in its session's config (TensorFlow's ClusterSpec propagation,
``cluster_def``, with ``share_session_state_in_clusterspec_propagation``: the variables on the ps stay
the ones every worker's session shares). Asynchronous training needs nothing else: each step is one
worker's batch and one update, so neither the batch nor the learning rate changes with the job's size
(``MARATHON_TF_WORKERS`` is logged), only the global step's rate.

Output (stdout, one line per logged step): ``step=<global step> loss=<loss>``, then
``first_step_time=<unix time>`` after the first step and ``done final_step=<n> loss=<x>`` at the end
(``preempted at step <n> ...`` instead when stopped).
"""

import argparse
import os
import signal
import sys
import time

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()

PREEMPTED_CODE = 42  # marathon-tf's default restart.preemption_exit_codes: 42 and 143
ELASTIC_BOOT = "elastic_boot"  # (--elastic) the job a worker's own server runs as: not one its session names
_stop = {"signal": None}


def _on_stop(signum, frame):
    _stop["signal"] = signum  # the training loop ends after the step it is in


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ps_hosts", default="", help="comma-separated host:port of the ps tasks")
    p.add_argument("--worker_hosts", default="", help="comma-separated host:port of the workers")
    p.add_argument("--job_name", default="worker", choices=["ps", "worker"])
    p.add_argument("--task_index", type=int, default=0)
    p.add_argument("--train_steps", type=int, default=300, help="stop when the global step reaches this")
    p.add_argument("--checkpoint_dir", default="ckpt", help="shared checkpoint directory")
    p.add_argument("--learning_rate", type=float, default=0.1)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--log_every", type=int, default=20, help="print a step= line every N local steps")
    p.add_argument("--save_checkpoint_steps", type=int, default=100, help="chief saves every N global steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--step_sleep", type=float, default=0.0,
                   help="sleep this many seconds after every local step (a slow worker, for tests)")
    p.add_argument("--step_sleep_task_index", type=int, default=None,
                   help="only the worker with this index sleeps (default: every worker)")
    p.add_argument("--restore_sleep", type=float, default=0.0,
                   help="the chief sleeps this many seconds before its session restores a checkpoint (a slow "
                        "restore, for tests)")
    p.add_argument("--elastic", action="store_true",
                   help="workers may join and leave the running job (ClusterSpec propagation, docs/elastic.md)")
    return p.parse_args(argv)


def log(line):
    print(line, flush=True)


class FastWorkerSessionCreator(tf.train.SessionCreator):
    """Like ``WorkerSessionCreator``, but checks for the chief's initialisation four times a second.

    ``WorkerSessionCreator`` (used by ``MonitoredTrainingSession`` on non-chief workers) polls
    every 30 s, so a worker that starts before the chief has initialised the variables idles
    for half a minute.  ``SessionManager(recovery_wait_secs=0.25)`` is the same logic, polled
    faster (one small ``ready_op`` run on the ps per check): after a restart the worker is back
    within a quarter second of the chief.
    """

    def __init__(self, scaffold, master, config, recovery_wait_secs=0.25, max_wait_secs=30 * 60):
        self._scaffold, self._master, self._config = scaffold, master, config
        self._recovery_wait_secs, self._max_wait_secs = recovery_wait_secs, max_wait_secs

    def create_session(self):
        self._scaffold.finalize()
        manager = tf.train.SessionManager(
            local_init_op=self._scaffold.local_init_op,
            ready_op=self._scaffold.ready_op,
            ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
            graph=tf.get_default_graph(),
            recovery_wait_secs=self._recovery_wait_secs,
        )
        return manager.wait_for_session(self._master, config=self._config,
                                        max_wait_secs=self._max_wait_secs)


class SaveOnRequest(tf.train.SessionRunHook):
    """marathon-tf's save hook, holding by waiting: SIGUSR1 asks the chief for a checkpoint, saved after the
    step it is in (with the same Saver and directory as its CheckpointSaverHook), said on stdout; a worker
    that does not save (``saver=None``) says it holds there. Then the program waits until its bootstrap lets it
    go on (SIGUSR2) — once it has confirmed the checkpoint, or when no stop came — or stops it."""

    def __init__(self, checkpoint_dir, saver, global_step):
        self.checkpoint_dir, self.saver, self.global_step = checkpoint_dir, saver, global_step
        self.asked = self.go = False
        signal.signal(signal.SIGUSR1, self._ask)
        signal.signal(signal.SIGUSR2, self._go_on)
        log("marathon-tf save-hook: ready hold=wait")

    def _ask(self, signum, frame):
        self.asked = True  # answered in after_run, between two steps

    def _go_on(self, signum, frame):
        self.go = True

    def after_run(self, run_context, run_values):
        if not self.asked:
            return
        self.asked = self.go = False
        session = run_context.session
        step = session.run(self.global_step)
        if self.saver is not None:
            path = self.saver.save(session, os.path.join(self.checkpoint_dir, "model.ckpt"), global_step=step)
            log(f"marathon-tf save-hook: saved step={step} path={path}")
        else:
            log(f"marathon-tf save-hook: held step={step}")
        while not self.go:  # (a SIGCONT does not end this; a SIGTERM is the bootstrap's to act on)
            time.sleep(0.01)


def build_model(learning_rate):
    """y_hat = w * x + b, mean squared error, plain SGD that bumps the global step."""
    x = tf.placeholder(tf.float32, [None], name="x")
    y = tf.placeholder(tf.float32, [None], name="y")
    w = tf.get_variable("w", [], initializer=tf.zeros_initializer())
    b = tf.get_variable("b", [], initializer=tf.zeros_initializer())
    global_step = tf.train.get_or_create_global_step()
    loss = tf.reduce_mean(tf.square(w * x + b - y))
    train_op = tf.train.GradientDescentOptimizer(learning_rate).minimize(loss, global_step=global_step)
    with tf.control_dependencies([train_op]):
        step_after = tf.identity(global_step.read_value())  # this update's global step
    return x, y, w, b, loss, train_op, step_after, global_step


def run_worker(args, cluster, server):
    is_chief = args.task_index == 0
    rng = np.random.default_rng(args.seed + args.task_index)  # each worker its own data stream

    def batch():
        xs = rng.uniform(-1.0, 1.0, args.batch_size).astype(np.float32)
        return xs, (2.0 * xs + 1.0 + rng.normal(0.0, 0.1, args.batch_size)).astype(np.float32)

    with tf.device(tf.train.replica_device_setter(
            worker_device=f"/job:worker/task:{args.task_index}", cluster=cluster)):
        x, y, w, b, loss, train_op, step_after, global_step = build_model(args.learning_rate)

    # Talk only to the ps tasks and ourselves: don't wait for (or hang on) the other workers.
    config = tf.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{args.task_index}"])
    if args.elastic:  # the ps learns this worker from the session, not from the spec it started with
        own = cluster.task_address("worker", args.task_index)
        session_cluster = tf.train.ClusterSpec({"ps": cluster.job_tasks("ps"), "worker": {args.task_index: own}})
        config.cluster_def.CopyFrom(session_cluster.as_cluster_def())
        config.experimental.share_session_state_in_clusterspec_propagation = True
    scaffold = tf.train.Scaffold(saver=tf.train.Saver(max_to_keep=3))
    if is_chief:
        creator = tf.train.ChiefSessionCreator(
            scaffold=scaffold, master=server.target, config=config, checkpoint_dir=args.checkpoint_dir)
        hooks = [tf.train.CheckpointSaverHook(
            args.checkpoint_dir, save_steps=args.save_checkpoint_steps, scaffold=scaffold),
                 SaveOnRequest(args.checkpoint_dir, scaffold.saver, global_step)]
    else:
        creator = FastWorkerSessionCreator(scaffold=scaffold, master=server.target, config=config)
        hooks = [SaveOnRequest(args.checkpoint_dir, None, global_step)]

    local_steps = 0
    sleep = args.step_sleep if args.step_sleep_task_index in (None, args.task_index) else 0.0
    if not (is_chief and os.environ.get("MTF_SAVE_ROUNDS") == "1"):
        # (marathon-tf's save rounds, when its bootstrap runs them, save before every planned stop and end the
        # chief itself: its own save here would race the round, which holds the other workers first)
        signal.signal(signal.SIGTERM, _on_stop)
    if is_chief and args.restore_sleep and tf.train.latest_checkpoint(args.checkpoint_dir):
        time.sleep(args.restore_sleep)
    with tf.train.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
        # A first run without training: where the job is (maybe restored from a checkpoint,
        # maybe already done by the other workers).
        xs, ys = batch()
        step, loss_value, w_value, b_value = sess.run([global_step, loss, w, b], feed_dict={x: xs, y: ys})
        log(f"worker:{args.task_index} session ready at global step {step}/{args.train_steps}")
        while step < args.train_steps and not sess.should_stop() and _stop["signal"] is None:
            xs, ys = batch()
            loss_value, step, w_value, b_value = sess.run([loss, step_after, w, b], feed_dict={x: xs, y: ys})
            local_steps += 1
            if sleep:
                time.sleep(sleep)
            if local_steps == 1:
                log(f"first_step_time={time.time():.3f}")
            if local_steps % args.log_every == 0:
                log(f"step={step} loss={loss_value:.6f}")
    # (leaving the session ran the chief's CheckpointSaverHook.end: a checkpoint at the last step)
    log(f"step={step} loss={loss_value:.6f}")
    if _stop["signal"] is not None:
        log(f"preempted at step {step} (signal {_stop['signal']})"
            + ("; checkpoint saved" if is_chief else "") + f"; exiting {PREEMPTED_CODE}")
        sys.stderr.flush()
        os._exit(PREEMPTED_CODE)  # the checkpoint is written: skip TensorFlow's slow shutdown
    log(f"done final_step={step} loss={loss_value:.6f} w={w_value:.4f} b={b_value:.4f} local_steps={local_steps}")
    return 0


def main(argv=None):
    args = parse_args(argv)
    cluster = tf.train.ClusterSpec({
        "ps": [h for h in args.ps_hosts.split(",") if h],
        "worker": [h for h in args.worker_hosts.split(",") if h],
    })
    if args.elastic and args.job_name == "worker":  # see the module: its own job, the cluster in the session
        own = cluster.task_address("worker", args.task_index)
        server = tf.train.Server(tf.train.ClusterSpec({ELASTIC_BOOT: [own]}), job_name=ELASTIC_BOOT, task_index=0)
        log(f"worker:{args.task_index} elastic: {os.environ.get('MARATHON_TF_WORKERS', '?')} workers in the job")
    else:
        server = tf.train.Server(cluster, job_name=args.job_name, task_index=args.task_index)
    if args.job_name == "ps":
        log(f"ps:{args.task_index} serving on {cluster.task_address('ps', args.task_index)}")
        server.join()  # never returns: the launcher stops the ps when the workers are done
        return 0
    return run_worker(args, cluster, server)


if __name__ == "__main__":
    sys.exit(main())
