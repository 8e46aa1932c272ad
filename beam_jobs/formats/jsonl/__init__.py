"""`--format jsonl`: the format (`format`), parsing chunks of lines exactly (`chunks`), and how
deep a line nests, from its bytes (`depth`)."""
