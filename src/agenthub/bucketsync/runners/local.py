"""`LocalJobRunner`: benchmark jobs as subprocesses, so the scoring loop runs on a laptop.

Each job gets `BUCKETSYNC_DATA_DIR/jobs/{job_id}/` holding `spec.json`, a `sandbox/` tree
with one directory per mount, `logs.txt` and, when it ends, `status.json`. The job runs in
its own session under a small supervisor (`python -m agenthub.bucketsync.runners.local DIR`)
that plays the platform's part:

- copies each mounted bucket prefix (of the local store, or of the S3 store) into the sandbox (a missing or empty prefix fails the
  job, as an HF bucket mount does);
- runs the command with mount paths rewritten into the sandbox and an environment with no
  tokens in it, killing it at the spec's timeout (the platform-side cap);
- copies read-write mounts back into their buckets and writes `status.json`.

Because the supervisor is detached, a job outlives a service restart; `inspect` then reads
`status.json` (or checks the supervisor's pid), which is what `verify reconcile` relies on.

This runner emulates the platform's contract, not its isolation: the job runs as the
service's OS user and could read the machine's files. Use it on a laptop or for trusted
submissions; untrusted ones belong on HF Jobs (`BUCKETSYNC_JOB_RUNNER=hf`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import agenthub
from agenthub import pids
from agenthub.bucketsync.runners.base import (
    CANCELED,
    COMPLETED,
    ERROR,
    HARNESS_ERROR,
    OOM,
    PLATFORM_ERROR,
    RUNNING,
    SUBMISSION_MISSING,
    TIMEOUT,
    JobLaunchError,
    JobSpec,
    JobState,
    LaunchedJob,
    Mount,
)
from agenthub.bucketsync.storage.base import Batch, BucketStore
from agenthub.bucketsync.storage.local import LocalBucketStore

if TYPE_CHECKING:  # obstore loads only where the S3 store is used
    from agenthub.bucketsync.storage.s3 import S3Config

STATUS = "status.json"
# The S3 credentials, given to the supervisor (never to the job) when they are settings.
S3_KEY_ENV, S3_SECRET_ENV = "BUCKETSYNC_S3_ACCESS_KEY_ID", "BUCKETSYNC_S3_SECRET_ACCESS_KEY"
LOGS = "logs.txt"
# Only what a Python harness needs; never the service's environment (tokens live there).
_PASSED_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "SYSTEMROOT")


def _write_json(path: Path, data: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(tmp, path)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class LocalJobRunner:
    """Jobs as subprocesses of this machine. Mounts come from the local store under
    `data_dir`, or, with `s3`, from the S3 store (the supervisor opens its own client:
    where the store is goes in `spec.json`, the credentials only into the supervisor's
    environment, never to the job)."""

    def __init__(
        self, data_dir: Path, *, python: str | None = None, s3: S3Config | None = None
    ) -> None:
        # Absolute: the job runs with its sandbox as the working directory.
        self._data_dir = Path(data_dir).resolve()
        self._s3 = s3
        self._jobs = self._data_dir / "jobs"
        self._python = python or sys.executable
        self._lock = threading.Lock()
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    def job_dir(self, job_id: str) -> Path:
        if not job_id.startswith("local-") or "/" in job_id or ".." in job_id:
            raise JobLaunchError(f"{job_id!r} is not a local job id")
        return self._jobs / job_id

    def launch(self, spec: JobSpec) -> LaunchedJob:
        job_id = f"local-{uuid.uuid4().hex[:16]}"
        directory = self._jobs / job_id
        try:
            (directory / "sandbox").mkdir(parents=True)
            _write_json(
                directory / "spec.json",
                {
                    "spec": asdict(spec),
                    "store_root": str(self._data_dir),
                    "python": self._python,
                    **self._s3_location(),
                },
            )
            # The directory holding the `agenthub` package, wherever this module sits in it.
            package_root = str(Path(agenthub.__file__).resolve().parents[1])
            env = {**os.environ, "PYTHONPATH": package_root, **self._s3_credentials()}
            with open(directory / "supervisor.txt", "wb") as supervisor_log:
                proc = subprocess.Popen(
                    [self._python, "-m", __name__, str(directory)],  # main() below supervises
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=supervisor_log,
                    # Its own session: the job survives a service restart (reconcile).
                    start_new_session=True,
                )
        except OSError as exc:
            raise JobLaunchError(f"could not start a local job: {exc}") from exc
        (directory / "pid").write_text(str(proc.pid))
        with self._lock:
            self._procs[job_id] = proc
        return LaunchedJob(job_id=job_id, url=directory.resolve().as_uri())

    def _s3_location(self) -> dict[str, Any]:
        if self._s3 is None:
            return {}
        location = asdict(self._s3)
        location.pop("access_key_id"), location.pop("secret_access_key")
        return {"s3": location}

    def _s3_credentials(self) -> dict[str, str]:
        found = {
            S3_KEY_ENV: self._s3.access_key_id if self._s3 else None,
            S3_SECRET_ENV: self._s3.secret_access_key if self._s3 else None,
        }
        return {name: value for name, value in found.items() if value}

    def inspect(self, job_id: str) -> JobState:
        directory = self.job_dir(job_id)
        status = _read_status(directory)
        with self._lock:
            proc = self._procs.get(job_id)
            if status is not None and proc is not None and proc.poll() is not None:
                del self._procs[job_id]  # reaped; nothing left to track
        if status is not None:
            return status
        if proc is not None:
            code = proc.poll()
            if code is None:
                return JobState(RUNNING)
            status = _read_status(directory)  # it may have finished between the two reads
            return status or JobState(
                ERROR, f"job supervisor exited ({code}) without a status", PLATFORM_ERROR
            )
        try:
            pid = int((directory / "pid").read_text())
        except (OSError, ValueError):
            return JobState(ERROR, "unknown local job", PLATFORM_ERROR)
        if pids.alive(pid):
            return JobState(RUNNING)
        return _read_status(directory) or JobState(ERROR, "job supervisor vanished", PLATFORM_ERROR)

    def logs(self, job_id: str) -> str:
        try:
            return (self.job_dir(job_id) / LOGS).read_text("utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def cancel(self, job_id: str) -> None:
        directory = self.job_dir(job_id)
        if _read_status(directory) is not None:
            return
        try:
            pid = int((directory / "pid").read_text())
            os.killpg(pid, signal.SIGKILL)
        except (OSError, ValueError):
            pass
        with self._lock:
            proc = self._procs.pop(job_id, None)
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        if _read_status(directory) is None:
            _write_json(
                directory / STATUS,
                {"stage": CANCELED, "message": "cancelled", "finished_at": _now()},
            )


def _read_status(directory: Path) -> JobState | None:
    try:
        data = json.loads((directory / STATUS).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    reason = data.get("reason")
    return JobState(
        stage=str(data.get("stage")),
        message=data.get("message"),
        reason=str(reason) if reason else None,
    )


# -- the supervisor (runs in the job's own process) ----------------------------------------


def _mounts(raw: list[dict[str, Any]]) -> list[Mount]:
    return [Mount(**item) for item in raw]


def _rewrite(arg: str, mounts: list[Mount], sandbox: Path) -> str:
    for mount in sorted(mounts, key=lambda m: -len(m.mount_path)):
        if arg == mount.mount_path or arg.startswith(mount.mount_path + "/"):
            return str(sandbox / arg.lstrip("/"))
    return arg


def _store(config: dict[str, Any]) -> BucketStore:
    """The store the job's mounts live in: S3 when `spec.json` says where, else local."""
    if "s3" not in config:
        return LocalBucketStore(Path(config["store_root"]))
    from agenthub.bucketsync.storage.s3 import S3BucketStore, S3Config

    return S3BucketStore(
        S3Config(
            **config["s3"],
            access_key_id=os.environ.get(S3_KEY_ENV),
            secret_access_key=os.environ.get(S3_SECRET_ENV),
        )
    )


def supervise(directory: Path) -> int:
    """Materialize the mounts, run the command under the timeout, copy rw mounts back, and
    write `status.json`. Returns the process exit status for the supervisor."""
    directory = directory.resolve()
    config = json.loads((directory / "spec.json").read_text("utf-8"))
    spec = config["spec"]
    mounts = _mounts(spec["mounts"])
    store = _store(config)
    sandbox = directory / "sandbox"
    started = _now()

    def finish(
        stage: str, message: str | None, exit_code: int | None, reason: str | None = None
    ) -> int:
        if (directory / STATUS).exists():  # cancelled meanwhile
            return 0
        _write_json(
            directory / STATUS,
            {
                "stage": stage,
                "message": message,
                "reason": reason,
                "exit_code": exit_code,
                "started_at": started,
                "finished_at": _now(),
            },
        )
        return 0

    for mount in mounts:
        target = sandbox / mount.mount_path.lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        files = store.list(mount.bucket, mount.prefix) if store.info(mount.bucket) else []
        if not files:
            # Only the submission is the agent's to provide; the rest is the challenge's.
            why = SUBMISSION_MISSING if mount.mount_path == "/submission" else HARNESS_ERROR
            return finish(
                ERROR, f"mount {mount.bucket}/{mount.prefix} is missing or empty", None, why
            )
        for entry in files:
            relative = entry.path[len(mount.prefix) :] if mount.prefix else entry.path
            data = store.read(mount.bucket, entry.path)
            if data is None:
                continue
            dest = target / relative
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)

    command = list(spec["command"])
    if command and command[0] in ("python3", "python"):
        command[0] = config["python"]
    command = [_rewrite(arg, mounts, sandbox) for arg in command]
    env = {name: os.environ[name] for name in _PASSED_ENV if name in os.environ}
    env["HOME"] = str(sandbox)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    timeout = float(spec["timeout_s"])
    with open(directory / LOGS, "wb") as log:
        try:
            proc = subprocess.Popen(
                command,
                cwd=sandbox,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        except OSError as exc:
            log.write(f"could not start {command[0]}: {exc}\n".encode())
            return finish(ERROR, f"could not start the command: {exc}", None, PLATFORM_ERROR)
        deadline = time.monotonic() + timeout
        code: int | None = None
        while code is None:
            try:
                code = proc.wait(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    proc.kill()
                    proc.wait()
                    log.write(f"\n[timed out after {timeout:.0f}s]\n".encode())
                    _copy_back(store, mounts, sandbox)
                    shutil.rmtree(sandbox, ignore_errors=True)
                    return finish(ERROR, f"timed out after {timeout:.0f}s", None, TIMEOUT)
    _copy_back(store, mounts, sandbox)
    # The copies (private eval set included) are not kept once written back.
    shutil.rmtree(sandbox, ignore_errors=True)
    if code == 0:
        return finish(COMPLETED, None, 0)
    # SIGKILL from outside the harness is what the kernel's OOM killer sends.
    why = OOM if code in (-signal.SIGKILL, 128 + signal.SIGKILL) else HARNESS_ERROR
    return finish(ERROR, f"the command exited with status {code}", code, why)


def _copy_back(store: BucketStore, mounts: list[Mount], sandbox: Path) -> None:
    for mount in mounts:
        if mount.read_only:
            continue
        root = (sandbox / mount.mount_path.lstrip("/")).resolve()
        adds = [
            (mount.prefix + path.relative_to(root).as_posix(), path.read_bytes())
            for path in sorted(root.rglob("*"))
            # A symlink could point anywhere on this machine; only real files go back.
            if path.is_file() and not path.is_symlink() and path.resolve().is_relative_to(root)
        ]
        if adds:
            store.write_batch(mount.bucket, Batch(adds=adds))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m agenthub.bucketsync.runners.local JOB_DIR", file=sys.stderr)
        return 2
    return supervise(Path(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
