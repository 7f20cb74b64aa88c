"""The pieces `agenthub up` and the MCP server rely on that the end-to-end tests do not
reach: bucket-sync tokens kept across restarts, and the `hf` CLI scratch writer."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from agenthub.bucketsync.agentside.session import (
    HfCliScratchWriter,
    McpConfig,
    McpConfigError,
    ToolFailure,
)
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.up import bucketsync_tokens


def test_bucketsync_tokens_are_kept_across_restarts_and_rekeyed_when_lost(tmp_path: Path) -> None:
    users = tmp_path / "bucketsync" / "users.json"
    first = bucketsync_tokens(tmp_path, LocalIdentity(users, org="local"))
    again = bucketsync_tokens(tmp_path, LocalIdentity(users, org="local"))

    assert first == again and set(first) == {"organizer", "alice"}
    identity = LocalIdentity(users, org="local")
    assert identity.whoami(first["alice"]).user == "alice"
    assert stat.S_IMODE((tmp_path / "bucketsync-tokens.json").stat().st_mode) == 0o600

    users.unlink()  # the user file was wiped: the kept tokens no longer work
    fresh = bucketsync_tokens(tmp_path, LocalIdentity(users, org="local"))

    assert fresh["alice"] != first["alice"]
    assert LocalIdentity(users, org="local").whoami(fresh["alice"]).user == "alice"


FAKE_HF = """#!{python}
import shutil, sys
from pathlib import Path
args = sys.argv[1:]
if args[:2] != ["buckets", "cp"] or not args[3].startswith("hf://buckets/"):
    sys.exit("usage: hf buckets cp SRC DST")
if "forbidden" in args[3]:
    sys.exit("403 Forbidden: you cannot write to this bucket")
target = Path({root!r}) / args[3][len("hf://buckets/"):]
target.parent.mkdir(parents=True, exist_ok=True)
shutil.copy(args[2], target)
"""


def test_the_hf_cli_writer_copies_into_the_bucket_and_explains_a_refusal(tmp_path: Path) -> None:
    fake = tmp_path / "hf"
    fake.write_text(FAKE_HF.format(python=sys.executable, root=str(tmp_path / "hub")))
    fake.chmod(0o755)
    writer = HfCliScratchWriter(str(fake))

    writer.write("acme/chal-agent-1", "notes/n.md", b"hello")

    assert (tmp_path / "hub" / "acme/chal-agent-1/notes/n.md").read_bytes() == b"hello"
    with pytest.raises(ToolFailure, match=r"403 Forbidden.*hf auth login"):
        writer.write("acme/forbidden", "n.md", b"x")


def test_mcp_config_names_every_missing_variable() -> None:
    with pytest.raises(McpConfigError) as caught:
        McpConfig.from_env({"AGENT_ID": "agent-1"})
    assert "BUCKETSYNC_URL" in str(caught.value) and "SCRATCH_BUCKET" in str(caught.value)
    config = McpConfig.from_env(
        {"BUCKETSYNC_URL": "http://h:1/", "AGENT_ID": "a", "SCRATCH_BUCKET": "o/s-a/"}
    )
    assert (config.url, config.scratch_bucket, config.token) == ("http://h:1", "o/s-a", None)
