"""The Identity port (`base.py`) and its adapters: `local.py` (a token file) and `hf.py`
(HF whoami + org members)."""
