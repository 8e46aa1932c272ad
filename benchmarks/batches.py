"""Random batches from sorted inputs, as an ML engineer judges a reader: the labels in a batch,
where its records sat in the input, and what a classifier learns in one epoch.

Makes inputs sorted several ways (by label, by a date the label drifts with, by a text column
the label depends on, and an image folder class by class), converts each with the default
(shuffled) order and with `--order input` (what every conversion wrote before), and reads each
with `make_dataset(out, 256, seed=1)`. Prints per input: the mean distinct labels of a batch
against random sampling, the mean spread (std) of a batch's input positions against random
sampling's, and for the label-sorted CSV the held-out accuracy of a softmax classifier trained
one epoch through `distribute()` under MirroredStrategy (2 logical CPU devices), against the
same rows shuffled before converting. Every figure is measured in the run.

    python benchmarks/batches.py [--rows 200000] [--workdir bench_data/batches]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
BATCH = 256
CLASSES = 10
IMAGES_PER_CLASS = 2000  # 20,000 images: twice the old reader's shuffle buffer
DIMS = 8


def _features(rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    """Points around each class's centre: a linear classifier learns them, not perfectly."""
    centres = np.random.default_rng(99).normal(0, 1.0, (CLASSES, DIMS))
    return centres[labels] + rng.normal(0, 1.6, (len(labels), DIMS))


def _write_csv(path: pathlib.Path, columns: dict[str, np.ndarray]) -> None:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    path.parent.mkdir(parents=True, exist_ok=True)
    pcsv.write_csv(pa.table(columns), str(path))


def _inputs(work: pathlib.Path, rows: int) -> dict[str, tuple[str, list[str]]]:
    """Each input: its pattern and flags; columns `pos` (input position) and `label`."""
    rng = np.random.default_rng(1)
    found: dict[str, tuple[str, list[str]]] = {}
    many = np.sort(rng.integers(0, 100, rows))
    _write_csv(work / "by_label100" / "data.csv", {"pos": np.arange(rows), "label": many})
    found["CSV sorted by its label (100 labels)"] = ("by_label100/data.csv", [])
    labels = np.sort(rng.integers(0, CLASSES, rows))
    x = _features(rng, labels)
    columns = {"pos": np.arange(rows), "label": labels} | {f"x{i}": x[:, i] for i in range(DIMS)}
    _write_csv(work / "by_label" / "data.csv", columns)
    found["CSV sorted by label (10 classes, 8 features)"] = ("by_label/data.csv", [])
    shuffled = rng.permutation(rows)
    _write_csv(
        work / "shuffled_first" / "data.csv",
        {k: (np.arange(rows) if k == "pos" else v[shuffled]) for k, v in columns.items()},
    )
    found["the same rows shuffled first"] = ("shuffled_first/data.csv", [])
    # A date the label drifts with: each week's labels one of 52, or the next week's.
    days = np.sort(rng.integers(0, 364, rows))
    drift = (days // 7 + rng.integers(0, 2, rows)) % 52
    dates = (np.datetime64("2025-01-01") + days).astype(str)
    by_date = {"pos": np.arange(rows), "day": dates, "label": drift}
    _write_csv(work / "by_date" / "data.csv", by_date)
    found["CSV sorted by date (52 labels drift with it)"] = ("by_date/data.csv", [])
    # A text column (a city) the label depends on, sorted alphabetically.
    cities = np.array([f"city-{c:03d}" for c in range(400)])
    city = np.sort(rng.integers(0, 400, rows))
    _write_csv(
        work / "by_text" / "data.csv",
        {"pos": np.arange(rows), "city": cities[city], "label": city * 100 // 400},
    )
    found["CSV sorted by a text column (100 labels)"] = ("by_text/data.csv", [])
    images = work / "images"
    if not images.exists():
        from PIL import Image

        for c in range(CLASSES):
            folder = images / f"class{c}"
            folder.mkdir(parents=True)
            for i in range(IMAGES_PER_CLASS):
                Image.new("RGB", (4, 4), (c * 20, i % 256, 0)).save(folder / f"{i:05d}.png")
    found["image folder, class by class (10 classes)"] = ("images", ["--format", "images"])
    return found


def _convert(work: pathlib.Path, pattern: str, flags: list[str], out: pathlib.Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run(
        [sys.executable, "-m", "beam_jobs", "convert", "--input", str(work / pattern),
         "--output", str(out), *flags],
        check=True, capture_output=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )  # fmt: skip


def _batch_mix(out: pathlib.Path, images: bool) -> tuple[float, float, int, int]:
    """Mean distinct labels and mean std of input positions of full batches, the records,
    and the labels there are."""
    from tfdata_reader import make_dataset

    features = ["label"] if images else ["label", "pos"]
    labels, spreads, positions, every = [], [], 0, set()
    for batch in make_dataset(str(out), BATCH, seed=1, features=features, label_key=""):
        values = batch["label"].numpy()
        every.update(values.tolist())
        positions += len(values)
        if len(values) < BATCH:
            continue
        labels.append(len(set(values.tolist())))
        if not images:
            spreads.append(float(np.std(batch["pos"].numpy())))
    spread = float(np.mean(spreads)) if spreads else 0.0
    return float(np.mean(labels)), spread, positions, len(every)


def _random_mix(out: pathlib.Path, images: bool, rows: int) -> tuple[float, float]:
    """What random sampling gives: batches drawn from the dataset's own labels."""
    from tfdata_reader import make_dataset

    labels = np.concatenate(
        [b["label"].numpy() for b in make_dataset(str(out), 1 << 16, shuffle=False,
                                                  features=["label"], label_key="")]
    )  # fmt: skip
    rng = np.random.default_rng(0)
    picks = [rng.choice(len(labels), BATCH, replace=False) for _ in range(300)]
    mix = float(np.mean([len(set(labels[p].tolist())) for p in picks]))
    spread = float(np.mean([np.std(p) for p in picks])) * (rows / len(labels))
    return mix, 0.0 if images else spread


def _accuracy(out: pathlib.Path, test: dict[str, np.ndarray]) -> float:
    """Held-out accuracy of a softmax classifier trained one epoch through `distribute`."""
    code = f"""
import json, numpy as np, tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from tfdata_reader import distribute
names = {[f"x{i}" for i in range(DIMS)]!r}
strategy = tf.distribute.MirroredStrategy()
data = distribute(strategy, {str(out)!r}, {BATCH}, features=names, label_key="label", seed=1)
with strategy.scope():
    inputs = {{n: tf.keras.Input((), name=n) for n in names}}
    columns = [tf.keras.layers.Reshape((1,))(inputs[n]) for n in names]
    stacked = tf.keras.layers.Concatenate()(columns)
    model = tf.keras.Model(inputs, tf.keras.layers.Dense({CLASSES})(stacked))
    model.compile(tf.keras.optimizers.SGD(0.05),
                  tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
model.fit(data, epochs=1, verbose=0)
test = json.loads(open({str(out / "test.json")!r}).read())
x = {{n: np.array(test[n], np.float32) for n in names}}
print(json.dumps(model.evaluate(x, np.array(test["label"]), verbose=0, return_dict=True)))
"""
    (out / "test.json").write_text(json.dumps({k: v.tolist() for k, v in test.items()}))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), check=True)  # fmt: skip
    return float(json.loads(done.stdout.strip().splitlines()[-1])["accuracy"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--workdir", type=pathlib.Path, default=ROOT / "bench_data" / "batches")
    args = parser.parse_args()
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))
    inputs = _inputs(work, args.rows)
    rng = np.random.default_rng(7)
    test_labels = rng.integers(0, CLASSES, 5000)
    test_x = _features(rng, test_labels)
    test = {"label": test_labels} | {f"x{i}": test_x[:, i] for i in range(DIMS)}
    lines = [
        f"{args.rows:,} rows a CSV, default flags but the order (one shard: the inputs are "
        f"small), batches of {BATCH}, `make_dataset(out, {BATCH}, seed=1)`; "
        "labels and spread: means over full batches (spread: std of the batch's input "
        "positions); accuracy: softmax classifier, one epoch, MirroredStrategy (2 replicas), "
        "5,000 held-out rows.",
        "",
        "| input | order written | labels a batch | random sampling | spread | random | accuracy |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, (pattern, flags) in inputs.items():
        images = "--format" in flags
        for order in ("shuffled", "input"):
            out = work / "out" / f"{pattern.split('/')[0]}-{order}"
            _convert(work, pattern, [*flags, "--order", order], out)
            mix, spread, records, _ = _batch_mix(out, images)
            random_mix, random_spread = _random_mix(out, images, records)
            accuracy = ""
            if pattern.startswith(("by_label/", "shuffled_first/")):
                accuracy = f"{_accuracy(out, test):.3f}"
            spreads = ("-", "-") if images else (f"{spread:,.0f}", f"{random_spread:,.0f}")
            lines.append(
                f"| {name} | {order} | {mix:.1f} | {random_mix:.1f} | {spreads[0]} | "
                f"{spreads[1]} | {accuracy} |"
            )
            print(lines[-1], flush=True)
    (work / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
