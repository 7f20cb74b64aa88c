"""`agenthub challenge deploy`: the challenge's Docker Spaces on the Hugging Face Hub.

A Space is planned, then made to match: created when missing (Docker SDK), its files
(the project's Dockerfile, pyproject.toml, src/agenthub and a generated README card)
committed only where they differ from the Space's (git blob ids compared, so an
unchanged tree makes no commit and no rebuild), its variables set where their values
differ, and its secrets set only when missing: the Hub never returns a secret's value,
so an existing one is kept unless `update_secrets` asks to rewrite it (every write of a
secret or variable restarts the Space). Secret values never appear in a plan or report.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi
from huggingface_hub.errors import RepositoryNotFoundError

APP_PORT = 7860  # a Docker Space's default app_port; the image's $PORT default
SHIPPED = ("Dockerfile", ".dockerignore", "pyproject.toml")
SHIPPED_TREE = "src/agenthub"
KEPT_REMOTE = {".gitattributes"}  # the Hub adds it to every new repo
Outcome = Literal[
    "created", "updated", "deleted", "unchanged", "kept", "would create", "would update",
    "would delete",
]  # fmt: skip


class DeployError(Exception):
    """The deploy cannot start; the message says what to give or fix."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


def git_oid(data: bytes) -> str:
    """The git blob id the Hub reports for a file with these bytes."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data, usedforsecurity=False).hexdigest()


@dataclass(frozen=True)
class SpaceSpec:
    """What one Space should be."""

    repo_id: str
    files: dict[str, bytes]
    variables: dict[str, str]
    secrets: dict[str, str]  # values are sent, never shown
    private: bool = False


@dataclass
class Report:
    lines: list[tuple[str, Outcome]] = field(default_factory=list)

    def add(self, what: str, outcome: Outcome) -> None:
        self.lines.append((what, outcome))

    @property
    def changed(self) -> bool:
        return any(o in ("created", "updated", "deleted") for _w, o in self.lines)


def project_root(given: Path | None = None) -> Path:
    """The source tree whose Dockerfile and package a Space is built from: `given`, else
    the checkout this package is installed from (editable installs)."""
    root = given or Path(__file__).resolve().parents[3]
    missing = [name for name in (*SHIPPED, SHIPPED_TREE) if not (root / name).exists()]
    if missing:
        raise DeployError(
            f"{root} is not an agenthub source tree (missing {', '.join(missing)})",
            hint="run from a checkout (pip install -e .) or pass --source PATH",
        )
    return root


def space_card(title: str, *, role: str) -> bytes:
    """The Space's README.md: the front matter the Hub reads (Docker SDK, app_port)."""
    return (
        "---\n"
        f"title: {_yaml_str(title + ' ' + role)}\n"
        "sdk: docker\n"
        f"app_port: {APP_PORT}\n"
        "pinned: false\n"
        "---\n\n"
        f"{role} of the agenthub challenge *{title}*, deployed by `agenthub challenge deploy`.\n"
    ).encode()


def _yaml_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def space_files(root: Path, *, card: bytes, command: str | None = None) -> dict[str, bytes]:
    """The files of a Space built from `root`: the image's Dockerfile (with `command`, a
    shell line, as a final CMD when given), what it copies, and the README card."""
    files = {name: (root / name).read_bytes() for name in SHIPPED}
    for path in sorted((root / SHIPPED_TREE).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files[path.relative_to(root).as_posix()] = path.read_bytes()
    if command is not None:
        quoted = command.replace("\\", "\\\\").replace('"', '\\"')
        files["Dockerfile"] += f'\nCMD ["sh", "-c", "exec {quoted}"]\n'.encode()
    files["README.md"] = card
    return files


def space_host(repo_id: str) -> str:
    """`owner-name.hf.space`, the host the Hub gives a Space (lower case, `/`, `.` and
    `_` as `-`)."""
    return repo_id.lower().replace("/", "-").replace(".", "-").replace("_", "-") + ".hf.space"


def deploy(
    api: HfApi,
    spec: SpaceSpec,
    report: Report,
    *,
    dry_run: bool = False,
    update_secrets: bool = False,
) -> None:
    """Make the Space match `spec`, reporting each item; `dry_run` changes nothing."""
    label = f"space {spec.repo_id}"
    try:
        api.space_info(spec.repo_id)
        exists = True
    except RepositoryNotFoundError:
        exists = False
    if exists:
        report.add(label, "unchanged")
    elif dry_run:
        report.add(label, "would create")
    else:
        api.create_repo(
            spec.repo_id,
            repo_type="space",
            space_sdk="docker",
            private=spec.private,
            exist_ok=True,
        )
        report.add(label, "created")
    _sync_files(api, spec, report, exists=exists, dry_run=dry_run)
    remote_variables = (
        {k: v.value for k, v in api.get_space_variables(spec.repo_id).items()} if exists else {}
    )
    for key, value in spec.variables.items():
        outcome = _upsert(key in remote_variables, remote_variables.get(key) == value, dry_run)
        if outcome in ("created", "updated"):
            api.add_space_variable(spec.repo_id, key, value)
        report.add(f"  variable {key}={value}", outcome)
    remote_secrets = set(api.get_space_secrets(spec.repo_id)) if exists else set()
    for key, value in spec.secrets.items():
        present = key in remote_secrets
        outcome = _upsert(present, present and not update_secrets, dry_run)
        if outcome in ("created", "updated"):
            api.add_space_secret(spec.repo_id, key, value)
        shown = outcome if outcome != "unchanged" else "kept"
        report.add(f"  secret {key} (value not shown)", shown)


def _upsert(present: bool, same: bool, dry_run: bool) -> Outcome:
    if present and same:
        return "unchanged"
    if dry_run:
        return "would update" if present else "would create"
    return "updated" if present else "created"


def _sync_files(
    api: HfApi, spec: SpaceSpec, report: Report, *, exists: bool, dry_run: bool
) -> None:
    remote = (
        {
            entry.path: entry.blob_id
            for entry in api.list_repo_tree(spec.repo_id, repo_type="space", recursive=True)
            if hasattr(entry, "blob_id")
        }
        if exists
        else {}
    )
    adds = {p: d for p, d in spec.files.items() if remote.get(p) != git_oid(d)}
    deletes = sorted(set(remote) - set(spec.files) - KEPT_REMOTE)
    groups: list[tuple[list[str], Outcome, Outcome]] = [
        ([p for p in adds if p not in remote], "created", "would create"),
        ([p for p in adds if p in remote], "updated", "would update"),
        (deletes, "deleted", "would delete"),
    ]
    for paths, done, planned in groups:
        if paths:
            report.add(f"  {len(paths)} file(s): {_sample(paths)}", planned if dry_run else done)
    if not adds and not deletes:
        report.add(f"  {len(spec.files)} file(s)", "unchanged")
    if dry_run or not (adds or deletes):
        return
    operations: list[CommitOperationAdd | CommitOperationDelete] = [
        CommitOperationAdd(path_in_repo=path, path_or_fileobj=data) for path, data in adds.items()
    ]
    operations += [CommitOperationDelete(path_in_repo=path) for path in deletes]
    api.create_commit(
        spec.repo_id,
        operations,
        commit_message="agenthub challenge deploy",
        repo_type="space",
    )


def _sample(paths: Iterable[str], shown: int = 3) -> str:
    names = sorted(paths)
    more = f", +{len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def bucketsync_variables(env: Mapping[str, str]) -> dict[str, str]:
    """bucket-sync's Space variables: the challenge's environment (what `challenge init`
    writes) with the Hub as storage."""
    return {**env, "BUCKETSYNC_STORAGE": "hf"}
