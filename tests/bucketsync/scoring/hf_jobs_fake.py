"""A recording fake of the `huggingface_hub` Jobs functions, on top of the bucket fake.

It keeps what hf-api-facts.md §2 says the platform does: `run_job` takes bucket `Volume`s
(read-write unless `read_only=True`), a job moves SCHEDULING → RUNNING → a terminal stage,
mounting a missing or empty bucket prefix fails the job, `fetch_job_logs` yields lines, and
every call without an explicit `namespace` would first hit the rate-limited `whoami`
(recorded so tests can prove we never do that). The test plays the container: `complete()`
writes into the rw volume the way a harness writing /state/summary.json would.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import httpx2  # huggingface_hub 2.x raises its errors with httpx2 responses
from huggingface_hub import JobStage, Volume
from huggingface_hub.errors import HfHubHTTPError

from tests.bucketsync.hf_fake import FakeHub


class FakeJobsHub:
    Volume = Volume

    def __init__(self, buckets: FakeHub) -> None:
        self.buckets = buckets
        self.jobs: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.refuse_launch = False
        self.down = False
        self._ids = itertools.count(1)

    def __getattr__(self, name: str) -> Any:  # bucket functions go to the bucket fake
        return getattr(self.buckets, name)

    def _record(self, name: str, kwargs: dict[str, Any]) -> None:
        self.calls.append((name, kwargs))
        if kwargs.get("namespace") is None:
            self.calls.append(("whoami", {}))
        if self.down:
            raise HfHubHTTPError(
                "503 Service Unavailable",
                response=httpx2.Response(503, request=httpx2.Request("GET", "/api/jobs")),
            )

    def run_job(self, **kwargs: Any) -> Any:
        self._record("run_job", kwargs)
        if self.refuse_launch:
            raise HfHubHTTPError(
                "402 Payment Required: no credits",
                response=httpx2.Response(402, request=httpx2.Request("POST", "/api/jobs/acme")),
            )
        job_id = f"job{next(self._ids):04d}"
        self.jobs[job_id] = {
            "stage": JobStage.SCHEDULING,
            "message": None,
            "volumes": [v.to_dict() for v in kwargs.get("volumes") or []],
            "logs": [],
            "spec": kwargs,
        }
        return self._info(job_id, kwargs["namespace"])

    def _info(self, job_id: str, namespace: str) -> Any:
        job = self.jobs[job_id]
        return SimpleNamespace(
            id=job_id,
            url=f"https://huggingface.co/jobs/{namespace}/{job_id}",
            status=SimpleNamespace(stage=job["stage"], message=job["message"]),
        )

    def inspect_job(self, *, job_id: str, namespace: str | None = None, token: Any = None) -> Any:
        self._record("inspect_job", {"job_id": job_id, "namespace": namespace, "token": token})
        job = self.jobs[job_id]
        if job["stage"] == JobStage.SCHEDULING:
            job["stage"] = JobStage.RUNNING
        return self._info(job_id, namespace or "me")

    def fetch_job_logs(
        self, *, job_id: str, namespace: str | None = None, token: Any = None
    ) -> Iterator[str]:
        self._record("fetch_job_logs", {"job_id": job_id, "namespace": namespace})
        yield from self.jobs[job_id]["logs"]

    def cancel_job(self, *, job_id: str, namespace: str | None = None, token: Any = None) -> None:
        self._record("cancel_job", {"job_id": job_id, "namespace": namespace})
        self.jobs[job_id]["stage"] = JobStage.CANCELED

    # -- the container's side ----------------------------------------------------------
    def complete(self, job_id: str, summary: dict[str, Any]) -> None:
        job = self.jobs[job_id]
        for volume in job["volumes"]:
            bucket = self.buckets.buckets.get(volume["source"])
            prefix = volume.get("path") or ""
            files = bucket["files"] if bucket else {}
            if not any(p == prefix or p.startswith(prefix + "/") for p in files):
                job["stage"], job["message"] = JobStage.ERROR, "init container exhausted retries"
                return
        state = next(v for v in job["volumes"] if v["mountPath"] == "/state")
        path = f"{state['path']}/summary.json" if state.get("path") else "summary.json"
        self.buckets.put(state["source"], path, json.dumps(summary).encode())
        job["logs"] = ["scoring…", json.dumps(summary)]
        job["stage"] = JobStage.COMPLETED
