"""Trains with MultiWorkerMirroredStrategy: one process per worker, each reading its own shards.

On a cluster, start this script on every worker with TF_CONFIG set for it. To try it on one
machine, `--local_workers 2` starts two worker processes on free localhost ports with the right
TF_CONFIG each, waits for both, and reports what each read.

    python examples/train_multiworker.py OUT_DIR --local_workers 2 --epochs 1
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys


def free_ports(count: int) -> list[int]:
    """Ports on 127.0.0.1 that were free a moment ago (the OS picks them)."""
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def launch_local_workers(count: int, argv: list[str]) -> int:
    """Runs this script `count` times as the workers of one localhost cluster."""
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(count)]}
    procs = []
    for index in range(count):
        tf_config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        env = dict(os.environ, TF_CONFIG=json.dumps(tf_config))
        procs.append(subprocess.Popen([sys.executable, __file__, *argv], env=env))
    return max(proc.wait() for proc in procs)


def train(args: argparse.Namespace) -> None:
    """One worker's training loop; Keras 3's `fit` does not take MultiWorkerMirroredStrategy
    datasets, so this is the custom loop the TF multi-worker guide uses."""
    import tensorflow as tf
    from train_mirrored import NUMERIC, build_model

    from tfdata_reader import distribute, read_manifest

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    task = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    manifest = read_manifest(args.dataset)
    global_batch = args.global_batch_size
    dataset = distribute(
        strategy,
        args.dataset,
        global_batch,
        features=NUMERIC,
        label_key="label",
        seed=1,
        drop_remainder=True,
        num_epochs=None,
    )
    with strategy.scope():
        model = build_model()
        optimizer = tf.keras.optimizers.Adam()
    loss_fn = tf.keras.losses.BinaryCrossentropy(from_logits=True, reduction=None)

    @tf.function
    def train_step(iterator):
        def replica_step(features, label):
            with tf.GradientTape() as tape:
                logits = model(features, training=True)
                per_example = loss_fn(tf.cast(label[:, None], tf.float32), logits)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        losses = strategy.run(replica_step, args=next(iterator))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    steps = manifest.total_records // global_batch
    iterator = iter(dataset)
    for epoch in range(args.epochs):
        total = sum(float(train_step(iterator)) for _ in range(steps))
        # One write per line: the workers share the launcher's stdout.
        sys.stdout.write(
            f"worker {task}: epoch {epoch + 1}: {steps} steps on "
            f"{strategy.num_replicas_in_sync} replicas, mean loss {total / steps:.4f}\n"
        )
        sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset", help="a conversion's output directory")
    parser.add_argument(
        "--local_workers",
        type=int,
        default=0,
        help="start this many local worker processes (default: be one worker)",
    )
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--global_batch_size", type=int, default=256)
    args = parser.parse_args()
    if args.local_workers:
        worker_argv = [
            args.dataset,
            "--epochs",
            str(args.epochs),
            "--global_batch_size",
            str(args.global_batch_size),
        ]
        raise SystemExit(launch_local_workers(args.local_workers, worker_argv))
    if "TF_CONFIG" not in os.environ:
        raise SystemExit("set TF_CONFIG for this worker, or pass --local_workers N")
    train(args)


if __name__ == "__main__":
    main()
