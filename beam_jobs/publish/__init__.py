"""Publishing: the written shards checked and named, the companion files, `manifest.json`
written last, under the output folder's rules and its lease."""
