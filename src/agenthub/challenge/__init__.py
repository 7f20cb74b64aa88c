"""A challenge in one command: `challenge.yaml` → bucket-sync's environment, its buckets,
the agents' README and the published clients."""
