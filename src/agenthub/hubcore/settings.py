"""hub-core configuration, read from the environment at the entry point.

The pilot's variables keep their seed names (`HUB_CORE_*`); the database URL
follows the service's own prefix (`HUBCORE_DATABASE_URL`).
"""

from __future__ import annotations

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

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
    # Migrate an empty or older database to head when the server starts.
    auto_migrate: bool = Field(
        True, validation_alias=AliasChoices("HUBCORE_AUTO_MIGRATE", "auto_migrate")
    )
