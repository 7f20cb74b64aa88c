"""Example benchmark harness for the bucket-sync scoring loop: "is n prime?".

Contract (bucket-sync seed §4): run as
    python3 /harness/run.py --submission-dir /submission --state-dir /state [--private-dir /private]
Loads `predict(n) -> bool` from the submission's `predict.py`, scores accuracy on the public
set shipped next to this file (or on the private eval set when --private-dir is given), and
writes /state/summary.json with at least {"score": <number>}. Standard library only.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path


def load_predict(submission_dir: Path):  # type: ignore[no-untyped-def]
    path = submission_dir / "predict.py"
    spec = importlib.util.spec_from_file_location("submission_predict", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"no predict.py in {submission_dir}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.predict


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--submission-dir", required=True, type=Path)
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--private-dir", type=Path)
    args = parser.parse_args()

    if args.private_dir is not None:
        cases = json.loads((args.private_dir / "eval.json").read_text())
        which = "private"
    else:
        cases = json.loads((Path(__file__).parent / "data" / "public.json").read_text())
        which = "public"
    predict = load_predict(args.submission_dir)
    started = time.perf_counter()
    correct = sum(1 for n, truth in cases if bool(predict(n)) == truth)
    runtime = time.perf_counter() - started
    summary = {
        "score": round(correct / len(cases), 6),
        "cases": len(cases),
        "eval_set": which,
        "runtime_s": round(runtime, 6),
    }
    args.state_dir.mkdir(parents=True, exist_ok=True)
    (args.state_dir / "summary.json").write_text(json.dumps(summary))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
