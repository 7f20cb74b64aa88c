"""The pilot's step 3: compare a running hub-core with the frozen source rows.

The oracle is the bundle itself — the same rows State Hub held at capture —
filtered by State Hub's own inbox rules (direct and broadcast, archived and
expired out, broadcast read state from the reader's receipt, newest first).
A later live State Hub read would be a freshness observation, not this oracle.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from agenthub.hubcore.api.projections import MODE_HEADER, PATH
from agenthub.hubcore.bundle_import import READ_MODE
from agenthub.hubcore.canonical import MESSAGE_FIELDS, Row, canonical_timestamp, normalize_message
from agenthub.hubcore.projection import MAX_LIMIT

BROADCAST = "*"
WRITE_METHODS = ("POST", "PATCH", "DELETE")


@dataclass(frozen=True)
class CheckResult:
    """`passed` is None when the snapshot holds nothing that could prove the check."""

    name: str
    passed: bool | None
    detail: str


@dataclass(frozen=True)
class InboxCase:
    name: str
    from_agent: str | None = None
    unread_only: bool = False
    limit: int | None = None


def expected_inbox(
    bundle: Mapping[str, Any],
    *,
    agent: str,
    now: datetime,
    from_agent: str | None = None,
    unread_only: bool = False,
    limit: int = 50,
) -> list[Row]:
    """What State Hub's `GET /messages/?to_agent=agent…` returned over the captured rows."""
    stamp = canonical_timestamp(now, "now")
    read_broadcasts = {
        r["message_id"]
        for r in bundle["receipts"]
        if r["agent"] == agent and r["read_at"] is not None
    }

    def visible(m: Row) -> bool:
        if m["to_agent"] not in (agent, BROADCAST) or m["archived_at"] is not None:
            return False
        if m["expires_at"] is not None and m["expires_at"] <= stamp:
            return False
        if from_agent is not None and m["from_agent"] != from_agent:
            return False
        if unread_only:
            if m["to_agent"] == BROADCAST:
                return m["id"] not in read_broadcasts
            return m["read_at"] is None
        return True

    rows = [m for m in bundle["messages"] if visible(m)]
    # Canonical timestamps and UUIDs sort as text exactly as the databases sort them.
    rows.sort(key=lambda m: (m["created_at"], m["id"]), reverse=True)
    return [{k: m[k] for k in MESSAGE_FIELDS} for m in rows[:limit]]


def inbox_cases(bundle: Mapping[str, Any], agent: str) -> list[InboxCase]:
    senders = Counter(
        m["from_agent"] for m in bundle["messages"] if m["to_agent"] in (agent, BROADCAST)
    )
    cases = [
        InboxCase("all"),
        InboxCase("all, limit 1000", limit=MAX_LIMIT),
        InboxCase("unread", unread_only=True),
        InboxCase("unread, limit 1000", unread_only=True, limit=MAX_LIMIT),
        InboxCase("limit 1", limit=1),
        InboxCase("limit 2", limit=2),
    ]
    for sender, _n in senders.most_common(3):
        cases.append(InboxCase(f"sender {sender}", from_agent=sender))
        cases.append(InboxCase(f"sender {sender}, unread", from_agent=sender, unread_only=True))
    return cases


def _canonical_response(rows: Any) -> list[Row]:
    return [
        {k: v for k, v in normalize_message({**row, "revision": 0}).items() if k != "revision"}
        for row in rows
    ]


def _first_difference(got: list[Row], want: list[Row]) -> str:
    if len(got) != len(want):
        return f"{len(got)} rows, expected {len(want)}"
    for position, (g, w) in enumerate(zip(got, want, strict=True)):
        if g != w:
            fields = sorted(k for k in w if g.get(k) != w[k])
            return f"row {position} ({w['id']}) differs in {', '.join(fields)}"
    return "identical"


class PilotCheck:
    """Runs every step-3 check against `base_url`; never writes anything."""

    def __init__(
        self,
        client: httpx.Client,
        bundle: Mapping[str, Any],
        *,
        agent: str,
        token: str,
        now: Callable[[], datetime],
        receiver_hashes: Callable[[], dict[str, str]] | None = None,
    ) -> None:
        self.client = client
        self.bundle = bundle
        self.agent = agent
        self.token = token
        self.now = now
        self.receiver_hashes = receiver_hashes

    def _get(self, params: dict[str, Any], token: str | None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        return self.client.get(PATH, params=params, headers=headers)

    def _inbox(self, case: InboxCase) -> tuple[CheckResult, list[Row]]:
        params: dict[str, Any] = {"to_agent": self.agent}
        if case.from_agent is not None:
            params["from_agent"] = case.from_agent
        if case.unread_only:
            params["unread_only"] = "true"
        if case.limit is not None:
            params["limit"] = case.limit
        response = self._get(params, self.token)
        want = expected_inbox(
            self.bundle,
            agent=self.agent,
            now=self.now(),
            from_agent=case.from_agent,
            unread_only=case.unread_only,
            limit=case.limit or 50,
        )
        if response.status_code != 200:
            return CheckResult(case.name, False, f"HTTP {response.status_code}"), []
        got = _canonical_response(response.json())
        headers_ok = (
            response.headers.get("cache-control") == "no-store"
            and response.headers.get(MODE_HEADER.lower()) == READ_MODE
        )
        verdict = _first_difference(got, want)
        passed = verdict == "identical" and headers_ok
        detail = f"{len(got)} rows {verdict}" + ("" if headers_ok else "; headers wrong")
        return CheckResult(case.name, passed, detail), got

    def run(self) -> list[CheckResult]:
        before = self.receiver_hashes() if self.receiver_hashes else None
        results: list[CheckResult] = []
        seen: list[Row] = []
        for case in inbox_cases(self.bundle, self.agent):
            result, rows = self._inbox(case)
            results.append(result)
            seen.extend(rows)
        results.append(self._broadcasts(seen))
        results.append(self._archive(seen))
        results.extend(self._auth())
        results.extend(self._writes(before))
        return results

    def _broadcasts(self, seen: list[Row]) -> CheckResult:
        live = expected_inbox(self.bundle, agent=self.agent, now=self.now(), limit=MAX_LIMIT)
        want = {m["id"] for m in live if m["to_agent"] == BROADCAST}
        got = {m["id"] for m in seen if m["to_agent"] == BROADCAST}
        missing = want - got
        return CheckResult(
            "broadcast inclusion",
            not missing if want else None,
            f"{len(want)} live broadcasts, {len(missing)} missing"
            + ("" if want else " (the snapshot has none to prove inclusion)"),
        )

    def _archive(self, seen: list[Row]) -> CheckResult:
        archived = {
            m["id"]
            for m in self.bundle["messages"]
            if m["archived_at"] is not None and m["to_agent"] in (self.agent, BROADCAST)
        }
        leaked = archived & {m["id"] for m in seen}
        return CheckResult(
            "archive exclusion",
            not leaked if archived else None,
            f"{len(archived)} archived in this inbox, {len(leaked)} served"
            + ("" if archived else " (the snapshot has none to prove exclusion)"),
        )

    def _auth(self) -> list[CheckResult]:
        params = {"to_agent": self.agent}
        missing = self._get(params, None).status_code
        wrong = self._get(params, self.token + "-wrong").status_code
        return [
            CheckResult("unauthenticated rejected", missing == 401, f"HTTP {missing}"),
            CheckResult("wrong token rejected", wrong == 401, f"HTTP {wrong}"),
        ]

    def _writes(self, before: dict[str, str] | None) -> list[CheckResult]:
        headers = {"Authorization": f"Bearer {self.token}"}
        statuses = {
            method: self.client.request(
                method, PATH, params={"to_agent": self.agent}, headers=headers
            ).status_code
            for method in WRITE_METHODS
        }
        results = [
            CheckResult(
                "writes refused",
                all(s == 405 for s in statuses.values()),
                ", ".join(f"{m} {s}" for m, s in statuses.items()),
            )
        ]
        if before is not None and self.receiver_hashes is not None:
            after = self.receiver_hashes()
            expected = {
                "content_hash": self.bundle["content_hash"],
                "receipts_hash": self.bundle["receipts_hash"],
                "tombstones_hash": self.bundle["tombstones_hash"],
            }
            results.append(
                CheckResult(
                    "no writes (receiver hashes unchanged, equal to the bundle)",
                    before == after == expected,
                    f"content {after['content_hash'][:16]}…",
                )
            )
        return results
