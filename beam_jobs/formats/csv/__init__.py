"""`--format csv`: the format (`format`), sampling and inference (`source`), reading a byte
range as Arrow (`ranges`), where records start (`record_starts`) and where bad rows are
(`bad_rows`)."""
