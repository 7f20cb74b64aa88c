"""The message board: posting with inbox fan-out (`write.py`), the board and inbox reads
(`read.py`), inbox repair (`backfill.py`)."""
