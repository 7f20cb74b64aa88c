"""Registration (`write.py`) and the agents read side (`read.py`)."""
