"""Configuration from the environment (BS-0.2, 1.1-1.3, 9.1) and the organizer CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from agenthub.bucketsync.errors import Unauthorized
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.settings import SettingsError, load_settings
from agenthub.cli import app

ENV = {"ORG": "acme", "COLLAB_SLUG": "chal", "AUDIT_BUCKET": "acme-admin/chal-audit"}


def test_bs_1_1_missing_required_settings_fail_naming_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("ORG", "COLLAB_SLUG", "AUDIT_BUCKET", "CENTRAL_BUCKET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLLAB_SLUG", "chal")
    with pytest.raises(SettingsError) as exc:
        load_settings()
    assert "AUDIT_BUCKET" in str(exc.value) and "ORG" in str(exc.value)
    assert "COLLAB_SLUG" not in str(exc.value)


def test_bs_0_2_bs_1_3_identity_comes_from_env_and_central_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("CENTRAL_BUCKET", raising=False)
    monkeypatch.setenv("LISTING_TTL_S", "5")
    settings = load_settings()
    assert settings.central_bucket == "acme/chal-main-bucket"
    assert settings.listing_ttl_s == 5
    assert settings.storage == "local"
    monkeypatch.setenv("CENTRAL_BUCKET", "acme/custom")
    assert load_settings().central_bucket == "acme/custom"


def test_bs_1_2_bs_9_1_hf_token_is_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    assert load_settings().hf_token is None  # huggingface_hub then uses the cached login
    monkeypatch.setenv("HF_TOKEN", "hf_rotated")
    token = load_settings().hf_token
    assert token is not None and token.get_secret_value() == "hf_rotated"


def test_invalid_bucket_ids_are_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AUDIT_BUCKET", "no-slash")
    with pytest.raises(SettingsError, match="AUDIT_BUCKET"):
        load_settings()


def test_serve_without_settings_exits_with_the_missing_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("ORG", "COLLAB_SLUG", "AUDIT_BUCKET"):
        monkeypatch.delenv(name, raising=False)
    result = CliRunner().invoke(app, ["bucketsync", "serve", "--port", "0"])
    assert result.exit_code == 2
    assert "ORG" in result.output and "AUDIT_BUCKET" in result.output


def test_users_add_prints_only_the_token(tmp_path: Path) -> None:
    # Only BUCKETSYNC_DATA_DIR is needed: the organizer may add users before configuring.
    env = {
        "ORG": None,
        "COLLAB_SLUG": None,
        "AUDIT_BUCKET": None,
        "BUCKETSYNC_DATA_DIR": str(tmp_path),
    }
    result = CliRunner().invoke(
        app,
        ["bucketsync", "users", "add", "alice", "--role", "admin", "--email", "a@x.io"],
        env=env,
    )
    assert result.exit_code == 0, result.output
    token = result.stdout.strip()
    assert "\n" not in token and token.startswith("bst_")
    caller = LocalIdentity(tmp_path / "users.json", org="acme").whoami(token)
    assert caller.user == "alice" and caller.orgs == {"acme": "admin"}
    assert token not in (tmp_path / "users.json").read_text()


def test_users_add_rejects_unknown_roles(tmp_path: Path) -> None:
    env = {**ENV, "BUCKETSYNC_DATA_DIR": str(tmp_path)}
    result = CliRunner().invoke(app, ["bucketsync", "users", "add", "x", "--role", "king"], env=env)
    assert result.exit_code == 2
    assert "role" in result.output


def test_users_add_refuses_an_existing_name_unless_rotate(tmp_path: Path) -> None:
    env = {**ENV, "BUCKETSYNC_DATA_DIR": str(tmp_path)}
    add = ["bucketsync", "users", "add", "alice", "--role", "contributor"]
    first = CliRunner().invoke(app, add, env=env)
    assert first.exit_code == 0, first.output
    old = first.stdout.strip()
    identity = LocalIdentity(tmp_path / "users.json", org="acme")

    again = CliRunner().invoke(app, add, env=env)

    assert again.exit_code == 2
    lines = again.output.strip().splitlines()
    assert lines[0] == "error: user 'alice' already exists [CONFLICT]"
    assert lines[1].startswith("hint: pass --rotate") and len(lines) == 2
    assert identity.whoami(old).user == "alice"  # the token `up` printed still works

    rotated = CliRunner().invoke(app, [*add, "--rotate"], env=env)

    assert rotated.exit_code == 0, rotated.output
    assert "old token is revoked" in rotated.stderr
    new = rotated.stdout.strip()
    assert identity.whoami(new).user == "alice"
    with pytest.raises(Unauthorized):
        identity.whoami(old)
