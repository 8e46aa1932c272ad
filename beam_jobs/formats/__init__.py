"""Input formats: each turns pieces of its files into Arrow batches of Example features.

`base` is the interface (`InputFormat`), `registry` lists the formats by name; each format is a
module or a folder of its own (`csv/`, `jsonl/`), over shared readers of line-delimited
(`lines/`) and compressed (`compressed`) files.
"""
