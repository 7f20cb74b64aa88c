"""The example challenge's evaluator for `verification.mode: eval-space`.

    agenthub challenge evaluate --evaluator examples/bucketsync-challenge/evaluator.py:evaluate

`evaluate(submission_dir, private_dir)` loads the submission's `predict(n) -> bool` and
returns the summary the verifier compares with the reported score: {"score": accuracy on
the private eval set}. Standard library only.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any


def evaluate(submission_dir: Path, private_dir: Path) -> dict[str, Any]:
    source = submission_dir / "predict.py"
    spec = importlib.util.spec_from_file_location(f"submission_{id(source)}", source)
    if spec is None or spec.loader is None or not source.is_file():
        raise FileNotFoundError(f"the submission has no predict.py ({source})")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cases = json.loads((private_dir / "eval.json").read_text())
    correct = sum(1 for n, truth in cases if bool(module.predict(n)) == truth)
    return {"score": round(correct / len(cases), 6), "cases": len(cases)}
