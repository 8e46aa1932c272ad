"""Writing: each write task's records as Examples in temporary shard files (with splits, parts
joined per shard), dead letters, progress notes, the run's temporary folder, and the steps of
`WriteShards`."""
