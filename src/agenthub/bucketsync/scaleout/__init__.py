"""The Redis adapters of core's ports for many workers: the bus (notifier) and the shared
limiters, dedup, stamps and locks."""
