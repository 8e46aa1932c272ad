"""The public Beam transforms: `ConvertToShards` (the conversion pipeline of a plan) and
`WriteShards` (the same shards from any PCollection), and the local runner's fix they apply."""
