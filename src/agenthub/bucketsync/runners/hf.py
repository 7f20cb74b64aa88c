"""`HfJobRunner`: benchmark jobs on HF Jobs, with bucket prefixes mounted as `Volume`s.

Every call passes `namespace` explicitly: without it huggingface_hub calls the rate-limited
`whoami()` first (hf-api-facts.md §2). Vendor exceptions become `JobLaunchError` (launch)
or `JobRunnerUnavailable` (everything else).
"""

from __future__ import annotations

from typing import Any

import httpx
import huggingface_hub
from huggingface_hub.errors import HfHubHTTPError

from agenthub.bucketsync.runners.base import (
    COMPLETED,
    DELETED,
    HARNESS_ERROR,
    OOM,
    PLATFORM_ERROR,
    TERMINAL_STAGES,
    TIMEOUT,
    JobLaunchError,
    JobRunnerUnavailable,
    JobSpec,
    JobState,
    LaunchedJob,
)


class HfJobRunner:
    """`api` is the `huggingface_hub` module (or anything with the same Jobs functions)."""

    def __init__(self, *, token: str | None, namespace: str, api: Any = None) -> None:
        self._token = token
        self._namespace = namespace
        self._api = api if api is not None else huggingface_hub
        self._http_error: type[Exception] = HfHubHTTPError

    def _volumes(self, spec: JobSpec) -> list[Any]:
        return [
            self._api.Volume(
                type="bucket",
                source=mount.bucket,
                mount_path=mount.mount_path,
                path=mount.prefix.rstrip("/") or None,
                read_only=mount.read_only,
            )
            for mount in spec.mounts
        ]

    def launch(self, spec: JobSpec) -> LaunchedJob:
        try:
            info = self._api.run_job(
                image=spec.image,
                command=list(spec.command),
                flavor=spec.flavor,
                timeout=spec.timeout_s,
                labels=dict(spec.labels),
                volumes=self._volumes(spec),
                namespace=self._namespace,
                token=self._token,
            )
        except (self._http_error, httpx.HTTPError, OSError, ValueError) as exc:
            raise JobLaunchError(
                f"HF Jobs refused the launch ({type(exc).__name__}: {exc})"
            ) from exc
        job_id = str(info.id)
        url = (
            getattr(info, "url", None) or f"https://huggingface.co/jobs/{self._namespace}/{job_id}"
        )
        return LaunchedJob(job_id=job_id, url=str(url))

    def _call(self, what: str, fn: Any, **kwargs: Any) -> Any:
        try:
            return fn(namespace=self._namespace, token=self._token, **kwargs)
        except (self._http_error, httpx.HTTPError, OSError, ValueError) as exc:
            raise JobRunnerUnavailable(f"{what} failed ({type(exc).__name__}: {exc})") from exc

    def inspect(self, job_id: str) -> JobState:
        info = self._call("inspect_job", self._api.inspect_job, job_id=job_id)
        status = info.status
        stage = str(getattr(status.stage, "value", status.stage))
        message = getattr(status, "message", None)
        return JobState(stage=stage, message=message, reason=_reason(stage, message))

    def logs(self, job_id: str) -> str:
        def collect(**kwargs: Any) -> list[str]:
            return list(self._api.fetch_job_logs(**kwargs))

        lines = self._call("fetch_job_logs", collect, job_id=job_id)
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)

    def cancel(self, job_id: str) -> None:
        self._call("cancel_job", self._api.cancel_job, job_id=job_id)


def _reason(stage: str, message: str | None) -> str | None:
    """HF Jobs reports a failure as a stage and free text; read the taxonomy out of it. A
    job the platform deleted, or one it ended without saying why, is the platform's fault."""
    if stage == COMPLETED or stage not in TERMINAL_STAGES:
        return None
    text = (message or "").lower()
    if "out of memory" in text or "oom" in text.split():
        return OOM
    if "timeout" in text or "timed out" in text:
        return TIMEOUT
    if stage == DELETED or not text:
        return PLATFORM_ERROR
    return HARNESS_ERROR
