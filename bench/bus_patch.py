"""Hub API requests per post with two workers on one Redis bus (issue 29): the bus event
carrying what the write changed (other workers patch their listings) against carrying
the folders only (they re-list them: the behaviour before, and an older worker's).

Two bucket-sync apps on the Hub emulator and one Redis (AGENTHUB_TEST_REDIS_URL or
--redis). Each post is made on one worker, alternating, with one @-mention; then the other
worker reads the board, the mentioned agent's inbox and its digest. The variants run
interleaved (ABBA by round), each round on a fresh emulator; printed per post: every
API request of both workers, and the listings (`tree`) among them.

    PYTHONPATH=src python3 bench/bus_patch.py --rounds 4 --posts 20

Figures of 2026-12-06 (hub feed on, frozen clock so no TTL expires; 4 rounds x 20 posts,
every round the same): folders only 6.00 API requests per post, 2.00 of them listings
(the reader re-lists message_board/ and inbox/); with the changes 4.00, 0 listings.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(1, str(ROOT))
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

from tests.support.hub_emulator import running_hub  # noqa: E402
from tests.support.hub_workload import Workload, bus_settled  # noqa: E402
from tests.support.redisdb import drop_prefix, unique_prefix  # noqa: E402

from agenthub.bucketsync.scaleout import buschanges  # noqa: E402
from agenthub.clock import FrozenClock  # noqa: E402

AGENTS = ("a1", "a2", "a3")


def run(redis_url: str, posts: int, *, entries: bool) -> tuple[float, float]:
    """(API requests, listings) per post, with or without the changes on the bus."""
    encode = buschanges.encode
    if not entries:
        buschanges.encode = lambda changes: None
    prefix = unique_prefix()
    bus: dict[str, Any] = {"BUCKETSYNC_BUS_URL": redis_url, "BUCKETSYNC_BUS_PREFIX": prefix}
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            running_hub() as hub,
            Workload.start(hub, Path(tmp), clock=FrozenClock(), **bus) as a,
            Workload.start(hub, Path(tmp), clock=FrozenClock(), create_buckets=False, **bus) as b,
        ):
            for agent in AGENTS:
                a.prepare(agent)
                assert a.register(agent).status_code == 201
            for worker in (a, b):  # warm, as serving workers are
                for agent in AGENTS:
                    worker.inbox(agent)
                    worker.digest(agent)
                worker.board()
            bus_settled(a, b)
            bus_settled(b, a)
            before, listed = hub.api_requests(), hub.counts(kind="api")["tree"]
            for n in range(posts):
                writer, reader = (a, b) if n % 2 == 0 else (b, a)
                author, mention = AGENTS[n % 3], AGENTS[(n + 1) % 3]
                posted = writer.post(author, mention)
                assert posted.status_code == 201, posted.text
                bus_settled(writer, reader)
                board = reader.board()  # the reader sees the post, listed or patched in
                assert posted.json()["filename"] in board.json()["items"], board.text
                assert reader.inbox(mention).status_code == 200
                assert reader.digest(mention).status_code == 200
            used = hub.api_requests() - before
            lists = hub.counts(kind="api")["tree"] - listed
            return used / posts, lists / posts
    finally:
        buschanges.encode = encode
        drop_prefix(redis_url, prefix)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis", default=os.environ.get("AGENTHUB_TEST_REDIS_URL"))
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--posts", type=int, default=20)
    args = parser.parse_args()
    if not args.redis:
        parser.error("give --redis or set AGENTHUB_TEST_REDIS_URL")
    figures: dict[str, list[tuple[float, float]]] = {"folders-only": [], "entries": []}
    for round_ in range(args.rounds):
        order = [False, True] if round_ % 2 == 0 else [True, False]
        for entries in order:
            name = "entries" if entries else "folders-only"
            figures[name].append(run(args.redis, args.posts, entries=entries))
            api, lists = figures[name][-1]
            print(f"round {round_} {name:12s} api/post {api:.2f} listings/post {lists:.2f}")
    for name, rows in figures.items():
        api = statistics.median(row[0] for row in rows)
        lists = statistics.median(row[1] for row in rows)
        print(f"median {name:12s} api/post {api:.2f} listings/post {lists:.2f}")


if __name__ == "__main__":
    main()
