"""The fleet soak's parts (issue 31): the ledger of what was acknowledged and delivered,
the processes it kills and samples, the bucket-sync agents and watchers, the State Hub
writers, and the invariants checked at the end. `bench/fleet_soak.py` runs them."""
