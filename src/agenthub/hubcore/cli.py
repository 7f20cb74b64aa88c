"""`agenthub hubcore …` commands: thin wrappers over capture, import, serve and the pilot check."""

from __future__ import annotations

import getpass
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from agenthub.clierrors import CliError, Commands
from agenthub.clock import SystemClock
from agenthub.db import check_reachable, make_engine
from agenthub.heap import freeze_startup_objects
from agenthub.hubcore import migrate as migrations
from agenthub.hubcore.settings import HubCoreSettings
from agenthub.ports import HUBCORE_PORT, require_free

app = typer.Typer(
    cls=Commands,
    help="hub-core: a derived, read-only copy of the State Hub inbox.",
    no_args_is_help=True,
)
console = Console(stderr=True)


class _Bar:
    """One task of a rich progress bar on stderr: `advance(n)` as work is done, `expect(n)`
    once the total is known (until then the bar shows no total)."""

    def __init__(self, bar: Progress, task: TaskID) -> None:
        self._bar = bar
        self._task = task

    def advance(self, done: int) -> None:
        self._bar.advance(self._task, done)

    def expect(self, total: int) -> None:
        self._bar.update(self._task, total=total)


@contextmanager
def _progress(
    description: str, total: int | None, *, unit: ProgressColumn | None = None
) -> Iterator[_Bar]:
    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        unit or MofNCompleteColumn(),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=console, transient=False) as bar:
        yield _Bar(bar, bar.add_task(description, total=total))


class BundleFormat(StrEnum):
    """The bundle file layouts (`bundlefile.Layout`)."""

    json = "json"
    jsonl = "jsonl"


@app.command()
def capture(
    out: Path = typer.Option(..., "--out", help="Bundle file to write (0600, keep it private)."),
    source_db: str | None = typer.Option(
        None, "--source-db", help="State Hub database URL (postgresql://… or sqlite:///…)."
    ),
    from_statehub: str | None = typer.Option(
        None, "--from-statehub", help="State Hub base URL; reads GET /messages/feed/snapshot."
    ),
    source_instance: str | None = typer.Option(
        None, "--source-instance", help="State Hub's instance label, if its database lacks one."
    ),
    captured_by: str | None = typer.Option(
        None, "--captured-by", help="Who captured (default user@host)."
    ),
    page_size: int | None = typer.Option(
        None,
        "--page-size",
        min=1,
        help="With --from-statehub: fetch the snapshot in pages of this many rows.",
    ),
    bundle_format: BundleFormat = typer.Option(
        BundleFormat.json,
        "--format",
        help="json: the seed's v1 bundle, one JSON object (default); "
        "jsonl: v2, JSON Lines. Both import, and hash alike.",
    ),
) -> None:
    """Capture a State Hub inbox into a snapshot bundle plus a hashes-only evidence file."""
    from agenthub.hubcore.capture import capture_database_to_file
    from agenthub.hubcore.capture_feed import capture_statehub_to_file

    if (source_db is None) == (from_statehub is None):
        raise CliError("give exactly one of --source-db or --from-statehub")
    who = captured_by or f"{getpass.getuser()}@{socket.gethostname()}"
    clock = SystemClock()
    if source_db is not None:
        with _progress("capturing rows", None) as bar:
            # Written to the file as it is read: memory does not grow with the inbox.
            bundle, evidence = capture_database_to_file(
                source_db,
                out,
                clock=clock,
                captured_by=who,
                source_instance=source_instance,
                progress=bar.advance,
                layout=bundle_format.value,
                expect=bar.expect,
            )
    else:
        assert from_statehub is not None
        # State Hub's feed snapshot says how many rows it holds only on its last page.
        with _progress("fetching the feed snapshot", None) as bar:
            bundle, evidence = capture_statehub_to_file(
                from_statehub,
                out,
                clock=clock,
                captured_by=who,
                page_size=page_size,
                progress=bar.advance,
                layout=bundle_format.value,
            )
    typer.echo(f"bundle      {out} (mode 0600, {bundle['schema']})")
    typer.echo(f"evidence    {evidence}")
    typer.echo(f"source      {bundle['source']['instance']} at {bundle['source']['cursor']}")
    typer.echo(
        f"messages    {bundle['count']}   receipts {bundle['receipts_count']}   "
        f"tombstones {bundle['tombstones_count']}"
    )
    typer.echo(f"content_hash {bundle['content_hash']}")
    typer.echo(
        f"next: agenthub hubcore import {out} --expected-hash {bundle['content_hash']} --apply"
    )


@app.command("import")
def import_(
    bundle_file: Path = typer.Argument(..., help="Bundle written by `agenthub hubcore capture`."),
    expected_hash: str = typer.Option(
        ..., "--expected-hash", help="content_hash from the capture's evidence file."
    ),
    apply: bool = typer.Option(False, "--apply", help="Write; without it only validate."),
) -> None:
    """Validate a bundle against HUBCORE_DATABASE_URL; with --apply import it in one transaction."""
    from agenthub.hubcore.bundle_import import import_file
    from agenthub.hubcore.store import Database

    settings = HubCoreSettings()
    engine = make_engine(settings.database_url)
    try:
        migrations.upgrade(engine)
        db = Database(engine)
        # Either layout is streamed: memory does not grow with the bundle.
        size = bundle_file.stat().st_size if bundle_file.is_file() else None
        # The bar counts the bundle's bytes as they are read: its total is known up front.
        with _progress("importing" if apply else "validating", size, unit=DownloadColumn()) as bar:
            result = import_file(
                db, bundle_file, expected_hash=expected_hash, apply=apply, progress=bar.advance
            )
    finally:
        engine.dispose()
    verdicts = {
        "valid": "valid; nothing written (add --apply to import)",
        "imported": "imported",
        "unchanged": "already imported: exact repeat, nothing changed",
    }
    typer.echo(f"{verdicts[result.outcome]}")
    typer.echo(
        f"source {result.source_instance}  messages {result.messages}  receipts {result.receipts}"
        f"  tombstones {result.tombstones}  content_hash {result.content_hash}"
    )


@app.command("pilot-check")
def pilot_check(
    bundle_file: Path = typer.Argument(..., help="The bundle that was imported (the oracle)."),
    expected_hash: str = typer.Option(..., "--expected-hash", help="Its content_hash."),
    url: str = typer.Option(
        f"http://127.0.0.1:{HUBCORE_PORT}", "--url", help="Running hub-core base URL."
    ),
    check_database: bool = typer.Option(
        True,
        "--check-database/--no-check-database",
        help="Also hash HUBCORE_DATABASE_URL before and after, to prove nothing was written.",
    ),
) -> None:
    """Run the pilot's step 3 against a running hub-core and print a pass/fail table.

    Reads HUB_CORE_OPERATOR_TOKEN and HUB_CORE_STATEHUB_INBOX_AGENT from the environment.
    """
    import httpx

    from agenthub.hubcore.bundle_import import receiver_hashes, validate_bundle
    from agenthub.hubcore.bundlefile import read_bundle
    from agenthub.hubcore.pilotcheck import PilotCheck
    from agenthub.hubcore.store import Database

    settings = HubCoreSettings()
    token = settings.operator_token.get_secret_value() if settings.operator_token else ""
    if not token or not settings.inbox_agent:
        raise CliError(
            "set HUB_CORE_OPERATOR_TOKEN and HUB_CORE_STATEHUB_INBOX_AGENT "
            "to the values the hub-core server runs with"
        )
    valid = validate_bundle(read_bundle(bundle_file), expected_hash=expected_hash)
    oracle = {
        "messages": valid.messages,
        "receipts": valid.receipts,
        "content_hash": valid.content_hash,
        "receipts_hash": valid.receipts_hash,
        "tombstones_hash": valid.tombstones_hash,
    }
    engine = make_engine(settings.database_url) if check_database else None
    clock = SystemClock()

    def hashes() -> dict[str, str]:
        assert engine is not None
        with Database(engine).read_only() as session:
            return receiver_hashes(session)

    try:
        with httpx.Client(base_url=url, timeout=60) as client:
            results = PilotCheck(
                client,
                oracle,
                agent=settings.inbox_agent,
                token=token,
                now=clock.now,
                receiver_hashes=hashes if engine is not None else None,
            ).run()
    except httpx.HTTPError as exc:
        raise CliError(f"cannot reach hub-core at {url}: {type(exc).__name__}") from exc
    finally:
        if engine is not None:
            engine.dispose()
    table = Table(title=f"hub-core pilot check: {settings.inbox_agent} at {url}")
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail")
    verdicts = {True: "[green]pass[/green]", False: "[red]FAIL[/red]", None: "[yellow]n/a[/yellow]"}
    for r in results:
        table.add_row(r.name, verdicts[r.passed], r.detail)
    Console().print(table)
    failed = sum(1 for r in results if r.passed is False)
    unproven = sum(1 for r in results if r.passed is None)
    passed = len(results) - failed - unproven
    typer.echo(f"{passed} passed, {failed} failed, {unproven} not provable from this snapshot")
    if failed:
        raise typer.Exit(1)


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="Interface to bind."),
    port: int = typer.Option(HUBCORE_PORT, help="TCP port."),
) -> None:
    """Run hub-core (migrates HUBCORE_DATABASE_URL first). The inbox pilot is off unless enabled."""
    import uvicorn

    from agenthub.hubcore.app import create_app

    settings = HubCoreSettings()
    check_reachable(settings.database_url)
    require_free(host, port)
    application = create_app(settings)
    reads = "on" if settings.inbox_reads else "off"
    following = f", following {settings.statehub_url}" if settings.statehub_url else ""
    typer.echo(
        f"hub-core on http://{host}:{port} (database {settings.database_url}, reads {reads}"
        f"{following})"
    )
    freeze_startup_objects()
    uvicorn.run(application, host=host, port=port, log_level="info")


@app.command()
def follow(
    statehub_url: str | None = typer.Option(
        None, "--statehub-url", help="State Hub base URL (default: HUBCORE_STATEHUB_URL)."
    ),
    once: bool = typer.Option(
        False, "--once", help="Catch up to a checkpoint (closure checked), print where, and exit."
    ),
) -> None:
    """Follow State Hub's change feed into HUBCORE_DATABASE_URL (snapshot first when empty)."""
    import asyncio
    import logging

    from agenthub.hubcore.app import follow_options
    from agenthub.hubcore.feedclient import HttpFeedSource
    from agenthub.hubcore.follower import Follower
    from agenthub.hubcore.followlock import AnotherFollower, sole_follower
    from agenthub.hubcore.store import Database

    settings = HubCoreSettings()
    url = statehub_url or settings.statehub_url
    if not url:
        raise CliError("give --statehub-url or set HUBCORE_STATEHUB_URL")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    # The follower's own INFO lines are the log; Alembic's "Context impl" lines are noise.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    engine = settings.engine()

    async def main() -> str:
        source = HttpFeedSource(url)
        follower = Follower(Database(engine), source, SystemClock(), follow_options(settings))
        try:
            if once:
                result = await follower.catch_up()
                closure = "closure checked" if result.checkpoint else "no checkpoint (xid mode)"
                return f"caught up at {result.cursor} (high water {result.high_water}, {closure})"
            await follower.run()
            return "stopped"
        finally:
            await source.aclose()

    try:
        with sole_follower(engine):
            migrations.upgrade(engine)
            typer.echo(f"following {url} into {settings.database_url}")
            typer.echo(asyncio.run(main()))
    except AnotherFollower as exc:
        raise CliError(str(exc), hint=exc.hint) from None
    except KeyboardInterrupt:
        typer.echo("stopped")
    finally:
        engine.dispose()


@app.command()
def migrate() -> None:
    """Bring the database in HUBCORE_DATABASE_URL to the current schema head."""
    settings = HubCoreSettings()
    engine = make_engine(settings.database_url)
    try:
        migrations.upgrade(engine)
        typer.echo(f"database at revision {migrations.current_revision(engine) or 'base'}")
    finally:
        engine.dispose()
