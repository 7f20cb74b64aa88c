"""`agenthub statehub …` commands: thin wrappers over the service functions."""

from __future__ import annotations

import typer

from agenthub.clierrors import Commands
from agenthub.db import check_reachable, make_engine
from agenthub.heap import freeze_startup_objects
from agenthub.ports import STATEHUB_PORT, require_free
from agenthub.statehub import migrate as migrations
from agenthub.statehub.settings import StateHubSettings

app = typer.Typer(
    cls=Commands, help="State Hub: the agent inbox and its change feed.", no_args_is_help=True
)


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="Interface to bind."),
    port: int = typer.Option(STATEHUB_PORT, help="TCP port."),
    access_log: bool = typer.Option(
        True, help="Log one line per request (uvicorn's access log; off saves a tenth of a read)."
    ),
) -> None:
    """Run the State Hub HTTP API (migrates the database to head first)."""
    import uvicorn

    from agenthub.statehub.app import create_app

    settings = StateHubSettings()
    check_reachable(settings.database_url)
    require_free(host, port)
    typer.echo(f"State Hub on http://{host}:{port} (database {settings.database_url})")
    application = create_app(settings)
    freeze_startup_objects()
    uvicorn.run(application, host=host, port=port, log_level="info", access_log=access_log)


@app.command()
def migrate(
    downgrade_to: str | None = typer.Option(
        None, "--downgrade-to", help="Downgrade to this revision ('base' empties the schema)."
    ),
) -> None:
    """Bring the database in STATEHUB_DATABASE_URL to the current schema head."""
    settings = StateHubSettings()
    engine = make_engine(settings.database_url)
    try:
        if downgrade_to:
            migrations.downgrade(engine, downgrade_to)
        else:
            migrations.upgrade(engine)
        typer.echo(f"database at revision {migrations.current_revision(engine) or 'base'}")
    finally:
        engine.dispose()
