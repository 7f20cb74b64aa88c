"""hub-core HTTP layer: routers translate HTTP to service calls and nothing else."""
