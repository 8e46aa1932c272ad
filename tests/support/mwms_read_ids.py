"""One MultiWorkerMirroredStrategy worker: reads one epoch through `distribute`, saves the ids.

Run by tests/reader/test_distributed.py as two processes with TF_CONFIG set.
    python tests/support/mwms_read_ids.py DATASET OUT_JSON
"""

import json
import sys

import tensorflow as tf

from tfdata_reader import distribute


def main() -> None:
    dataset, out = sys.argv[1], sys.argv[2]
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    dist = distribute(strategy, dataset, 64, seed=3, features=["id"])
    ids = []
    for batch in dist:
        for local in strategy.experimental_local_results(batch["id"]):
            ids.extend(local.numpy().tolist())
    with open(out, "w") as f:
        json.dump({"ids": ids, "replicas": strategy.num_replicas_in_sync}, f)


if __name__ == "__main__":
    main()
