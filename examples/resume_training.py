"""Trains under MirroredStrategy, stops, and resumes exactly where it was in the data.

The reader's state is two numbers, the epoch and the global step in it (`ReadPosition`). They
are saved with the model and optimizer in one `tf.train.Checkpoint`; `position.callback()`
moves them on as Keras trains. Run it once with `--stop_after` (an interrupted job), then
again without: the second run restores the checkpoint and reads on from the next global step
of the same epoch, on any number of replicas or workers, with no record repeated or skipped.

    python examples/resume_training.py OUT_DIR --checkpoints CKPT_DIR --epochs 2 --stop_after 7
    python examples/resume_training.py OUT_DIR --checkpoints CKPT_DIR --epochs 2
"""

from __future__ import annotations

import argparse

from tfdata_reader.quiet import import_tensorflow_quietly

import_tensorflow_quietly()  # TensorFlow without its C++ start-up notices (oneDNN, CUDA)

import tensorflow as tf  # noqa: E402
from train_mirrored import NUMERIC, build_model, use_two_cpu_replicas  # noqa: E402

from tfdata_reader import ReadPosition, distribute, steps_per_epoch  # noqa: E402


class StopAfter(tf.keras.callbacks.Callback):
    """Saves the checkpoint and stops training after `steps` steps (an interrupted job)."""

    def __init__(self, steps: int, save: tf.train.CheckpointManager) -> None:
        super().__init__()
        self._steps, self._save, self._done = steps, save, 0

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self._done += 1
        if self._done == self._steps:
            self._save.save()
            self.model.stop_training = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset", help="a conversion's output directory (shuffled order)")
    parser.add_argument("--checkpoints", required=True, help="where checkpoints go")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--global_batch_size", type=int, default=256)
    parser.add_argument("--stop_after", type=int, help="stop after this many steps, saved")
    args = parser.parse_args()

    use_two_cpu_replicas()
    strategy = tf.distribute.MirroredStrategy()
    position = ReadPosition()
    with strategy.scope():
        model = build_model()
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer, position=position)
    manager = tf.train.CheckpointManager(checkpoint, args.checkpoints, max_to_keep=2)
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint)
    start = position.as_dict()
    # An endless stream of epochs, read from the position on; Keras counts the steps. A run
    # that resumes mid-epoch first finishes that epoch, so that Keras' epochs stay the data's.
    data = distribute(
        strategy,
        args.dataset,
        args.global_batch_size,
        features=NUMERIC,
        label_key="label",
        seed=1,
        position=position,
        num_epochs=None,
    )
    steps = steps_per_epoch(args.dataset, args.global_batch_size)
    callbacks = [position.callback()]
    if args.stop_after:
        callbacks.append(StopAfter(args.stop_after, manager))
    if start["step"] and start["epoch"] < args.epochs:
        model.fit(data, epochs=1, steps_per_epoch=steps - start["step"], callbacks=callbacks,
                  verbose=0, shuffle=False)  # fmt: skip
    if not model.stop_training and position.as_dict()["epoch"] < args.epochs:
        model.fit(data, initial_epoch=int(position.epoch), epochs=args.epochs,
                  steps_per_epoch=steps, callbacks=callbacks, verbose=0, shuffle=False)  # fmt: skip
    if not args.stop_after:
        manager.save()
    print(
        f"started at epoch {start['epoch']} step {start['step']}; now at epoch "
        f"{int(position.epoch)} step {int(position.step)} ({steps} steps an epoch)"
    )


if __name__ == "__main__":
    main()
