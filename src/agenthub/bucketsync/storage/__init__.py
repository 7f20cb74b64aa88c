"""The BucketStore port (`base.py`) and its adapters: `local.py` (directories) and `hf.py`
(HF buckets)."""
