"""Prints, as JSON, the `id`s `make_dataset` reads from a dataset (run with the TLS proxy env)."""

import json
import sys

from tfdata_reader import make_dataset

if __name__ == "__main__":
    path, split = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
    ids = []
    for batch in make_dataset(path, 4096, shuffle=True, seed=3, split=split, features=["id"]):
        ids.extend(int(i) for i in batch["id"].numpy())
    print(json.dumps(ids))
