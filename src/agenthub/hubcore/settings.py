"""hub-core configuration, read from the environment at the entry point.

The pilot's variables keep their seed names (`HUB_CORE_*`); the database URL
follows the service's own prefix (`HUBCORE_DATABASE_URL`).
"""

from __future__ import annotations

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy import Engine

from agenthub.db import make_engine

DEFAULT_DATABASE_URL = "sqlite:///./var/hubcore.db"


class HubCoreSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    database_url: str = Field(
        DEFAULT_DATABASE_URL, validation_alias=AliasChoices("HUBCORE_DATABASE_URL", "database_url")
    )
    inbox_reads: bool = Field(
        False,
        validation_alias=AliasChoices("HUB_CORE_STATEHUB_INBOX_READS", "inbox_reads"),
    )
    operator_token: SecretStr | None = Field(
        None, validation_alias=AliasChoices("HUB_CORE_OPERATOR_TOKEN", "operator_token")
    )
    inbox_agent: str | None = Field(
        None, validation_alias=AliasChoices("HUB_CORE_STATEHUB_INBOX_AGENT", "inbox_agent")
    )
    # Follow this State Hub's change feed (inside `serve`, or with `agenthub hubcore follow`).
    statehub_url: str | None = Field(
        None, validation_alias=AliasChoices("HUBCORE_STATEHUB_URL", "statehub_url")
    )
    # Beyond this lag (hub-core clock - last applied source_time) reads say `stale`.
    max_lag_s: float = Field(
        30.0, gt=0, validation_alias=AliasChoices("HUBCORE_MAX_LAG_S", "max_lag_s")
    )
    # Long-poll seconds per feed request (State Hub clamps to 55); below max_lag_s so
    # an idle source's heartbeat keeps the copy `live`.
    follow_wait_s: float = Field(
        20.0, ge=0, le=55, validation_alias=AliasChoices("HUBCORE_FOLLOW_WAIT_S", "follow_wait_s")
    )
    follow_limit: int = Field(
        1000, ge=1, le=5000, validation_alias=AliasChoices("HUBCORE_FOLLOW_LIMIT", "follow_limit")
    )
    snapshot_page_size: int = Field(
        2000,
        ge=1,
        le=10_000,
        validation_alias=AliasChoices("HUBCORE_SNAPSHOT_PAGE_SIZE", "snapshot_page_size"),
    )
    # Connections kept open, and opened beyond them under load: a process holds at most
    # pool_size + pool_max_overflow (a follower's lock keeps one of them while it follows).
    pool_size: int = Field(5, ge=1, validation_alias=AliasChoices("HUBCORE_POOL_SIZE", "pool_size"))
    pool_max_overflow: int = Field(
        10, ge=0, validation_alias=AliasChoices("HUBCORE_POOL_MAX_OVERFLOW", "pool_max_overflow")
    )
    # Migrate an empty or older database to head when the server starts.
    auto_migrate: bool = Field(
        True, validation_alias=AliasChoices("HUBCORE_AUTO_MIGRATE", "auto_migrate")
    )

    def engine(self) -> Engine:
        """The engine of `database_url` with this process's pool limits."""
        return make_engine(
            self.database_url, pool_size=self.pool_size, max_overflow=self.pool_max_overflow
        )
