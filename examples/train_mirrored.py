"""Trains a small Keras model under MirroredStrategy from a converted dataset.

On a machine without accelerators the CPU is split into 2 logical devices, so the strategy has
two replicas, as it would with two GPUs. The input function gets its per-replica batch size and
shard from `tf.distribute.InputContext`.

    python examples/train_mirrored.py OUT_DIR --steps 20
"""

from __future__ import annotations

import argparse
import math

import tensorflow as tf

from tfdata_reader import make_dataset, read_manifest

NUMERIC = ["x0", "x1", "x2", "x3"]


def _use_two_cpu_replicas() -> None:
    if tf.config.list_physical_devices("GPU"):
        return
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()]
    )


def _to_inputs(batch: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
    features = tf.stack([batch[name] for name in NUMERIC], axis=1) / 100.0
    return features, tf.cast(batch["label"], tf.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset", help="a conversion's output directory")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--global_batch_size", type=int, default=256)
    args = parser.parse_args()

    _use_two_cpu_replicas()
    strategy = tf.distribute.MirroredStrategy()
    manifest = read_manifest(args.dataset)

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        ds = make_dataset(
            args.dataset,
            context.get_per_replica_batch_size(args.global_batch_size),
            seed=1,
            num_epochs=None,
            input_context=context,
            features=[*NUMERIC, "label"],
            drop_remainder=True,
        )
        return ds.map(_to_inputs)

    dist_ds = strategy.distribute_datasets_from_function(dataset_fn)
    with strategy.scope():
        model = tf.keras.Sequential(
            [
                tf.keras.Input((len(NUMERIC),)),
                tf.keras.layers.Dense(16, "relu"),
                tf.keras.layers.Dense(1),
            ]
        )
        model.compile(
            optimizer="adam",
            loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
        )
    history = model.fit(dist_ds, epochs=1, steps_per_epoch=args.steps, verbose=2)
    loss = history.history["loss"][-1]
    print(
        f"trained {args.steps} steps on {strategy.num_replicas_in_sync} replicas from "
        f"{manifest.total_records:,} records in {len(manifest.shards)} shards; "
        f"final loss {loss:.4f}"
    )
    if not math.isfinite(loss):
        raise SystemExit("loss is not finite")


if __name__ == "__main__":
    main()
