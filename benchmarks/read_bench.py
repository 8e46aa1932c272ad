"""Reading throughput on a converted dataset: make_dataset vs the raw read ceiling vs the common
hand-written reader vs tfx-bsl's TFXIO (TFExampleRecord with the dataset's schema.pbtxt, as TFX
trainers read), over the first million records (batch 256). Prints one JSON line of
records/s, the best of three rounds that take turns (the machine's speed drifts between runs).

The clock stops at the last batch. Tearing down an iterator that `take` cut short (tf.data
cancels and joins its reader threads) took 0-5 s here at random, for every reader alike; that is
not reading, and timing it made single runs of the same reader differ by 2x.

    python benchmarks/read_bench.py DATASET [BATCH] [DATASET_IN_INPUT_ORDER]

With a second dataset (the same records converted with `--order input`), `make_dataset` reads
it too: shuffled blocks, the reader of datasets in input order (`make_dataset_input_order`).
"""

from __future__ import annotations

import json
import sys
import time

import tensorflow as tf

from tfdata_reader import make_dataset, read_manifest
from tfdata_reader.dataset import parse_spec, shard_paths

ROUNDS = 3


def _rate(ds: tf.data.Dataset, count_of, limit: int) -> float:
    """Records per second over the first `limit` batches (steady state, not the epoch's tail)."""
    batches = iter(ds)
    start = time.perf_counter()
    records = sum(count_of(next(batches)) for _ in range(limit))
    elapsed = time.perf_counter() - start
    del batches  # teardown, outside the clock
    return records / elapsed


def _tfxio(path: str, files: list[str], batch: int, shuffle: bool) -> tf.data.Dataset:
    """tfx-bsl's reader of the shards, with the schema the conversion wrote beside them, at
    its default options (which shuffle) or in order."""
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx_bsl.public import tfxio

    with open(f"{path}/schema.pbtxt") as f:
        schema = text_format.Parse(f.read(), schema_pb2.Schema())
    options = tfxio.TensorFlowDatasetOptions(batch_size=batch, shuffle=shuffle, num_epochs=None)
    return tfxio.TFExampleRecord(file_pattern=files, schema=schema).TensorFlowDataset(options)


def _rows(tensor) -> int:
    return int(tensor.dense_shape[0]) if isinstance(tensor, tf.SparseTensor) else tensor.shape[0]


def main() -> None:
    path = sys.argv[1]
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    in_order = sys.argv[3] if len(sys.argv) > 3 else None
    manifest = read_manifest(path)
    files = shard_paths(path, manifest)
    compression = "GZIP" if manifest.compression == "gzip" else ""
    spec = parse_spec(manifest.features)
    first = manifest.features[0].name

    raw = (
        tf.data.Dataset.from_tensor_slices(files)
        .interleave(
            lambda f: tf.data.TFRecordDataset(f, compression, buffer_size=8 << 20),
            cycle_length=min(16, len(files)),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        .batch(batch)
        .prefetch(tf.data.AUTOTUNE)
    )
    hand = (
        tf.data.TFRecordDataset(files, compression)
        .map(lambda r: tf.io.parse_single_example(r, spec))
        .batch(batch)
    )
    limit = min(manifest.total_records, 1_000_000) // batch
    tfxio, tfxio_in_order = _tfxio(path, files, batch, True), _tfxio(path, files, batch, False)
    results = {}
    for round_ in range(ROUNDS):
        for name, ds, count_of in [
            ("raw_ceiling", raw, lambda b: b.shape[0]),
            (
                "make_dataset",
                make_dataset(path, batch, seed=1),
                lambda b: b[first].shape[0],
            ),
            (
                "make_dataset_no_shuffle",
                make_dataset(path, batch, shuffle=False),
                lambda b: b[first].shape[0],
            ),
            *(
                [
                    (
                        "make_dataset_input_order",
                        make_dataset(in_order, batch, seed=1),
                        lambda b: b[first].shape[0],
                    )
                ]
                if in_order
                else []
            ),
            ("hand_written", hand, lambda b: b[first].shape[0]),
            ("tfxio", tfxio, lambda b: _rows(b[first])),
            ("tfxio_no_shuffle", tfxio_in_order, lambda b: _rows(b[first])),
        ]:
            # The hand-written reader is an order of magnitude slower: a fifth of the batches.
            n = limit // 5 if name == "hand_written" else limit
            if name == "hand_written" and round_:
                continue
            results[name] = max(results.get(name, 0.0), _rate(ds, count_of, n))
    print(json.dumps({"records": manifest.total_records, **results}))


if __name__ == "__main__":
    main()
