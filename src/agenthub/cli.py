"""The `agenthub` command: one Typer app with a sub-command per service."""

from __future__ import annotations

import typer

from agenthub.bucketsync.agentcli import app as buckets_app
from agenthub.bucketsync.cli import app as bucketsync_app
from agenthub.challenge.cli import app as challenge_app
from agenthub.hubcore.cli import app as hubcore_app
from agenthub.statehub.cli import app as statehub_app

app = typer.Typer(
    help="agenthub: messaging and collaboration backbone for fleets of AI agents.",
    no_args_is_help=True,
)
app.add_typer(statehub_app, name="statehub")
app.add_typer(hubcore_app, name="hubcore")
app.add_typer(bucketsync_app, name="bucketsync")
app.add_typer(buckets_app, name="buckets")
app.add_typer(challenge_app, name="challenge")


@app.command()
def up(
    host: str = typer.Option("127.0.0.1", help="Interface to bind."),
    statehub_port: int = typer.Option(8100, help="State Hub port."),
) -> None:
    """Start every service on the embedded defaults (SQLite under ./var) and print their URLs."""
    import uvicorn

    from agenthub.statehub.app import create_app
    from agenthub.statehub.settings import StateHubSettings

    settings = StateHubSettings()
    typer.echo(f"State Hub   http://{host}:{statehub_port}   (database {settings.database_url})")
    uvicorn.run(create_app(settings), host=host, port=statehub_port, log_level="info")


if __name__ == "__main__":
    app()
