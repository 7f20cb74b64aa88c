"""`agenthub challenge …`: set up a challenge from its `challenge.yaml`."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import typer

from agenthub.bucketsync.settings import OfflineSettings
from agenthub.bucketsync.storage.base import BucketStore
from agenthub.challenge import bootstrap
from agenthub.challenge.deploy_cli import deploy_command
from agenthub.challenge.schema import ChallengeError, load
from agenthub.clierrors import CliError, Commands
from agenthub.ports import BUCKETSYNC_PORT

app = typer.Typer(
    cls=Commands, help="A challenge in one command, from challenge.yaml.", no_args_is_help=True
)
app.command("deploy")(deploy_command)


@app.command()
def init(
    config: Path = typer.Argument(..., help="The challenge.yaml to set up."),
    target: str = typer.Option("local", help="local (a bucket directory) or hf (Hugging Face)."),
    data_dir: Path | None = typer.Option(
        None,
        help="local target: bucket-sync's data directory "
        "(default: BUCKETSYNC_DATA_DIR, else ./var/bucketsync).",
    ),
    env_out: Path = typer.Option(
        Path("./var/challenge.env"), help="Where to write bucket-sync's environment."
    ),
    service_url: str = typer.Option(
        f"http://127.0.0.1:{BUCKETSYNC_PORT}", help="bucket-sync's public URL, for the README."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would change; change nothing."),
    force: bool = typer.Option(False, "--force", help="Replace generated files that differ."),
) -> None:
    """Validate challenge.yaml, write the environment, create the central and audit buckets,
    and publish the agents' README and clients. Re-running changes nothing that exists."""
    try:
        challenge = load(config)
    except ChallengeError as exc:
        raise CliError(str(exc)) from exc
    settings = OfflineSettings()
    data_dir = data_dir or settings.data_dir
    if target == "local":
        from agenthub.bucketsync.app.adapters import local_store

        store: BucketStore = local_store(data_dir)
    elif target == "hf":
        from agenthub.bucketsync.app.adapters import hf_store

        store = hf_store(settings)
    else:
        raise CliError(f"--target must be local or hf, not {target!r}")
    report = bootstrap.apply(
        bootstrap.plan(challenge, service_url=service_url, target=target),
        store,
        env_file=env_out,
        dry_run=dry_run,
        force=force,
    )
    hint = f"BUCKETSYNC_DATA_DIR={data_dir} " if target == "local" else ""
    for what, outcome in report.lines:
        typer.echo(f"{outcome:>13}  {what}")
    if dry_run:
        typer.echo("dry run: nothing was written")
    elif not report.changed:
        typer.echo("nothing to do: everything already exists")
    else:
        typer.echo(
            f"start it: set -a; . {env_out}; set +a; {hint}agenthub bucketsync serve"
            f"{serve_options(service_url)}"
        )
    if not dry_run and target == "local":
        typer.echo(
            f"users: {hint}agenthub bucketsync users add NAME --role admin|contributor"
            "   (prints the user's token; `users list` shows them)"
        )
    if not dry_run and challenge.verification.mode == "eval-space":
        typer.echo(
            f"verify (eval-space): same environment, {hint}"
            "agenthub challenge evaluate --evaluator your_module:evaluate"
        )


def serve_options(service_url: str) -> str:
    """` --port N` so `bucketsync serve` listens where the README says (nothing when the
    URL names no port: a proxy or a Space in front decides)."""
    port = urlsplit(service_url).port
    return f" --port {port}" if port else ""


@app.command()
def evaluate(
    evaluator: str = typer.Option(
        ...,
        "--evaluator",
        help="The organizer's evaluate(submission_dir, private_dir) -> dict, as "
        "'module:function' or 'path/to/file.py:function'.",
    ),
    once: bool = typer.Option(False, "--once", help="One pass over pending results, then exit."),
    interval: float = typer.Option(30.0, "--interval", min=0.1, help="Seconds between passes."),
) -> None:
    """eval-space mode: score pending results on the private eval set and record verdicts
    (bucket-sync's environment, e.g. `set -a; . var/challenge.env; set +a`). Human verdicts
    in the verification index are never overwritten."""
    from agenthub.bucketsync.app.adapters import default_adapters
    from agenthub.bucketsync.app.hub import build_hub
    from agenthub.bucketsync.settings import load_settings
    from agenthub.challenge.evaluate import EvalLoop, EvaluatorError, PassReport, load_evaluator
    from agenthub.clock import SystemClock

    try:
        function = load_evaluator(evaluator)
    except EvaluatorError as exc:
        raise CliError(str(exc)) from exc
    settings = load_settings()
    store, identity = default_adapters(settings)
    loop = EvalLoop(build_hub(settings, store, identity, SystemClock()), function)

    def report(result: PassReport) -> None:
        for filename, outcome in result.outcomes.items():
            typer.echo(f"{outcome:>28}  {filename}")
        typer.echo(f"pending examined: {result.examined}")

    try:
        loop.run(interval_s=interval, once=once, on_pass=report)
    except EvaluatorError as exc:
        raise CliError(str(exc)) from exc
    except KeyboardInterrupt:
        typer.echo("stopped")
