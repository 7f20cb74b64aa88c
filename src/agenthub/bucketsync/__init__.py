"""bucket-sync: the sole writer of a challenge's central collaboration bucket."""
