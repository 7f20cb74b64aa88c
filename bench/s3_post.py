"""bucket-sync board post latency: the S3 store (moto's server on loopback) vs the local
store, over real HTTP against an `agenthub bucketsync serve` subprocess.

Each round starts a fresh server (a fresh data directory; on S3 a fresh S3 bucket), sets up
`--agents` agents, then each agent promotes `--posts` messages from its scratch bucket one
after another; only the `POST /v1/messages` is timed (the upload before it is not). Rounds
alternate local, s3, local, s3… so both see the same machine load.

    PYTHONPATH=src python3 bench/s3_post.py [--rounds 2] [--agents 10] [--posts 6]

moto is a Python server: S3 figures here are moto's latency plus ours, not AWS's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from tests.support.s3server import KEY_ID, REGION, SECRET, S3Server, running_s3

from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.identity.stored import StoredUsers
from agenthub.bucketsync.storage.s3 import S3BucketStore, S3Config
from bench._servers import free_port, percentile, wait_until_up

ORG, SLUG = "bench", "chal"


def one_round(kind: str, s3: S3Server, agents: int, posts: int) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="s3bench-") as tmp:
        data = Path(tmp) / "data"
        storage = s3.env(s3.new_bucket()) if kind == "s3" else {}
        # Where the server reads users: the data directory, or (s3) the S3 bucket.
        users: Path | StoredUsers = data / "users.json"
        if kind == "s3":
            users = StoredUsers(
                S3BucketStore(
                    S3Config(
                        bucket=storage["BUCKETSYNC_S3_BUCKET"],
                        endpoint=s3.endpoint,
                        region=REGION,
                        access_key_id=KEY_ID,
                        secret_access_key=SECRET,
                    )
                )
            )
        identity = LocalIdentity(users, org=ORG)
        tokens = {f"a{i}": identity.add_user(f"u{i}", role="contributor") for i in range(agents)}
        env = {
            **os.environ,
            "ORG": ORG,
            "COLLAB_SLUG": SLUG,
            "AUDIT_BUCKET": f"{ORG}-admin/{SLUG}-audit",
            "BUCKETSYNC_DATA_DIR": str(data),
            **storage,
        }
        port = free_port()
        log = open(Path(tmp) / "serve.log", "wb")  # noqa: SIM115 (lives as long as the server)
        server = subprocess.Popen(
            [sys.executable, "-m", "agenthub.cli", "bucketsync", "serve", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
                wait_until_up(client)
                for i, (agent, token) in enumerate(tokens.items()):
                    auth = {"Authorization": f"Bearer {token}"}
                    bucket = f"{ORG}/{SLUG}-{agent}"
                    client.post(f"/local/buckets/{bucket}", headers=auth).raise_for_status()
                    client.put(
                        f"/local/buckets/{bucket}/files/.bucket-sync-handshake",
                        content=f"u{i}".encode(),
                        headers=auth,
                    ).raise_for_status()
                    client.post(
                        "/v1/agents/register",
                        json={"agent_id": agent, "model": "m", "harness": "h"},
                        headers=auth,
                    ).raise_for_status()
                timings: list[float] = []
                for n in range(posts):
                    for agent, token in tokens.items():
                        bucket = f"{ORG}/{SLUG}-{agent}"
                        path = f"notes/m{n}.md"
                        client.put(
                            f"/local/buckets/{bucket}/files/{path}",
                            content=f"post {n} from {agent}".encode(),
                            headers={"Authorization": f"Bearer {token}"},
                        ).raise_for_status()
                        started = time.perf_counter()
                        answer = client.post(
                            "/v1/messages", json={"source": f"hf://buckets/{bucket}/{path}"}
                        )
                        timings.append((time.perf_counter() - started) * 1000)
                        answer.raise_for_status()
                return timings
        finally:
            server.terminate()
            server.wait(timeout=15)
            log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--posts", type=int, default=6, help="per agent (≤20: the source limit)")
    args = parser.parse_args()
    results: dict[str, list[float]] = {"local": [], "s3": []}
    with running_s3() as s3:
        for _ in range(args.rounds):
            for kind in ("local", "s3"):
                results[kind] += one_round(kind, s3, args.agents, args.posts)
    print(f"board post (POST /v1/messages, promote), {args.rounds} interleaved rounds")
    for kind, values in results.items():
        print(
            f"  {kind:5s} n={len(values):4d}  p50 {percentile(values, 50):7.1f} ms  "
            f"p99 {percentile(values, 99):7.1f} ms"
        )


if __name__ == "__main__":
    main()
