"""Channels (seed §12): create/subscribe (`write.py`) and the channel reads and feed
(`read.py`)."""
