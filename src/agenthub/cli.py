"""The `agenthub` command: one Typer app with a sub-command per service.

Errors are reported once, at the top (`agenthub.clierrors.Commands`): `error:` and
`hint:` on stderr and the error's exit code; `--debug` adds the traceback.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import typer

from agenthub import __version__
from agenthub.clierrors import DEBUG_KEY, CliError, Commands
from agenthub.heap import freeze_startup_objects
from agenthub.ports import BUCKETSYNC_PORT, HUBCORE_PORT, STATEHUB_PORT, require_free

# Each service's commands, imported when the command line names them: `agenthub buckets
# cp`, which an agent runs over and over, then loads neither hub-core's database layer nor
# the deploy code (2 s instead of 0.5 s on a loaded machine).
SUBCOMMANDS = {
    "statehub": "agenthub.statehub.cli",
    "hubcore": "agenthub.hubcore.cli",
    "bucketsync": "agenthub.bucketsync.cli",
    "buckets": "agenthub.bucketsync.agentside.buckets",
    "challenge": "agenthub.challenge.cli",
    "dashboard": "agenthub.bucketsync.dashboard.cli",
}


class LazyCommands(Commands):
    """The root group: `SUBCOMMANDS` are built from their module's Typer `app` on use."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *SUBCOMMANDS]

    def get_command(self, ctx: Any, name: str) -> Any:
        if name not in SUBCOMMANDS:
            return super().get_command(ctx, name)
        sub: typer.Typer = importlib.import_module(SUBCOMMANDS[name]).app
        # Help texts are plain: bucket paths such as `[/PREFIX]` are not rich markup.
        sub.rich_markup_mode = None
        command = typer.main.get_group(sub)
        command.name = name
        return command


app = typer.Typer(
    cls=LazyCommands,
    help="agenthub: messaging and collaboration backbone for fleets of AI agents.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"agenthub {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    debug: bool = typer.Option(
        False, "--debug", envvar="AGENTHUB_DEBUG", help="Show the traceback of an error."
    ),
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print agenthub's version and exit.",
    ),
) -> None:
    ctx.meta[DEBUG_KEY] = debug


@app.command()
def up(
    host: str = typer.Option("127.0.0.1", help="Interface to bind."),
    statehub_port: int = typer.Option(STATEHUB_PORT, help="State Hub port (0: any free port)."),
    hubcore_port: int = typer.Option(HUBCORE_PORT, help="hub-core port (0: any free port)."),
    var: Path = typer.Option(Path("var"), help="Directory for the databases and the token."),
    agent: str = typer.Option(
        "operator",
        envvar="HUB_CORE_STATEHUB_INBOX_AGENT",
        help="The agent whose inbox hub-core serves.",
    ),
    bucketsync_port: int = typer.Option(
        BUCKETSYNC_PORT, help="bucket-sync port (0: any free port)."
    ),
    challenge: Path | None = typer.Option(
        None, help="The challenge.yaml bucket-sync runs (default: the shipped example)."
    ),
) -> None:
    """Start State Hub, hub-core (following it) and bucket-sync with an example challenge,
    all under ./var; print every URL and the tokens a first user needs."""
    import asyncio

    from agenthub.challenge.schema import ChallengeError
    from agenthub.up import EXAMPLE_CHALLENGE, Stack, serve_stack

    challenge_file = challenge or EXAMPLE_CHALLENGE
    if not challenge_file.is_file():
        raise CliError(
            f"{challenge_file} does not exist", hint="pass --challenge path/to/challenge.yaml"
        )
    for port, option in (
        (statehub_port, "--statehub-port"),
        (hubcore_port, "--hubcore-port"),
        (bucketsync_port, "--bucketsync-port"),
    ):
        require_free(host, port, option=option)

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
        ]
        if stack.bucketsync is not None:
            lines += bucketsync_lines(stack)
        lines.append("Ctrl-C stops them all.")
        typer.echo("\n".join(lines))

    freeze_startup_objects()
    try:
        asyncio.run(
            serve_stack(
                var,
                host=host,
                statehub_port=statehub_port,
                hubcore_port=hubcore_port,
                agent=agent,
                on_ready=ready,
                bucketsync_port=bucketsync_port,
                challenge=challenge_file,
            )
        )
    except ChallengeError as exc:
        raise CliError(str(exc)) from exc


def bucketsync_lines(stack: object) -> list[str]:
    """What a first user of bucket-sync needs: URLs, tokens, and a copy-pasteable start."""
    from agenthub.up import EXAMPLE_CHALLENGE, Stack

    assert isinstance(stack, Stack) and stack.bucketsync is not None
    b = stack.bucketsync
    url, alice, boss = b.url, b.tokens["alice"], b.tokens["organizer"]
    bucket = f"{b.org}/{b.slug}-agent-1"
    return [
        f"bucket-sync {url}   (local buckets in {b.data_dir}, environment {b.env_file})",
        f"  self-description {url}/v1   agents' README hf://buckets/{b.central_bucket}/README.md",
        f"  leaderboard {url}/v1/leaderboard   digest {url}/v1/digest",
        f"dashboard   {url}/dashboard   (humans: sign in with a token below)",
        f"token alice       {alice}   (contributor; kept in {stack.var / 'bucketsync-tokens.json'})",
        f"token organizer   {boss}   (admin)",
        "try (as alice's agent agent-1):",
        f"  export T={alice}",
        f'  curl -s -H "Authorization: Bearer $T" '
        f"{url}/local/buckets/{b.central_bucket}/files/README.md   # the agents' README",
        f'  curl -s -XPOST {url}/local/buckets/{bucket} -H "Authorization: Bearer $T"',
        f"  curl -s -XPUT {url}/local/buckets/{bucket}/files/.bucket-sync-handshake "
        '-H "Authorization: Bearer $T" --data-binary alice',
        f'  curl -s -XPOST {url}/v1/agents/register -H "Authorization: Bearer $T" '
        "-H 'content-type: application/json' "
        """-d '{"agent_id":"agent-1","model":"m","harness":"h"}'""",
        f"  curl -s -XPUT {url}/local/buckets/{bucket}/files/notes/hi.md "
        "-H \"Authorization: Bearer $T\" --data-binary 'hello, board'",
        f"  curl -s -XPOST {url}/v1/messages -H 'content-type: application/json' "
        f"""-d '{{"source":"hf://buckets/{bucket}/notes/hi.md"}}'""",
        f"  curl -s '{url}/v1/messages?expand=true'",
        "verify results (eval-space, another shell):",
        f"  set -a; . {b.env_file}; set +a; BUCKETSYNC_DATA_DIR={b.data_dir} "
        "agenthub challenge evaluate --evaluator "
        f"{EXAMPLE_CHALLENGE.parent / 'evaluator.py'}:evaluate",
        "MCP for agent harnesses:",
        f"  BUCKETSYNC_URL={url} AGENT_ID=agent-1 SCRATCH_BUCKET={bucket} BUCKETSYNC_TOKEN=$T "
        "agenthub bucketsync mcp",
    ]


if __name__ == "__main__":
    app()
