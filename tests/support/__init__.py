"""Helpers the tests share (no tests here): running conversions, reading datasets back, the
independent oracles, a local Cloud Storage, and scripts that tests start as subprocesses."""
