"""The shuffle of a shuffled conversion (the default order), as one stage: the first pass's runs
(`runs`: each write task's records dealt out to random buckets), the index that sends each run's
stretches to the units that read them (`units`), the second pass (`shards`: each bucket's records
permuted into its shard), and the seeded draws all of them take (`draws`)."""
