"""Landscape events: what changed on the leaderboard for an agent, written when a result or
a verdict is."""
