"""From Python, start to end: convert a CSV with `beam_jobs.convert`, then fit a Keras model on
the shards, a feature that may be missing filled in so that `keras.Input(shape=())` takes it.

    python examples/convert_and_fit.py WORKDIR
"""

from __future__ import annotations

import argparse
import csv
import pathlib

import numpy as np


def write_csv(path: pathlib.Path, rows: int) -> None:
    rng = np.random.default_rng(0)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["x", "score", "clicked"])
        for i in range(rows):
            x = rng.normal()
            score = "" if i % 4 == 0 else f"{rng.uniform():.4f}"  # every 4th row: missing
            writer.writerow([f"{x:.5f}", score, int(x > 0)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("workdir", type=pathlib.Path)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    write_csv(args.workdir / "raw.csv", 4000)

    from beam_jobs import convert

    result = convert(
        input=str(args.workdir / "raw.csv"),
        output=str(args.workdir / "out"),
        target_shard_bytes="64KiB",
        splits={"train": 80, "eval": 20},
        label="clicked",
        overwrite=True,
        pipeline_options={"direct_num_workers": 1},
    )
    manifest = result.manifest
    print(f"converted: {result.converted}, records: {manifest.total_records}, "
          f"shards: {len(manifest.shards)}, splits: {sorted(manifest.splits)}")  # fmt: skip

    import keras

    from tfdata_reader import make_dataset

    def dataset(split: str):
        # The manifest names the label (--label), so batches come as (features, label).
        return make_dataset(str(args.workdir / "out"), 64, split=split, seed=1,
                            fill_missing={"score": 0.0})  # fmt: skip

    inputs = {name: keras.Input(shape=(), name=name) for name in ("x", "score")}
    stacked = keras.layers.Concatenate()([keras.layers.Reshape((1,))(v) for v in inputs.values()])
    model = keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid")(stacked))
    model.compile(
        optimizer=keras.optimizers.Adam(0.05), loss="binary_crossentropy", metrics=["accuracy"]
    )
    model.fit(dataset("train"), epochs=3, verbose=0)
    loss, accuracy = model.evaluate(dataset("eval"), verbose=0)
    print(f"eval loss: {loss:.3f}, accuracy: {accuracy:.3f}")


if __name__ == "__main__":
    main()
