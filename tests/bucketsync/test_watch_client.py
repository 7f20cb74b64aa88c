"""`agenthub.bucketsync.agentside.watch.WatchClient` against a real server: the same watch contract
as collab_watch.sh (BS-13.35-13.38), for Python harnesses."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agenthub.bucketsync.agentside.watch import (
    WatchClient,
    WatchError,
    default_state_dir,
    joined_stamp,
)
from tests.bucketsync.test_collab_watch import Server, server

__all__ = ["server"]


def client_for(server: Server, stream: Any = "inbox", **extra: Any) -> WatchClient:
    return WatchClient(
        server.base, "agent-2", stream, state_dir=server.state, wait_s=5, backoff_s=0.05, **extra
    )


def test_bs_13_35_client_baselines_then_delivers_and_resumes(server: Server) -> None:
    old = server.world.raw("agent-1", "old @agent-2").json()["filename"]
    client = client_for(server)
    client.baseline()
    # Baselined before agent-2 registered: mail since then is still to be delivered.
    assert client.cursor() == ""
    first = client.next_page(max_wait=5)
    assert first is not None and [i["filename"] for i in first["items"]] == [old]
    client.ack(first)
    new = server.world.raw("agent-1", "new @agent-2").json()["filename"]
    page = client.next_page(max_wait=5)
    assert page is not None and [i["filename"] for i in page["items"]] == [new]
    assert client.cursor() == old  # not acked yet
    client.ack(page)
    epoch, last, pid, stream = (server.state / "heartbeat").read_text().split()
    assert (last, stream) == ("delivered", "inbox") and int(pid) > 0 and int(epoch) > 0
    assert client.cursor() == new
    assert client.next_page(max_wait=1) is None


def test_bs_13_36_client_wakes_on_a_post_while_parked(server: Server) -> None:
    client = client_for(server)
    client.baseline()
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(client.next_page(max_wait=10)))
    thread.start()
    server.parked()
    sent = server.world.raw("agent-1", "wake @agent-2").json()["filename"]
    thread.join(timeout=10)
    assert result and result[0]["items"][0]["filename"] == sent
    assert result[0]["watch"]["status"] == "delivered"


def test_bs_13_36_client_run_dead_letters_a_failing_page(server: Server) -> None:
    client = client_for(server)
    client.baseline()
    poison = server.world.raw("agent-1", "poison @agent-2").json()["filename"]
    seen: list[str] = []

    def handler(page: dict[str, Any]) -> None:
        seen.append(page["items"][0]["filename"])
        raise RuntimeError("handler crashed")

    client.run(handler, should_stop=lambda: client.cursor() == poison, poll_s=5)
    assert seen == [poison] * 3
    letter = json.loads((Path(server.state) / "dead-letter.jsonl").read_text())
    assert letter["cursor"] == poison and "handler crashed" in letter["error"]


def test_bs_13_38_client_errors_fail_fast(server: Server) -> None:
    client = WatchClient(server.base, "ghost-agent", "inbox", state_dir=server.state)
    with pytest.raises(WatchError) as failure:
        client.next_page(max_wait=1)
    assert failure.value.status == 404


def test_client_first_run_skips_what_came_before_registering(server: Server) -> None:
    older = server.world.raw("agent-1", "before you came @agent-3").json()["filename"]
    time.sleep(0.01)  # registration is stamped in milliseconds too
    server.world.agent("agent-3")
    since = server.world.raw("agent-1", "welcome @agent-3").json()["filename"]
    client = WatchClient(server.base, "agent-3", "inbox", state_dir=server.state, wait_s=5)

    page = client.next_page(max_wait=5)

    assert page is not None and [i["filename"] for i in page["items"]] == [since]
    assert older < since


def test_joined_stamp_reads_both_timestamp_dialects() -> None:
    assert joined_stamp("2026-03-01T12:00:00.123Z") == "20260301-120000-123"
    assert joined_stamp("2026-03-01 12:00 UTC") == "20260301-120000-000"
    assert joined_stamp("yesterday") is None and joined_stamp(None) is None


def test_collab_watch_dir_is_the_state_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLLAB_WATCH_DIR", str(tmp_path / "state"))
    assert default_state_dir("http://127.0.0.1:8300", "agent-1") == tmp_path / "state"
    nested = tmp_path / "state" / "127.0.0.1_8300" / "agent-1"
    nested.mkdir(parents=True)
    assert default_state_dir("http://127.0.0.1:8300", "agent-1") == nested  # earlier layout
