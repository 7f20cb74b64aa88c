"""The `agenthub` command: one Typer app with a sub-command per service."""

from __future__ import annotations

from pathlib import Path

import typer

from agenthub.bucketsync.agentcli import app as buckets_app
from agenthub.bucketsync.cli import app as bucketsync_app
from agenthub.bucketsync.dashboard.cli import app as dashboard_app
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
app.add_typer(dashboard_app, name="dashboard")


@app.command()
def up(
    host: str = typer.Option("127.0.0.1", help="Interface to bind."),
    statehub_port: int = typer.Option(8100, help="State Hub port (0: any free port)."),
    hubcore_port: int = typer.Option(8200, help="hub-core port (0: any free port)."),
    var: Path = typer.Option(Path("var"), help="Directory for the databases and the token."),
    agent: str = typer.Option(
        "operator",
        envvar="HUB_CORE_STATEHUB_INBOX_AGENT",
        help="The agent whose inbox hub-core serves.",
    ),
) -> None:
    """Start State Hub and hub-core (following it) on SQLite under ./var; print URLs and token."""
    import asyncio

    from agenthub.up import Stack, serve_stack

    def ready(stack: Stack) -> None:
        inbox = f"{stack.hubcore_url}/ports/projections/statehub-inbox?to_agent={stack.agent}"
        lines = [
            f"State Hub   {stack.statehub_url}   (database {stack.var / 'statehub.db'})",
            f"hub-core    {stack.hubcore_url}   (database {stack.var / 'hubcore.db'}, "
            "following State Hub)",
            f"agent       {stack.agent}",
            f"token       {stack.token}   (kept in {stack.var / 'operator-token'})",
            "try:",
            f"  curl -s -X POST {stack.statehub_url}/messages/ -H 'content-type: application/json' "
            f"""-d '{{"from_agent":"alice","to_agent":"{stack.agent}","subject":"hi","body":"hello"}}'""",
            f"  curl -s -H 'Authorization: Bearer {stack.token}' '{inbox}'",
            "Ctrl-C stops both.",
        ]
        typer.echo("\n".join(lines))

    asyncio.run(
        serve_stack(
            var,
            host=host,
            statehub_port=statehub_port,
            hubcore_port=hubcore_port,
            agent=agent,
            on_ready=ready,
        )
    )


if __name__ == "__main__":
    app()
