"""`ReadPosition`: where training stands in a shuffled dataset's order, to resume from.

The order of a shuffled dataset's epoch is a function of the seed and the epoch alone
(`order`), and a global step is the same records on any number of input pipelines, so the
whole state of reading is two numbers: the epoch and the global step within it. They are two
int64 variables, saved with the model by a `tf.train.Checkpoint` (or as a small dict), and a
dataset made with `make_dataset(..., position=p)` (or `distribute`) starts each iteration where
they point. The training loop moves them on: Keras by `p.callback()`, a custom loop by
`p.advance()` after each step.

    position = ReadPosition()
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer, position=position)
    checkpoint.restore(tf.train.latest_checkpoint(folder))  # nothing the first time
    data = distribute(strategy, "gs://b/ds", 512, position=position, num_epochs=None)
    steps = steps_per_epoch("gs://b/ds", 512)
    model.fit(data, initial_epoch=int(position.epoch), epochs=10, steps_per_epoch=steps,
              callbacks=[position.callback(), ...])

Keras wants the same steps in every epoch of a `fit`: read endlessly (`num_epochs=None`) and
give `steps_per_epoch`; a run resumed mid-epoch first fits `steps - position.step` steps
(`examples/resume_training.py`).

Several sources with weights: the position also keeps the weights its epoch was read with
from each step on (`WeightHistory`), so that a dataset made with other weights at step `s`
goes on with the same epoch, each source from where it stood, the new weights sharing the rest
(`mixed`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from tfdata_reader.history import WeightHistory, Weights, going_on
from tfdata_reader.streams import EpochCounter

__all__ = ["ReadPosition", "WeightHistory"]


class ReadPosition(EpochCounter):
    """The epoch and the global step within it that reading resumes from.

    `steps_per_epoch` is set by the dataset it is given to (`make_dataset(position=...)`),
    which knows the records and the global batch; `advance` needs it to roll over epochs.
    """

    def __init__(self, epoch: int = 0, step: int = 0) -> None:
        if epoch < 0 or step < 0:
            raise ValueError(
                f"a ReadPosition's epoch and step count from 0, got (epoch {epoch}, step {step})"
            )
        super().__init__(epoch, step, name="read_position")
        with tf.init_scope():
            # The weights of several sources its epoch was read with (`WeightHistory`, JSON).
            self.weights = tf.Variable("", dtype=tf.string, trainable=False, name="weights")
        self.steps_per_epoch: int | None = None

    @property
    def history(self) -> WeightHistory | None:
        return WeightHistory.from_json(self.weights.numpy().decode("utf-8"))

    def read_with(self, sources: Sequence[str], weights: Weights) -> WeightHistory:
        """Notes that a dataset of `sources` with `weights` reads on from here; returns the
        weights of this epoch from each step on (`WeightHistory.reading`)."""
        epoch, step = int(self.epoch.numpy()), int(self.step.numpy())
        found = going_on(self.weights.numpy().decode("utf-8"), epoch, step, sources, weights)
        self.weights.assign(found.to_json())
        return found

    def advance(self, steps: int = 1) -> None:
        """Moves on by `steps` global steps (each a batch on every replica), into the next
        epoch past the end of this one."""
        if not self.steps_per_epoch:  # None; 0 is refused by the dataset
            raise ValueError(
                "ReadPosition.advance: give the position to make_dataset or distribute first "
                "(it learns the steps of an epoch from the dataset)"
            )
        step = int(self.step.numpy()) + steps
        epochs, step = divmod(step, self.steps_per_epoch)
        if int(self.epoch.numpy()) + epochs < 0:
            raise ValueError(f"ReadPosition.advance({steps}) would move before epoch 0")
        self.epoch.assign_add(epochs)
        self.step.assign(step)
        history = self.history
        if epochs and history is not None:  # later epochs start with the weights read last
            ended = history.next_epoch()
            moved = dataclasses.replace(ended, epoch=int(self.epoch.numpy()))
            self.weights.assign(moved.to_json())

    def as_dict(self) -> dict[str, Any]:
        """`{"epoch": e, "step": s}`, and within an epoch that a dataset read (or of several
        sources) `"weights"`: the datasets and weights the epoch was read with from each step
        (`WeightHistory`), so that other datasets given the position mid-epoch are refused as
        with a `tf.train.Checkpoint`. The state, for a checkpoint of one's own."""
        epoch, step = int(self.epoch.numpy()), int(self.step.numpy())
        state: dict[str, Any] = {"epoch": epoch, "step": step}
        history = self.history
        several = history is not None and (len(history.sources) > 1 or len(history.segments) > 1)
        if history is not None and (several or (step and history.epoch == epoch)):
            state["weights"] = json.loads(history.to_json())
        return state

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> ReadPosition:
        position = cls(int(state["epoch"]), int(state["step"]))
        if state.get("weights"):
            position.weights.assign(json.dumps(state["weights"]))
        return position

    def callback(self) -> tf.keras.callbacks.Callback:
        """A Keras callback that moves the position on as `fit` trains: after each step,
        by the steps Keras ran (several with `steps_per_execution`)."""
        position = self

        class AdvanceReadPosition(tf.keras.callbacks.Callback):
            done = 0  # steps of this Keras epoch counted so far

            def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
                self.done = 0

            def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
                # `batch`: the last step run; a Keras epoch is the rest of a dataset epoch.
                position.advance(batch + 1 - self.done)
                self.done = batch + 1

        return AdvanceReadPosition()
