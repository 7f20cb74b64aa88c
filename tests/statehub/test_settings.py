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


def test_pool_limits_and_the_listen_url_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STATEHUB_POOL_SIZE", "4")
    monkeypatch.setenv("STATEHUB_POOL_MAX_OVERFLOW", "0")
    monkeypatch.setenv("STATEHUB_LISTEN_URL", "postgresql://postgres@db:5432/statehub")

    settings = StateHubSettings()

    assert (settings.pool_size, settings.pool_max_overflow) == (4, 0)
    assert settings.listen_url == "postgresql://postgres@db:5432/statehub"


def test_a_listen_url_that_is_not_postgresql_is_refused_with_a_hint() -> None:
    with pytest.raises(ValidationError, match="direct PostgreSQL connection"):
        StateHubSettings(listen_url="sqlite:///./var/statehub.db")


@pytest.mark.parametrize("variable", ["STATEHUB_POOL_SIZE", "STATEHUB_POOL_MAX_OVERFLOW"])
def test_a_negative_pool_limit_is_refused(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.setenv(variable, "-1")
    with pytest.raises(ValidationError, match=variable.removeprefix("STATEHUB_").lower()):
        StateHubSettings()
