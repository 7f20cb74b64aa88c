"""`agenthub bucketsync …`: run the service and manage it offline (thin wrappers)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import typer

from agenthub.bucketsync.errors import StorageUnavailable
from agenthub.bucketsync.settings import BucketSyncSettings, SettingsError, load_settings
from agenthub.clierrors import CliError, Commands
from agenthub.heap import freeze_startup_objects
from agenthub.pids import ProcessLock
from agenthub.ports import BUCKETSYNC_PORT, require_free

if TYPE_CHECKING:
    from agenthub.bucketsync.identity.local import UsersDocument

app = typer.Typer(
    cls=Commands,
    help="bucket-sync: the only writer of a challenge's central bucket.",
    no_args_is_help=True,
)
users_app = typer.Typer(
    help="Local identity: users and their tokens (BUCKETSYNC_DATA_DIR).", no_args_is_help=True
)
app.add_typer(users_app, name="users")


# Parked long-polls would otherwise hold a shutdown for up to LONGPOLL_MAX_WAIT_S.
SHUTDOWN_GRACE_S = 5
# uvicorn's own default is 5 s: under load (~10 on 2 cores) a starting worker missed it,
# was killed and respawned, and a restart took 30 s instead of 5 (issue 31).
WORKER_HEALTHCHECK_TIMEOUT_S = 30
# Held by every `serve` on a data directory for its life (`pids.ProcessLock`).
SERVE_LOCK = "serve.lock"


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="Interface to bind."),
    port: int = typer.Option(BUCKETSYNC_PORT, help="TCP port."),
    workers: int = typer.Option(
        1, help="Worker processes; more than one needs BUCKETSYNC_BUS_URL (Redis)."
    ),
    worker_healthcheck_timeout: int = typer.Option(
        WORKER_HEALTHCHECK_TIMEOUT_S,
        "--worker-healthcheck-timeout",
        envvar="BUCKETSYNC_WORKER_HEALTHCHECK_TIMEOUT_S",
        min=1,
        help="With --workers N: seconds a worker may take to answer the supervisor's "
        "health ping before it is killed and replaced (starting workers included; raise "
        "it on a loaded machine).",
    ),
) -> None:
    """Run the bucket-sync HTTP API."""
    import uvicorn

    settings = load_settings()
    check_workers(settings, workers)
    check_bus(settings)
    _lock = lock_data_dir(settings)  # held until serve returns (the process ends)
    require_free(host, port)
    bus = f"bus {settings.bus_url}" if settings.bus_url else "in-process notifier: one worker"
    if workers == 1:
        from agenthub.bucketsync.app import create_app

        application = create_app(settings)
        announce(settings, host, port, bus, workers)
        freeze_startup_objects()
        uvicorn.run(
            application,
            host=host,
            port=port,
            log_level="info",
            workers=1,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        )
    else:
        # Each worker builds its own app from the environment; they share Redis. The
        # supervisor builds none, but imports what they would and forks them (uvicorn
        # spawns fresh interpreters): at load 10 re-importing took most of a restart's
        # 10-17 s (issue 31), a forked worker only builds its app.
        from agenthub.bucketsync.app.workers import preload_workers

        preload_workers(settings)
        fork_workers()
        announce(settings, host, port, bus, workers)
        uvicorn.run(
            "agenthub.bucketsync.app.workers:app_from_environment",
            factory=True,
            host=host,
            port=port,
            log_level="info",
            workers=workers,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            timeout_worker_healthcheck=worker_healthcheck_timeout,
        )


def fork_workers() -> None:
    """uvicorn starts its workers with multiprocessing's `spawn` (a fresh interpreter that
    imports everything again) and has no setting for it: switch its context to `fork`.
    Safe while the supervisor has no thread and no open connection (it builds no app);
    should a thread ever be running here, the workers are spawned as before."""
    import multiprocessing
    import threading

    import uvicorn._subprocess

    if threading.active_count() == 1:
        uvicorn._subprocess.spawn = multiprocessing.get_context("fork")  # type: ignore[assignment]


def announce(settings: BucketSyncSettings, host: str, port: int, bus: str, workers: int) -> None:
    typer.echo(
        f"bucket-sync on http://{host}:{port} (storage {settings.storage}, "
        f"central {settings.central_bucket}, {bus}, workers {workers})",
        err=True,
    )


def lock_data_dir(settings: BucketSyncSettings) -> ProcessLock:
    """Refuse a second `serve` on one data directory unless every one of them has the bus:
    without it each caches its own listings, and reads of the other's writes would be up
    to LISTING_TTL_S stale. Servers with the bus share it (the lock is taken shared)."""
    lock = ProcessLock(settings.data_dir / SERVE_LOCK)
    holder = lock.take(shared=bool(settings.bus_url))
    if holder is None:
        return lock
    who = f"pid {holder}" if holder else "another process"
    raise CliError(
        f"another bucket-sync serve ({who}) is serving BUCKETSYNC_DATA_DIR="
        f"{settings.data_dir}; without a shared BUCKETSYNC_BUS_URL two servers would each "
        f"serve reads up to LISTING_TTL_S={settings.listing_ttl_s:g} s stale",
        hint="stop the other serve, use one serve with --workers N, or set "
        "BUCKETSYNC_BUS_URL=redis://... for every serve on this directory",
        exit_code=UNAVAILABLE_EXIT,
    )


def check_workers(settings: BucketSyncSettings, workers: int) -> None:
    """Seed §13: the notifier, limiters and dedup are in-process unless a bus is set, so a
    second worker would silently turn every long-poll into a full timeout."""
    if workers < 1:
        raise SettingsError("--workers must be at least 1")
    if workers > 1 and not settings.bus_url:
        raise SettingsError(
            f"--workers {workers} needs BUCKETSYNC_BUS_URL=redis://...: without a shared bus "
            "a post handled by one worker cannot wake waiters parked on another, and rate "
            "limits would hold per worker only; run one worker or set the bus"
        )


# An unreachable dependency, not a usage mistake: what a supervisor should restart on.
UNAVAILABLE_EXIT = 1


def check_bus(settings: BucketSyncSettings) -> None:
    """Refuse to start, before anything is announced, when the bus does not answer: with
    `--workers N` uvicorn's supervisor would otherwise exit 0 after its workers die."""
    if not settings.bus_url:
        return
    # Not through `app`: with --workers N the supervisor never imports the application.
    from agenthub.bucketsync.scaleout.bus import RedisBus

    try:
        RedisBus(settings.bus_url, settings.bus_key_prefix).check()
    except StorageUnavailable as exc:
        cause = exc.__cause__ or exc
        raise CliError(
            f"BUCKETSYNC_BUS_URL {_without_password(settings.bus_url)} is unreachable ({cause}); "
            "start Redis there, point BUCKETSYNC_BUS_URL at a running one, or unset it to "
            "run a single worker",
            exit_code=UNAVAILABLE_EXIT,
        ) from exc


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


@users_app.command("add")
def users_add(
    name: str = typer.Argument(..., help="User name (like an HF username)."),
    role: str = typer.Option(..., "--role", help="admin | contributor (| write | read)."),
    email: str | None = typer.Option(None, "--email", help="Optional email."),
    rotate: bool = typer.Option(
        False, "--rotate", help="Re-key an existing user: its old token stops working."
    ),
) -> None:
    """Create a user in the org and print the new token alone on stdout (an existing
    name is refused unless --rotate)."""
    from agenthub.bucketsync.identity.local import add_user

    path = users_file()
    token = add_user(path, name, role=role, email=email, rotate=rotate)
    if rotate:
        typer.echo(f"{name}: new token issued; the old token is revoked", err=True)
    typer.echo(f"{name} ({role}) is in {_where(path)}", err=True)
    sys.stdout.write(token + "\n")


@users_app.command("list")
def users_list() -> None:
    """Print each user: name, role, email (tokens are never stored, only their digests)."""
    from agenthub.bucketsync.identity.local import list_users

    path = users_file()
    users = list_users(path)
    for name, record in users.items():
        typer.echo(f"{name}\t{record['role'] or '(revoked)'}\t{record['email'] or ''}")
    typer.echo(f"{len(users)} users in {_where(path)}", err=True)


@users_app.command("remove")
def users_remove(name: str = typer.Argument(..., help="The user to delete.")) -> None:
    """Delete a user: its token stops working at its next request."""
    from agenthub.bucketsync.identity.local import remove_user

    path = users_file()
    remove_user(path, name)
    typer.echo(f"{name} removed from {_where(path)}; its token no longer works", err=True)


def _where(target: Path | UsersDocument) -> str:
    return str(target) if isinstance(target, Path) else target.where


def users_file() -> Path | UsersDocument:
    """The identity store `serve` reads: the S3 bucket's users document with
    BUCKETSYNC_STORAGE=s3, else BUCKETSYNC_DATA_DIR/users.json. Without the variable the
    default ./var/bucketsync must exist here, so a command run from another directory does
    not start a second, unseen store."""
    import os

    from agenthub.bucketsync.app.adapters import users_document
    from agenthub.bucketsync.settings import OfflineSettings

    settings = OfflineSettings()
    if settings.storage == "s3":
        return users_document(settings)
    data_dir = settings.data_dir.resolve()
    if "BUCKETSYNC_DATA_DIR" not in {key.upper() for key in os.environ} and not data_dir.is_dir():
        raise CliError(
            f"no bucket-sync data directory at {data_dir}",
            hint="run this in the directory where `agenthub up` or `agenthub challenge init` "
            "ran (it holds var/bucketsync), or set BUCKETSYNC_DATA_DIR to the server's",
        )
    return data_dir / "users.json"


@app.command("backfill-inbox")
def backfill_inbox(
    dry_run: bool = typer.Option(False, "--dry-run", help="Count, write nothing."),
) -> None:
    """Rebuild inbox copies from the board history (offline, idempotent)."""
    from agenthub.bucketsync.app.adapters import default_adapters
    from agenthub.bucketsync.board.backfill import backfill_inbox as run

    settings = load_settings()
    store, _identity = default_adapters(settings)
    report = run(
        store, settings.central_bucket, fanout_cap=settings.mention_fanout_cap, dry_run=dry_run
    )
    typer.echo(
        f"messages {report.messages}, copies written {report.copies_written}, "
        f"already present {report.already_present}, broadcasts skipped "
        f"{report.broadcasts_skipped}"
    )


@app.command()
def mcp() -> None:
    """Serve bucket-sync's agent tools over MCP on stdio (digest, post_message, read_inbox,
    wait_for_updates, promote_result, leaderboard, claim_idea, list_claims,
    pending_directives, ack_directive, subscribe_leaderboard, landscape, expand). Configured by
    BUCKETSYNC_URL, AGENT_ID,
    SCRATCH_BUCKET, and BUCKETSYNC_TOKEN (local mode) or a logged-in `hf` CLI."""
    from agenthub.bucketsync.agentside.mcp import serve_stdio
    from agenthub.bucketsync.agentside.session import McpConfig, McpConfigError

    try:
        config = McpConfig.from_env()
        serve_stdio(config)
    except McpConfigError as exc:
        raise CliError(str(exc)) from exc


@app.command()
def unread(
    url: str = typer.Option(..., "--url", envvar="BUCKETSYNC_URL", help="bucket-sync's base URL"),
    agent: str = typer.Option(..., "--agent", envvar="AGENT_ID", help="your agent id"),
) -> None:
    """Print "N unread for you (mentions: k)": the harness hook GET /v1/setup configures.
    Counts only (never a message body), after your watcher's cursor; moves nothing."""
    from agenthub.bucketsync.agentside.hooks import UnreadError, unread_counts, unread_line

    try:
        typer.echo(unread_line(*unread_counts(url, agent)))
    except UnreadError as exc:
        raise CliError(
            str(exc), hint="check --url (or BUCKETSYNC_URL), and that the server is up"
        ) from exc


verify_app = typer.Typer(help="The verifier (VERIFIER_ENABLED): offline maintenance.")
app.add_typer(verify_app, name="verify")


@verify_app.command("reconcile")
def verify_reconcile() -> None:
    """Record verdicts of verification runs that ended while nobody watched, and finish the
    status files of agent runs likewise (idempotent, safe to schedule)."""
    from agenthub.bucketsync.app.adapters import default_adapters
    from agenthub.bucketsync.app.hub import build_hub, build_scoring
    from agenthub.clock import SystemClock

    settings = load_settings()
    if not settings.jobs_enabled:
        raise CliError("JOBS_ENABLED is not true; nothing to reconcile")
    store, identity = default_adapters(settings)
    hub = build_hub(settings, store, identity, SystemClock())
    scoring = build_scoring(hub, listen=False)
    if scoring.verifier is not None:
        report = scoring.verifier.reconcile()
        typer.echo(
            f"verifications: examined {report.examined}, recorded {report.recorded}, "
            f"healed {report.healed}, still running {report.still_running}, "
            f"skipped {report.skipped}"
        )
    finished, running = scoring.jobs.reconcile_runs()
    typer.echo(f"agent runs: finished {finished}, still running {running}")


challenge_app = typer.Typer(help="The challenge's benchmark (organizer, offline).")
app.add_typer(challenge_app, name="challenge")


@challenge_app.command("install")
def challenge_install(
    harness: Path = typer.Argument(..., help="Directory holding the harness entrypoint."),
    private: Path | None = typer.Option(
        None, "--private", help="Directory of the private eval set (for the verifier)."
    ),
) -> None:
    """Upload the harness to {CENTRAL_BUCKET}/{HARNESS_PREFIX} and the private eval set to
    {AUDIT_BUCKET}/{PRIVATE_DATASET_PREFIX} (what the bootstrap does on HF)."""
    from agenthub.bucketsync.app.adapters import default_adapters
    from agenthub.bucketsync.app.hub import build_hub
    from agenthub.bucketsync.app.lifespan import prepare_buckets
    from agenthub.bucketsync.storage.base import Batch
    from agenthub.clock import SystemClock

    settings = load_settings()
    entry = harness / settings.job_harness_entrypoint
    if not entry.is_file():
        raise CliError(f"{entry} does not exist (JOB_HARNESS_ENTRYPOINT)")
    store, identity = default_adapters(settings)
    prepare_buckets(build_hub(settings, store, identity, SystemClock()))
    for directory, bucket, prefix in (
        (harness, settings.central_bucket, settings.harness_prefix),
        (private, settings.audit_bucket, settings.private_dataset_prefix),
    ):
        if directory is None:
            continue
        files = [
            (prefix + path.relative_to(directory).as_posix(), path.read_bytes())
            for path in sorted(directory.rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts
        ]
        if not files:
            raise CliError(f"{directory} has no files")
        store.write_batch(bucket, Batch(adds=files))
        typer.echo(f"{len(files)} files -> hf://buckets/{bucket}/{prefix}")
