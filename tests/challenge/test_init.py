"""`agenthub challenge init`: challenge.yaml → environment, buckets, README and clients."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.settings import load_settings
from agenthub.bucketsync.storage.hf import HfBucketStore
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.challenge import bootstrap
from agenthub.challenge.readme import agent_readme
from agenthub.challenge.schema import ChallengeError, load
from agenthub.cli import app as cli
from tests.support.hub_emulator import running_hub

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
limits:
  listing_ttl_s: 5
"""


@pytest.fixture
def challenge_file(tmp_path: Path) -> Path:
    path = tmp_path / "challenge.yaml"
    path.write_text(CHALLENGE)
    return path


def run_init(challenge_file: Path, tmp_path: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        cli,
        ["challenge", "init", str(challenge_file), "--data-dir", str(tmp_path / "data"),
         "--env-out", str(tmp_path / "challenge.env"), "--service-url", "http://hub.test", *extra],
    )  # fmt: skip
    return result.exit_code, result.output


def read_env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_bs_10_15_init_writes_env_creates_buckets_and_publishes_readme_and_clients(
    challenge_file: Path, tmp_path: Path
) -> None:
    code, out = run_init(challenge_file, tmp_path)

    assert code == 0, out
    env = read_env(tmp_path / "challenge.env")
    assert env["ORG"] == "acme" and env["COLLAB_SLUG"] == "primes"
    assert env["CENTRAL_BUCKET"] == "acme/primes-main-bucket"
    assert env["AUDIT_BUCKET"] == "acme-admin/primes-audit"
    assert env["SCORE_FIELD"] == "accuracy" and env["LISTING_TTL_S"] == "5"
    store = LocalBucketStore(tmp_path / "data")
    central = store.info("acme/primes-main-bucket")
    assert central is not None and central.creator == "bucket-sync"
    audit = store.info("acme-admin/primes-audit")
    assert audit is not None and audit.private
    readme = (store.read("acme/primes-main-bucket", "README.md") or b"").decode()
    assert "# Prime hunt" in readme and "http://hub.test/v1/agents/register" in readme
    assert "## Staying responsive" in readme
    # BS-10.15: the README tells agents to copy share_trace.py down from the central bucket
    assert (
        "agenthub buckets cp hf://buckets/acme/primes-main-bucket/clients/share_trace.py ."
        in readme
    )
    assert (
        store.read("acme/primes-main-bucket", "clients/share_trace.py")
        == (bootstrap.CLIENTS_DIR / "share_trace.py").read_bytes()
    )


def test_rerun_changes_nothing_and_says_so(challenge_file: Path, tmp_path: Path) -> None:
    run_init(challenge_file, tmp_path)
    before = sorted((tmp_path / "data").rglob("*"))

    code, out = run_init(challenge_file, tmp_path)

    assert code == 0
    assert "nothing to do" in out
    assert "created" not in out
    assert sorted((tmp_path / "data").rglob("*")) == before


def test_an_edited_generated_file_is_kept_unless_forced(
    challenge_file: Path, tmp_path: Path
) -> None:
    run_init(challenge_file, tmp_path)
    store = LocalBucketStore(tmp_path / "data")
    from agenthub.bucketsync.storage.base import Batch

    store.write_batch("acme/primes-main-bucket", Batch(adds=[("README.md", b"organizer edits")]))

    _code, kept = run_init(challenge_file, tmp_path)
    _code, forced = run_init(challenge_file, tmp_path, "--force")

    assert "kept" in kept
    assert store.read("acme/primes-main-bucket", "README.md") != b"organizer edits"
    assert "updated" in forced


def test_dry_run_writes_nothing(challenge_file: Path, tmp_path: Path) -> None:
    code, out = run_init(challenge_file, tmp_path, "--dry-run")

    assert code == 0
    assert "would create" in out and "dry run" in out
    assert not (tmp_path / "challenge.env").exists()
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").rglob("*.md"))


def test_a_broken_challenge_gets_one_clear_error_per_problem(tmp_path: Path) -> None:
    path = tmp_path / "challenge.yaml"
    path.write_text(
        textwrap.dedent(
            """
            org: acme
            slug: Primes_2026
            scorng: {field: accuracy}
            scoring: {order: up}
            verification: {mode: jobs}
            """
        )
    )

    with pytest.raises(ChallengeError) as caught:
        load(path)

    problems = caught.value.problems
    assert any(p.startswith("slug:") for p in problems)
    assert any("scorng: unknown field (did you mean 'scoring'?)" in p for p in problems)
    assert any(p.startswith("scoring.order:") for p in problems)
    assert any(p.startswith("branding: required") for p in problems)
    code, out = run_init(path, tmp_path)
    assert code == 2 and "problem(s)" in out


def test_jobs_verification_needs_a_harness(tmp_path: Path) -> None:
    path = tmp_path / "challenge.yaml"
    data = yaml.safe_load(CHALLENGE)
    data["verification"] = {"mode": "jobs"}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ChallengeError, match=r"jobs\.harness_dir"):
        load(path)


def test_missing_harness_directory_is_named(tmp_path: Path) -> None:
    path = tmp_path / "challenge.yaml"
    data = yaml.safe_load(CHALLENGE)
    data["jobs"] = {"harness_dir": "no-such-dir"}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(
        ChallengeError, match=r"jobs\.harness_dir: .*no-such-dir is not a directory"
    ):
        load(path)


def test_the_initialised_challenge_runs_the_loop(challenge_file: Path, tmp_path: Path) -> None:
    """init → bucket-sync on that environment → register → post → result → leaderboard."""
    run_init(challenge_file, tmp_path)
    env = read_env(tmp_path / "challenge.env")
    settings = load_settings(
        **env, BUCKETSYNC_DATA_DIR=str(tmp_path / "data"), BUCKETSYNC_STORAGE="local"
    )
    identity = LocalIdentity(settings.data_dir / "users.json", org="acme")
    token = identity.add_user("alice", role="contributor")
    auth = {"Authorization": f"Bearer {token}"}
    bucket = "acme/primes-solver"
    with TestClient(create_app(settings, identity=identity)) as client:
        assert client.post(f"/local/buckets/{bucket}", headers=auth).status_code == 201
        client.put(
            f"/local/buckets/{bucket}/files/.bucket-sync-handshake", content=b"alice", headers=auth
        )
        registered = client.post(
            "/v1/agents/register",
            json={"agent_id": "solver", "model": "m", "harness": "h"},
            headers=auth,
        )
        assert registered.status_code == 201, registered.text
        client.put(f"/local/buckets/{bucket}/files/n.md", content=b"hello @solver", headers=auth)
        posted = client.post("/v1/messages", json={"source": f"hf://buckets/{bucket}/n.md"})
        assert posted.status_code == 201, posted.text
        result = b"---\naccuracy: 0.9\nmethod: sieve\nstatus: agent-run\ndescription: d\n---\n"
        client.put(f"/local/buckets/{bucket}/files/r.md", content=result, headers=auth)
        promoted = client.post("/v1/results", json={"source": f"hf://buckets/{bucket}/r.md"})
        assert promoted.status_code == 201, promoted.text
        board = client.get("/v1/leaderboard").json()
    assert board["score_field"] == "accuracy"
    assert [row["agent"] for row in board["rows"]] == ["solver"]


def test_hf_target_creates_and_publishes_through_huggingface_hub(
    challenge_file: Path, tmp_path: Path
) -> None:
    the_plan = bootstrap.plan(
        load(challenge_file), service_url="https://acme-primes.hf.space", target="hf"
    )
    with running_hub() as hub:
        store = HfBucketStore(token="admin-token", endpoint=hub.url)
        first = bootstrap.apply(the_plan, store, env_file=tmp_path / "hf.env")
        again = bootstrap.apply(the_plan, store, env_file=tmp_path / "hf.env")

        assert set(hub.buckets.buckets) == {"acme/primes-main-bucket", "acme-admin/primes-audit"}
        assert hub.buckets.buckets["acme-admin/primes-audit"].private is True
        assert "README.md" in hub.files("acme/primes-main-bucket")
        assert "clients/share_trace.py" in hub.files("acme/primes-main-bucket")
    assert first.changed and not again.changed


def test_bs_13_39_readme_staying_responsive_quotes_the_watcher_recipes(
    challenge_file: Path, tmp_path: Path
) -> None:
    run_init(challenge_file, tmp_path)
    readme = (
        LocalBucketStore(tmp_path / "data").read("acme/primes-main-bucket", "README.md") or b""
    ).decode()
    section = readme.split("## Staying responsive", 1)[1].split("\n## ", 1)[0]

    # the one-line bootstrap, then both harness recipes: single-shot re-armed, or --exec
    copy = "agenthub buckets cp hf://buckets/acme/primes-main-bucket/clients/collab_watch.sh ."
    assert copy in section
    assert "sh collab_watch.sh http://hub.test $AGENT" in section
    assert "sh collab_watch.sh --exec './handle.sh' http://hub.test $AGENT" in section
    assert "re-arm" in section and "foreground" in section


def test_the_readme_tells_agents_how_verification_and_mcp_work(tmp_path: Path) -> None:
    path = tmp_path / "challenge.yaml"
    path.write_text(CHALLENGE.replace("mode: manual", "mode: eval-space"))
    run_init(path, tmp_path)

    readme = (
        LocalBucketStore(tmp_path / "data").read("acme/primes-main-bucket", "README.md") or b""
    ).decode()

    assert "Verification: `eval-space`" in readme and "artifacts: submission/" in readme
    assert (
        "BUCKETSYNC_URL=http://hub.test BUCKETSYNC_TOKEN=$BUCKETSYNC_TOKEN AGENT_ID=$AGENT "
        "SCRATCH_BUCKET=acme/primes-$AGENT agenthub bucketsync mcp" in readme
    )


def test_readme_points_to_the_harness_setup_and_llms_txt(challenge_file: Path) -> None:
    for target in ("local", "hf"):
        readme = agent_readme(
            load(challenge_file), service_url="http://hub.test", clients=[], target=target
        )
        assert "'http://hub.test/v1/setup?harness=claude-code&agent_id='$AGENT" in readme
        assert "http://hub.test/llms.txt" in readme


def test_readme_names_the_cli_and_token_of_its_target(challenge_file: Path) -> None:
    challenge = load(challenge_file)
    url = "http://hub.test"
    clients = bootstrap.published_clients()
    local = agent_readme(challenge, service_url=url, clients=clients, target="local")
    hf = agent_readme(challenge, service_url=url, clients=clients, target="hf")

    assert "agenthub buckets create acme/primes-$AGENT" in local
    assert "Bearer $BUCKETSYNC_TOKEN" in local and "export BUCKETSYNC_URL=http://hub.test" in local
    assert "hf " not in local.replace("hf://", "") and "HF_TOKEN" not in local
    assert "hf buckets create acme/primes-$AGENT" in hf and "Bearer $HF_TOKEN" in hf
    assert "agenthub buckets " not in hf and "BUCKETSYNC_TOKEN" not in hf
