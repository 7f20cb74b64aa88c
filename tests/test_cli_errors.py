"""The one CLI failure path: `error:`/`hint:` on stderr, the error's exit code, and a
traceback only when asked for."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.testing import CliRunner

from agenthub.cli import app
from agenthub.clierrors import CliError, Commands
from agenthub.hubcore.errors import CaptureFailed

NO_STATEHUB = {"HUBCORE_STATEHUB_URL": "", "AGENTHUB_DEBUG": None}


def one_command_app(error: Exception) -> typer.Typer:
    standalone = typer.Typer(cls=Commands)

    @standalone.command()
    def fail() -> None:
        raise error

    @standalone.command()
    def succeed() -> None:
        typer.echo("done")

    return standalone


def test_a_cli_error_prints_error_and_hint_and_exits_with_its_code() -> None:
    failing = one_command_app(CliError("no such thing", hint="make one", exit_code=3))

    result = CliRunner().invoke(failing, ["fail"])

    assert result.exit_code == 3
    assert result.stderr == "error: no such thing\nhint: make one\n"
    assert result.stdout == ""


def test_a_domain_error_reaching_the_cli_is_printed_with_its_code_and_exits_2() -> None:
    failing = one_command_app(CaptureFailed("source moved", hint="capture again"))

    result = CliRunner().invoke(failing, ["fail"])

    assert result.exit_code == 2
    assert result.stderr == "error: source moved [capture_failed]\nhint: capture again\n"


def test_an_error_without_a_hint_prints_no_hint_line() -> None:
    result = CliRunner().invoke(app, ["hubcore", "follow"], env=NO_STATEHUB)

    assert result.exit_code == 2
    assert result.stderr == "error: give --statehub-url or set HUBCORE_STATEHUB_URL\n"


def test_other_exceptions_are_not_swallowed() -> None:
    failing = one_command_app(RuntimeError("a bug"))

    result = CliRunner().invoke(failing, ["fail"])

    assert isinstance(result.exception, RuntimeError)
    assert "error:" not in result.output


def test_a_successful_command_is_untouched() -> None:
    result = CliRunner().invoke(one_command_app(CliError("unused")), ["succeed"])

    assert result.exit_code == 0 and result.stdout == "done\n"


def test_a_user_mistake_shows_no_traceback() -> None:
    result = CliRunner().invoke(app, ["up", "--challenge", "no/such/challenge.yaml"])

    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert result.stderr == (
        "error: no/such/challenge.yaml does not exist\n"
        "hint: pass --challenge path/to/challenge.yaml\n"
    )


def test_debug_flag_shows_the_traceback_and_keeps_the_exit_code() -> None:
    result = CliRunner().invoke(app, ["--debug", "hubcore", "follow"], env=NO_STATEHUB)

    assert result.exit_code == 2
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.endswith("error: give --statehub-url or set HUBCORE_STATEHUB_URL\n")


def test_agenthub_debug_environment_variable_shows_the_traceback() -> None:
    env = {**NO_STATEHUB, "AGENTHUB_DEBUG": "1"}

    result = CliRunner().invoke(app, ["hubcore", "follow"], env=env)

    assert result.exit_code == 2 and "Traceback" in result.stderr


def test_challenge_init_reads_the_data_directory_when_run_not_when_imported(
    tmp_path: Path,
) -> None:
    # The default used to be read from the environment when agenthub.challenge.cli was
    # imported, so a BUCKETSYNC_DATA_DIR set afterwards was ignored.
    data = tmp_path / "data"
    challenge = Path(__file__).parents[1] / "examples" / "bucketsync-challenge" / "challenge.yaml"
    args = ["challenge", "init", str(challenge), "--env-out", str(tmp_path / "c.env")]

    result = CliRunner().invoke(app, args, env={"BUCKETSYNC_DATA_DIR": str(data)})

    assert result.exit_code == 0, result.output
    assert f"BUCKETSYNC_DATA_DIR={data} " in result.stdout
    assert any(data.iterdir())
