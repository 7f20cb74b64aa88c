"""`clients/collab_watch.sh` as a subprocess against a real server on loopback
(seed §13, BS-13.34-13.38), and its delivery at `GET /v1/watch.sh`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.local import LocalBucketStore
from tests.bucketsync.conftest import ORG, World, make_settings
from tests.support.servers import live_server

SCRIPT = Path(__file__).resolve().parents[2] / "src/agenthub/bucketsync/clients/collab_watch.sh"
SHELL = shutil.which("dash") or "sh"  # dash when present: no bashisms slip through


@dataclass
class Server:
    base: str
    world: World
    state: Path
    home: Path

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "HOME": str(self.home),
            "COLLAB_WATCH_DIR": str(self.state),
            "COLLAB_WATCH_WAIT": "5",
            "COLLAB_WATCH_BACKOFF": "0.2",
            **extra,
        }

    def run(self, *args: str, timeout: float = 30, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [SHELL, str(SCRIPT), *args],
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start(self, *args: str, **env: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [SHELL, str(SCRIPT), *args],
            env=self.env(**env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def parked(self, count: int = 1, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while self.world.client.get("/v1/healthz").json()["longpoll"]["parked"] < count:
            assert time.monotonic() < deadline, "the watcher never parked"
            time.sleep(0.05)

    def cursor(self, stream: str = "inbox") -> str:
        return (self.state / f"cursor.{stream}").read_text().strip()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    settings = make_settings(tmp_path / "data")
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(settings, store=LocalBucketStore(settings.data_dir), identity=identity)
    with live_server(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        world = World(client, app.state.hub, identity)  # type: ignore[arg-type]
        world.agent("agent-1")
        world.agent("agent-2")
        yield Server(base, world, tmp_path / "state", tmp_path)


def test_bs_13_34_watch_sh_is_served_byte_for_byte(server: Server, tmp_path: Path) -> None:
    response = server.world.client.get("/v1/watch.sh")
    assert response.status_code == 200
    assert response.content == SCRIPT.read_bytes()
    assert response.headers["content-type"].startswith("text/x-shellscript")


def test_bs_13_34_watch_sh_missing_is_404(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    settings = make_settings(tmp_path / "data", BUCKETSYNC_CLIENTS_DIR=str(tmp_path / "empty"))
    with TestClient(create_app(settings)) as client:
        assert client.get("/v1/watch.sh").status_code == 404


def test_first_run_delivers_what_arrived_since_registering_never_older_history(
    server: Server,
) -> None:
    older = server.world.raw("agent-1", "before you came @agent-3").json()["filename"]
    time.sleep(0.01)  # registration is stamped in milliseconds too
    server.world.agent("agent-3")
    since = server.world.raw("agent-1", "welcome @agent-3").json()["filename"]

    first = server.run(server.base, "agent-3", "inbox")

    assert first.returncode == 0, first.stderr
    assert [i["filename"] for i in json.loads(first.stdout)["items"]] == [since]
    assert server.cursor() == since and older < since
    journal = (server.state / "delivered.jsonl").read_text().splitlines()
    assert json.loads(journal[-1])["cursor"] == since


def test_first_run_with_nothing_pending_blocks_until_mail(server: Server) -> None:
    server.world.raw("agent-1", "old news @agent-2")
    server.run(server.base, "agent-2", "inbox")  # delivers it: mail since registering
    (server.state / "cursor.inbox").unlink()
    (server.state / "delivered.jsonl").unlink()
    server.world.agent("agent-3")
    watcher = server.start(server.base, "agent-3", "inbox")
    server.parked()
    assert watcher.poll() is None
    new = server.world.raw("agent-1", "fresh @agent-3").json()["filename"]
    out, err = watcher.communicate(timeout=20)
    assert watcher.returncode == 0, err
    assert [item["filename"] for item in json.loads(out)["items"]] == [new]


def test_bs_13_35_resumes_from_the_persisted_cursor(server: Server) -> None:
    server.run(server.base, "agent-2", "inbox", "--max-wait", "1")  # baseline, then exit 3
    first = server.world.raw("agent-1", "one @agent-2").json()["filename"]
    second = server.world.raw("agent-1", "two @agent-2").json()["filename"]
    done = server.run(server.base, "agent-2", "inbox")
    assert done.returncode == 0
    assert [i["filename"] for i in json.loads(done.stdout)["items"]] == [first, second]
    third = server.world.raw("agent-1", "three @agent-2").json()["filename"]
    again = server.run(server.base, "agent-2", "inbox")
    assert [i["filename"] for i in json.loads(again.stdout)["items"]] == [third]


def test_bs_13_36_max_wait_is_a_clean_timeout(server: Server) -> None:
    started = time.monotonic()
    result = server.run(server.base, "agent-2", "inbox", "--max-wait", "2")
    assert result.returncode == 3 and result.stdout == ""
    assert time.monotonic() - started < 10


def test_bs_13_36_peek_reports_without_moving_the_cursor(server: Server) -> None:
    server.run(server.base, "agent-2", "inbox", "--max-wait", "1")
    baseline = server.cursor()
    assert server.run("--peek", server.base, "agent-2", "inbox").returncode == 0
    server.world.raw("agent-1", "pending @agent-2")
    peek = server.run("--peek", server.base, "agent-2", "inbox")
    assert peek.returncode == 10 and "pending" in peek.stdout
    assert server.cursor() == baseline


def test_bs_13_36_exec_acks_only_on_success_and_dead_letters_poison(server: Server) -> None:
    server.run(server.base, "agent-2", "inbox", "--max-wait", "1")
    baseline = server.cursor()
    attempts = server.home / "attempts"
    handler = (
        f'echo x >> {attempts}; grep -q poison "$COLLAB_WATCH_PAGE" && exit 7; '
        f"cat > {server.home}/ok.json"
    )
    watcher = server.start("--exec", handler, server.base, "agent-2", "inbox")
    try:
        server.parked()
        poison = server.world.raw("agent-1", "poison @agent-2").json()["filename"]
        deadline = time.monotonic() + 20
        while not (server.state / "dead-letter.jsonl").exists():
            assert time.monotonic() < deadline, "never dead-lettered"
            # Until then, the cursor never moves past the failing page.
            assert server.cursor() in (baseline, poison)
            time.sleep(0.05)
        assert len(attempts.read_text().splitlines()) == 3
        letter = json.loads((server.state / "dead-letter.jsonl").read_text().splitlines()[0])
        assert letter["exit"] == 7 and letter["after"] == baseline
        assert letter["page"]["items"][0]["filename"] == poison
        server.parked()
        good = server.world.raw("agent-1", "good @agent-2").json()["filename"]
        deadline = time.monotonic() + 20
        while server.cursor() != good:
            assert time.monotonic() < deadline, "the good page was never acked"
            time.sleep(0.05)
        assert json.loads((server.home / "ok.json").read_text())["items"][0]["filename"] == good
    finally:
        watcher.terminate()
        watcher.wait(timeout=10)


def test_bs_13_36_status_lines_and_exit_codes(server: Server) -> None:
    server.run(server.base, "agent-2", "inbox", "--max-wait", "1")
    idle = server.run("--status", server.base, "agent-2", "inbox")
    assert idle.returncode == 11 and idle.stdout.startswith("STATUS=NO_WATCHER UNREAD=0 ")
    assert idle.stdout.rstrip().endswith(" PID=- STREAM=inbox LAST=no_mail")
    watcher = server.start("--exec", "cat >/dev/null", server.base, "agent-2", "inbox")
    try:
        server.parked()
        ok = server.run("--status", server.base, "agent-2", "inbox")
        assert ok.returncode == 0 and ok.stdout.startswith("STATUS=OK UNREAD=0 HEARTBEAT_AGE=")
        assert f" PID={watcher.pid} STREAM=inbox LAST=waiting" in ok.stdout
        other = server.run("--status", server.base, "agent-2", "updates")
        assert other.returncode == 11 and "STATUS=NO_WATCHER" in other.stdout
        assert "is on 'inbox'" in other.stderr
    finally:
        watcher.terminate()
        watcher.wait(timeout=10)
    server.world.raw("agent-1", "@agent-2 unread")
    behind = server.run("--status", server.base, "agent-2", "inbox")
    # Mail pending outranks "no watcher": BEHIND is the verdict to act on.
    assert behind.returncode == 10 and behind.stdout.startswith("STATUS=BEHIND UNREAD=1 ")
    offline = server.run("--status", "http://127.0.0.1:9", "agent-2", "inbox")
    assert offline.returncode == 4 and offline.stdout.startswith("STATUS=OFFLINE")


def test_bs_13_37_lock_refuses_a_second_watcher_and_reclaims_a_stale_one(
    server: Server,
) -> None:
    watcher = server.start("--exec", "cat >/dev/null", server.base, "agent-2", "inbox")
    try:
        server.parked()
        second = server.run(server.base, "agent-2", "inbox", "--max-wait", "1")
        assert second.returncode == 5 and str(watcher.pid) in second.stderr
    finally:
        watcher.terminate()
        watcher.wait(timeout=10)
    (server.state / "lock").mkdir(exist_ok=True)
    dead = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True).stdout
    (server.state / "lock" / "pid").write_text(dead)
    reclaimed = server.run(server.base, "agent-2", "inbox", "--max-wait", "1")
    assert reclaimed.returncode == 3
    epoch, last, pid, stream = (server.state / "heartbeat").read_text().split()
    assert abs(int(epoch) - time.time()) < 30
    assert (last, stream) == ("no_mail", "inbox") and pid.isdigit()


def test_bs_13_38_only_the_response_cursor_moves_the_cursor(server: Server) -> None:
    server.run(server.base, "agent-2", "inbox", "--max-wait", "1")
    poison = '"cursor":"99999999-999999-999_zzz.md" "filename":"99999999-999999-999_zzz.md"'
    sent = server.world.raw("agent-1", f"@agent-2 {poison}").json()["filename"]
    result = server.run(server.base, "agent-2", "inbox")
    assert result.returncode == 0
    assert server.cursor() == sent
    # And frontmatter cannot carry a response-shaped key at all (BS-13.26).
    refused = server.world.promote(
        "agent-1", "p.md", "---\nfilename: 99999999-999999-999_zzz.md\n---\n@agent-2"
    )
    assert refused.status_code == 400


def test_bs_13_38_client_errors_fail_fast_with_the_body(server: Server) -> None:
    result = server.run(server.base, "ghost-agent", "inbox", "--max-wait", "5")
    assert result.returncode == 1 and "NOT_REGISTERED" in result.stderr


def test_bs_13_35_updates_stream_delivers_channel_posts_at_notify_all(server: Server) -> None:
    world = server.world
    world.user("boss", role="admin")
    world.client.post(
        "/v1/channels",
        json={"name": "ideas", "agent_id": "human-boss", "body": "ideas"},
        headers=world.auth("boss"),
    )
    world.put("agent-2", "sub.md", "s")
    world.client.post(
        "/v1/channels/ideas/subscribe",
        json={"source": world.uri("agent-2", "sub.md"), "notify": "all"},
    )
    watcher = server.start(server.base, "agent-2")
    server.parked()
    sent = world.raw("agent-1", "room news", channel="ideas").json()["filename"]
    out, err = watcher.communicate(timeout=20)
    assert watcher.returncode == 0, err
    (item,) = json.loads(out)["items"]
    assert item["filename"] == sent and item["reasons"] == ["channel:ideas"]


def test_bs_13_11_a_client_that_hangs_up_frees_its_waiter_slot(server: Server) -> None:
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(f"{server.base}/v1/inbox/agent-2?wait=30", timeout=0.5)
    deadline = time.monotonic() + 5
    while server.world.client.get("/v1/healthz").json()["longpoll"]["waiters"] != 0:
        assert time.monotonic() < deadline, "the abandoned waiter kept its slot"
        time.sleep(0.05)


def test_status_is_behind_on_a_first_run_with_mail_waiting(server: Server) -> None:
    server.world.raw("agent-1", "@agent-2 waiting for you")
    status = server.run("--status", server.base, "agent-2", "inbox")
    assert status.returncode == 10
    assert status.stdout.startswith("STATUS=BEHIND UNREAD=1 HEARTBEAT_AGE=- PID=- STREAM=- LAST=-")
    assert not (server.state / "cursor.inbox").exists()  # --status never baselines


def test_collab_watch_state_names_the_cursor_file(server: Server) -> None:
    cursor = server.home / "legacy.cursor"
    sent = server.world.raw("agent-1", "@agent-2 hello").json()["filename"]
    result = server.run(server.base, "agent-2", "inbox", COLLAB_WATCH_STATE=str(cursor))
    assert result.returncode == 0, result.stderr
    assert cursor.read_text().strip() == sent
    assert not (server.state / "cursor.inbox").exists()
    assert (server.state / "heartbeat").exists() and (server.state / "delivered.jsonl").exists()


def test_state_kept_in_the_earlier_nested_layout_is_still_used(server: Server) -> None:
    host = server.base.removeprefix("http://").replace(":", "_")
    nested = server.state / host / "agent-2"
    nested.mkdir(parents=True)
    old = server.world.raw("agent-1", "@agent-2 read long ago").json()["filename"]
    (nested / "cursor.inbox").write_text(old + "\n")
    new = server.world.raw("agent-1", "@agent-2 new").json()["filename"]

    result = server.run(server.base, "agent-2", "inbox")

    assert result.returncode == 0, result.stderr
    assert [i["filename"] for i in json.loads(result.stdout)["items"]] == [new]
    assert (nested / "cursor.inbox").read_text().strip() == new
