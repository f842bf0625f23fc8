"""The engine's facade beside tasks, by chapter: sessions, files, shares, harnesses and
principals, and the records they hand a door."""
