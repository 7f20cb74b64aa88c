"""StateHubSettings: configuration mistakes are refused at start with a hint, not at first use."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agenthub.statehub.settings import StateHubSettings


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "sqlite:///file:x?mode=memory"])
def test_in_memory_sqlite_is_refused_with_a_hint(url: str) -> None:
    with pytest.raises(ValidationError, match=r"sqlite:///path/to/statehub\.db"):
        StateHubSettings(database_url=url)


def test_an_unsupported_database_scheme_is_refused_with_a_hint() -> None:
    with pytest.raises(ValidationError, match="postgresql://"):
        StateHubSettings(database_url="mysql://root@localhost/statehub")


@pytest.mark.parametrize(
    "url", ["sqlite:///./var/statehub.db", "postgresql://postgres@127.0.0.1:5432/statehub"]
)
def test_file_and_server_urls_are_accepted(url: str) -> None:
    assert StateHubSettings(database_url=url).database_url == url


def test_settings_come_from_statehub_environment_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STATEHUB_DATABASE_URL", "sqlite:///elsewhere.db")
    monkeypatch.setenv("STATEHUB_NEWS_TTL_DAYS", "7")

    settings = StateHubSettings()

    assert settings.database_url == "sqlite:///elsewhere.db"
    assert settings.news_ttl_days == 7
    assert settings.instance_label is None
