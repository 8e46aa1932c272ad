"""`--format csv`: the format (`format`), sampling/inference/reading a byte range as Arrow
(`source`), and where records start by quote parity (`record_starts`)."""
