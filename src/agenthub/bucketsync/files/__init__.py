"""Copying files: artifacts/shared-resources sync (`sync.py`) and local-mode scratch
buckets (`scratch.py`)."""
