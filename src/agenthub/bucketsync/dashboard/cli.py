"""`agenthub dashboard serve`: the dashboard in front of any bucket-sync URL."""

from __future__ import annotations

import typer

from agenthub.bucketsync.settings import SettingsError
from agenthub.clierrors import CliError, Commands
from agenthub.heap import freeze_startup_objects
from agenthub.ports import BUCKETSYNC_PORT, DASHBOARD_PORT, require_free

app = typer.Typer(
    cls=Commands, help="The human dashboard for a bucket-sync challenge.", no_args_is_help=True
)


@app.command()
def serve(
    upstream: str = typer.Argument(
        ..., help=f"bucket-sync base URL, e.g. http://127.0.0.1:{BUCKETSYNC_PORT}"
    ),
    host: str = typer.Option("127.0.0.1", help="Interface to bind."),
    port: int = typer.Option(DASHBOARD_PORT, help="TCP port."),
    poll_s: float = typer.Option(30.0, help="Seconds between the page's refreshes."),
) -> None:
    """Serve the dashboard at http://HOST:PORT/dashboard (sign in with a local token)."""
    import uvicorn

    from agenthub.bucketsync.dashboard.app import create_dashboard_app

    try:
        dashboard = create_dashboard_app(upstream, poll_s=poll_s)
    except SettingsError as exc:
        raise CliError(str(exc), hint="give the URL bucket-sync serves on") from exc
    require_free(host, port)
    typer.echo(f"dashboard for {upstream} at http://{host}:{port}/dashboard")
    freeze_startup_objects()
    uvicorn.run(dashboard, host=host, port=port, log_level="info")
