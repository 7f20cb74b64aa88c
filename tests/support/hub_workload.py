"""bucket-sync on the Hub emulator, driven like a fleet drives it: agents with scratch
buckets and tokens registering, posting with @-mentions, promoting results, reading their
digest and inbox. Shared by tests/bucketsync/test_hub_budget.py and bench/hub_budget.py,
which count what each operation costs in Hub API requests (`hub.api_requests()`).

    with running_hub() as hub, Workload.start(hub, tmp_path) as world:
        world.prepare("a1")                  # bucket, handshake, token (not counted)
        cost = world.measure(lambda: world.register("a1"))
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from httpx2 import Response

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.hf import HfIdentity
from agenthub.bucketsync.settings import BucketSyncSettings, load_settings
from agenthub.bucketsync.storage.hf import HfBucketStore
from agenthub.clock import Clock, SystemClock
from tests.support.hub_emulator import HubEmulator

ORG = "acme"
SLUG = "chal"
CENTRAL = f"{ORG}/{SLUG}-main-bucket"
AUDIT = "acme-admin/chal-audit"
ADMIN_TOKEN = "hf_admin"


def settings_for(hub: HubEmulator, data_dir: Path, **overrides: Any) -> BucketSyncSettings:
    values: dict[str, Any] = {
        "ORG": ORG,
        "COLLAB_SLUG": SLUG,
        "AUDIT_BUCKET": AUDIT,
        "BUCKETSYNC_DATA_DIR": str(data_dir),
        "BUCKETSYNC_STORAGE": "hf",
        "HF_TOKEN": ADMIN_TOKEN,
        "HF_ENDPOINT": hub.url,
    }
    values.update(overrides)
    return load_settings(**values)


class Workload:
    """One bucket-sync app on `hub`, and the agents it serves."""

    def __init__(self, hub: HubEmulator, client: TestClient, store: HfBucketStore) -> None:
        self.hub = hub
        self.client = client
        self.store = store
        self._counter = itertools.count()

    @classmethod
    @contextlib.contextmanager
    def start(
        cls,
        hub: HubEmulator,
        data_dir: Path,
        *,
        clock: Clock | None = None,
        deadline_s: float = 10.0,
        create_buckets: bool = True,
        **overrides: Any,
    ) -> Iterator[Workload]:
        """The app on `hub`; `create_buckets=False` for a second worker of the same service
        (creating a bucket again would empty it)."""
        if create_buckets:
            hub.add_bucket(CENTRAL, author=ORG)
            hub.add_bucket(AUDIT, author="acme-admin", private=True)
        clock = clock or SystemClock()
        settings = settings_for(hub, data_dir, **overrides)
        identity = HfIdentity(
            admin_token=ADMIN_TOKEN,
            endpoint=hub.url,
            deadline_s=deadline_s,
            clock=clock,
            roles_ttl_s=300,
        )
        # bench/hub_budget.py --before runs this driver on an older src/ whose store has
        # no group commit (and whose settings no linger).
        linger = getattr(settings, "hub_group_linger_s", None)
        store = HfBucketStore(
            token=ADMIN_TOKEN,
            endpoint=hub.url,
            deadline_s=deadline_s,
            **({} if linger is None else {"group_linger_s": linger}),
        )
        app = create_app(settings, store=store, identity=identity, clock=clock)
        with TestClient(app) as client:
            yield cls(hub, client, store)

    # -- arranging (direct emulator state, not counted) -----------------------------------------
    @staticmethod
    def token(agent: str) -> str:
        return f"tok-{agent}"

    @staticmethod
    def bucket(agent: str) -> str:
        return f"{ORG}/{SLUG}-{agent}"

    def prepare(self, agent: str) -> None:
        """The agent's user, token, scratch bucket and handshake, as the agent makes them."""
        user = f"user-{agent}"
        self.hub.accounts.tokens[self.token(agent)] = {
            "name": user,
            "orgs": [{"name": ORG, "roleInOrg": "contributor"}],
        }
        self.hub.add_bucket(self.bucket(agent), author=user)
        self.hub.put(self.bucket(agent), ".bucket-sync-handshake", user.encode())

    def auth(self, agent: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(agent)}"}

    def upload(self, agent: str, name: str, text: str) -> str:
        """A file in the agent's scratch bucket (its own upload, not the service's cost)."""
        self.hub.put(self.bucket(agent), name, text.encode())
        return f"hf://buckets/{self.bucket(agent)}/{name}"

    # -- operations (what the service spends Hub requests on) -----------------------------------
    def register(self, agent: str) -> Response:
        return self.client.post(
            "/v1/agents/register", json={"agent_id": agent}, headers=self.auth(agent)
        )

    def post(self, agent: str, mention: str | None = None, *, key: str | None = None) -> Response:
        n = next(self._counter)
        text = f"note {n} from {agent}" + (f" for @{mention}" if mention else "") + "\n"
        source = self.upload(agent, f"msg-{n}.md", text)
        headers = {"Idempotency-Key": key} if key else {}
        return self.client.post("/v1/messages", json={"source": source}, headers=headers)

    def result(self, agent: str, score: float = 0.5) -> Response:
        n = next(self._counter)
        text = f"---\nscore: {score}\nstatus: agent-run\nmethod: sweep\ndescription: run {n}\n---\nrun {n} of {agent}\n"
        source = self.upload(agent, f"result-{n}.md", text)
        return self.client.post("/v1/results", json={"source": source})

    def digest(self, agent: str) -> Response:
        return self.client.get("/v1/digest", params={"as": agent})

    def inbox(self, agent: str) -> Response:
        return self.client.get(f"/v1/inbox/{agent}")

    def board(self) -> Response:
        return self.client.get("/v1/messages")

    def measure(self, operation: Callable[[], Response], *, expect: int | None = None) -> int:
        """The Hub API requests `operation` made (Xet CAS transfers are not API requests)."""
        before = self.hub.api_requests()
        response = operation()
        if expect is not None:
            assert response.status_code == expect, response.text
        return self.hub.api_requests() - before

    def routes_during(self, operation: Callable[[], Response]) -> dict[str, int]:
        """The API requests of `operation`, by route (for a figure's breakdown)."""
        before = self.hub.counts(kind="api")
        operation()
        after = self.hub.counts(kind="api")
        return {
            route: after[route] - before[route] for route in after if after[route] > before[route]
        }


def bus_settled(a: Workload, b: Workload, timeout_s: float = 10.0) -> None:
    """Wait until worker `b` has applied every bus event worker `a` published so far (two
    apps on one Redis bus): Redis delivers one publisher's events in order, so `b` seeing
    a later wake of `a` is enough."""
    from agenthub.bucketsync.scaleout.bus import RedisBus

    bus_a, bus_b = a.client.app.state.hub.notifier, b.client.app.state.hub.notifier  # type: ignore[attr-defined]
    assert isinstance(bus_a, RedisBus) and isinstance(bus_b, RedisBus)
    seen = threading.Event()
    key = f"settled:{uuid.uuid4().hex}"
    bus_b.subscribe(lambda keys: seen.set() if key in keys else None)
    bus_a.wake([key])
    assert seen.wait(timeout_s), "worker b never heard from worker a"
