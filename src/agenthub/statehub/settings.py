"""State Hub configuration, read from `STATEHUB_*` environment variables at the entry point."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from agenthub.db import normalize_url

DEFAULT_DATABASE_URL = "sqlite:///./var/statehub.db"


class StateHubSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="STATEHUB_", extra="ignore")

    database_url: str = DEFAULT_DATABASE_URL
    # PostgreSQL `lock` mode LISTENs for commits on one connection of its own. Behind a
    # transaction pooler (pgbouncer) name a direct connection here; unset, the database
    # URL is used, and if notifications do not arrive through it the wake polls.
    listen_url: str | None = None
    # Connections kept open, and opened beyond them under load (closed when returned:
    # with SQLAlchemy's 5 kept, 8 concurrent senders spent a sixth of a send connecting).
    # A process holds at most pool_size + pool_max_overflow (+1 to LISTEN): the budget.
    pool_size: int = Field(16, ge=1)
    pool_max_overflow: int = Field(10, ge=0)
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

    @field_validator("listen_url")
    @classmethod
    def _postgres_listen_url(cls, value: str | None) -> str | None:
        if value is not None and normalize_url(value).get_backend_name() != "postgresql":
            raise ValueError(
                "the LISTEN URL is a direct PostgreSQL connection: "
                "postgresql://user@host:5432/dbname (not through pgbouncer)"
            )
        return value

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
