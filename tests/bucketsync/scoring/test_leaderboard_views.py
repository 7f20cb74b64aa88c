"""The leaderboard for people and programs (issue 19, item 4), over real HTTP on loopback:
organizer baselines shown and never ranked, the CSV/JSON download of every row and column,
and the Pareto view over score and reported cost on a crafted board."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.core.locks import Unfenced
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.live import pareto
from agenthub.bucketsync.live.boardview import COLUMNS
from agenthub.bucketsync.results.leaderboard import Entry, Row, rank
from agenthub.bucketsync.scoring.quota import LedgerRow, QuotaLedger
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import ORG, World, make_settings
from tests.support.servers import live_server

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


@dataclass
class Served:
    world: World
    clock: FrozenClock
    results: int = 0

    def result(self, agent: str, score: float, *, token: str | None = None, **extra: Any) -> Any:
        """Write a result into `agent`'s scratch bucket and promote it (as `token`'s holder)."""
        self.results += 1
        fm = {"score": score, "method": "m", "status": "agent-run", "description": "d", **extra}
        lines = "".join(f"{k}: {json.dumps(v)}\n" for k, v in fm.items())
        path = f"results/r{self.results}.md"
        assert (
            self.world.put(agent, path, f"---\n{lines}---\nrun {self.results}\n").status_code == 201
        )
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.clock.advance(0.01)  # distinct stamps
        return self.world.client.post(
            "/v1/results", json={"source": self.world.uri(agent, path)}, headers=headers
        )

    def promoted(self, agent: str, score: float, **extra: Any) -> str:
        response = self.result(agent, score, **extra)
        assert response.status_code == 201, response.text
        return str(response.json()["filename"])

    def board(self, **params: str) -> dict[str, Any]:
        response = self.world.client.get("/v1/leaderboard", params=params)
        assert response.status_code == 200, response.text
        return dict(response.json())

    def share_tokens(self, agent: str, session: str, total: int | None) -> None:
        fm: dict[str, Any] = {"schema_version": 1, "harness": "claude-code", "session_id": session}
        if total is not None:
            fm["tokens"] = {"input": total, "output": 0}
        text = "---\n" + json.dumps(fm) + "\n---\nsummary\n"
        assert self.world.put(agent, f"traces/{session}/manifest.md", text).status_code == 201
        body = {"source": self.world.uri(agent, f"traces/{session}/")}
        assert self.world.client.post("/v1/traces", json=body).status_code == 201

    def ran(self, agent: str, job: str, minutes: float | None, *, listed: bool = False) -> None:
        """A run in the jobs ledger (unless already `listed`), and its job_status.json
        (unfinished when `minutes` is None)."""
        hub = self.world.hub
        s = hub.settings
        ledger = QuotaLedger(hub.store, s.audit_bucket, s.job_quota_ledger_path)
        run = f"runs/{job}/"
        bucket = self.world.bucket(agent)
        start = NOW - timedelta(hours=1)
        if not listed:
            row = LedgerRow(start, agent, f"user-{agent}", job, bucket, run)
            ledger.save([*ledger.rows(), row], Unfenced("job-quota"))
        status: dict[str, Any] = {"job_id": job, "launched_at": start.isoformat()}
        status["finished_at"] = (
            (start + timedelta(minutes=minutes)).isoformat() if minutes is not None else None
        )
        hub.store.write_batch(
            bucket, Batch(adds=[(f"{run}job_status.json", json.dumps(status).encode())])
        )


@contextmanager
def serving(
    tmp_path: Path, store_type: type[LocalBucketStore] = LocalBucketStore, **env: str
) -> Iterator[Served]:
    """A live bucket-sync on loopback (jobs on unless `env` says otherwise)."""
    clock = FrozenClock(NOW)
    settings = make_settings(tmp_path / "data", **{"JOBS_ENABLED": "true", **env})
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    store = store_type(settings.data_dir, clock=clock)
    app = create_app(settings, store=store, identity=identity, clock=clock)
    with live_server(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        yield Served(World(client, app.state.hub, identity), clock)  # type: ignore[arg-type]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serving(tmp_path) as running:
        yield running


def organizer_agent(served: Served, agent: str = "baseline-bot") -> str:
    """An org admin's own agent; returns the admin's token."""
    token = served.world.user("olive", role="admin")
    served.world.agent(agent, "olive")
    return token


# -- baselines ----------------------------------------------------------------------------


def test_an_organizer_baseline_is_shown_flagged_and_never_ranked(served: Served) -> None:
    for agent in ("agent-1", "agent-2"):
        served.world.agent(agent)
    token = organizer_agent(served)
    served.promoted("agent-1", 0.5)
    served.promoted("agent-2", 0.7)
    strong = served.promoted("baseline-bot", 0.99, token=token, baseline=True)
    weak = served.promoted("baseline-bot", 0.6, token=token, baseline=True)

    body = served.board()

    assert [(r["rank"], r["agent"]) for r in body["rows"]] == [(1, "agent-2"), (2, "agent-1")]
    assert body["count"] == 2
    assert [(r["filename"], r["rank"], r["baseline"]) for r in body["baselines"]] == [
        (strong, None, True),
        (weak, None, True),  # every baseline is its own reference point
    ]
    assert [r["agent"] for r in served.board(verification="pending")["rows"]] == [
        "agent-2",
        "agent-1",
    ]


def test_a_baseline_organizer_still_ranks_for_an_ordinary_result(served: Served) -> None:
    token = organizer_agent(served)
    served.promoted("baseline-bot", 0.9, token=token, baseline=True)
    ordinary = served.promoted("baseline-bot", 0.4)

    body = served.board()

    assert [(r["rank"], r["filename"], r["baseline"]) for r in body["rows"]] == [
        (1, ordinary, False)
    ]


def test_baseline_from_an_agent_without_a_token_is_refused_and_nothing_is_written(
    served: Served,
) -> None:
    served.world.agent("agent-1")

    response = served.result("agent-1", 0.9, baseline=True)

    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "NOT_ORGANIZER"
    assert "Bearer" in error["hint"]
    assert served.world.client.get("/v1/results").json()["count"] == 0


def test_baseline_from_a_contributor_token_is_refused(served: Served) -> None:
    served.world.agent("agent-1", "carol")

    response = served.result("agent-1", 0.9, token=served.world.tokens["carol"], baseline=True)

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "NOT_ORGANIZER"
    assert served.world.client.get("/v1/results").json()["count"] == 0


def test_an_organizer_cannot_mark_another_users_agent_as_baseline(served: Served) -> None:
    token = organizer_agent(served)
    served.world.agent("agent-1", "carol")

    response = served.result("agent-1", 0.9, token=token, baseline=True)

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "IDENTITY_MISMATCH"


def test_baseline_must_be_a_boolean_and_false_is_an_ordinary_result(served: Served) -> None:
    served.world.agent("agent-1")

    refused = served.result("agent-1", 0.9, baseline="yes")
    ordinary = served.promoted("agent-1", 0.8, baseline=False)

    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "INVALID_FRONTMATTER"
    stored = served.world.client.get(f"/v1/results/{ordinary}").json()["frontmatter"]
    assert "baseline" not in stored
    assert served.board()["rows"][0]["filename"] == ordinary


def test_rank_keeps_baselines_apart_each_one_shown_and_the_verification_filter_applies() -> None:
    def entry(n: int, agent: str, score: float, **fm: Any) -> Entry:
        stamp = f"20260301-12000{n}-000"
        return Entry(
            f"{stamp}_{agent}.md", agent, stamp, {"score": score, "status": "agent-run", **fm}
        )

    entries = [
        entry(1, "a", 0.5),
        entry(2, "ref", 0.9, baseline=True),
        entry(3, "ref", 0.8, baseline=True),
        entry(4, "ref", 0.7, baseline=True),
        entry(5, "ref", 0.6),
    ]
    index = {entries[3].filename: "invalid"}

    ranking = rank(entries, index, score_field="score", order="desc")

    assert [(r.rank, r.agent, r.score) for r in ranking.rows] == [(1, "ref", 0.6), (2, "a", 0.5)]
    assert [(r.rank, r.score, r.baseline) for r in ranking.baselines] == [
        (None, 0.9, True),
        (None, 0.8, True),
    ]
    assert ranking.excluded["verification_invalid"] == 1


# -- downloads ----------------------------------------------------------------------------


def cell(value: Any) -> str:
    """The documented CSV encoding of a JSON download value."""
    if value is None:
        return ""
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return str(value)


def download(served: Served, **params: str) -> Any:
    response = served.world.client.get("/v1/leaderboard", params=params)
    assert response.status_code == 200, response.text
    return response


def test_the_csv_download_parses_and_equals_the_json_rows(served: Served) -> None:
    for agent in ("agent-1", "agent-2", "agent-3"):
        served.world.agent(agent)
    token = organizer_agent(served)
    # The row's pin is the server's pin of the submission (what GET /v1/results/{f}
    # shows), never a hash the author wrote into the frontmatter.
    assert served.world.put("agent-1", "sub/predict.py", "print(1)\n").status_code == 201
    pinned = served.promoted("agent-1", 0.5, artifacts="sub/", pin_hash="sha256:" + "ab" * 32)
    served.promoted("agent-2", 0.7, description='=HYPERLINK("http://x","y"), a "quote"\nline')
    served.promoted("agent-3", 0.6, method=["beam", "rerank"])
    served.promoted("baseline-bot", 0.65, token=token, baseline=True)
    served.share_tokens("agent-1", "s-1", 1200)
    served.ran("agent-1", "job-1", 7.5)

    as_json = download(served, format="json")
    as_csv = download(served, format="csv")

    assert as_json.headers["content-type"].startswith("application/json")
    assert as_csv.headers["content-type"].startswith("text/csv")
    for response, ext in ((as_json, "json"), (as_csv, "csv")):
        disposition = response.headers["content-disposition"]
        assert disposition.startswith('attachment; filename="chal-leaderboard-board-')
        assert disposition.endswith(f'.{ext}"')
    table = as_json.json()
    assert table["columns"] == list(COLUMNS)
    reader = csv.DictReader(io.StringIO(as_csv.text))
    assert reader.fieldnames == table["columns"]
    parsed = list(reader)
    assert parsed == [{k: cell(v) for k, v in row.items()} for row in table["rows"]]
    by_agent = {row["agent"]: row for row in table["rows"]}
    assert [row["agent"] for row in table["rows"]] == [
        "agent-2",
        "agent-3",
        "agent-1",
        "baseline-bot",
    ]
    pin = served.world.client.get(f"/v1/results/{pinned}").json()["pin"]
    assert by_agent["agent-1"]["pin"] == pin["manifest_hash"] != "sha256:" + "ab" * 32
    assert by_agent["agent-2"]["pin"] is None  # names no submission
    assert by_agent["agent-1"]["tokens"] == 1200 and by_agent["agent-1"]["job_minutes"] == 7.5
    assert by_agent["agent-2"]["tokens"] is None  # shared no trace: unknown, not 0
    assert by_agent["agent-3"]["method"] == '["beam","rerank"]'
    assert by_agent["baseline-bot"]["baseline"] is True
    assert by_agent["baseline-bot"]["rank"] is None
    assert {row["verification"] for row in table["rows"]} == {"pending"}


def test_a_formula_in_a_description_is_defused_in_the_csv(served: Served) -> None:
    served.world.agent("agent-1")
    served.promoted("agent-1", 0.5, description="=cmd|' /C calc'!A0")

    text = download(served, format="csv").text

    # Unprefixed, a spreadsheet would run the cell; the JSON keeps the author's text.
    assert "'=cmd|" in text and ",=cmd|" not in text
    assert download(served, format="json").json()["rows"][0]["description"].startswith("=cmd")


def test_a_download_has_every_row_whatever_the_limit(served: Served) -> None:
    for n in range(1, 5):
        served.world.agent(f"agent-{n}")
        served.promoted(f"agent-{n}", n / 10)

    rows = download(served, format="json", limit="2").json()["rows"]

    assert [row["rank"] for row in rows] == [1, 2, 3, 4]
    assert len(served.board(limit="2")["rows"]) == 2


@pytest.mark.parametrize(
    ("params", "named"),
    [({"format": "xml"}, "format"), ({"view": "top"}, "view"), ({"cost": "dollars"}, "cost")],
)
def test_an_unknown_format_view_or_cost_axis_is_a_400_with_a_hint(
    served: Served, params: dict[str, str], named: str
) -> None:
    response = served.world.client.get("/v1/leaderboard", params=params)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "INVALID_QUERY" and named in error["message"] and error["hint"]


# -- the Pareto view ----------------------------------------------------------------------


def crafted(served: Served) -> dict[str, str]:
    """agent → its result's filename, on a board whose front is known by construction."""
    board = {
        # agent: (score, tokens, job minutes)
        "agent-a": (0.9, 1000, 10.0),  # front: the best known score
        "agent-b": (0.8, 500, 10.0),  # front: fewer tokens than a
        "agent-c": (0.7, 800, 12.0),  # dominated by b on all three
        "agent-d": (0.6, 100, 1.0),  # front: cheapest
        "agent-g": (0.6, 100, 1.0),  # front: equal to d, neither beats the other
        "agent-f": (0.5, 100, 1.0),  # dominated by d: same cost, lower score
    }
    names: dict[str, str] = {}
    for agent, (score, tokens, minutes) in board.items():
        served.world.agent(agent)
        names[agent] = served.promoted(agent, score)
        served.share_tokens(agent, f"s-{agent}", tokens)
        served.ran(agent, f"job-{agent}", minutes)
    served.world.agent("agent-e")  # the best score, but it shared no trace: unknown cost
    names["agent-e"] = served.promoted("agent-e", 0.95)
    served.ran("agent-e", "job-e", 2.0)
    served.world.agent("agent-h")  # one session without counts: its tokens are unknown
    names["agent-h"] = served.promoted("agent-h", 0.85)
    served.share_tokens("agent-h", "s-h1", 10)
    served.share_tokens("agent-h", "s-h2", None)
    served.world.agent("agent-i")  # few tokens, but its run is still going
    names["agent-i"] = served.promoted("agent-i", 0.4)
    served.share_tokens("agent-i", "s-i", 50)
    served.ran("agent-i", "job-i", None)
    token = organizer_agent(served)
    names["baseline-bot"] = served.promoted("baseline-bot", 0.99, token=token, baseline=True)
    return names


def agents(rows: list[dict[str, Any]]) -> list[str]:
    return [row["agent"] for row in rows]


def test_the_pareto_set_on_a_crafted_board(served: Served) -> None:
    crafted(served)

    body = served.board(view="pareto")

    assert body["view"] == "pareto" and body["cost_axes"] == ["tokens", "job_minutes"]
    assert agents(body["rows"]) == ["agent-a", "agent-b", "agent-d", "agent-g"]
    assert {row["pareto"] for row in body["rows"]} == {"front"}
    assert agents(body["dominated"]) == ["agent-c", "agent-f"]
    assert agents(body["unknown_cost"]) == ["agent-e", "agent-h", "agent-i"]
    costs = {row["agent"]: row["cost"] for row in body["unknown_cost"]}
    assert costs["agent-e"] == {"tokens": None, "job_minutes": 2.0}
    assert costs["agent-h"]["tokens"] is None
    assert costs["agent-i"] == {"tokens": 50, "job_minutes": None}
    assert body["rows"][0]["cost"] == {"tokens": 1000, "job_minutes": 10.0}
    assert agents(body["baselines"]) == ["baseline-bot"]  # shown, never on the front
    assert [row["rank"] for row in body["rows"]] == [2, 4, 6, 7]  # the board's ranks


def test_the_pareto_view_on_tokens_alone_uses_what_is_known_there(served: Served) -> None:
    crafted(served)

    body = served.board(view="pareto", cost="tokens")

    # agent-i's unfinished run no longer matters; its 50 tokens beat d's 100.
    assert agents(body["rows"]) == ["agent-a", "agent-b", "agent-d", "agent-g", "agent-i"]
    assert agents(body["unknown_cost"]) == ["agent-e", "agent-h"]


def test_the_pareto_download_is_the_front(served: Served) -> None:
    crafted(served)

    rows = download(served, view="pareto", format="csv").text.splitlines()[1:]

    assert [line.split(",")[1] for line in rows] == ["agent-a", "agent-b", "agent-d", "agent-g"]


def test_with_jobs_off_every_job_minutes_is_unknown(tmp_path: Path) -> None:
    with serving(tmp_path, JOBS_ENABLED="false") as served:
        served.world.agent("agent-1")
        served.promoted("agent-1", 0.5)
        served.share_tokens("agent-1", "s-1", 10)

        body = served.board(view="pareto")
        tokens_only = served.board(view="pareto", cost="tokens")

    assert body["rows"] == [] and agents(body["unknown_cost"]) == ["agent-1"]
    assert body["unknown_cost"][0]["cost"] == {"tokens": 10, "job_minutes": None}
    assert agents(tokens_only["rows"]) == ["agent-1"]


def row(agent: str, score: float) -> Row:
    return Row(1, agent, score, f"{agent}.md", "", "pending", None, None)


def test_unknown_cost_read_as_zero_would_empty_the_front_the_broken_variant() -> None:
    rows = [row("known", 0.8), row("silent", 0.9)]
    known = pareto.Cost(tokens=1000, job_minutes=5.0)
    honest = {"known": known, "silent": pareto.Cost(None, None)}
    as_zero = {"known": known, "silent": pareto.Cost(0, 0.0)}

    kept = pareto.classify(rows, honest, axes=pareto.AXES, order="desc")
    broken = pareto.classify(rows, as_zero, axes=pareto.AXES, order="desc")

    assert kept == {"known.md": "front", "silent.md": "unknown_cost"}
    # Null read as zero: the agent that reported nothing "beats" the one that did.
    assert broken == {"known.md": "dominated", "silent.md": "front"}


def test_the_front_follows_the_score_order() -> None:
    rows = [row("low", 0.2), row("high", 0.9)]
    same = {"low": pareto.Cost(10, 1.0), "high": pareto.Cost(10, 1.0)}

    desc = pareto.classify(rows, same, axes=pareto.AXES, order="desc")
    asc = pareto.classify(rows, same, axes=pareto.AXES, order="asc")

    assert desc == {"high.md": "front", "low.md": "dominated"}
    assert asc == {"low.md": "front", "high.md": "dominated"}


class CountingStore(LocalBucketStore):
    """The local store, counting reads of run status files."""

    status_reads = 0

    def read(self, bucket: str, path: str) -> bytes | None:
        if path.endswith("job_status.json"):
            self.status_reads += 1
        return super().read(bucket, path)


def test_a_finished_runs_minutes_are_read_once_a_running_one_each_time(tmp_path: Path) -> None:
    with serving(tmp_path, CountingStore) as served:
        store = served.world.hub.store
        assert isinstance(store, CountingStore)
        served.world.agent("agent-1")
        served.promoted("agent-1", 0.5)
        served.ran("agent-1", "job-1", 3.0)
        served.ran("agent-1", "job-2", 4.0)
        served.ran("agent-1", "job-3", None)

        reads = []
        for _ in range(2):
            before = store.status_reads
            running = served.board(view="pareto", cost="job_minutes")["unknown_cost"]
            reads.append(store.status_reads - before)
        served.ran(
            "agent-1", "job-3", 1.5, listed=True
        )  # the run ends: its status now has finished_at
        done = served.board(view="pareto", cost="job_minutes")["rows"]

    assert [row["cost"]["job_minutes"] for row in running] == [None]
    assert reads == [3, 1]  # the second read re-reads only the run still going
    assert [row["cost"]["job_minutes"] for row in done] == [8.5]
