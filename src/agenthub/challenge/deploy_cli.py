"""`agenthub challenge deploy`: the command line over `deploy.py`."""

from __future__ import annotations

from pathlib import Path

import typer

from agenthub.bucketsync.settings import OfflineSettings
from agenthub.challenge.deploy import (
    DeployError,
    Report,
    SpaceSpec,
    bucketsync_variables,
    deploy,
    project_root,
    space_card,
    space_files,
    space_host,
)
from agenthub.challenge.schema import ChallengeError, load
from agenthub.clierrors import CliError

DASHBOARD_COMMAND = (
    'agenthub dashboard serve "$BUCKETSYNC_URL" --host 0.0.0.0 --port "${PORT:-7860}"'
)


def deploy_command(
    config: Path = typer.Argument(..., help="The challenge.yaml to deploy."),
    space: str | None = typer.Option(
        None, help="bucket-sync's Space id (default ORG/SLUG-bucketsync)."
    ),
    dashboard: bool = typer.Option(
        False, "--dashboard", help="Also deploy a dashboard Space in front of bucket-sync."
    ),
    dashboard_space: str | None = typer.Option(
        None, help="The dashboard Space id (default ORG/SLUG-dashboard); implies --dashboard."
    ),
    source: Path | None = typer.Option(
        None, help="The agenthub source tree to build from (default: this checkout)."
    ),
    private: bool = typer.Option(False, "--private", help="Create the Spaces private."),
    update_secrets: bool = typer.Option(
        False,
        "--update-secrets",
        help="Rewrite HF_TOKEN on Spaces that have it (the Hub never shows a secret's value, "
        "so an existing one is otherwise kept).",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would change; change nothing."),
) -> None:
    """Create or update the challenge's bucket-sync Space (Docker SDK, built from this
    project's Dockerfile) with HF_TOKEN as a secret and the challenge's environment as
    variables; optionally a dashboard Space. Re-running changes nothing that matches.
    HF_TOKEN (and HF_ENDPOINT for another Hub) come from the environment."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    try:
        challenge = load(config)
        root = project_root(source)
    except ChallengeError as exc:
        raise CliError(str(exc)) from exc
    except DeployError as exc:
        raise CliError(str(exc), hint=exc.hint) from exc
    settings = OfflineSettings()
    token = settings.hf_token_value()
    if not token:
        raise CliError(
            "HF_TOKEN is not set",
            hint="export a write token of the challenge's org; it becomes the Spaces' secret",
        )
    backend_id = space or f"{challenge.org}/{challenge.slug}-bucketsync"
    title = challenge.branding.title or challenge.slug
    specs = [
        SpaceSpec(
            backend_id,
            space_files(root, card=space_card(title, role="bucket-sync")),
            bucketsync_variables(challenge.to_env()),
            {"HF_TOKEN": token},
            private=private,
        )
    ]
    if dashboard or dashboard_space:
        specs.append(
            SpaceSpec(
                dashboard_space or f"{challenge.org}/{challenge.slug}-dashboard",
                space_files(
                    root, card=space_card(title, role="dashboard"), command=DASHBOARD_COMMAND
                ),
                {"BUCKETSYNC_URL": f"https://{space_host(backend_id)}"},
                {},
                private=private,
            )
        )
    api = HfApi(endpoint=settings.hf_endpoint, token=token)
    report = Report()
    try:
        for spec in specs:
            deploy(api, spec, report, dry_run=dry_run, update_secrets=update_secrets)
    except HfHubHTTPError as exc:
        for what, outcome in report.lines:
            typer.echo(f"{outcome:>13}  {what}")
        raise CliError(
            f"the Hub refused: {exc}",
            hint="Docker Spaces need a paid plan (PRO, Team or Enterprise) and a write token",
        ) from None
    for what, outcome in report.lines:
        typer.echo(f"{outcome:>13}  {what}")
    if dry_run:
        typer.echo("dry run: nothing was changed")
    elif not report.changed:
        typer.echo("nothing to do: every Space already matches")
    else:
        typer.echo(
            f"bucket-sync: https://{space_host(backend_id)}/v1/healthz once the Space is built "
            "(each commit, variable or secret change rebuilds or restarts it)"
        )
