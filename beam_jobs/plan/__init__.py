"""Planning a conversion before any worker starts: list the inputs, sample them, infer the
feature spec, measure sizes, and cut the inputs into shards (pure arithmetic in `shards`)."""
