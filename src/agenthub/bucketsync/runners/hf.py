"""`HfJobRunner`: benchmark jobs on HF Jobs, with bucket prefixes mounted as `Volume`s.

Every call passes `namespace` explicitly: without it huggingface_hub calls the rate-limited
`whoami()` first (hf-api-facts.md §2). Vendor exceptions become `JobLaunchError` (launch)
or `JobRunnerUnavailable` (everything else); every call runs through `HubCalls` (a
deadline, no sleeping inside huggingface_hub).
"""

from __future__ import annotations

from typing import Any

from huggingface_hub import HfApi, Volume

from agenthub.bucketsync.errors import StorageUnavailable
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
from agenthub.bucketsync.storage.governor import HubGovernor
from agenthub.bucketsync.storage.hubcalls import DEFAULT_DEADLINE_S, HubCalls


class HfJobRunner:
    """Jobs on the Hub at `endpoint` (None: huggingface_hub's default, `HF_ENDPOINT`)."""

    def __init__(
        self,
        *,
        token: str | None,
        namespace: str,
        endpoint: str | None = None,
        deadline_s: float = DEFAULT_DEADLINE_S,
        api: Any = None,
        governor: HubGovernor | None = None,
    ) -> None:
        self._token = token
        self._namespace = namespace
        self._api = api if api is not None else HfApi(endpoint=endpoint, token=token)
        self._calls = HubCalls(deadline_s=deadline_s, governor=governor)

    def _volumes(self, spec: JobSpec) -> list[Any]:
        return [
            Volume(
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
            info = self._calls.run(
                "run_job",
                lambda: self._api.run_job(
                    image=spec.image,
                    command=list(spec.command),
                    flavor=spec.flavor,
                    timeout=spec.timeout_s,
                    labels=dict(spec.labels),
                    volumes=self._volumes(spec),
                    namespace=self._namespace,
                    token=self._token,
                ),
                write=True,
            )
        except StorageUnavailable as exc:
            raise JobLaunchError(f"HF Jobs refused the launch ({exc.message})") from exc
        job_id = str(info.id)
        url = (
            getattr(info, "url", None) or f"https://huggingface.co/jobs/{self._namespace}/{job_id}"
        )
        return LaunchedJob(job_id=job_id, url=str(url))

    def _call(self, what: str, fn: Any, **kwargs: Any) -> Any:
        try:
            return self._calls.run(
                what, lambda: fn(namespace=self._namespace, token=self._token, **kwargs)
            )
        except StorageUnavailable as exc:
            raise JobRunnerUnavailable(f"{what} failed ({exc.message})") from exc

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
