"""The JobRunner port (`base.py`) and its adapters: `local.py` (a sandboxed subprocess) and
`hf.py` (HF Jobs)."""
