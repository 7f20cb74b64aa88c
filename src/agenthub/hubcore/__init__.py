"""hub-core: a derived, read-only copy of the State Hub inbox (snapshot pilot)."""

from agenthub.hubcore.bundle_import import ImportResult, import_snapshot, snapshot_hash

__all__ = ["ImportResult", "import_snapshot", "snapshot_hash"]
