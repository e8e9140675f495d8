"""A tiny TF1 between-graph program (tf.compat.v1) for the integration test.

Flags style: ``--ps_hosts --worker_hosts --job_name --task_index`` (appended by the
bootstrap). The ps serves forever; each worker trains ``--steps`` steps of a one-variable
model placed on the ps with ``replica_device_setter`` and exits 0. ``device_filters`` keep
the workers from waiting on each other; a plain Session with an "initialized yet?" poll
avoids MonitoredTrainingSession's ~30 s non-chief stall (see TF_RUNTIME.md).
"""

import argparse
import time

import tensorflow.compat.v1 as tf

parser = argparse.ArgumentParser()
parser.add_argument("--ps_hosts", required=True)
parser.add_argument("--worker_hosts", required=True)
parser.add_argument("--job_name", required=True)
parser.add_argument("--task_index", type=int, required=True)
parser.add_argument("--steps", type=int, default=5)
args = parser.parse_args()

tf.disable_eager_execution()
cluster = tf.train.ClusterSpec({"ps": args.ps_hosts.split(","), "worker": args.worker_hosts.split(",")})
me = f"/job:{args.job_name}/task:{args.task_index}"
config = tf.ConfigProto(device_filters=["/job:ps", me])
server = tf.distribute.Server(cluster, job_name=args.job_name, task_index=args.task_index, config=config)

if args.job_name == "ps":
    print(f"ps {args.task_index} serving", flush=True)
    server.join()

with tf.device(tf.train.replica_device_setter(worker_device=me, cluster=cluster)):
    global_step = tf.train.get_or_create_global_step()
    w = tf.get_variable("w", initializer=0.0)
    loss = tf.square(w - 3.0)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
init = tf.global_variables_initializer()
uninitialized = tf.report_uninitialized_variables()

with tf.Session(server.target, config=config) as sess:
    if args.task_index == 0:
        sess.run(init)
    else:
        deadline = time.monotonic() + 60
        while sess.run(uninitialized).size and time.monotonic() < deadline:
            time.sleep(0.2)
    for _ in range(args.steps):
        _, step, value = sess.run([train_op, global_step, loss])
        print(f"step={step} loss={value:.4f} worker={args.task_index}", flush=True)
