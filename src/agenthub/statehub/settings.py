"""State Hub configuration, read from `STATEHUB_*` environment variables at the entry point."""

from __future__ import annotations

from typing import Literal

from pydantic import field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from agenthub.db import normalize_url

DEFAULT_DATABASE_URL = "sqlite:///./var/statehub.db"


class StateHubSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="STATEHUB_", extra="ignore")

    database_url: str = DEFAULT_DATABASE_URL
    # None: use the label generated once and stored in the database.
    instance_label: str | None = None
    news_ttl_days: int = 30
    revision_mode: Literal["lock", "xid"] = "lock"
    # Long-poll wake by watermark poll (SQLite, PostgreSQL xid mode): seconds between probes.
    wake_poll_interval_s: float = 0.025
    # Build the next feed page while a catching-up reader takes this one (`readahead`).
    feed_read_ahead: bool = True
    # Migrate an empty or older database to head when the server starts.
    auto_migrate: bool = True

    @field_validator("database_url")
    @classmethod
    def _persistent_database(cls, value: str) -> str:
        url = normalize_url(value)  # a ValueError names the schemes we support
        database = url.database or ""
        in_memory = database in ("", ":memory:") or url.query.get("mode") == "memory"
        if url.get_backend_name() == "sqlite" and in_memory:
            # Engines open a connection per unit of work, and each in-memory
            # connection is its own empty database: the schema would vanish.
            raise ValueError(
                "in-memory SQLite cannot hold State Hub's data; "
                "use a file such as sqlite:///path/to/statehub.db"
            )
        return value
