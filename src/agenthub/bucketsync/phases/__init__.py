"""A challenge from start to finish: phases (`schedule.py`), the events at their boundaries
(`announce.py`), the private split kept sealed until its reveal (`private.py`) and each
agent's final entries (`finals.py`). Without phases configured none of it acts."""
