"""HTTP routers: translate requests to service calls and results to JSON, nothing else."""
