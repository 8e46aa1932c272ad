"""The shared vocabulary, below every stage: errors, input files and pieces, write tasks and the
shards they publish, bad rows, splits, shard compression and sharding options, sizes, paths, and
the flag table that options dataclasses are declared with."""
