"""Looking at a converted dataset: the text of `inspect`, `--dry_run` and the end-of-run summary,
`inspect --stats`, the `report` page, `verify` and `diff`."""
