"""HF Jobs on the emulator: run, inspect, logs (server-sent events) and cancel.

A job is `SCHEDULING` when launched and `RUNNING` from its first inspection on, until the
test plays the container: `complete(job_id, summary)` writes `summary.json` into the job's
`/state` volume the way a harness would, and fails the job with the platform's "init
container exhausted retries" when a mounted bucket prefix is missing or empty (a bucket
folder cannot be empty; hf-api-facts.md §2). `finish` sets any stage directly.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

from tests.support.hub_emulator.buckets import BucketState
from tests.support.hub_emulator.wire import HubError, HubRequest, HubResponse, RouteTable

JOB = r"/api/jobs/(?P<ns>[^/]+)/(?P<job>[0-9a-f]+)"


class JobState:
    def __init__(self, buckets: BucketState) -> None:
        self.buckets = buckets
        self.jobs: dict[str, dict[str, Any]] = {}  # id -> the JobInfo JSON
        self.logs: dict[str, list[str]] = {}
        self.tokens: dict[str, str | None] = {}  # id -> the bearer that launched it
        self._ids = itertools.count(1)

    @property
    def ids(self) -> list[str]:
        """Job ids in launch order."""
        return list(self.jobs)

    def stage(self, job_id: str) -> str:
        return str(self.jobs[job_id]["status"]["stage"])

    def volumes(self, job_id: str) -> dict[str, dict[str, Any]]:
        """The job's volumes by mount path."""
        return {v["mountPath"]: v for v in self.jobs[job_id]["volumes"]}

    def complete(self, job_id: str, summary: dict[str, Any]) -> None:
        """Run the container: write `summary` to /state, log it, end COMPLETED."""
        for volume in self.jobs[job_id]["volumes"]:
            prefix = volume.get("path") or ""
            with self.buckets.lock:
                bucket = self.buckets.buckets.get(volume["source"])
                paths = list(bucket.files) if bucket else []
            if not any(p == prefix or p.startswith(prefix + "/") for p in paths):
                self.finish(job_id, "ERROR", "init container exhausted retries")
                return
        state = self.volumes(job_id)["/state"]
        path = f"{state['path']}/summary.json" if state.get("path") else "summary.json"
        self.buckets.put(state["source"], path, json.dumps(summary).encode())
        self.finish(job_id, "COMPLETED", None, "scoring…", json.dumps(summary))

    def finish(
        self, job_id: str, stage: str = "COMPLETED", message: str | None = None, *logs: str
    ) -> None:
        self.jobs[job_id]["status"] = {"stage": stage, "message": message}
        self.logs[job_id].extend(logs)

    def job(self, namespace: str, job_id: str) -> dict[str, Any]:
        found = self.jobs.get(job_id)
        if found is None or found["owner"]["name"] != namespace:
            raise HubError(404, f"Job {job_id} not found")
        return found


def install(table: RouteTable, state: JobState) -> None:
    @table.add("job_run", "POST", r"/api/jobs/(?P<ns>[^/]+)")
    def run(request: HubRequest) -> HubResponse:
        body = request.json() or {}
        job_id = f"{next(state._ids):024x}"
        namespace = request.params["ns"]
        state.jobs[job_id] = {
            "id": job_id,
            "createdAt": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
            "dockerImage": body.get("dockerImage"),
            "spaceId": body.get("spaceId"),
            "command": body.get("command", []),
            "arguments": body.get("arguments", []),
            "environment": body.get("environment", {}),
            "flavor": body.get("flavor", "cpu-basic"),
            "labels": body.get("labels", {}),
            "volumes": body.get("volumes", []),
            "timeoutSeconds": body.get("timeoutSeconds"),
            "status": {"stage": "SCHEDULING", "message": None},
            "owner": {"id": namespace, "name": namespace, "type": "org"},
        }
        state.logs[job_id] = ["===== Job started ====="]
        state.tokens[job_id] = request.token
        return HubResponse.json(state.jobs[job_id])

    @table.add("job_inspect", "GET", JOB)
    def inspect(request: HubRequest) -> HubResponse:
        job = state.job(request.params["ns"], request.params["job"])
        if job["status"]["stage"] == "SCHEDULING":
            job["status"] = {"stage": "RUNNING", "message": None}
        return HubResponse.json(job)

    @table.add("job_logs", "GET", JOB + r"/logs")
    def logs(request: HubRequest) -> HubResponse:
        state.job(request.params["ns"], request.params["job"])
        lines = list(state.logs[request.params["job"]])

        def events() -> Iterator[bytes]:
            for line in lines:
                stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                yield f"data: {json.dumps({'data': line, 'timestamp': stamp})}\n\n".encode()

        return HubResponse(200, headers={"Content-Type": "text/event-stream"}, stream=events())

    @table.add("job_cancel", "POST", JOB + r"/cancel")
    def cancel(request: HubRequest) -> HubResponse:
        job = state.job(request.params["ns"], request.params["job"])
        job["status"] = {"stage": "CANCELED", "message": "canceled by the user"}
        return HubResponse.json({})
