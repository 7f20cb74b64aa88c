"""Results: promotion (`write.py`) and the ranked leaderboard (`leaderboard.py`)."""
