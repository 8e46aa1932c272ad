"""Running a conversion: the launcher (plan, lease, run, result), the command line's arguments,
which runner runs it, Dask, the local runner's worker processes, and interruptions."""
