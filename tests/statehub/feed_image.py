"""A minimal feed consumer for tests: applies snapshots and pages to an in-memory image."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agenthub.statehub.rows import content_hash


@dataclass
class Image:
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    receipts: dict[str, dict[str, Any]] = field(default_factory=dict)
    tombstones: dict[str, dict[str, Any]] = field(default_factory=dict)
    cursor: str = "v1:0"

    @classmethod
    def from_snapshot(cls, snapshot: dict[str, Any]) -> Image:
        image = cls(cursor=snapshot["cursor"])
        image.messages = {m["id"]: m for m in snapshot["messages"]}
        image.receipts = {f"{r['message_id']}:{r['agent']}": r for r in snapshot["receipts"]}
        image.tombstones = {t["message_id"]: t for t in snapshot["tombstones"]}
        return image

    def apply(self, page: dict[str, Any]) -> None:
        for change in page["changes"]:
            entity, op, key, state = change["entity"], change["op"], change["key"], change["state"]
            if entity == "message":
                self.messages[key] = state
            elif entity == "receipt" and op == "upsert":
                self.receipts[key] = state
            elif entity == "receipt" and op == "delete":
                self.receipts.pop(key, None)
            elif entity == "tombstone":
                self.messages.pop(key, None)
                self.receipts = {k: r for k, r in self.receipts.items() if r["message_id"] != key}
                self.tombstones[key] = state
            else:  # pragma: no cover - a change the contract does not define
                raise AssertionError(f"unknown change {change}")
        self.cursor = page["next_cursor"]

    def content_hash(self) -> str:
        return content_hash(
            list(self.messages.values()),
            list(self.receipts.values()),
            list(self.tombstones.values()),
        )


def same_rows(image: Image, snapshot: dict[str, Any]) -> bool:
    other = Image.from_snapshot(snapshot)
    return (image.messages, image.receipts, image.tombstones) == (
        other.messages,
        other.receipts,
        other.tombstones,
    )
