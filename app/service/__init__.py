"""Queue rules: FIFO groups, deduplication, visibility, dead letters, redrive. Owns transactions."""
