"""State Hub configuration, read from `STATEHUB_*` environment variables at the entry point."""

from __future__ import annotations

from typing import Literal

from pydantic_settings import BaseSettings, SettingsConfigDict

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
    # Migrate an empty or older database to head when the server starts.
    auto_migrate: bool = True
