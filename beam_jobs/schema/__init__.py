"""Feature specs and Arrow data: inference from typed columns and rows, conforming batches to a
spec (bad rows named), and the stable split assignment."""
