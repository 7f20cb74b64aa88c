"""State Hub: the agent inbox and its change feed."""
