"""`agenthub challenge deploy` against the loopback Hub emulator, through the real
`huggingface_hub` client: the Space is created once, a re-run changes nothing, the token
is never printed, and the deployed Space's start command serves `/v1/healthz`."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from agenthub.challenge.deploy import git_oid
from agenthub.challenge.schema import load
from agenthub.cli import app as cli
from tests.support.hub_emulator import HubEmulator, running_hub
from tests.support.hub_emulator.spaces import git_oid as hub_git_oid
from tests.support.service_process import free_port, running, wait_healthy

TOKEN = "hf_deploy_secret_0123456789"
SPACE = "acme/primes-bucketsync"
CHALLENGE = """
org: acme
slug: primes
admin_org: acme-admin
branding:
  title: Prime hunt
  tagline: Find the primes, together.
scoring:
  field: accuracy
  order: desc
  required_fields: [accuracy, method, status, description]
verification:
  mode: manual
"""
WRITES = (
    "repo_create",
    "space_commit",
    "space_variables_add",
    "space_secrets_add",
    "space_secrets_delete",
    "space_variables_delete",
)


@pytest.fixture
def hub() -> Iterator[HubEmulator]:
    with running_hub() as hub:
        hub.accounts.add_user(TOKEN, "organizer", acme="admin", **{"acme-admin": "admin"})
        yield hub


@pytest.fixture
def challenge_file(tmp_path: Path) -> Path:
    path = tmp_path / "challenge.yaml"
    path.write_text(CHALLENGE)
    return path


def invoke(hub: HubEmulator, *args: str) -> Result:
    env = {"HF_TOKEN": TOKEN, "HF_ENDPOINT": hub.url}
    return CliRunner().invoke(cli, ["challenge", *args], env=env)


def writes(hub: HubEmulator) -> int:
    return sum(hub.count(route) for route in WRITES)


def test_git_oid_is_the_hubs_blob_id() -> None:
    # the comparison that makes a re-run a no-op: git's own blob id of b"hello\n"
    assert git_oid(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"
    assert git_oid(b"x") == hub_git_oid(b"x")


def test_deploy_creates_the_space_once_and_a_rerun_changes_nothing(
    hub: HubEmulator, challenge_file: Path
) -> None:
    first = invoke(hub, "deploy", str(challenge_file))
    assert first.exit_code == 0, first.output

    space = hub.spaces.spaces[SPACE]
    assert space.sdk == "docker"
    assert hub.count("repo_create") == 1
    assert len(space.commits) == 1
    card = space.files["README.md"].decode()
    assert "sdk: docker" in card and "app_port: 7860" in card
    assert space.files["Dockerfile"] == Path("Dockerfile").read_bytes()
    assert space.files["src/agenthub/cli.py"] == Path("src/agenthub/cli.py").read_bytes()
    assert not any("__pycache__" in p for p in space.files)
    expected = {**load(challenge_file).to_env(), "BUCKETSYNC_STORAGE": "hf"}
    assert {k: v["value"] for k, v in space.variables.items()} == expected
    assert space.secrets["HF_TOKEN"]["value"] == TOKEN
    assert "created" in first.output

    before = writes(hub)
    again = invoke(hub, "deploy", str(challenge_file))
    assert again.exit_code == 0, again.output
    assert writes(hub) == before  # no create, commit, variable or secret write
    assert len(space.commits) == 1
    assert "nothing to do: every Space already matches" in again.output
    assert not re.search(r"\b(created|updated|deleted)\b", again.output)

    # the token is sent (as the secret and as the bearer) but never shown
    for result in (first, again):
        assert TOKEN not in result.output
        assert "HF_TOKEN (value not shown)" in result.output


def test_dry_run_plans_and_writes_nothing(hub: HubEmulator, challenge_file: Path) -> None:
    result = invoke(hub, "deploy", str(challenge_file), "--dry-run", "--dashboard")
    assert result.exit_code == 0, result.output
    assert writes(hub) == 0 and hub.spaces.spaces == {}
    assert f"would create  space {SPACE}" in result.output
    assert "would create  space acme/primes-dashboard" in result.output
    assert "would create    variable BUCKETSYNC_STORAGE=hf" in result.output
    assert "dry run: nothing was changed" in result.output
    assert TOKEN not in result.output


def test_a_changed_setting_updates_only_that_variable(
    hub: HubEmulator, challenge_file: Path
) -> None:
    assert invoke(hub, "deploy", str(challenge_file)).exit_code == 0
    challenge_file.write_text(CHALLENGE.replace("Find the primes", "Hunt the primes"))
    hub.reset_counts()

    result = invoke(hub, "deploy", str(challenge_file))

    assert result.exit_code == 0, result.output
    assert hub.count("space_variables_add") == 1
    assert writes(hub) == 1  # no commit: the files are the same
    space = hub.spaces.spaces[SPACE]
    assert space.variables["CHALLENGE_TAGLINE"]["value"] == "Hunt the primes, together."
    assert "updated    variable CHALLENGE_TAGLINE=Hunt the primes, together." in result.output


def test_changed_files_are_committed_and_stray_files_deleted(
    hub: HubEmulator, challenge_file: Path, tmp_path: Path
) -> None:
    assert invoke(hub, "deploy", str(challenge_file)).exit_code == 0
    space = hub.spaces.spaces[SPACE]
    space.files["old.py"] = b"stale"
    space.files["Dockerfile"] = b"FROM scratch\n"

    result = invoke(hub, "deploy", str(challenge_file))

    assert result.exit_code == 0, result.output
    assert len(space.commits) == 2
    assert sorted(space.commits[-1]["paths"]) == ["Dockerfile", "old.py"]
    assert "old.py" not in space.files
    assert space.files["Dockerfile"] == Path("Dockerfile").read_bytes()


def test_an_existing_secret_is_kept_unless_asked(hub: HubEmulator, challenge_file: Path) -> None:
    assert invoke(hub, "deploy", str(challenge_file)).exit_code == 0
    space = hub.spaces.spaces[SPACE]
    space.secrets["HF_TOKEN"]["value"] = "set-by-hand"

    kept = invoke(hub, "deploy", str(challenge_file))
    assert "kept    secret HF_TOKEN (value not shown)" in kept.output
    assert space.secrets["HF_TOKEN"]["value"] == "set-by-hand"

    rotated = invoke(hub, "deploy", str(challenge_file), "--update-secrets")
    assert rotated.exit_code == 0, rotated.output
    assert space.secrets["HF_TOKEN"]["value"] == TOKEN
    assert TOKEN not in rotated.output


def test_without_a_token_it_says_what_to_set(challenge_file: Path) -> None:
    result = CliRunner().invoke(
        cli, ["challenge", "deploy", str(challenge_file)], env={"HF_TOKEN": ""}
    )
    assert result.exit_code != 0
    assert "HF_TOKEN is not set" in result.output


def test_a_refusing_hub_is_a_clear_error_without_the_token(
    hub: HubEmulator, challenge_file: Path
) -> None:
    from tests.support.hub_emulator import Fault

    hub.inject("repo_create", Fault.status(402))
    result = invoke(hub, "deploy", str(challenge_file))
    assert result.exit_code != 0
    assert "the Hub refused" in result.output and "paid plan" in result.output
    assert TOKEN not in result.output


def space_command(dockerfile: bytes) -> list[str]:
    """The exec-form argv of the Dockerfile's last CMD (the one a container runs)."""
    lines = [line for line in dockerfile.decode().splitlines() if line.startswith("CMD ")]
    return list(json.loads(lines[-1][4:]))


def test_the_deployed_space_starts_as_a_space_runs_it_and_serves_healthz(
    hub: HubEmulator, challenge_file: Path, tmp_path: Path
) -> None:
    """The Space's own files, its CMD, `PORT` and its variables and secret as the
    environment: what the Space runtime does after building the image. The image's
    `pip install .` is stood in for by PYTHONPATH at the deployed `src/` (tests/test_image.py
    runs that install)."""
    init = invoke(hub, "init", str(challenge_file), "--target", "hf")
    assert init.exit_code == 0, init.output
    deployed = invoke(hub, "deploy", str(challenge_file), "--dashboard")
    assert deployed.exit_code == 0, deployed.output

    def checkout(space_id: str) -> tuple[Path, dict[str, str], list[str]]:
        space = hub.spaces.spaces[space_id]
        root = tmp_path / space_id.replace("/", "_")
        for path, data in space.files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(data)
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "PYTHONPATH": str(root / "src"),
            **{k: v["value"] for k, v in space.variables.items()},
            **{k: v["value"] for k, v in space.secrets.items()},
            "HF_ENDPOINT": hub.url,  # the test's Hub instead of huggingface.co
            "SPACE_ID": space_id,
        }
        return root, env, space_command(space.files["Dockerfile"])

    root, env, argv = checkout(SPACE)
    assert argv[:2] == ["sh", "-c"] and "bucketsync serve" in argv[2]
    port = free_port()
    log = tmp_path / "space.log"
    with running(argv, {**env, "PORT": str(port)}, cwd=root, log=log) as process:
        health = wait_healthy(f"http://127.0.0.1:{port}/v1/healthz", process, log)
        assert health.json()["status"] == "ok", health.text
        assert "storage hf" in log.read_text()

        # the dashboard Space: the same image with its CMD, pointed at bucket-sync
        dash_root, dash_env, dash_argv = checkout("acme/primes-dashboard")
        assert dash_env["BUCKETSYNC_URL"] == "https://acme-primes-bucketsync.hf.space"
        dash_env["BUCKETSYNC_URL"] = f"http://127.0.0.1:{port}"  # no hf.space on loopback
        dash_port = free_port()
        dash_log = tmp_path / "dashboard.log"
        with running(
            dash_argv, {**dash_env, "PORT": str(dash_port)}, cwd=dash_root, log=dash_log
        ) as dashboard:
            page = wait_healthy(f"http://127.0.0.1:{dash_port}/dashboard/", dashboard, dash_log)
            assert "<html" in page.text.lower()
    assert TOKEN not in log.read_text()
