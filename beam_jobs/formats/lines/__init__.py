"""Line-delimited inputs (CSV, JSON lines, text): chunks of the lines a piece owns, the quote and
newline counts before each cut point, and the line number of each bad row."""
