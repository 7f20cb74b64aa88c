"""HF Jobs on the emulator: run, inspect, logs (server-sent events) and cancel. A job
stays `RUNNING` until the test ends it with `JobState.finish`."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

from tests.support.hub_emulator.wire import HubError, HubRequest, HubResponse, RouteTable

JOB = r"/api/jobs/(?P<ns>[^/]+)/(?P<job>[0-9a-f]+)"


class JobState:
    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}  # id -> the JobInfo JSON
        self.logs: dict[str, list[str]] = {}
        self._ids = itertools.count(1)

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
            "status": {"stage": "RUNNING", "message": None},
            "owner": {"id": namespace, "name": namespace, "type": "org"},
        }
        state.logs[job_id] = ["===== Job started ====="]
        return HubResponse.json(state.jobs[job_id])

    @table.add("job_inspect", "GET", JOB)
    def inspect(request: HubRequest) -> HubResponse:
        return HubResponse.json(state.job(request.params["ns"], request.params["job"]))

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
