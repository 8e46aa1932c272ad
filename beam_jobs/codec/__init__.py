"""Record codecs, below every stage: Arrow batches to serialized `tf.train.Example`s and back,
TFRecord framing with CRC32C, DEFLATE for GZIP shards, and the shard file that combines them."""
