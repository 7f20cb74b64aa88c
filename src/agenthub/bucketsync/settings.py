"""bucket-sync configuration: the seed's environment variables plus `BUCKETSYNC_*`.

Built once at the entry point (`load_settings`) and passed down; nothing else reads the
environment.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from agenthub.errors import AgentHubError

REQUIRED = ("ORG", "COLLAB_SLUG", "AUDIT_BUCKET")

# The Hub's API request limits per 5-minute window, by plan (huggingface.co/docs/hub/
# rate-limits): what HUB_BUDGET names. A user token spends its user's; an org's token, the
# org's.
HUB_TIERS = {"free": 1_000, "pro": 2_500, "team": 3_000, "enterprise": 6_000}
HUB_WINDOW_S = 300.0


class SettingsError(AgentHubError):
    """Configuration is missing or invalid; the message names the variables."""

    code = "CONFIGURATION_ERROR"


PHASE_NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")


class Phase(BaseModel):
    """One named phase of a challenge (`challenge.yaml` `phases:`, `CHALLENGE_PHASES`): its
    UTC window [start, end) and its rules: whether results are accepted, the benchmark jobs
    an agent may launch per 24h while it runs (None: JOB_PER_AGENT_PER_DAY), and which
    scoring split the leaderboard shows (`private`: the private split is revealed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    start: datetime
    end: datetime
    results: bool = True
    job_quota: int | None = Field(None, ge=0)
    split: Literal["public", "private"] = "public"

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not PHASE_NAME_RE.match(value):
            raise ValueError(f"phase name {value!r} must be 1-40 of [a-z0-9-], e.g. 'final'")
        return value

    @field_validator("start", "end")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError(
                "phase times need a timezone: write them in UTC, e.g. 2026-05-01T00:00:00Z"
            )
        return value.astimezone(UTC)

    @model_validator(mode="after")
    def _window(self) -> Phase:
        if self.end <= self.start:
            raise ValueError(f"phase {self.name!r} ends before it starts")
        return self


def check_phases(phases: list[Phase]) -> list[Phase]:
    """Phases in time order, named once, never overlapping (a gap between two is allowed)."""
    ordered = sorted(phases, key=lambda p: p.start)
    names = [p.name for p in ordered]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"phase names must be unique: {', '.join(twice)}")
    for before, after in pairwise(ordered):
        if after.start < before.end:
            raise ValueError(f"phases {before.name!r} and {after.name!r} overlap")
    return ordered


class OfflineSettings(BaseSettings):
    """Where the buckets are, for offline commands that only touch them (`users add`,
    `challenge init`), so they work without the service's full configuration."""

    model_config = SettingsConfigDict(extra="ignore", case_sensitive=False, populate_by_name=True)

    data_dir: Path = Field(Path("./var/bucketsync"), alias="BUCKETSYNC_DATA_DIR")
    storage: Literal["local", "hf", "s3"] = Field("local", alias="BUCKETSYNC_STORAGE")
    hf_token: SecretStr | None = Field(None, alias="HF_TOKEN")
    # The Hub the hf adapters talk to (huggingface_hub's own default when unset).
    hf_endpoint: str | None = Field(None, alias="HF_ENDPOINT")
    # Each Hub call's deadline: it answers 503 by then, whatever the Hub does (and stays
    # well inside the 120 s lock leases held around store calls).
    hub_call_deadline_s: float = Field(15.0, gt=0, le=60, alias="HUB_CALL_DEADLINE_S")
    # Group commit on the Hub (storage/groupcommit.py): while a bucket is being written, a
    # batch waits this long for concurrent writes to share its request (issue 29's budget
    # of 2.5 API requests per post under a fleet); an idle bucket's write goes at once.
    hub_group_linger_s: float = Field(0.25, ge=0, le=5, alias="HUB_GROUP_LINGER_S")
    # BUCKETSYNC_STORAGE=s3: every bucket id `ns/name` lives in ONE S3 bucket, under
    # `{BUCKETSYNC_S3_PREFIX}buckets/ns/name/`. Credentials left unset come from the usual
    # AWS variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) or a role.
    s3_bucket: str = Field("", alias="BUCKETSYNC_S3_BUCKET")
    s3_prefix: str = Field("", alias="BUCKETSYNC_S3_PREFIX")
    s3_endpoint: str | None = Field(None, alias="BUCKETSYNC_S3_ENDPOINT")
    s3_region: str | None = Field(None, alias="BUCKETSYNC_S3_REGION")
    s3_access_key_id: str | None = Field(None, alias="BUCKETSYNC_S3_ACCESS_KEY_ID")
    s3_secret_access_key: SecretStr | None = Field(None, alias="BUCKETSYNC_S3_SECRET_ACCESS_KEY")
    s3_deadline_s: float = Field(15.0, gt=0, le=60, alias="BUCKETSYNC_S3_DEADLINE_S")

    def hf_token_value(self) -> str | None:
        """The HF token in clear, for the one adapter call that needs it."""
        return self.hf_token.get_secret_value() if self.hf_token is not None else None


class BucketSyncSettings(OfflineSettings):
    org: str = Field(alias="ORG")
    collab_slug: str = Field(alias="COLLAB_SLUG")
    audit_bucket: str = Field(alias="AUDIT_BUCKET")
    central_bucket: str = Field("", alias="CENTRAL_BUCKET")

    listing_ttl_s: float = Field(30.0, alias="LISTING_TTL_S")
    content_cache_max_bytes: int = Field(64 * 1024 * 1024, alias="CONTENT_CACHE_MAX_BYTES")
    expand_max_limit: int = Field(200, alias="EXPAND_MAX_LIMIT")
    mention_fanout_cap: int = Field(10, alias="MENTION_FANOUT_CAP")
    dedup_lru_size: int = Field(10_000, alias="DEDUP_LRU_SIZE")
    max_source_bytes: int = Field(1024 * 1024, alias="MAX_SOURCE_BYTES")
    # JSON bodies of the API; files uploaded to /local/buckets have their own limit, up to
    # the seed's per-call sync size (§5: 5 GB), received in pieces, never held in memory.
    max_request_bytes: int = Field(2 * 1024 * 1024, alias="MAX_REQUEST_BYTES")
    max_upload_bytes: int = Field(5 * 1024**3, alias="MAX_UPLOAD_BYTES")

    score_field: str = Field("score", alias="SCORE_FIELD")
    required_result_fields: str = Field(
        "score,method,status,description", alias="REQUIRED_RESULT_FIELDS"
    )
    sync_max_bytes: int = Field(5 * 1024**3, alias="SYNC_MAX_BYTES")
    sync_max_files: int = Field(10_000, alias="SYNC_MAX_FILES")
    score_order: Literal["asc", "desc"] = Field("desc", alias="SCORE_ORDER")
    score_unit: str = Field("", alias="SCORE_UNIT")
    # Decimal places the dashboard shows every score with (0.7100 next to 1.0000).
    score_decimals: int = Field(4, ge=0, le=12, alias="SCORE_DECIMALS")
    # The challenge's branding (challenge.yaml), shown in the dashboard's header.
    challenge_title: str = Field("", alias="CHALLENGE_TITLE")
    challenge_tagline: str = Field("", alias="CHALLENGE_TAGLINE")
    jobs_enabled: bool = Field(False, alias="JOBS_ENABLED")
    # The challenge's phases (JSON list of `Phase`); empty: no phases, results always open.
    challenge_phases: list[Phase] = Field(default_factory=list, alias="CHALLENGE_PHASES")
    # Results an agent may mark as final entries (Kaggle's 2).
    final_entries_max: int = Field(2, ge=1, le=100, alias="FINAL_ENTRIES_MAX")
    # Staged disclosure: a result's method is withheld this long after its stamp (0: never).
    result_embargo_hours: float = Field(0.0, ge=0, alias="RESULT_EMBARGO_HOURS")

    # Live features (seed §11-§13).
    digest_channel_recent: int = Field(3, alias="DIGEST_CHANNEL_RECENT")
    longpoll_max_wait_s: float = Field(55.0, alias="LONGPOLL_MAX_WAIT_S")
    longpoll_max_waiters_per_owner: int = Field(4, alias="LONGPOLL_MAX_WAITERS_PER_OWNER")
    longpoll_max_waiters_total: int = Field(256, alias="LONGPOLL_MAX_WAITERS_TOTAL")
    longpoll_wake_spread_threshold: int = Field(20, alias="LONGPOLL_WAKE_SPREAD_THRESHOLD")
    longpoll_wake_spread_s: float = Field(8.0, alias="LONGPOLL_WAKE_SPREAD_S")
    watch_fresh_s: float = Field(240.0, alias="WATCH_FRESH_S")
    # Off only to measure what the streams' stable point costs (bench): streams then skip.
    stream_watermark: bool = Field(True, alias="BUCKETSYNC_STREAM_WATERMARK")
    bus_url: str | None = Field(None, alias="BUCKETSYNC_BUS_URL")
    bus_prefix: str = Field("", alias="BUCKETSYNC_BUS_PREFIX")
    clients_dir: Path | None = Field(None, alias="BUCKETSYNC_CLIENTS_DIR")

    # The dashboard's "Sign in with Hugging Face" (hf-spaces-facts.md §1.2): on when the
    # Space sets OAUTH_CLIENT_ID and a public URL is known (DASHBOARD_PUBLIC_URL, else the
    # first SPACE_HOST entry).
    oauth_client_id: str | None = Field(None, alias="OAUTH_CLIENT_ID")
    oauth_client_secret: SecretStr | None = Field(None, alias="OAUTH_CLIENT_SECRET")
    oauth_scopes: str = Field("openid profile email", alias="OAUTH_SCOPES")
    openid_provider_url: str = Field("https://huggingface.co", alias="OPENID_PROVIDER_URL")
    space_host: str | None = Field(None, alias="SPACE_HOST")
    dashboard_public_url: str | None = Field(None, alias="DASHBOARD_PUBLIC_URL")
    dashboard_poll_s: float = Field(30.0, gt=0, alias="DASHBOARD_POLL_S")

    # On hf: follow the central bucket's change feed instead of re-listing it every TTL
    # (storage/hffeed.py says when the feed counts as live, and the fallback).
    hub_feed: bool = Field(True, alias="HUB_FEED")
    # The HF token's request budget (storage/governor.py): a plan's preset, or a count of
    # API requests per HUB_BUDGET_WINDOW_S; RESERVE is the share left to the token's other
    # users. Off: nothing is counted (the Hub's 429 is passed on as a 503).
    hub_budget: Literal["off", "free", "pro", "team", "enterprise"] = Field(
        "off", alias="HUB_BUDGET"
    )
    hub_budget_requests: int | None = Field(None, ge=1, alias="HUB_BUDGET_REQUESTS")
    hub_budget_window_s: float = Field(HUB_WINDOW_S, gt=0, alias="HUB_BUDGET_WINDOW_S")
    hub_budget_reserve: float = Field(0.1, ge=0, lt=1, alias="HUB_BUDGET_RESERVE")

    # Benchmark jobs, quotas and the verifier (seed §4 "Jobs" / "Verifier").
    job_runner: Literal["local", "hf"] | None = Field(None, alias="BUCKETSYNC_JOB_RUNNER")
    job_per_agent_per_day: int = Field(10, alias="JOB_PER_AGENT_PER_DAY", ge=0)
    job_per_user_per_day: int = Field(30, alias="JOB_PER_USER_PER_DAY", ge=0)
    job_quota_ledger_path: str = Field("quota/job_ledger.jsonl", alias="JOB_QUOTA_LEDGER_PATH")
    harness_prefix: str = Field("harness/", alias="HARNESS_PREFIX")
    job_harness_entrypoint: str = Field("run.py", alias="JOB_HARNESS_ENTRYPOINT")
    job_extra_args: str = Field("", alias="JOB_EXTRA_ARGS")
    job_image: str = Field("python:3.12", alias="JOB_IMAGE")
    job_flavor: str = Field("cpu-basic", alias="JOB_FLAVOR")
    job_timeout_minutes: float = Field(30.0, alias="JOB_TIMEOUT_MINUTES", gt=0)
    job_cancel_grace_s: float = Field(60.0, alias="JOB_CANCEL_GRACE_S", ge=0)
    job_poll_s: float = Field(5.0, alias="JOB_POLL_S", gt=0)
    # Runs the platform failed (platform_error) are relaunched this many times, uncharged.
    job_platform_retries: int = Field(2, alias="JOB_PLATFORM_RETRIES", ge=0)
    jobs_namespace: str = Field("", alias="JOBS_NAMESPACE")
    verifier_enabled: bool = Field(False, alias="VERIFIER_ENABLED")
    verifier_agent: str = Field("verifier", alias="VERIFIER_AGENT")
    verifier_score_tol: float = Field(0.02, alias="VERIFIER_SCORE_TOL", ge=0)
    verifier_guard_field: str = Field("", alias="VERIFIER_GUARD_FIELD")
    verifier_guard_cap: float | None = Field(None, alias="VERIFIER_GUARD_CAP")
    private_dataset_prefix: str = Field("private/", alias="PRIVATE_DATASET_PREFIX")
    verification_runs_prefix: str = Field("verification_runs/", alias="VERIFICATION_RUNS_PREFIX")
    # How many verification re-runs at once; the rest wait in GET /v1/queue.
    verifier_concurrency: int = Field(1, alias="VERIFIER_CONCURRENCY", ge=1)
    # The verifier's heartbeat on the queue; three missed beats read as stopped.
    verifier_heartbeat_s: float = Field(15.0, alias="VERIFIER_HEARTBEAT_S", gt=0)

    @field_validator("challenge_phases", mode="before")
    @classmethod
    def _phases_json(cls, value: Any) -> Any:
        if isinstance(value, str):
            return json.loads(value) if value.strip() else []
        return value

    @field_validator("challenge_phases")
    @classmethod
    def _phases_order(cls, value: list[Phase]) -> list[Phase]:
        return check_phases(value)

    @model_validator(mode="after")
    def _derive(self) -> BucketSyncSettings:
        for name in ("org", "collab_slug", "audit_bucket"):
            if not getattr(self, name).strip():
                raise ValueError(f"{name.upper()} must not be empty")
        if not self.central_bucket:
            self.central_bucket = f"{self.org}/{self.collab_slug}-main-bucket"
        for name in ("central_bucket", "audit_bucket"):
            value = getattr(self, name)
            if value.count("/") != 1 or not all(value.split("/")):
                raise ValueError(f"{name.upper()} must look like 'namespace/name', got {value!r}")
        if self.verifier_enabled and not self.jobs_enabled:
            raise ValueError("VERIFIER_ENABLED=true needs JOBS_ENABLED=true (it re-runs jobs)")
        if self.storage == "s3" and not self.s3_bucket.strip():
            raise ValueError(
                "BUCKETSYNC_STORAGE=s3 needs BUCKETSYNC_S3_BUCKET (the S3 bucket that holds "
                "every bucket-sync bucket; BUCKETSYNC_S3_ENDPOINT for MinIO, R2 or GCS)"
            )
        if self.job_runner == "local" and self.storage == "hf":
            raise ValueError(
                "BUCKETSYNC_JOB_RUNNER=local needs BUCKETSYNC_STORAGE=local or s3 (the local "
                "runner copies prefixes out of those stores); use hf, or leave it unset"
            )
        if self.verifier_guard_field and self.verifier_guard_cap is None:
            raise ValueError("VERIFIER_GUARD_FIELD is set but VERIFIER_GUARD_CAP is not")
        for name in ("harness_prefix", "private_dataset_prefix", "verification_runs_prefix"):
            value = getattr(self, name)
            if value and not value.endswith("/"):
                setattr(self, name, value + "/")
        if not self.jobs_namespace:
            self.jobs_namespace = self.org
        return self

    @property
    def audit_two_org(self) -> bool:
        """Two-org mode: the audit bucket lives outside ORG, so it may hold caller IPs."""
        return self.audit_bucket.split("/", 1)[0] != self.org

    @property
    def result_fields(self) -> list[str]:
        """Required result fields; the score field is always required (BS-3.7)."""
        fields = [f.strip() for f in self.required_result_fields.split(",") if f.strip()]
        return fields if self.score_field in fields else [self.score_field, *fields]

    @property
    def hub_budget_limit(self) -> int | None:
        """The API requests per window the service may spend (None: not governed)."""
        if self.hub_budget_requests is not None:
            total = self.hub_budget_requests
        elif self.hub_budget != "off":
            total = HUB_TIERS[self.hub_budget]
        else:
            return None
        return max(1, int(total * (1 - self.hub_budget_reserve)))

    @property
    def job_timeout_s(self) -> int:
        return max(1, round(self.job_timeout_minutes * 60))

    @property
    def runner_kind(self) -> str:
        """The JobRunner adapter: `BUCKETSYNC_JOB_RUNNER`, else the storage backend's."""
        return self.job_runner or ("hf" if self.storage == "hf" else "local")

    @property
    def serves_buckets(self) -> bool:
        """bucket-sync owns the storage (local, s3): it creates its buckets and serves
        agents' scratch buckets at /local/buckets; on HF agents use the Hub."""
        return self.storage != "hf"

    @property
    def bus_key_prefix(self) -> str:
        """Namespace of every Redis key and channel, so challenges (and test runs) sharing
        one Redis never see each other's wakes or limits."""
        return self.bus_prefix or f"bucketsync:{self.central_bucket}:"

    def scratch_bucket(self, agent_id: str) -> str:
        return f"{self.org}/{self.collab_slug}-{agent_id}"


# Where a challenge's variables are: `agenthub up` and `agenthub challenge init` write them.
ENV_HINT = (
    "load the challenge's environment first: `set -a; . var/challenge.env; set +a` "
    "(written by `agenthub up` or `agenthub challenge init challenge.yaml`)"
)


def load_settings(**overrides: object) -> BucketSyncSettings:
    """Read settings from the environment; fail with one message naming what is missing."""
    try:
        return BucketSyncSettings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        missing = sorted(
            str(err["loc"][0]).upper() for err in exc.errors() if err["type"] == "missing"
        )
        if missing:
            raise SettingsError(
                "bucket-sync needs these environment variables: " + ", ".join(missing),
                hint=ENV_HINT,
            ) from exc
        problems = "; ".join(err["msg"] for err in exc.errors())
        raise SettingsError(f"bucket-sync configuration is invalid: {problems}") from exc
