"""Per-feature statistics of a conversion, computed by the writers and published as TFDV's
`statistics.pb`."""
