"""`agenthub challenge init`: plan what a challenge needs, then make only what is missing.

The plan is pure (the env, the buckets, the files to publish); `apply` creates missing
buckets, writes missing or changed files (changed ones only with `force`), and reports
every item as created / unchanged / kept / updated. A second run changes nothing.
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agenthub.bucketsync.storage.base import Batch, BucketStore
from agenthub.challenge.readme import agent_readme
from agenthub.challenge.schema import Challenge

CLIENTS_DIR = Path(__file__).resolve().parent.parent / "bucketsync" / "clients"
SERVICE_USER = "bucket-sync"  # the creator bucket-sync accepts for its own buckets
Outcome = Literal["created", "unchanged", "kept", "updated", "would create", "would update"]


@dataclass(frozen=True)
class PlannedFile:
    bucket: str
    path: str
    data: bytes


@dataclass
class Plan:
    env: dict[str, str]
    buckets: list[tuple[str, bool]]  # (name, private)
    files: list[PlannedFile]


@dataclass
class Report:
    lines: list[tuple[str, Outcome]] = field(default_factory=list)

    def add(self, what: str, outcome: Outcome) -> None:
        self.lines.append((what, outcome))

    @property
    def changed(self) -> bool:
        return any(o in ("created", "updated") for _w, o in self.lines)


def published_clients() -> list[str]:
    return sorted(
        p.name
        for p in CLIENTS_DIR.iterdir()
        if p.is_file() and p.suffix in (".py", ".sh") and p.name != "__init__.py"
    )


def plan(challenge: Challenge, *, service_url: str, target: str = "local") -> Plan:
    """What `challenge` needs on `target` (`local` or `hf`: the README names its CLI)."""
    clients = published_clients()
    files = [
        PlannedFile(
            challenge.central,
            "README.md",
            agent_readme(
                challenge, service_url=service_url, clients=clients, target=target
            ).encode(),
        ),
        *(
            PlannedFile(challenge.central, f"clients/{name}", (CLIENTS_DIR / name).read_bytes())
            for name in clients
        ),
    ]
    if challenge.jobs is not None:
        for directory, bucket, prefix in (
            (challenge.jobs.harness_dir, challenge.central, "harness/"),
            (challenge.jobs.private_dir, challenge.audit, "private/"),
        ):
            if directory is None:
                continue
            files += _tree(directory, bucket, prefix)
    private = challenge.verification.private_dir
    if private is not None and (challenge.jobs is None or challenge.jobs.private_dir is None):
        files += _tree(private, challenge.audit, "private/")
    return Plan(
        env=challenge.to_env(),
        buckets=[(challenge.central, False), (challenge.audit, True)],
        files=files,
    )


def apply(
    the_plan: Plan,
    store: BucketStore,
    *,
    env_file: Path,
    dry_run: bool = False,
    force: bool = False,
) -> Report:
    report = Report()
    # Quoted where needed: the file is sourced by sh (`set -a; . challenge.env`), and a
    # title such as "Prime hunt (example)" would not parse bare.
    env_text = "".join(f"{k}={shlex.quote(v)}\n" for k, v in the_plan.env.items())
    _write_env(env_file, env_text, report, dry_run=dry_run, force=force)
    for bucket, private in the_plan.buckets:
        if store.info(bucket) is not None:
            report.add(f"bucket {bucket}", "unchanged")
        elif dry_run:
            report.add(f"bucket {bucket}", "would create")
        else:
            store.create(bucket, creator=SERVICE_USER, private=private)
            report.add(f"bucket {bucket}", "created")
    by_bucket: dict[str, list[PlannedFile]] = {}
    for planned in the_plan.files:
        by_bucket.setdefault(planned.bucket, []).append(planned)
    for bucket, planned_files in by_bucket.items():
        existing = (
            {e.path: e for e in store.list(bucket, "", recursive=True)}
            if store.info(bucket)
            else {}
        )
        current = (
            store.read_many(bucket, [f.path for f in planned_files if f.path in existing])
            if existing
            else {}
        )
        adds: list[tuple[str, bytes]] = []
        for planned in planned_files:
            label = f"hf://buckets/{bucket}/{planned.path}"
            if planned.path not in existing:
                report.add(label, "would create" if dry_run else "created")
                adds.append((planned.path, planned.data))
            elif current.get(planned.path) == planned.data or _same(
                existing[planned.path].content_hash, planned.data
            ):
                report.add(label, "unchanged")
            elif force:
                report.add(label, "would update" if dry_run else "updated")
                adds.append((planned.path, planned.data))
            else:
                report.add(label, "kept")
        if adds and not dry_run:
            store.write_batch(bucket, Batch(adds=adds))
    return report


def _tree(directory: Path, bucket: str, prefix: str) -> list[PlannedFile]:
    return [
        PlannedFile(bucket, prefix + p.relative_to(directory).as_posix(), p.read_bytes())
        for p in sorted(directory.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    ]


def _same(content_hash: str, data: bytes) -> bool:
    return content_hash == hashlib.sha256(data).hexdigest()


def _write_env(env_file: Path, text: str, report: Report, *, dry_run: bool, force: bool) -> None:
    label = f"env {env_file}"
    if env_file.exists():
        if env_file.read_text() == text:
            report.add(label, "unchanged")
            return
        if not force:
            report.add(label, "kept")
            return
        outcome: Outcome = "would update" if dry_run else "updated"
    else:
        outcome = "would create" if dry_run else "created"
    report.add(label, outcome)
    if not dry_run:
        env_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = env_file.with_name(env_file.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(env_file)
