"""agent-collabs' backend on the Hub emulator, for bench/hub_budget.py's comparison.

Its backend (huggingface/agent-collabs, `backend/app`) asks for `huggingface_hub>=1.0` and
calls the module-level functions of the installed one (2.4 here), so it talks to the
emulator like our service does: it is driven, not modelled. It reads `HF_ENDPOINT` when
huggingface_hub is imported, so it runs in a subprocess that starts the emulator first,
then sets `HF_ENDPOINT` and its settings (ORG, COLLAB_SLUG, AUDIT_BUCKET, HF_TOKEN), then
imports it from `{checkout}/backend`. Nothing of it is copied into this repository.

The workload is bench/hub_budget.py's per-operation one: one agent alone, warm (its read
model listed once). It has no watched read; an agent there polls `GET /v1/inbox/{me}`,
which is what "watched read" counts for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

ORG, SLUG = "acme", "chal"
CENTRAL, AUDIT, ADMIN = f"{ORG}/{SLUG}-main-bucket", "acme-admin/chal-audit", "hf_admin"


def collabs_figures(checkout: Path) -> dict[str, int | str]:
    """API requests per operation of agent-collabs at `checkout` (a subprocess)."""
    backend = checkout / "backend"
    if not (backend / "app" / "main.py").exists():
        raise SystemExit(f"{checkout} is not an agent-collabs checkout (no backend/app/main.py)")
    env = {
        **os.environ,
        "PYTHONPATH": f"{backend}{os.pathsep}{ROOT}",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    }
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [sys.executable, __file__], env=env, cwd=tmp, capture_output=True, text=True
        )
    if out.returncode != 0:
        raise SystemExit(f"agent-collabs run failed:\n{out.stderr[-3000:]}")
    figures: dict[str, int | str] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def _child() -> None:
    from tests.support.hub_emulator import HubEmulator
    from tests.support.hub_emulator.xet_bridge import xet_bridge

    hub = HubEmulator()
    os.environ.update(
        HF_ENDPOINT=hub.url,
        ORG=ORG,
        COLLAB_SLUG=SLUG,
        AUDIT_BUCKET=AUDIT,
        HF_TOKEN=ADMIN,
        LISTING_TTL_S="30",
    )
    hub.add_bucket(CENTRAL, author=ORG)
    hub.add_bucket(AUDIT, author="acme-admin", private=True)
    try:
        with xet_bridge():
            print(json.dumps(_measure(hub)))
    finally:
        hub.stop()


def _measure(hub: Any) -> dict[str, int | str]:
    from app.main import app  # agent-collabs' backend, from the checkout on PYTHONPATH
    from fastapi.testclient import TestClient

    def prepare(agent: str) -> None:
        hub.accounts.tokens[f"tok-{agent}"] = {
            "name": f"user-{agent}",
            "orgs": [{"name": ORG, "roleInOrg": "contributor"}],
        }
        hub.add_bucket(f"{ORG}/{SLUG}-{agent}", author=f"user-{agent}")
        hub.put(f"{ORG}/{SLUG}-{agent}", ".bucket-sync-handshake", f"user-{agent}".encode())

    counter = iter(range(1000))

    def upload(agent: str, text: str) -> str:
        name = f"m{next(counter)}.md"
        hub.put(f"{ORG}/{SLUG}-{agent}", name, text.encode())
        return f"hf://buckets/{ORG}/{SLUG}-{agent}/{name}"

    figures: dict[str, int | str] = {}
    with TestClient(app) as client:

        def measure(name: str, method: str, url: str, **kwargs: Any) -> None:
            before = hub.api_requests()
            response = client.request(method, url, **kwargs)
            used = hub.api_requests() - before
            figures[name] = (
                used if response.status_code < 300 else f"{used} ({response.status_code})"
            )

        def register(agent: str) -> Any:
            return client.post(
                "/v1/agents/register",
                json={"agent_id": agent, "model": "m", "harness": "h"},
                headers={"Authorization": f"Bearer tok-{agent}"},
            )

        def result(agent: str) -> dict[str, str]:
            text = (
                f"---\nscore: 0.5\nstatus: agent-run\nmethod: sweep\ndescription: d\n---\n{agent}\n"
            )
            return {"source": upload(agent, text)}

        for agent in ("a1", "a2", "a3"):
            prepare(agent)
        register("a2")
        client.get("/v1/messages")
        client.get("/v1/digest", params={"as": "a2"})
        client.post("/v1/results", json=result("a2"))
        measure(
            "registration",
            "POST",
            "/v1/agents/register",
            json={"agent_id": "a1", "model": "m", "harness": "h"},
            headers={"Authorization": "Bearer tok-a1"},
        )
        register("a3")
        post = {"source": upload("a1", "note for @a2\n")}
        measure("post", "POST", "/v1/messages", json=post, headers={"Idempotency-Key": "k1"})
        measure("result", "POST", "/v1/results", json=result("a1"))
        client.get("/v1/digest", params={"as": "a1"})
        measure("digest", "GET", "/v1/digest", params={"as": "a1"})
        client.get("/v1/inbox/a2")
        measure("watched read", "GET", "/v1/inbox/a2")
    return figures


if __name__ == "__main__":
    _child()
