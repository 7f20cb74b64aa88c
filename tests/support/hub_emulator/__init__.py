"""A Hugging Face Hub on loopback, for driving the REAL `huggingface_hub` client over HTTP.

Start one, point the client at it, arrange state, inject faults, read the counts:

    with running_hub() as hub:                         # API + CAS listeners, Xet bridge on
        api = HfApi(endpoint=hub.url)                  # or HF_ENDPOINT=hub.url in Settings
        hub.buckets.add_bucket("acme/main")
        hub.buckets.put("acme/main", "a.md", b"hi")   # direct state access, not counted
        hub.buckets.delete("acme/main", "a.md")       # (both show on the change feed)
        hub.accounts.add_user("tok", "alice", acme="contributor")
        hub.inject("batch", Fault.rate_limited(300))   # every batch POST answers 429
        hub.inject(["paths_info", "tree"], Fault.reset(), times=1)
        hub.inject("batch", Fault.hang(after_apply=True))  # applied, never answered
        with hub.refusing():                           # the API host refuses connections
            ...
        with hub.refusing("cas"):                      # only the Xet storage host is down
            ...
        hub.counts()            # Counter by route name, e.g. {"batch": 2, "paths_info": 1}
        hub.requests            # every RequestRecord (route, method, path, body, token,
                                #   query: `record.arg("email")` tells the members lookup
                                #   by email from a page of the full member scan)
        hub.batch_operations("acme/main")   # the NDJSON operations of each batch
        hub.api_requests()      # what the Hub's rate limiter would count (kind "api")
        hub.reset_counts()

Routes (name → wire), in `buckets.py`, `accounts.py`, `jobs.py`, `spaces.py`:
  bucket_create POST /api/buckets/{ns}/{name}      bucket_info GET /api/buckets/{id}
  tree GET /api/buckets/{id}/tree[/{prefix}] (Link pagination, `buckets.page_size`)
  paths_info POST …/paths-info    batch POST …/batch (NDJSON; `buckets.fail_paths` fails
  single operations like a partial Hub batch)   xet_token GET …/xet-{read,write}-token
  resolve GET/HEAD /buckets/{id}/resolve/{path} (kind "resolve"; the plain-HTTP read path)
  bucket_events GET …/events (server-sent events: changes/ready/reset; `feed_enabled`)
  whoami GET /api/whoami-v2       org_members GET /api/organizations/{org}/members
  job_run POST /api/jobs/{ns}     job_inspect GET /api/jobs/{ns}/{id}   job_logs …/logs
  job_cancel POST …/cancel        agent_harnesses GET /api/agent-harnesses
  cas_put / cas_get PUT/GET /xet/{hash} on the CAS listener (kind "cas")
  Spaces (`spaces.py`, state in `hub.spaces`): repo_create POST /api/repos/create
  space_info GET /api/spaces/{id}   space_tree GET …/tree/{rev}   space_preupload POST
  …/preupload/{rev}   space_commit POST …/commit/{rev} (NDJSON)   validate_yaml POST
  /api/validate-yaml   space_{secrets,variables}_{get,add,delete} GET/POST/DELETE …/{kind}

Extending: register more routes on `hub.table` (see `wire.RouteTable.add`), keep their
state in a new module beside these, and add a policy (`hub.add_policy`) for behaviour that
decides per request, such as a rate limiter answering 429 past a budget.

Xet content transfer is short-circuited at `huggingface_hub.utils._xet.get_xet_session`
(see `xet_bridge.py` for exactly what that replaces and why); every other byte the client
sends or receives crosses a real socket.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from tests.support.hub_emulator import accounts, buckets, jobs, spaces
from tests.support.hub_emulator.accounts import AccountState
from tests.support.hub_emulator.buckets import BucketState, xet_hash
from tests.support.hub_emulator.faults import Fault, Injection, Policy, RequestRecord
from tests.support.hub_emulator.jobs import JobState
from tests.support.hub_emulator.server import HttpServer
from tests.support.hub_emulator.spaces import SpaceState
from tests.support.hub_emulator.wire import HubError, HubRequest, HubResponse, RouteTable
from tests.support.hub_emulator.xet_bridge import xet_bridge

__all__ = [
    "Fault",
    "HubEmulator",
    "HubError",
    "HubRequest",
    "HubResponse",
    "running_hub",
    "xet_hash",
]


class HubEmulator:
    def __init__(self, *, page_size: int = 50, hang_max_s: float = 120.0) -> None:
        self.table = RouteTable()
        self.buckets = BucketState(page_size=page_size)
        self.accounts = AccountState(page_size=page_size)
        self.jobs = JobState(self.buckets)
        self.spaces = SpaceState()
        self._server = HttpServer(self.table, hang_max_s=hang_max_s)
        buckets.install(
            self.table,
            self.buckets,
            cas_url=lambda: self.cas_url,
            stopping=self._server.stopping,
        )
        accounts.install(self.table, self.accounts)
        jobs.install(self.table, self.jobs)
        spaces.install(self.table, self.spaces)

    @property
    def url(self) -> str:
        """The Hub endpoint (what `HF_ENDPOINT` is set to)."""
        return self._server.api.url

    @property
    def cas_url(self) -> str:
        return self._server.cas.url

    # -- state shortcuts (direct, not counted) ---------------------------------------------------
    def add_bucket(self, bucket_id: str, *, author: str = "", private: bool = False) -> None:
        self.buckets.add_bucket(bucket_id, author=author, private=private)

    def put(self, bucket_id: str, path: str, data: bytes) -> str:
        return self.buckets.put(bucket_id, path, data)

    def files(self, bucket_id: str) -> dict[str, bytes]:
        return self.buckets.files(bucket_id)

    # -- faults --------------------------------------------------------------------------------
    def inject(
        self, routes: str | Iterable[str], fault: Fault, *, times: int | None = None
    ) -> Injection:
        """Apply `fault` to requests on `routes` (`"*"` = all), `times` times or until removed."""
        names = [routes] if isinstance(routes, str) else list(routes)
        injection = Injection(names, fault, times)
        self._server.add_policy(injection)
        return injection

    def add_policy(self, policy: Policy) -> Policy:
        return self._server.add_policy(policy)

    def remove(self, policy: Policy) -> None:
        self._server.remove_policy(policy)

    def clear_faults(self) -> None:
        for policy in list(self._server._policies):
            self._server.remove_policy(policy)
        self._server.release_hangs()

    def release_hangs(self) -> None:
        self._server.release_hangs()

    def refusing(self, which: str = "api") -> contextlib.AbstractContextManager[None]:
        return self._server.refusing(which)

    # -- counters ------------------------------------------------------------------------------
    def counts(self, *, kind: str | None = None) -> Counter[str]:
        return self._server.log.counts(kind=kind)

    def count(self, route: str) -> int:
        return self.counts()[route]

    def api_requests(self) -> int:
        return sum(self.counts(kind="api").values())

    @property
    def requests(self) -> list[RequestRecord]:
        return self._server.log.records

    def batch_operations(self, bucket_id: str) -> list[list[dict[str, Any]]]:
        """The NDJSON operations of each batch request `bucket_id` received, in order."""
        return [
            [json.loads(line) for line in record.body.splitlines() if line.strip()]
            for record in self.requests
            if record.route == "batch" and record.path == f"/api/buckets/{bucket_id}/batch"
        ]

    def reset_counts(self) -> None:
        self._server.log.clear()

    def stop(self) -> None:
        self._server.stop()


@contextlib.contextmanager
def running_hub(*, page_size: int = 50, xet_timeout_s: float = 10.0) -> Iterator[HubEmulator]:
    """An emulator for the duration of the block, with huggingface_hub's Xet transfers
    bridged to its CAS listener."""
    hub = HubEmulator(page_size=page_size)
    try:
        with xet_bridge(timeout_s=xet_timeout_s):
            yield hub
    finally:
        hub.stop()
