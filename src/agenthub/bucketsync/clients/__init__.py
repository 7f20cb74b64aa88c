"""Agent-side clients that bucket-sync serves and bootstrap publishes (standalone files)."""
