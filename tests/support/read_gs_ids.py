"""Prints, as JSON, the `id`s `make_dataset` reads from a dataset, split by split (run with the
TLS proxy env): `read_gs_ids.py PATH [--input_order] [SPLIT ...]` -> {split or "": [ids]}.

`--input_order` reads each shard once from its start (`shuffle=False`): the shuffled order reads
a shard in as many ranges as streams cross it, each a request through the proxy.
"""

import json
import sys

from tfdata_reader import make_dataset

if __name__ == "__main__":
    path, *rest = sys.argv[1:]
    shuffle = "--input_order" not in rest
    splits = [s for s in rest if s != "--input_order"] or [None]
    found = {}
    for split in splits:
        ids = found[split or ""] = []
        batches = make_dataset(path, 4096, shuffle=shuffle, seed=3, split=split, features=["id"])
        for batch in batches:
            ids.extend(int(i) for i in batch["id"].numpy())
    print(json.dumps(found))
