"""`challenge.yaml`: the organizer's one file. Validated up front; every problem is
reported at once, each naming the field and the fix.

One schema (`Challenge`), two readers: our flat layout (`org:`, `slug:`, `branding:` ...)
and agent-collabs' nested one (`challenge:`, `storage:`, `spaces:`, `scoring.score_field`,
`jobs.enabled` ...), which `_from_nested` maps onto the schema field by field — problems
are then reported under the names the organizer wrote (docs/compatibility.md).

bucket-sync itself never reads this file (BS-0.2): `to_env` turns it into the
environment the Space runs with.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agenthub.bucketsync.settings import Phase, check_phases

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
SLUG_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")


class ChallengeError(Exception):
    """`challenge.yaml` is invalid; `problems` holds one line per problem."""

    def __init__(self, path: str, problems: list[str]) -> None:
        super().__init__(
            f"{path}: {len(problems)} problem(s)\n" + "\n".join(f"  - {p}" for p in problems)
        )
        self.problems = problems


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Branding(Strict):
    title: str = Field(min_length=1, max_length=120)
    tagline: str = ""
    description: str = ""


class Scoring(Strict):
    field: str = "score"
    order: Literal["asc", "desc"] = "desc"
    unit: str = ""
    # Decimal places the dashboard shows every score with, so 1.0000 sits by 0.7100.
    decimals: int = Field(4, ge=0, le=12)
    required_fields: list[str] = Field(
        default_factory=lambda: ["score", "method", "status", "description"]
    )

    @field_validator("field")
    @classmethod
    def _field_name(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,63}", value):
            raise ValueError("must be a lowercase frontmatter key such as 'score' or 'accuracy'")
        return value


class Verification(Strict):
    mode: Literal["manual", "eval-space", "jobs"] = "manual"
    agent: str = "verifier"
    tolerance: float = Field(0.0, ge=0)
    guard_field: str | None = None
    guard_cap: float | None = None
    # eval-space: the private eval set the evaluator scores on (published to the audit bucket)
    private_dir: Path | None = None


class Jobs(Strict):
    harness_dir: Path | None = None
    private_dir: Path | None = None
    entrypoint: str = "run.py"
    image: str | None = None
    flavor: str | None = None
    timeout_minutes: int = Field(30, ge=1, le=24 * 60)
    per_agent_per_day: int = Field(10, ge=0)
    per_user_per_day: int = Field(30, ge=0)


class Limits(Strict):
    listing_ttl_s: float = Field(30.0, gt=0)
    mention_fanout_cap: int = Field(10, ge=1)
    expand_max_limit: int = Field(200, ge=1)
    sync_max_bytes: int = Field(5 * 1024**3, ge=1)
    sync_max_files: int = Field(10_000, ge=1)


class Disclosure(Strict):
    # Staged disclosure: a result's method is withheld this long after its stamp (its
    # score is public at once); 0 = never withheld.
    embargo_hours: float = Field(0.0, ge=0, le=24 * 365)


class Challenge(Strict):
    org: str
    slug: str
    admin_org: str | None = None
    central_bucket: str | None = None
    audit_bucket: str | None = None
    branding: Branding
    scoring: Scoring = Field(default_factory=Scoring)
    verification: Verification = Field(default_factory=Verification)
    jobs: Jobs | None = None
    limits: Limits = Field(default_factory=Limits)
    # Named phases with UTC windows and rules; none: results are always open.
    phases: list[Phase] = Field(default_factory=list)
    # Results each agent may mark as final entries (Kaggle's 2).
    final_entries: int = Field(2, ge=1, le=100)

    @field_validator("phases")
    @classmethod
    def _phases(cls, value: list[Phase]) -> list[Phase]:
        return check_phases(value)

    disclosure: Disclosure = Field(default_factory=Disclosure)

    @field_validator("org", "admin_org")
    @classmethod
    def _org(cls, value: str | None) -> str | None:
        if value is not None and not NAME_RE.match(value):
            raise ValueError("must be a Hugging Face org name (letters, digits, '.', '_', '-')")
        return value

    @field_validator("slug")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not SLUG_RE.match(value):
            raise ValueError("must be 1-40 of [a-z0-9-], e.g. 'primes-2026'")
        return value

    @field_validator("central_bucket", "audit_bucket")
    @classmethod
    def _bucket(cls, value: str | None) -> str | None:
        if value is not None and (
            value.count("/") != 1 or not all(NAME_RE.match(p) for p in value.split("/"))
        ):
            raise ValueError("must look like 'namespace/name'")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Challenge:
        if self.verification.mode == "jobs" and (
            self.jobs is None or self.jobs.harness_dir is None
        ):
            raise ValueError(
                "verification.mode 'jobs' needs jobs.harness_dir (the benchmark the verifier re-runs)"
            )
        return self

    # -- derived ----------------------------------------------------------------------

    @property
    def central(self) -> str:
        return self.central_bucket or f"{self.org}/{self.slug}-main-bucket"

    @property
    def audit(self) -> str:
        # Two-org mode by default when an admin org is named: caller IPs stay private there.
        return self.audit_bucket or f"{self.admin_org or self.org}/{self.slug}-audit"

    def to_env(self) -> dict[str, str]:
        """bucket-sync's environment for this challenge (secrets such as HF_TOKEN excluded)."""
        required = list(dict.fromkeys([self.scoring.field, *self.scoring.required_fields]))
        env = {
            "ORG": self.org,
            "COLLAB_SLUG": self.slug,
            "CENTRAL_BUCKET": self.central,
            "AUDIT_BUCKET": self.audit,
            "SCORE_FIELD": self.scoring.field,
            "SCORE_ORDER": self.scoring.order,
            "SCORE_UNIT": self.scoring.unit,
            "SCORE_DECIMALS": str(self.scoring.decimals),
            "CHALLENGE_TITLE": self.branding.title,
            "CHALLENGE_TAGLINE": self.branding.tagline,
            "REQUIRED_RESULT_FIELDS": ",".join(required),
            "LISTING_TTL_S": _number(self.limits.listing_ttl_s),
            "MENTION_FANOUT_CAP": str(self.limits.mention_fanout_cap),
            "EXPAND_MAX_LIMIT": str(self.limits.expand_max_limit),
            "SYNC_MAX_BYTES": str(self.limits.sync_max_bytes),
            "SYNC_MAX_FILES": str(self.limits.sync_max_files),
            "JOBS_ENABLED": "true" if self.jobs is not None else "false",
            "VERIFIER_ENABLED": "true" if self.verification.mode == "jobs" else "false",
            "VERIFIER_AGENT": self.verification.agent,
            "VERIFIER_SCORE_TOL": _number(self.verification.tolerance),
        }
        if self.phases:
            env["CHALLENGE_PHASES"] = json.dumps(
                [p.model_dump(mode="json") for p in self.phases], separators=(",", ":")
            )
            env["FINAL_ENTRIES_MAX"] = str(self.final_entries)
        if self.disclosure.embargo_hours > 0:
            env["RESULT_EMBARGO_HOURS"] = _number(self.disclosure.embargo_hours)
        if self.verification.guard_field:
            env["VERIFIER_GUARD_FIELD"] = self.verification.guard_field
        if self.verification.guard_cap is not None:
            env["VERIFIER_GUARD_CAP"] = _number(self.verification.guard_cap)
        if self.jobs is not None:
            env["JOB_HARNESS_ENTRYPOINT"] = self.jobs.entrypoint
            env["JOB_TIMEOUT_MINUTES"] = str(self.jobs.timeout_minutes)
            env["JOB_PER_AGENT_PER_DAY"] = str(self.jobs.per_agent_per_day)
            env["JOB_PER_USER_PER_DAY"] = str(self.jobs.per_user_per_day)
            if self.jobs.image:
                env["JOB_IMAGE"] = self.jobs.image
            if self.jobs.flavor:
                env["JOB_FLAVOR"] = self.jobs.flavor
        return env


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def load(path: Path) -> Challenge:
    """Parse and validate `challenge.yaml`; relative paths resolve against its folder."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ChallengeError(str(path), [f"cannot read it: {exc.strerror}"]) from None
    except yaml.YAMLError as exc:
        raise ChallengeError(str(path), [f"not valid YAML: {exc}"]) from None
    if not isinstance(raw, dict):
        raise ChallengeError(
            str(path), ["the top level must be a mapping (org:, slug:, branding: ...)"]
        )
    nested = isinstance(raw.get("challenge"), dict)
    problems: list[str] = []
    origin: dict[str, str] = {}
    if nested:
        raw, problems, origin = _from_nested(raw)
    challenge = None
    try:
        challenge = Challenge.model_validate(raw)
    except ValidationError as exc:
        problems += [_describe(err, raw, origin if nested else None) for err in exc.errors()]
    if problems or challenge is None:
        raise ChallengeError(str(path), problems)
    private = challenge.verification.private_dir
    if private is not None:
        if not private.is_absolute():
            private = challenge.verification.private_dir = (path.parent / private).resolve()
        if not private.is_dir():
            raise ChallengeError(
                str(path), [f"verification.private_dir: {private} is not a directory"]
            )
    if challenge.jobs is not None:
        base = path.parent
        for name in ("harness_dir", "private_dir"):
            value = getattr(challenge.jobs, name)
            if value is not None and not value.is_absolute():
                setattr(challenge.jobs, name, (base / value).resolve())
        problems = [
            f"jobs.{name}: {getattr(challenge.jobs, name)} is not a directory"
            for name in ("harness_dir", "private_dir")
            if getattr(challenge.jobs, name) is not None
            and not getattr(challenge.jobs, name).is_dir()
        ]
        harness = challenge.jobs.harness_dir
        entry = harness / challenge.jobs.entrypoint if harness is not None else None
        if harness is not None and entry is not None and harness.is_dir() and not entry.is_file():
            problems.append(f"jobs.entrypoint: {entry} does not exist (the file the job runs)")
        if problems:
            raise ChallengeError(str(path), problems)
    return challenge


def _describe(err: Any, raw: dict[str, Any], origin: dict[str, str] | None = None) -> str:
    where = ".".join(str(p) for p in err["loc"]) or "(top level)"
    if origin is not None:  # name the key the organizer wrote in the nested layout
        where = origin.get(where, where)
        if err["type"] == "missing":
            return f"{where}: required (add it to challenge.yaml)"
    if err["type"] == "extra_forbidden":
        name = str(err["loc"][-1])
        known = _known_fields(err["loc"][:-1])
        close = difflib.get_close_matches(name, known, n=1)
        fix = f"did you mean '{close[0]}'?" if close else f"known fields: {', '.join(known)}"
        return f"{where}: unknown field ({fix})"
    if err["type"] == "missing":
        return f"{where}: required (add it to challenge.yaml)"
    message = str(err["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}"


def _known_fields(loc: tuple[Any, ...]) -> list[str]:
    model: type[BaseModel] = Challenge
    for part in loc:
        field = model.model_fields.get(str(part))
        annotation = getattr(field, "annotation", None)
        inner = [a for a in getattr(annotation, "__args__", (annotation,)) if isinstance(a, type)]
        nested = [a for a in inner if issubclass(a, BaseModel)]
        if not nested:
            return []
        model = nested[0]
    return sorted(model.model_fields)


# agent-collabs' nested layout -> the schema: `(section, key) -> schema path`. Keys mapped to
# None configure what bucket-sync does not deploy (its Spaces, its dashboard's labels) and
# are accepted and ignored; any other key is a problem, as in our layout.
_NESTED: dict[str, dict[str, str | None]] = {
    "challenge": {
        "org": "org",
        "admin_org": "admin_org",
        "slug": "slug",
        "title": "branding.title",
        "tagline": "branding.tagline",
        "short_description": "branding.description",
    },
    "storage": {"central_bucket": "central_bucket", "audit_bucket": "audit_bucket"},
    "spaces": {"backend": None, "dashboard": None, "eval": None},
    "scoring": {
        "score_field": "scoring.field",
        "score_unit": "scoring.unit",
        "score_decimals": "scoring.decimals",
        "order": "scoring.order",
        "required_fields": "scoring.required_fields",
        "score_label": None,
        "secondary_field": None,
        "secondary_label": None,
    },
    "verification": {
        "mode": "verification.mode",
        "agent": "verification.agent",
        "score_tol": "verification.tolerance",
        "guard_field": "verification.guard_field",
        "guard_cap": "verification.guard_cap",
        "eval_poll_s": None,
    },
    "jobs": {
        "enabled": None,  # decides whether `jobs` exists at all
        "image": "jobs.image",
        "flavor": "jobs.flavor",
        "timeout_minutes": "jobs.timeout_minutes",
        "harness_entrypoint": "jobs.entrypoint",
        "per_agent_per_day": "jobs.per_agent_per_day",
        "per_user_per_day": "jobs.per_user_per_day",
        "harness_dir": "jobs.harness_dir",
        "private_dir": "jobs.private_dir",
        "harness_prefix": None,
        "extra_args": None,
    },
    "dashboard": {"invite_url": None},
}


def _from_nested(raw: dict[str, Any]) -> tuple[dict[str, Any], list[str], dict[str, str]]:
    """agent-collabs' layout as the schema's input, the problems only its shape can have
    (unknown sections and keys), and where each schema field came from."""
    flat: dict[str, Any] = {}
    problems: list[str] = []
    origin = {
        target: f"{section}.{key}"
        for section, keys in _NESTED.items()
        for key, target in keys.items()
        if target is not None
    }
    origin["branding"] = "challenge.title"
    jobs = raw.get("jobs")
    jobs_on = isinstance(jobs, dict) and bool(jobs.get("enabled"))
    verification = raw.get("verification")
    guarded = isinstance(verification, dict) and bool(verification.get("guard_field"))
    for section, body in raw.items():
        known = _NESTED.get(str(section))
        if known is None:
            close = difflib.get_close_matches(str(section), list(_NESTED), n=1)
            fix = f"did you mean '{close[0]}'?" if close else f"known: {', '.join(_NESTED)}"
            problems.append(f"{section}: unknown section ({fix})")
            continue
        if body is None:
            continue
        if not isinstance(body, dict):
            problems.append(f"{section}: must be a mapping")
            continue
        for key, value in body.items():
            if key not in known:
                close = difflib.get_close_matches(str(key), list(known), n=1)
                fix = f"did you mean '{close[0]}'?" if close else f"known: {', '.join(known)}"
                problems.append(f"{section}.{key}: unknown field ({fix})")
                continue
            target = known[key]
            if target is None or (target.startswith("jobs.") and not jobs_on):
                continue
            if value in ("", None) or (key == "guard_cap" and value == 0 and not guarded):
                continue  # agent-collabs' way of saying "not set"
            if isinstance(value, str) and key in ("tagline", "short_description"):
                value = value.strip()
            *parents, leaf = target.split(".")
            node = flat
            for parent in parents:
                node = node.setdefault(parent, {})
            node[leaf] = value
    if jobs_on:
        flat.setdefault("jobs", {})
    return flat, problems, origin
