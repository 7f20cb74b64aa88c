"""Domain errors become HTTP responses in one place per service.

Each service keeps a status table `{ErrorClass: status}` and a `render(exc, status)` that
draws its own wire shape in its `api/errors.py`; `install_error_handlers` registers them
once. An error's status is found by walking its class's MRO until a class has a row, so
the nearest ancestor with a row answers for a subclass that has none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from fastapi import FastAPI, Request
from starlette.responses import Response

from agenthub.errors import AgentHubError

E = TypeVar("E", bound=AgentHubError)

StatusTable = Mapping[type[E], int]


def status_for(table: StatusTable[E], exc: E) -> int:
    """The status of the nearest class in `exc`'s MRO that has a row in `table`."""
    for cls in type(exc).__mro__:
        if cls in table:
            return table[cls]
    raise LookupError(f"{type(exc).__name__} has no row in the status table")


def install_error_handlers(
    app: FastAPI,
    table: StatusTable[E],
    render: Callable[[E, int], Response],
) -> None:
    """Answer every error the table covers with `render(exc, status_for(table, exc))`."""
    covered = tuple(table)

    async def handle(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, covered)
        return render(exc, status_for(table, exc))

    for cls in covered:
        app.add_exception_handler(cls, handle)
