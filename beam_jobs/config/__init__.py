"""The conversion's options: `ConvertConfig`, built from the flag table by the command line and by
`beam_jobs.convert` alike."""
