"""The one command-line failure path.

A command that cannot go on raises `CliError(message, hint=..., exit_code=2)`; a domain
error (any `AgentHubError`) that reaches the command line is reported the same way. Every
Typer app that can be run on its own is built with `cls=Commands`, whose `invoke` catches
the error once, prints

    error: <message>            (domain errors add their stable code: `[code]`)
    hint: <hint>                (when there is one)

on stderr and exits with the error's code, without a traceback unless `--debug`
(or `AGENTHUB_DEBUG=1`) asked for one.
"""

from __future__ import annotations

import traceback
from typing import Any

import pydantic
import typer
from sqlalchemy.exc import OperationalError
from typer.core import TyperGroup

from agenthub.db import DatabaseUnreachable
from agenthub.errors import AgentHubError

# A user's mistake (a missing option, a bad setting, a refused input) exits 2, like click's.
USAGE_EXIT = 2
# `ctx.meta` is shared by every nested context: the root's `--debug` is seen below it.
DEBUG_KEY = "agenthub.debug"


class CliError(AgentHubError):
    """A command cannot go on; `exit_code` is what the process exits with."""

    code = "cli_error"

    def __init__(
        self, message: str, *, hint: str | None = None, exit_code: int = USAGE_EXIT
    ) -> None:
        super().__init__(message, hint=hint)
        self.exit_code = exit_code


def report(exc: AgentHubError) -> int:
    """Print `exc` as `error:`/`hint:` lines on stderr; return the exit code it asks for."""
    if isinstance(exc, CliError):
        typer.echo(f"error: {exc.message}", err=True)
        exit_code = exc.exit_code
    else:
        typer.echo(f"error: {exc.message} [{exc.code}]", err=True)
        exit_code = USAGE_EXIT
    if exc.hint:
        typer.echo(f"hint: {exc.hint}", err=True)
    return exit_code


def operator_mistake(exc: BaseException) -> CliError | None:
    """The `CliError` for an exception that comes from a setting the operator gave (a
    settings value that does not validate, a database that cannot be reached); None for
    anything else, which stays a bug with a traceback."""
    if isinstance(exc, pydantic.ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or exc.title
        message = str(first["msg"]).removeprefix("Value error, ")
        return CliError(
            f"{exc.title} {where}: {message}",
            hint="fix the setting in the environment (or the .env file) and run it again",
        )
    if isinstance(exc, DatabaseUnreachable | OperationalError):
        cause = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        return CliError(
            f"cannot open the database: {cause}",
            hint="start the database server, create the database (createdb NAME), "
            "or point the *_DATABASE_URL setting at one that exists",
        )
    return None


class Commands(TyperGroup):
    """A Typer group that reports an `AgentHubError` raised by any command below it, and
    an operator's mistake (`operator_mistake`) the same way."""

    # `ctx` is click's Context, which newer Typer releases vendor: not nameable portably.
    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (
            AgentHubError,
            pydantic.ValidationError,
            OperationalError,
            DatabaseUnreachable,
        ) as exc:
            error = exc if isinstance(exc, AgentHubError) else operator_mistake(exc)
            assert error is not None
            if ctx.meta.get(DEBUG_KEY):
                typer.echo("".join(traceback.format_exception(exc)).rstrip(), err=True)
            raise typer.Exit(report(error)) from None
