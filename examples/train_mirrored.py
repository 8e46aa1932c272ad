"""Trains a small Keras model under MirroredStrategy from a converted dataset.

On a machine without accelerators the CPU is split into 2 logical devices, so the strategy has
two replicas, as it would with two GPUs. `tfdata_reader.distribute` gives each replica its
per-replica batch of `(features, label)`.

    python examples/train_mirrored.py OUT_DIR --steps 20
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from tfdata_reader.quiet import import_tensorflow_quietly

import_tensorflow_quietly()  # TensorFlow without its C++ start-up notices (oneDNN, CUDA)

import tensorflow as tf  # noqa: E402

from tfdata_reader import distribute, read_manifest  # noqa: E402

NUMERIC = ["x0", "x1", "x2", "x3"]


def use_two_cpu_replicas() -> None:
    """Splits the CPU into 2 logical devices when there is no GPU (before TF initializes)."""
    if tf.config.list_physical_devices("GPU"):
        return
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()]
    )


def build_model() -> tf.keras.Model:
    """A small classifier over the sample's numeric features, given as a dict."""
    inputs = {name: tf.keras.Input((), name=name) for name in NUMERIC}
    stacked = tf.keras.layers.Concatenate()(
        [tf.keras.layers.Reshape((1,))(inputs[name]) for name in NUMERIC]
    )
    hidden = tf.keras.layers.Dense(16, "relu")(tf.keras.layers.Rescaling(0.01)(stacked))
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(1)(hidden))
    model.compile(optimizer="adam", loss=tf.keras.losses.BinaryCrossentropy(from_logits=True))
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset", help="a conversion's output directory")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--global_batch_size", type=int, default=256)
    args = parser.parse_args()

    use_two_cpu_replicas()
    strategy = tf.distribute.MirroredStrategy()
    manifest = read_manifest(args.dataset)
    loss = fit(strategy, args.dataset, args.global_batch_size, args.steps)
    print(
        f"trained {args.steps} steps on {strategy.num_replicas_in_sync} replicas from "
        f"{manifest.total_records:,} records in {len(manifest.shards)} shards; "
        f"final loss {loss:.4f}"
    )


def fit(strategy: tf.distribute.Strategy, path: Any, global_batch_size: int, steps: int) -> float:
    """Fits the model for `steps` steps on `path` (anything `distribute` reads); the final
    loss (a SystemExit when it is not finite)."""
    dataset = distribute(
        strategy,
        path,
        global_batch_size,
        features=NUMERIC,
        label_key="label",
        num_epochs=None,
        seed=1,
        drop_remainder=True,
    )
    with strategy.scope():
        model = build_model()
    history = model.fit(dataset, epochs=1, steps_per_epoch=steps, verbose=2, shuffle=False)
    loss = float(history.history["loss"][-1])
    if not math.isfinite(loss):
        raise SystemExit("loss is not finite")
    return loss


if __name__ == "__main__":
    main()
