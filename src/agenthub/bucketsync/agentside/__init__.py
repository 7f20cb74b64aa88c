"""Code an agent runs: the watch client, the MCP server and the `buckets` CLI."""
