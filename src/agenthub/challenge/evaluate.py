"""`verification.mode: eval-space`: a private evaluator scores pending results out-of-band.

Each pass finds the promoted `agent-run` results whose verdict is still `pending`, locates
each one's submission exactly as the jobs verifier does, copies it and the private eval set
(the audit bucket's PRIVATE_DATASET_PREFIX) into a scratch directory, runs the organizer's
`evaluate(submission_dir, private_dir) -> dict` and records the verdict through the
verifier's `VerdictBook`: the same tolerance rule, the same private side ledger written
before the index, the same compare-and-set (a human verdict is never overwritten) and the
same board announcement. A result the ledger already decided (or could not locate) is not
evaluated again, so a re-run of a pass changes nothing; one whose evaluation raised is
retried on the next pass (the organizer may have fixed the evaluator). Without a private
eval set a pass refuses to judge anything.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.results.leaderboard import score_of
from agenthub.bucketsync.results.pins import STATUS_FILE, Located
from agenthub.bucketsync.scoring.verdicts import VerdictBook

log = logging.getLogger(__name__)

Evaluate = Callable[[Path, Path], Mapping[str, Any]]
# Ledger states after which a pass leaves a result alone (a human or a new promotion decides).
# A `failed` evaluation (the organizer's code raised) is retried on the next pass.
SETTLED = ("unlocatable", "undecidable")


class EvaluatorError(Exception):
    """`--evaluator` does not name a callable `evaluate(submission_dir, private_dir)`, or
    there is nothing to evaluate against."""


def load_evaluator(spec: str) -> Evaluate:
    """`package.module:function` (importable from the current directory) or
    `path/to/file.py:function`."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise EvaluatorError(
            f"--evaluator {spec!r} must look like 'module:function' or 'path/to/file.py:function'"
        )
    try:
        if module_name.endswith(".py"):
            path = Path(module_name).resolve()
            if not path.is_file():
                raise EvaluatorError(f"--evaluator: {path} does not exist")
            loader_spec = importlib.util.spec_from_file_location(f"_evaluator_{path.stem}", path)
            if loader_spec is None or loader_spec.loader is None:
                raise EvaluatorError(f"--evaluator: cannot load {path}")
            module = importlib.util.module_from_spec(loader_spec)
            loader_spec.loader.exec_module(module)
        else:
            if "" not in sys.path and str(Path.cwd()) not in sys.path:
                sys.path.insert(0, str(Path.cwd()))
            module = importlib.import_module(module_name)
    except ImportError as exc:
        raise EvaluatorError(f"--evaluator: cannot import {module_name!r}: {exc}") from None
    function = getattr(module, attr, None)
    if not callable(function):
        raise EvaluatorError(
            f"--evaluator: {module_name!r} has no callable {attr!r} "
            "(define evaluate(submission_dir, private_dir) -> dict)"
        )
    return function  # type: ignore[no-any-return]


@dataclass
class PassReport:
    examined: int = 0
    outcomes: dict[str, str] = field(default_factory=dict)  # filename -> what happened

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)


class EvalLoop:
    def __init__(self, hub: Hub, evaluate: Evaluate) -> None:
        self.hub = hub
        self.evaluate = evaluate
        self.book = VerdictBook(hub)
        self.settings = hub.settings

    def pending(self) -> list[str]:
        """Promoted agent-run results with a score whose index entry is still pending."""
        index = self.book.index_fresh()
        if index is None:
            return []
        entries = self.hub.read_model.entries(naming.RESULTS)
        records = self.hub.read_model.records(list(entries), naming.RESULTS)
        found = []
        for record in records.values():
            fm = record.frontmatter
            if fm.get("status") != "agent-run":
                continue
            if score_of(fm, self.settings.score_field) is None:
                continue
            if index.get(record.filename, "pending") == "pending":
                found.append(record.filename)
        return sorted(found)

    def run_once(self) -> PassReport:
        report = PassReport()
        self.hub.read_model.invalidate(naming.RESULTS)
        with tempfile.TemporaryDirectory(prefix="agenthub-eval-") as scratch:
            private_dir: Path | None = None
            for filename in self.pending():
                report.examined += 1
                if private_dir is None:
                    private_dir = self._private_set(Path(scratch) / "private")
                report.outcomes[filename] = self.consider(
                    filename, private_dir, Path(scratch) / "submissions" / filename
                )
        return report

    def consider(self, filename: str, private_dir: Path, workdir: Path) -> str:
        ledger = self.book.ledger(filename) or {}
        state = ledger.get("state")
        if state in ("decided", "deferred"):
            return self.book.commit(filename, ledger)  # finish a half-recorded verdict
        if state in SETTLED:
            return f"already {state}"
        record = self.hub.read_model.record(naming.result_path(filename), naming.RESULTS)
        author = naming.parse_stamped_filename(filename)
        if record is None or author is None:
            return "no such result"
        located, problem = self.book.locate(author[1], record.frontmatter)
        if located is None:
            self.book.nudge(filename, author[1], problem)
            self.book.save_ledger(filename, {"state": "unlocatable", "problem": problem})
            return "unlocatable"
        attempts = int(ledger.get("attempts", 0)) + 1
        try:
            submission_dir = self._download(located, workdir)
            summary = self.evaluate(submission_dir, private_dir)
            if not isinstance(summary, Mapping):
                raise TypeError(f"evaluate() returned {type(summary).__name__}, not a dict")
        except Exception as exc:  # the organizer's code: record it, retry next pass
            log.exception("evaluating %s failed", filename)
            self.book.save_ledger(
                filename,
                {
                    "state": "failed",
                    "attempts": attempts,
                    "message": f"{type(exc).__name__}: {exc}",
                },
            )
            return "failed"
        return self.book.record(
            filename, {"mode": "eval-space", "submission": located.prefix}, dict(summary)
        )

    def _private_set(self, target: Path) -> Path:
        s = self.settings
        if not self.hub.store.list(s.audit_bucket, s.private_dataset_prefix):
            raise EvaluatorError(
                f"no private eval set at hf://buckets/{s.audit_bucket}/"
                f"{s.private_dataset_prefix}: set verification.private_dir in challenge.yaml "
                "and re-run `agenthub challenge init`"
            )
        return self._download(Located(s.audit_bucket, s.private_dataset_prefix), target)

    def _download(self, located: Located, target: Path) -> Path:
        target.mkdir(parents=True, exist_ok=True)
        store = self.hub.store
        paths = [
            e.path
            for e in store.list(located.bucket, located.prefix)
            if not e.path.endswith(STATUS_FILE)
        ]
        for path, data in store.read_many(located.bucket, paths).items():
            relative = path[len(located.prefix) :]
            naming.validate_components(relative)
            destination = target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(data)
        return target

    def run(
        self,
        *,
        interval_s: float,
        once: bool,
        on_pass: Callable[[PassReport], None],
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        while True:
            on_pass(self.run_once())
            if once:
                return
            sleep(interval_s)
