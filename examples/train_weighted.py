"""Trains under MirroredStrategy from several datasets mixed by weight, and shows each source's
share of the batches.

    python examples/train_weighted.py OUT_A=0.7 OUT_B=0.3 --steps 20

Each `DATASET=WEIGHT` names a converted dataset (a folder, or a glob of daily partitions read as
one source) and its weight. `tfdata_reader.distribute` reads them as one epoch order in which
every global step holds each source in its share (spread as a random sample's) and each source
has a quota of the epoch's records by weight (repeated, or sampled anew each epoch). The
datasets' ids must be apart (`make_sample_csv.py --first_id`): the shares are counted by id.
"""

from __future__ import annotations

import argparse
import math

from tfdata_reader.quiet import import_tensorflow_quietly

import_tensorflow_quietly()  # TensorFlow without its C++ start-up notices (oneDNN, CUDA)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from train_mirrored import fit, use_two_cpu_replicas  # noqa: E402

from tfdata_reader import make_dataset, read_manifest  # noqa: E402
from tfdata_reader.mixing import quotas  # noqa: E402


def weighted(pairs: list[str]) -> dict[str, float]:
    """`DATASET=WEIGHT` arguments as a mapping."""
    found = {}
    for pair in pairs:
        path, sep, weight = pair.rpartition("=")
        if not sep:
            raise SystemExit(f"{pair!r}: give DATASET=WEIGHT")
        found[path] = float(weight)
    return found


def source_shares(sources: dict[str, float], global_batch: int, steps: int) -> np.ndarray:
    """Each source's share of each of the first `steps` global steps: `[steps, sources]`."""
    ids = [
        np.concatenate([b["id"].numpy() for b in make_dataset(p, 4096, features=["id"],
                                                               label_key="", shuffle=False)])
        for p in sources
    ]  # fmt: skip
    mixed = make_dataset(sources, global_batch, features=["id"], label_key="", seed=1)
    shares = []
    for batch in mixed.take(steps):
        got = batch["id"].numpy()
        shares.append([np.isin(got, own).mean() for own in ids])
    return np.array(shares)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sources", nargs="+", help="DATASET=WEIGHT, one or more")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--global_batch_size", type=int, default=256)
    args = parser.parse_args()
    sources = weighted(args.sources)

    use_two_cpu_replicas()
    strategy = tf.distribute.MirroredStrategy()
    records = [read_manifest(p).total_records for p in sources]
    epoch = quotas(records, list(sources.values()))
    shares = source_shares(sources, args.global_batch_size, args.steps)
    for k, (path, weight) in enumerate(sources.items()):
        share = epoch[k] / sum(records)
        random = math.sqrt(share * (1 - share) / args.global_batch_size)
        print(
            f"{path}: weight {weight:g}, {records[k]:,} records, quota {epoch[k]:,} an epoch; "
            f"share of a batch {shares[:, k].mean():.3f} (spread {shares[:, k].std():.3f}, "
            f"random sampling's {random:.3f})"
        )
    loss = fit(strategy, sources, args.global_batch_size, args.steps)
    print(
        f"trained {args.steps} steps on {strategy.num_replicas_in_sync} replicas from "
        f"{len(sources)} weighted sources; final loss {loss:.4f}"
    )


if __name__ == "__main__":
    main()
