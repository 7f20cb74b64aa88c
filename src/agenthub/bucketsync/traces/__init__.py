"""Trace & stats sharing (seed §10): promotion (`write.py`) and the library reads
(`read.py`)."""
