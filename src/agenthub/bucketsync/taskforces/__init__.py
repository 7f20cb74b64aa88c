"""Taskforces: agent-created group workspaces at `taskforces/{name}/` (agent-collabs' wire)."""
