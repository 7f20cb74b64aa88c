"""The bucket command a hint or a README names, for the store a challenge runs on.

On Hugging Face an agent uses the `hf` CLI (logged in, `$HF_TOKEN`); on the local store
(and on S3, which bucket-sync serves the same way) the same verbs are `agenthub buckets …`, which reads `BUCKETSYNC_URL` and
`BUCKETSYNC_TOKEN` from the environment. A hint that names the other CLI cannot work.
"""

from __future__ import annotations

from typing import Literal

Target = Literal["local", "hf"]


def bucket_cli(target: str) -> str:
    """`agenthub buckets` on the local store, `hf buckets` on Hugging Face."""
    return "hf buckets" if target == "hf" else "agenthub buckets"


def token_variable(target: str) -> str:
    """The environment variable holding the agent's bearer token."""
    return "HF_TOKEN" if target == "hf" else "BUCKETSYNC_TOKEN"


def whoami_command(target: str) -> str:
    """A command printing the caller's user name (the handshake's content)."""
    return "hf auth whoami | head -n1" if target == "hf" else "agenthub buckets whoami"
