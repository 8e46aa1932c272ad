"""Writing and publishing: Arrow batches -> Examples -> framed TFRecord shards under temporary
names, dead letters, progress notes, then publishing with `manifest.json` written last, under
the output folder's rules."""
